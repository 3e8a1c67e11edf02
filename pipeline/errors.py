"""The one exception hierarchy of trncat.

Every error the pipeline raises on purpose is a :class:`PipelineError`. Each child also subclasses the
built-in that fits (``ValueError``, ``OSError``, ...), so a caller can catch broadly or narrowly. Hub
errors are translated into these classes in :mod:`pipeline.hub` and nowhere else.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class of every error trncat raises on purpose. The CLI prints it as one line."""

    exit_code: int = 2


class ConfigError(PipelineError, ValueError):
    """Bad input from the user or a hand-kept file (a bad model id, an unknown task, a malformed YAML)."""


class ModelIdError(ConfigError):
    """A string that is not a valid Hub model id (``org/name``)."""


class RecordError(PipelineError, ValueError):
    """A result record that does not satisfy the contract."""

    exit_code = 1


class PlanError(PipelineError, ValueError):
    """The planner cannot size a model (no config.json, no architecture, no parameter count)."""


class PlanLimitError(PlanError):
    """A config too large to plan safely: counts beyond the planner's bounds, or planning past its time or memory
    limit. The queue skips such a model (it is never benchmarked); the rest of the run goes on."""


class BenchError(PipelineError, RuntimeError):
    """The harness could not produce a record at all (not the same as a model that fails: that is a record)."""


class RemoteCodeRefused(BenchError):
    """The model only loads with its own code (``trust_remote_code``), which trncat never runs.

    Not an error of the harness: the benchmark records it as a ``fail`` at ``load`` (code ``remote_code``).
    """


class BackendUnavailableError(BenchError):
    """The requested backend's runtime is not installed or has no device here (e.g. torch_neuronx absent)."""


class BundleError(PipelineError, ValueError):
    """A compiled-cache bundle refused: it holds a file that is not the NEFF cache's own (code, a pickle, a link,
    a path out of its folder), is over the size cap, or its bytes do not match the digest its record names."""


class DatasetError(PipelineError, OSError):
    """The dataset folder is unreadable or inconsistent."""


class HubError(PipelineError, OSError):
    """The Hub (or the local hub) answered with an error we could not recover from."""


class StoreError(HubError):
    """A request the local hub's store refuses; ``status`` and ``code`` say how the server answers it."""

    def __init__(self, message: str, *, status: int, code: str | None = None, commit: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.commit = commit


class RepoNotFoundError(HubError):
    """The repository or revision does not exist, or is private."""


class GatedRepoError(RepoNotFoundError):
    """The repository is gated and we have no access."""


class HubRateLimitError(HubError):
    """The Hub kept answering 429 after the retry budget was spent."""


class HubServerError(HubError):
    """The Hub kept answering 5xx after the retry budget was spent."""


class ParentMovedError(HubError):
    """The target branch moved while we committed (409/412) and rebasing did not converge."""


class HubDeadlineError(HubError):
    """A sequence of Hub calls (one publish) ran past its deadline (``TRNCAT_PUBLISH_DEADLINE_S``)."""


class RetryableHubAnswer(PipelineError, RuntimeError):
    """A 408/429/5xx answer or a network error inside a Hub call, raised to the Hub's retry loop.

    :mod:`pipeline.hub.transport` raises it so that huggingface_hub's own backoff (which sleeps on the real
    clock) never sees the answer; :class:`pipeline.hub.Hub` catches it, spends its budget and tries again, or
    raises the translated error. It never reaches a caller of the Hub.
    """

    def __init__(self, message: str, *, status: int | None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
