"""The only module of trncat that talks to the Hub (``huggingface_hub.HfApi`` and its download functions).

Every huggingface_hub error becomes a :mod:`pipeline.errors` class here and nowhere else. One retry budget
per call covers 429 and 5xx answers with capped exponential backoff (``Retry-After`` honoured); a commit whose
parent moved (409/412) is rebuilt on the new branch head, up to a budget.

huggingface_hub retries some requests itself (listing pages, preupload, LFS, downloads) and sleeps with
``time.sleep`` inside ``huggingface_hub.utils._http``. So that there is one budget and one injectable clock,
that module's ``time`` is replaced by a shim whose ``sleep`` goes to the calling :class:`Hub`: each of its
retries counts against the Hub's ``max_retries``, and once that is spent the call fails with one message.
Outside a Hub call the shim sleeps as before.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx2
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub import errors as hf_errors
from huggingface_hub._commit_api import CommitOperation
from huggingface_hub.hf_api import ExpandModelProperty_T, ModelInfo
from huggingface_hub.utils import _http as _hf_http

from pipeline import constants
from pipeline.errors import (
    GatedRepoError,
    HubError,
    HubRateLimitError,
    HubServerError,
    ParentMovedError,
    RepoNotFoundError,
)
from pipeline.ids import validate_model_id

__all__ = [
    "CommitResult",
    "Hub",
    "HubSort",
    "ModelListing",
    "fetch_config",
    "fetch_safetensors_params",
    "validate_model_id",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")
HubSort = Literal["trending_score", "downloads"]
RepoType = Literal["model", "dataset", "space"]
#: What a listing carries, so discovery needs no request per model.
LISTING_EXPAND: list[ExpandModelProperty_T] = [
    "sha",
    "safetensors",
    "tags",
    "gated",
    "downloads",
    "likes",
    "trendingScore",
    "pipeline_tag",
    "library_name",
    "lastModified",
]
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504})
PARENT_MOVED = frozenset({409, 412})
MAX_RETRY_AFTER_S = 600.0


@dataclass(frozen=True)
class ModelListing:
    """One model as the Hub lists it."""

    id: str
    sha: str | None
    pipeline_tag: str | None
    tags: tuple[str, ...]
    gated: Literal[False, "auto", "manual"]
    downloads: int
    likes: int
    trending_score: int
    params: int | None
    library_name: str | None
    last_modified: datetime | None

    @property
    def custom_code(self) -> bool:
        """The model needs ``trust_remote_code`` (we never run those)."""
        return "custom_code" in self.tags

    @classmethod
    def from_info(cls, info: ModelInfo) -> ModelListing:
        """Build from huggingface_hub's ModelInfo (fields it lacks get neutral values)."""
        gated = info.gated if info.gated in ("auto", "manual") else False
        return cls(
            id=info.id,
            sha=info.sha,
            pipeline_tag=info.pipeline_tag,
            tags=tuple(info.tags or ()),
            gated=gated,
            downloads=int(info.downloads or 0),
            likes=int(info.likes or 0),
            trending_score=int(info.trending_score or 0),
            params=int(info.safetensors.total) if info.safetensors else None,
            library_name=info.library_name,
            last_modified=info.last_modified,
        )


@dataclass(frozen=True)
class CommitResult:
    """What a commit produced. ``created`` is False when nothing changed (no commit was made)."""

    sha: str
    pr_num: int | None = None
    pr_url: str | None = None
    url: str | None = None
    created: bool = True
    rebases: int = 0


# -- one retry budget shared with huggingface_hub's own backoff ------------------------------------------
class _RetryBudgetSpent(Exception):
    """Raised from huggingface_hub's backoff loop when the Hub call's budget is spent."""


@dataclass
class _Budget:
    sleep: Callable[[float], None]
    max_retries: int
    max_delay: float
    retries: int = 0
    last_status: int | None = None
    waits: list[float] = field(default_factory=list)

    def wait(self, seconds: float) -> None:
        if self.retries >= self.max_retries:
            raise _RetryBudgetSpent
        self.retries += 1
        seconds = min(float(seconds), MAX_RETRY_AFTER_S)
        self.waits.append(seconds)
        self.sleep(seconds)


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("trncat_hub_budget", default=None)


class _TimeShim:
    """Stands in for ``time`` inside huggingface_hub.utils._http (see the module docstring)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        budget = _BUDGET.get()
        if budget is None:
            time.sleep(seconds)
        else:
            # huggingface_hub adds 1 s to Retry-After and uses its own base; cap to ours.
            budget.wait(min(seconds, budget.max_delay))


class _StatusCatcher(logging.Filter):
    """huggingface_hub logs the status it is about to retry; keep it for the final message."""

    _RE = re.compile(r"HTTP Error (\d{3}) thrown")

    def filter(self, record: logging.LogRecord) -> bool:
        budget = _BUDGET.get()
        if budget is not None and (match := self._RE.search(str(record.msg))):
            budget.last_status = int(match[1])
        return True


_hf_http.time = _TimeShim()  # type: ignore[assignment]
logging.getLogger(_hf_http.__name__).addFilter(_StatusCatcher())


def _http_status(exc: BaseException) -> tuple[int | None, float | None]:
    """HTTP status and Retry-After found in an exception or its causes (hf wraps HEAD errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        response = getattr(current, "response", None)
        if isinstance(response, httpx2.Response):
            retry_after = response.headers.get("Retry-After")
            try:
                wait = float(retry_after) if retry_after is not None else None
            except ValueError:
                wait = None
            return response.status_code, wait
        current = current.__cause__ or current.__context__
    return None, None


def _caused_by(exc: BaseException, kinds: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` or one of its causes is one of ``kinds`` (huggingface_hub wraps errors)."""
    current: BaseException | None = exc
    for _ in range(20):
        if current is None:
            return False
        if isinstance(current, kinds):
            return True
        current = current.__cause__ or current.__context__
    return False


def _is_network_error(exc: BaseException) -> bool:
    return _caused_by(exc, (httpx2.TransportError, ConnectionError))


def _translate(exc: BaseException, what: str, attempts: int, status: int | None) -> HubError:
    """One-line pipeline error for a huggingface_hub failure."""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
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
        return HubError(f"{what}: HTTP {status}: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}")
    if _is_network_error(exc):
        return HubError(f"{what}: cannot reach the Hub{tries} ({type(exc).__name__})")
    return HubError(f"{what}: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}")


class Hub:
    """Client of the Hub (or of the local hub) with translated errors and one retry budget per call.

    Args:
        endpoint: Hub URL; defaults to ``pipeline.constants.HF_ENDPOINT``.
        token: Hub token; defaults to ``pipeline.constants.HF_TOKEN`` (else huggingface_hub's own lookup).
        sleep: Clock used between retries (tests inject a fake).
        max_retries: Retries per call for 429, 5xx and network errors.
        max_rebases: Times a commit is rebuilt on a moved parent before ParentMovedError.
        base_delay: First backoff delay in seconds; doubles per retry.
        max_delay: Cap of the backoff delay (Retry-After is honoured up to 600 s).
        cache_dir: Download cache; give one per endpoint so local repos never mix with real ones.
    """

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_retries: int = 5,
        max_rebases: int = 3,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        cache_dir: Path | None = None,
    ) -> None:
        self.endpoint = (endpoint or constants.HF_ENDPOINT).rstrip("/")
        self.token = token if token is not None else constants.HF_TOKEN
        self.max_retries = max_retries
        self.max_rebases = max_rebases
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._sleep = sleep
        self._api = HfApi(endpoint=self.endpoint, token=self.token)
        if constants.IS_CI:  # progress bars only clutter CI logs
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()

    # -- the retry loop --------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T]) -> T:
        budget = _Budget(self._sleep, self.max_retries, self.max_delay)
        token = _BUDGET.set(budget)
        try:
            while True:
                try:
                    return fn()
                except Exception as exc:
                    if _caused_by(exc, _RetryBudgetSpent):
                        raise _translate(exc, what, budget.retries + 1, budget.last_status or 500) from None
                    status, retry_after = _http_status(exc)
                    retryable = status in RETRYABLE or (status is None and _is_network_error(exc))
                    if not retryable or budget.retries >= budget.max_retries:
                        raise _translate(exc, what, budget.retries + 1, status) from exc
                    if retry_after is None:
                        delay = min(self.max_delay, self.base_delay * 2**budget.retries)
                    else:
                        delay = retry_after
                    logger.warning("%s: HTTP %s, retrying in %.1fs", what, status or "error", delay)
                    budget.wait(delay)
        finally:
            _BUDGET.reset(token)

    # -- reading -----------------------------------------------------------------------------------------
    def list_models(self, *, task: str, sort: HubSort, limit: int) -> list[ModelListing]:
        """Top ``limit`` models of a task by a ranking, in one listing (no request per model).

        Args:
            task: Pipeline tag, e.g. ``text-generation``.
            sort: ``trending_score`` or ``downloads``.
            limit: How many.

        Returns:
            Listings, best first.

        Raises:
            HubError: (or a child) when the Hub cannot answer.
        """
        return self._call(
            f"listing {task} by {sort}",
            lambda: [
                ModelListing.from_info(info)
                for info in self._api.list_models(pipeline_tag=task, sort=sort, limit=limit, expand=LISTING_EXPAND)
            ],
        )

    def model_info(self, repo_id: str, *, revision: str | None = None) -> ModelListing:
        """One model's listing fields at a revision.

        Raises:
            RepoNotFoundError: no such model or revision.
            HubError: other failures.
        """
        return self._call(
            f"model info of {repo_id}",
            lambda: ModelListing.from_info(self._api.model_info(repo_id, revision=revision, expand=LISTING_EXPAND)),
        )

    def fetch_config(self, repo_id: str, *, revision: str | None = None) -> dict[str, Any]:
        """``config.json`` of a model, parsed (nothing else is downloaded).

        Raises:
            RepoNotFoundError: no such repo, revision or config.json.
            GatedRepoError: gated without access.
            HubError: unparsable config or other failure.
        """
        path = self.download(repo_id, "config.json", revision=revision)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise HubError(f"config.json of {repo_id} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise HubError(f"config.json of {repo_id} is not a JSON object")
        return data

    def fetch_safetensors_params(self, repo_id: str, *, revision: str | None = None) -> int | None:
        """Total parameter count from the Hub's safetensors metadata, or None when it has none."""
        return self.model_info(repo_id, revision=revision).params

    def download(
        self, repo_id: str, filename: str, *, revision: str | None = None, repo_type: RepoType = "model"
    ) -> Path:
        """Download one file (cached) and return its local path.

        Raises:
            RepoNotFoundError: no such repo, revision or file.
            GatedRepoError: gated without access.
            HubError: other failures.
        """
        return Path(
            self._call(
                f"downloading {filename} from {repo_id}",
                lambda: hf_hub_download(
                    repo_id,
                    filename,
                    revision=revision,
                    repo_type=repo_type,
                    endpoint=self.endpoint,
                    token=self.token,
                    cache_dir=self.cache_dir,
                ),
            )
        )

    def snapshot(
        self,
        repo_id: str,
        *,
        revision: str | None = None,
        repo_type: RepoType = "model",
        local_dir: Path | None = None,
        allow_patterns: list[str] | None = None,
    ) -> Path:
        """Download a repo (or the files matching ``allow_patterns``) and return the folder."""
        return Path(
            self._call(
                f"downloading {repo_id}",
                lambda: snapshot_download(
                    repo_id,
                    revision=revision,
                    repo_type=repo_type,
                    local_dir=local_dir,
                    allow_patterns=allow_patterns,
                    endpoint=self.endpoint,
                    token=self.token,
                    cache_dir=self.cache_dir,
                ),
            )
        )

    def file_exists(
        self, repo_id: str, filename: str, *, revision: str | None = None, repo_type: RepoType = "dataset"
    ) -> bool:
        """Whether ``filename`` exists at ``revision`` (False for a missing repo or revision too)."""
        return self._call(
            f"checking {filename} in {repo_id}",
            lambda: self._api.file_exists(repo_id, filename, revision=revision, repo_type=repo_type),
        )

    def list_files(self, repo_id: str, *, revision: str | None = None, repo_type: RepoType = "dataset") -> list[str]:
        """Every file path of a repo at a revision."""
        return self._call(
            f"listing files of {repo_id}",
            lambda: self._api.list_repo_files(repo_id, revision=revision, repo_type=repo_type),
        )

    def head_sha(self, repo_id: str, *, repo_type: RepoType = "dataset", revision: str = "main") -> str:
        """Commit sha a branch (or refs/pr/N) points to."""
        info = self._call(
            f"reading {repo_id}@{revision}",
            lambda: self._api.repo_info(repo_id, repo_type=repo_type, revision=revision),
        )
        if not info.sha:
            raise HubError(f"reading {repo_id}@{revision}: the Hub returned no commit sha")
        return info.sha

    # -- writing -----------------------------------------------------------------------------------------
    def commit(
        self,
        repo_id: str,
        *,
        operations_factory: Callable[[str], list[CommitOperation]],
        message: str,
        description: str = "",
        repo_type: RepoType = "dataset",
        create_pr: bool = False,
        revision: str | None = None,
    ) -> CommitResult:
        """One commit on ``revision`` (default main), or a new PR from main when ``create_pr``.

        The commit names its parent; when the branch moved meanwhile (409/412), the head is read again and
        ``operations_factory`` rebuilds the operations on it, up to ``max_rebases`` times.

        Args:
            repo_id: Target repo.
            operations_factory: parent sha -> operations (called again on each rebuild and retry, since
                huggingface_hub mutates operations).
            message: Commit title.
            description: Commit (and PR) description.
            repo_type: Target repo type.
            create_pr: Open ``refs/pr/N`` instead of writing to the branch.
            revision: Branch or ``refs/pr/N`` to write to.

        Returns:
            The commit; ``created`` is False when nothing changed.

        Raises:
            ParentMovedError: the branch kept moving.
            HubError: (or a child) other failures.
        """
        branch = revision or "main"
        for rebase in range(self.max_rebases + 1):
            parent = self.head_sha(repo_id, repo_type=repo_type, revision=branch)

            def attempt(parent: str = parent) -> Any:
                return self._api.create_commit(
                    repo_id,
                    operations_factory(parent),
                    commit_message=message,
                    commit_description=description,
                    repo_type=repo_type,
                    revision=revision,
                    create_pr=create_pr,
                    parent_commit=parent,
                )

            try:
                info = self._call(f"committing to {repo_id}@{branch}", attempt)
            except ParentMovedError:
                logger.warning("%s@%s moved under us; rebuilding the commit (%d)", repo_id, branch, rebase + 1)
                continue
            return CommitResult(
                sha=info.oid,
                pr_num=info.pr_num,
                pr_url=info.pr_url,
                url=info.commit_url,
                created=info.oid != parent,
                rebases=rebase,
            )
        raise ParentMovedError(
            f"committing to {repo_id}@{branch}: the branch moved {self.max_rebases + 1} times while committing"
        )

    def whoami(self) -> str:
        """The user (or bot account) the token belongs to.

        Raises:
            HubError: no valid token, or the Hub failed.
        """
        info = self._call("reading the token's user", lambda: self._api.whoami(token=self.token))
        name = info.get("name") if isinstance(info, dict) else None
        if not isinstance(name, str) or not name:
            raise HubError("the Hub did not say whose token this is")
        return name

    def open_bot_pr(
        self,
        repo_id: str,
        *,
        repo_type: RepoType = "dataset",
        author: str | None = None,
        title_prefix: str | None = None,
    ) -> int | None:
        """Number of the newest open PR by ``author`` whose title starts with ``title_prefix``, or None."""

        def find() -> int | None:
            numbers = [
                d.num
                for d in self._api.get_repo_discussions(
                    repo_id,
                    author=author,
                    discussion_type="pull_request",
                    discussion_status="open",
                    repo_type=repo_type,
                )  # fmt: skip
                if d.is_pull_request and d.status == "open" and (not title_prefix or d.title.startswith(title_prefix))
            ]
            return max(numbers) if numbers else None

        return self._call(f"looking up open PRs of {repo_id}", find)

    def comment(self, repo_id: str, pr_num: int, text: str, *, repo_type: RepoType = "dataset") -> None:
        """Comment on a discussion or PR."""
        self._call(
            f"commenting on {repo_id}#{pr_num}",
            lambda: self._api.comment_discussion(repo_id, pr_num, text, repo_type=repo_type),
        )

    def create_repo(self, repo_id: str, *, repo_type: RepoType, exist_ok: bool = True) -> str:
        """Create a repo (no error when it exists and ``exist_ok``); returns its URL."""
        return str(
            self._call(
                f"creating {repo_id}",
                lambda: self._api.create_repo(repo_id, repo_type=repo_type, exist_ok=exist_ok),
            )
        )


@cache
def _default_hub() -> Hub:
    return Hub()


def default_hub() -> Hub:
    """The process-wide Hub client on ``pipeline.constants.HF_ENDPOINT`` (recreated if the endpoint changed)."""
    hub = _default_hub()
    if hub.endpoint != constants.HF_ENDPOINT.rstrip("/"):
        _default_hub.cache_clear()
        hub = _default_hub()
    return hub


def fetch_config(model_id: str, *, revision: str | None = None) -> dict[str, Any]:
    """``config.json`` of a Hub model, parsed, via the default Hub (see :meth:`Hub.fetch_config`)."""
    return default_hub().fetch_config(validate_model_id(model_id), revision=revision)


def fetch_safetensors_params(model_id: str, *, revision: str | None = None) -> int | None:
    """Safetensors parameter total of a Hub model, or None (see :meth:`Hub.fetch_safetensors_params`)."""
    return default_hub().fetch_safetensors_params(validate_model_id(model_id), revision=revision)


def file_additions(files: dict[str, Path]) -> list[CommitOperation]:
    """Commit operations adding (or replacing) ``path_in_repo -> local file``; the only place they are built."""
    from huggingface_hub import CommitOperationAdd

    return [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(local)) for path, local in sorted(files.items())]
