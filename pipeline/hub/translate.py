"""huggingface_hub's errors, read through their cause chain and turned into :mod:`pipeline.errors` classes."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import httpx2
from huggingface_hub import errors as hf_errors

from pipeline.errors import (
    GatedRepoError,
    HubError,
    HubRateLimitError,
    HubServerError,
    ParentMovedError,
    RepoNotFoundError,
    RetryableHubAnswer,
)

#: Answers the Hub may give once and not again: retried within the budget.
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})
#: A commit whose parent is no longer the branch head.
PARENT_MOVED = frozenset({409, 412})
_MAX_CHAIN = 20


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, outermost first (huggingface_hub wraps errors; cycles are cut)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (a date or garbage gives None)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def http_status(exc: BaseException) -> tuple[int | None, float | None]:
    """HTTP status and Retry-After found in ``exc`` or its causes."""
    for current in causes(exc):
        if isinstance(current, RetryableHubAnswer):
            return current.status, current.retry_after
        response = getattr(current, "response", None)
        if isinstance(response, httpx2.Response):
            return response.status_code, parse_retry_after(response.headers.get("Retry-After"))
    return None, None


def network_error(exc: BaseException) -> BaseException | None:
    """The network error (nothing answered) behind ``exc``, or None when something answered."""
    return next((e for e in causes(exc) if isinstance(e, (httpx2.TransportError, ConnectionError))), None)


def disk_full(exc: BaseException) -> OSError | None:
    """The full disk (ENOSPC, or a quota: EDQUOT) behind ``exc``: a download's write, not the network."""
    return next((e for e in causes(exc) if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)), None)


def is_retryable(exc: BaseException) -> bool:
    """Whether trying again may help: a retryable answer, or a network error (never a full disk)."""
    if disk_full(exc) is not None:
        return False
    status, _ = http_status(exc)
    return status in RETRYABLE or (status is None and network_error(exc) is not None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def translate(exc: BaseException, what: str, *, attempts: int) -> HubError:
    """One-line pipeline error for a failed Hub call.

    Args:
        exc: What the call raised.
        what: The call, in words (``listing text-generation by downloads``).
        attempts: How many times it was tried.

    Returns:
        The error to raise.
    """
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if (full := disk_full(exc)) is not None:  # said as itself: docs/failures.md's disk_full reads this text
        return HubError(f"{what}: OSError: [Errno {full.errno}] {full.strerror or 'No space left on device'}")
    chain = list(causes(exc))
    status, _ = http_status(exc)
    if any(isinstance(e, hf_errors.GatedRepoError) for e in chain):
        return GatedRepoError(f"{what}: the repo is gated and this token has no access")
    if any(isinstance(e, hf_errors.RevisionNotFoundError) for e in chain):
        return RepoNotFoundError(f"{what}: revision not found")
    if any(isinstance(e, hf_errors.RemoteEntryNotFoundError) for e in chain):
        return RepoNotFoundError(f"{what}: file not found in the repo")
    if any(isinstance(e, hf_errors.RepositoryNotFoundError) for e in chain):
        return RepoNotFoundError(f"{what}: repository not found (or private)")
    if status == 429:
        return HubRateLimitError(f"{what}: rate limited by the Hub (HTTP 429){tries}")
    if status is not None and status >= 500:
        return HubServerError(f"{what}: the Hub answered HTTP {status}{tries}")
    if status in PARENT_MOVED:
        return ParentMovedError(f"{what}: the branch moved during the commit (HTTP {status})")
    if status is not None:
        return HubError(f"{what}: HTTP {status}: {_first_line(exc) or repr(exc)}")
    if (cause := network_error(exc)) is not None:
        return HubError(f"{what}: cannot reach the Hub{tries} ({type(cause).__name__})")
    return HubError(f"{what}: {type(exc).__name__}: {_first_line(exc)}")
