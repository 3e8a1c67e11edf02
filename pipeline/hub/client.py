"""The Hub client: every call trncat makes to the Hub (or the local hub), with errors translated and one
retry budget per call (429, 5xx and network errors, timeouts included; ``Retry-After`` honoured), none past a
running deadline (:func:`pipeline.hub.retry.deadline`). A commit whose parent moved (409/412) is rebuilt on the
new branch head, up to a budget. A call whose lost answer may hide that the Hub did it all the same (a commit, a
PR, a comment) is never repeated blindly: before each retry the loop looks for its effect.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi
from huggingface_hub._commit_api import CommitOperation
from huggingface_hub.hf_api import ExpandModelProperty_T

from pipeline import constants
from pipeline.errors import HubDeadlineError, HubError, ParentMovedError
from pipeline.hub import transport
from pipeline.hub.files import RepoFiles
from pipeline.hub.listing import LISTING_EXPAND, ONLY_SHA, CommitResult, HubSort, ModelListing, RepoType
from pipeline.hub.operations import git_blob_id
from pipeline.hub.prs import PullRequests, new_marker, with_marker
from pipeline.hub.retry import Budget, time_left
from pipeline.hub.translate import http_status, is_retryable, network_error, translate

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: The largest JSON file of a model repo parsed (config.json, model_index.json): real ones are a few KB.
MAX_JSON_BYTES = 8 * 1024 * 1024


class Hub(RepoFiles, PullRequests):
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
        self._user: str | None = None
        transport.install()

    # -- the retry loop --------------------------------------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], *, effect: Callable[[], T | None] | None = None) -> T:
        """``fn()`` on one retry budget; before each retry, ``effect()`` (when given) looks for what a try whose
        answer was lost may have done all the same, and a value it finds is the answer."""
        budget = Budget(self._sleep, self.max_retries, self.base_delay, self.max_delay)
        tried = False
        with budget.active():
            while True:
                if (left := time_left()) is not None and left <= 0:
                    again = " again" if tried else ""
                    raise HubDeadlineError(f"{what}: the deadline passed before it could be tried{again}")
                try:
                    if tried and effect is not None and (found := effect()) is not None:
                        logger.warning("%s: the Hub had done it already (its answer was lost)", what)
                        return found
                    tried = True
                    return fn()
                except Exception as exc:
                    if not is_retryable(exc) or budget.spent:
                        raise translate(exc, what, attempts=budget.attempts) from exc
                    status, retry_after = http_status(exc)
                    delay = budget.delay(retry_after)
                    if (left := time_left()) is not None and delay >= left:
                        last = translate(exc, what, attempts=budget.attempts)
                        raise HubDeadlineError(f"{last}; the deadline passes before the next try") from exc
                    if status is None and budget.retries == 0 and (cause := network_error(exc)) is not None:
                        # Nothing answered: say so at once, and for how long it will go on trying.
                        total = budget.backoff_total()
                        logger.warning(
                            "%s: no answer from the Hub at %s (%s): is it reachable? retrying %d times over "
                            "about %.0f s (Ctrl-C stops)", what, self.endpoint, type(cause).__name__,
                            budget.max_retries, total,
                        )  # fmt: skip
                    else:
                        logger.warning("%s: HTTP %s, retrying in %.1fs", what, status or "error", delay)
                    budget.wait(delay)

    # -- reading -----------------------------------------------------------------------------------------
    def list_models(self, *, task: str, sort: HubSort, limit: int, library: str | None = None) -> list[ModelListing]:
        """Top ``limit`` models of a task by a ranking, in one listing (no request per model).

        Args:
            task: Pipeline tag, e.g. ``text-generation``.
            sort: ``trending_score`` or ``downloads``.
            limit: How many.
            library: Only models of this library (the Hub's ``filter``), e.g. ``sentence-transformers``.

        Returns:
            Listings, best first.

        Raises:
            HubError: (or a child) when the Hub cannot answer.
        """
        query: dict[str, Any] = {"pipeline_tag": task, "sort": sort, "limit": limit, "expand": LISTING_EXPAND}
        query.update({"filter": library} if library else {})
        return self._call(
            f"listing {task}" + (f" of {library}" if library else "") + f" by {sort}",
            lambda: [ModelListing.from_info(info) for info in self._api.list_models(**query)],
        )

    def model_info(self, repo_id: str, *, revision: str | None = None, files: bool = False) -> ModelListing:
        """One model's listing fields at a revision (with its file paths when ``files``).

        Raises:
            RepoNotFoundError: no such model or revision.
            HubError: other failures.
        """
        expand: list[ExpandModelProperty_T] = [*LISTING_EXPAND, "siblings"] if files else LISTING_EXPAND
        return self._call(
            f"model info of {repo_id}",
            lambda: ModelListing.from_info(self._api.model_info(repo_id, revision=revision, expand=expand)),
        )

    def fetch_json(self, repo_id: str, filename: str, *, revision: str | None = None) -> dict[str, Any]:
        """One JSON object file of a model repo, parsed (``config.json``, a pipeline's ``model_index.json``); raises
        RepoNotFoundError (no such repo, revision or file), GatedRepoError, or HubError (not a JSON object, ...)."""
        path = self.download(repo_id, filename, revision=revision)
        if path.stat().st_size > MAX_JSON_BYTES:  # untrusted: never parse a file of this size into memory
            raise HubError(f"{filename} of {repo_id} is {path.stat().st_size} bytes, more than {MAX_JSON_BYTES}")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise HubError(f"{filename} of {repo_id} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise HubError(f"{filename} of {repo_id} is not a JSON object")
        return data

    def fetch_safetensors_params(self, repo_id: str, *, revision: str | None = None, file: str = "") -> int | None:
        """Total parameter count from the Hub's safetensors metadata (None when it has none), or that of one
        safetensors ``file`` of the repo, read from its header alone (range requests, no weights)."""
        if not file:
            return self.model_info(repo_id, revision=revision).params
        what = f"reading the safetensors header of {file} in {repo_id}"
        meta = self._call(what, lambda: self._api.parse_safetensors_file_metadata(repo_id, file, revision=revision))
        return sum(meta.parameter_count.values())

    def head_sha(self, repo_id: str, *, repo_type: RepoType = "dataset", revision: str = "main") -> str:
        """Commit sha a branch (or refs/pr/N) points to."""
        info = self._call(
            f"reading {repo_id}@{revision}",
            lambda: self._api.repo_info(repo_id, repo_type=repo_type, revision=revision, expand=ONLY_SHA),
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
        parent: str | None = None,
    ) -> CommitResult:
        """One commit on ``revision`` (default main), or a new PR from main when ``create_pr``.

        The commit names its parent; when the branch moved meanwhile (409/412), the head is read again and
        ``operations_factory`` rebuilds the operations on it, up to ``max_rebases`` times. A try whose answer was
        lost is never repeated blindly: a new PR is looked for first by the marker its description carries
        (:func:`pipeline.hub.prs.new_marker`), a commit onto a branch by the files it adds, at the branch's head.

        Args:
            repo_id: Target repo.
            operations_factory: parent sha -> operations (called again on each rebuild and retry, since
                huggingface_hub mutates operations); none means the parent already holds everything.
            message: Commit title.
            description: Commit (and PR) description.
            repo_type: Target repo type.
            create_pr: Open ``refs/pr/N`` instead of writing to the branch.
            revision: Branch or ``refs/pr/N`` to write to.
            parent: The branch head the caller just read (the first attempt builds on it without reading it
                again); None to read it.

        Returns:
            The commit; ``created`` is False when nothing changed.

        Raises:
            ParentMovedError: the branch kept moving.
            HubError: (or a child) other failures.
        """
        branch = revision or "main"
        known = parent
        marker = new_marker() if create_pr else ""
        for rebase in range(self.max_rebases + 1):
            if rebase or known is None:
                known = self.head_sha(repo_id, repo_type=repo_type, revision=branch)
            parent = known
            sent: list[CommitOperation] = []

            def attempt(parent: str = parent, rebase: int = rebase, sent: list[CommitOperation] = sent) -> CommitResult:
                operations = operations_factory(parent)
                if not operations:  # this parent already holds everything: no commit
                    return CommitResult(sha=parent, created=False, rebases=rebase)
                sent[:] = operations
                info = self._api.create_commit(
                    repo_id,
                    operations,
                    commit_message=message,
                    commit_description=with_marker(description, marker) if marker else description,
                    repo_type=repo_type,
                    revision=revision,
                    create_pr=create_pr,
                    parent_commit=parent,
                )
                return CommitResult(sha=info.oid, pr_num=info.pr_num, pr_url=info.pr_url, url=info.commit_url,
                                    created=info.oid != parent, rebases=rebase)  # fmt: skip

            def landed(
                parent: str = parent, rebase: int = rebase, sent: list[CommitOperation] = sent
            ) -> CommitResult | None:
                if marker:  # a new PR: the bot's open PR whose description holds this commit's marker
                    found = self.pr_with_marker(repo_id, marker, repo_type=repo_type)
                    return replace(found, rebases=rebase) if found is not None else None
                return self._landed(repo_id, branch, parent, sent, repo_type=repo_type, rebase=rebase)

            try:
                result = self._call(f"committing to {repo_id}@{branch}", attempt, effect=landed)
            except ParentMovedError:
                logger.warning("%s@%s moved under us; rebuilding the commit (%d)", repo_id, branch, rebase + 1)
                continue
            return result
        raise ParentMovedError(
            f"committing to {repo_id}@{branch}: the branch moved {self.max_rebases + 1} times while committing"
        )

    def _landed(
        self, repo_id: str, branch: str, parent: str, sent: list[CommitOperation], *, repo_type: RepoType, rebase: int
    ) -> CommitResult | None:
        """The branch's head when it is a commit after ``parent`` that holds every file ``sent`` added, byte for byte
        (what a commit whose answer was lost left), else None. Raw calls: it runs inside the commit's retry loop."""
        from huggingface_hub import CommitOperationAdd
        from huggingface_hub.hf_api import RepoFile

        head = self._api.repo_info(repo_id, repo_type=repo_type, revision=branch, expand=ONLY_SHA).sha
        added = {op.path_in_repo: op for op in sent if isinstance(op, CommitOperationAdd)}
        if not head or head == parent or not added or len(added) != len(sent):
            return None
        held = {
            item.path: item
            for item in self._api.get_paths_info(repo_id, list(added), revision=head, repo_type=repo_type)
            if isinstance(item, RepoFile)
        }
        for path, op in added.items():
            item = held.get(path)
            if item is None:
                return None
            mine = op.upload_info.sha256.hex() if item.lfs is not None else _git_blob_id_of(op)
            if (item.lfs.sha256 if item.lfs is not None else item.blob_id) != mine:
                return None
        return CommitResult(sha=head, rebases=rebase)

    def create_repo(self, repo_id: str, *, repo_type: RepoType, exist_ok: bool = True) -> str:
        """Create a repo (no error when it exists and ``exist_ok``); returns its URL. A Space is a static one."""
        sdk = "static" if repo_type == "space" else None
        return str(
            self._call(
                f"creating {repo_id}",
                lambda: self._api.create_repo(repo_id, repo_type=repo_type, exist_ok=exist_ok, space_sdk=sdk),
            )
        )


def _git_blob_id_of(op: Any) -> str:
    """The git blob id of what a ``CommitOperationAdd`` adds (read from its file or bytes)."""
    with op.as_file() as handle:
        return git_blob_id(handle.read())
