"""The adapter between huggingface_hub's HTTP client and the Hub's retry budget.

huggingface_hub sends every request through one shared ``httpx2.Client`` made by the factory its public
``set_client_factory`` sets. Its own backoff (``http_backoff``) retries 408/429/5xx and network errors
sleeping on the real clock, with a budget of its own. So that a Hub call has ONE budget and ONE injectable
clock, the client made here has a transport that, inside a Hub call (:func:`pipeline.hub.retry.active_budget`),
raises such answers to the Hub's retry loop as :class:`pipeline.errors.RetryableHubAnswer` instead of handing
them back; huggingface_hub does not catch that error, so its backoff never runs. Outside a Hub call the
transport is transparent.

Every request it sends gets trncat's timeouts (``TRNCAT_HUB_CONNECT_TIMEOUT_S``, ``TRNCAT_HUB_READ_TIMEOUT_S``,
cut to what is left of a running deadline, :func:`pipeline.hub.retry.deadline`), whatever huggingface_hub asked
for: its client has none, and many of its calls pass ``timeout=None``, so a Hub that accepted a connection and then
never answered hung a publish for ever. Inside a Hub call a timeout, like any network error, reaches the Hub's
retry loop as a :class:`pipeline.errors.RetryableHubAnswer`, also when it strikes while the body is read.

The one thing huggingface_hub does not make public is its request event hook (offline mode, request ids,
download counters), which its default client installs: it is imported here and nowhere else, and
``tests/hub/test_hub.py`` fails loudly if it moves or the shared client stops coming from the factory.
Requests made from huggingface_hub's worker threads (parallel downloads) run outside the context of the
call and keep huggingface_hub's own backoff.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import httpx2
from huggingface_hub import set_client_factory
from huggingface_hub.utils._http import hf_request_event_hook

from pipeline import constants
from pipeline.errors import RetryableHubAnswer
from pipeline.hub.retry import active_budget, time_left
from pipeline.hub.translate import RETRYABLE, parse_retry_after

#: The shortest timeout a request gets once a deadline has (nearly) passed: it fails at once, as a network error.
_MIN_TIMEOUT_S = 0.001


def request_timeouts() -> dict[str, float]:
    """The timeouts of a request sent now: the configured ones, none longer than what is left of the deadline."""
    connect, read = constants.TRNCAT_HUB_CONNECT_TIMEOUT_S, constants.TRNCAT_HUB_READ_TIMEOUT_S
    timeouts = {"connect": connect, "read": read, "write": read, "pool": connect}
    left = time_left()
    if left is not None:
        timeouts = {name: max(min(value, left), _MIN_TIMEOUT_S) for name, value in timeouts.items()}
    return timeouts


class _BudgetStream(httpx2.SyncByteStream):
    """An answer's body whose network errors (a read timeout, a dropped connection) reach the retry loop."""

    def __init__(self, inner: httpx2.SyncByteStream, where: str) -> None:
        self.inner = inner
        self.where = where

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.inner
        except httpx2.TransportError as exc:
            raise RetryableHubAnswer(f"{self.where}: {type(exc).__name__} reading the answer", status=None) from exc

    def close(self) -> None:
        self.inner.close()


class BudgetTransport(httpx2.BaseTransport):
    """Wraps the real transport: every request gets trncat's timeouts; inside a Hub call, retryable answers and
    network errors (timeouts included) are raised to the Hub's retry loop."""

    def __init__(self, inner: httpx2.BaseTransport | None = None) -> None:
        self.inner = inner or httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.extensions = {**request.extensions, "timeout": request_timeouts()}
        if active_budget() is None:
            return self.inner.handle_request(request)
        where = f"{request.method} {request.url.copy_with(query=None)}"
        try:
            response = self.inner.handle_request(request)
        except httpx2.TransportError as exc:
            raise RetryableHubAnswer(f"{where}: {type(exc).__name__}", status=None) from exc
        if response.status_code in RETRYABLE:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            response.close()
            status = response.status_code
            raise RetryableHubAnswer(f"{where}: HTTP {status}", status=status, retry_after=retry_after)
        if isinstance(response.stream, httpx2.SyncByteStream):
            response.stream = _BudgetStream(response.stream, where)
        return response

    def close(self) -> None:
        self.inner.close()


def client_factory() -> httpx2.Client:
    """huggingface_hub's default client, with :class:`BudgetTransport` in front of the network."""
    return httpx2.Client(
        event_hooks={"request": [hf_request_event_hook]},
        follow_redirects=True,
        # The transport sets each request's timeouts (huggingface_hub passes ``timeout=None`` to many calls).
        timeout=httpx2.Timeout(constants.TRNCAT_HUB_READ_TIMEOUT_S, connect=constants.TRNCAT_HUB_CONNECT_TIMEOUT_S),
        transport=BudgetTransport(),
    )


@functools.cache
def install() -> None:
    """Make huggingface_hub build its shared client with :func:`client_factory` (once per process)."""
    set_client_factory(client_factory)
