"""The benchmark queue: candidates - already measured - ineligible -> GitHub Actions matrices.

A candidate is measured when the dataset's results hold a row with the same key: model id, revision,
task, device, dtype, workload (batch size, input/output tokens, image size) and toolchain versions (those
the caller pins, ``runners/toolchain.yaml``; what does not decide a task's result is left out of its key:
:func:`pipeline.workload.key_mask`). A ``pass`` is not re-run and a ``fail`` not retried (a real
incompatibility until the revision or the toolchain changes); ``error`` rows are infrastructure failures,
retried while their count is at most ``max_error_retries``.

Each queued model is planned from its configs (one download per model and revision, cached) to pick the
runner label its core count needs. The result is a list of matrices ``{"include": [...]}`` of at most 256
entries each (GitHub's cap per matrix), each entry with its predicted seconds and compile host memory
(:mod:`pipeline.queue.durations`), ordered largest and longest first, so the tail of a sweep is short jobs.

When the toolchain moves (a Neuron release), every model is queued again: the re-measure goes in a stated order,
what last passed first, then what last failed at compile, then the rest (:data:`REMEASURE_ORDER`; a model with no
earlier row is of the rest), each group largest and longest first; the old rows stay in the results as history.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.dataset import iter_results, read_latest, read_serving, results_paths
from pipeline.discover import Candidate, Discovery
from pipeline.errors import ConfigError, HubError, PlanError, PlanLimitError, RepoNotFoundError
from pipeline.hardware import DEFAULT_INSTANCE, get_instance, row_device
from pipeline.hub import Hub
from pipeline.ids import is_revision, model_id_problem
from pipeline.plan import Plan, normalize_dtype, runner_label
from pipeline.prices import Accelerators
from pipeline.queue.durations import DurationModel
from pipeline.queue.gpu import gpu_label, gpus_needed
from pipeline.queue.planners import HubPlanner
from pipeline.queue.serving import serving_jobs
from pipeline.queue.toolchain import as_pinned, check_toolchain, public_version, version_column
from pipeline.taskspec import default_workload, key_mask, task_source
from pipeline.types import HOST_MEMORY_SHORT

if TYPE_CHECKING:
    from pipeline.serve import ServingWorkload

logger = logging.getLogger(__name__)

#: GitHub Actions generates at most 256 jobs from one matrix.
MAX_CHUNK = 256
#: The re-measure's groups, in queue order: by how the model's newest earlier CI row (another toolchain or
#: revision) fared.
REMEASURE_ORDER = ("passed", "compile_failure", "rest")
_WORKLOAD_COLUMNS = ("batch_size", "input_tokens", "output_tokens", "image_size")

#: Candidate -> its :class:`~pipeline.plan.Plan` (:class:`~pipeline.queue.planners.HubPlanner` plans from the Hub).
Planner = Callable[[Candidate], Plan]


def load_candidates(paths: Iterable[Path]) -> list[Candidate]:
    """Candidates from discovery JSON files (``trncat discover --json``: one discovery or a list of them).

    Raises:
        ConfigError: unreadable or malformed file.
    """
    candidates: list[Candidate] = []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            docs = data if isinstance(data, list) else [data]
            for doc in docs:
                candidates.extend(Discovery.from_dict(doc).candidates)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: not a discovery file: {exc}") from None
    return candidates


@dataclass
class Queue:
    """What to benchmark: ``chunks`` of GitHub matrices, and what was left out with a reason."""

    chunks: list[dict[str, list[dict[str, Any]]]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    toolchain: dict[str, str] = field(default_factory=dict)
    #: How many predictions came from history at this toolchain, older toolchains, and the prior.
    duration_sources: dict[str, int] = field(default_factory=dict)
    #: Queued jobs per re-measure group (:data:`REMEASURE_ORDER`), in that order.
    remeasure: dict[str, int] = field(default_factory=dict)

    @property
    def entries(self) -> list[dict[str, Any]]:
        """Every matrix entry, across chunks."""
        return [entry for chunk in self.chunks for entry in chunk["include"]]

    def to_dict(self) -> dict[str, Any]:
        """``{"count", "chunks", "skipped", "toolchain"}``; each chunk is a ``strategy.matrix`` value."""
        return {
            "count": len(self.entries),
            "chunks": self.chunks,
            "skipped": self.skipped,
            "toolchain": self.toolchain,
            "remeasure": self.remeasure,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON (compact by default, as a ``$GITHUB_OUTPUT`` line wants it)."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    def chunk_json(self, index: int) -> str:
        """One chunk as compact JSON, for ``strategy.matrix: ${{ fromJSON(...) }}``.

        Raises:
            ConfigError: no such chunk (an empty queue has none: GitHub rejects an empty matrix).
        """
        if not 0 <= index < len(self.chunks):
            raise ConfigError(f"chunk {index} does not exist; the queue has {len(self.chunks)} chunk(s)")
        return json.dumps(self.chunks[index], separators=(",", ":"))


_Key = tuple[Any, ...]


def _history(
    root: Path, toolchain: Mapping[str, str]
) -> tuple[dict[_Key, Counter[str]], dict[tuple[str, str, str], str]]:
    """One pass over the CI rows of every results file (only the columns read here): the status counts per key, and
    per (model id without case, task, device) the re-measure group of its newest pass or fail, whatever its
    toolchain or revision (a queued model was not measured at its key, so that row is an earlier one).

    Only the project's own runs count as "measured": a community or local record (``source`` other than
    ``ci``) never keeps a model from the project's runners.
    """
    versions = [version_column(k) for k in toolchain]
    columns = ["model_id", "revision", "task", "device", "dtype", *_WORKLOAD_COLUMNS, *versions, "status"]
    history: dict[_Key, Counter[str]] = {}
    newest: dict[tuple[str, str, str], tuple[Any, str]] = {}
    for row in iter_results(root, [*columns, "failure_code", "failure_stage", "finished_at", "source", "hardware"]):
        if row["source"] != "ci":  # only the project's own runs count as measured (a community fail is no verdict)
            continue
        # A Trainium3 row keys as `trainium3`: a Trainium2 pass never keeps a model from the Trainium3 queue.
        row["device"] = row_device(row["device"], hardware=row["hardware"])
        head = [row[c] for c in columns[: -1 - len(versions)]]
        key = _masked(row["task"], head, {k: as_pinned(row[version_column(k)], toolchain[k]) for k in toolchain})
        counts = history.setdefault(key, Counter())
        # A run the host refused for lack of memory says nothing about the model: it is retried, uncounted.
        if row["failure_code"] != HOST_MEMORY_SHORT:
            counts[row["status"]] += 1
        if row["status"] not in ("pass", "fail"):
            continue
        model = (str(row["model_id"]).casefold(), row["task"], str(row["device"]))
        group = (
            "passed" if row["status"] == "pass" else "compile_failure" if row["failure_stage"] == "compile" else "rest"
        )
        if model not in newest or row["finished_at"] > newest[model][0]:
            newest[model] = (row["finished_at"], group)
    return history, {model: group for model, (_, group) in newest.items()}


def fetch_results(hub: Hub, repo: str, *, into: Path, pick: Callable[[list[str]], list[str]] = results_paths) -> Path:
    """Download the results files of the Hub dataset ``repo`` into ``into`` (what :func:`build_queue` reads), or the
    files ``pick`` picks of the repo's (:func:`pipeline.dataset.warm_queue_paths`: what a warm queue reads).

    Raises:
        HubError: (or a child) the Hub failed.
    """
    if wanted := pick(hub.list_files(repo, repo_type="dataset")):
        hub.snapshot(repo, repo_type="dataset", local_dir=into, allow_patterns=wanted)
    return into


def _key(candidate: Candidate, *, device: str, dtype: str, toolchain: Mapping[str, str]) -> _Key:
    workload = default_workload(candidate.task).to_dict()
    head = [candidate.model_id, candidate.sha, candidate.task, device, dtype, *(workload[c] for c in _WORKLOAD_COLUMNS)]
    return _masked(candidate.task, head, toolchain)


def _masked(task: str, head: list[Any], versions: Mapping[str, Any]) -> _Key:
    """A key with what does not decide ``task``'s result set to None (:func:`pipeline.workload.key_mask`)."""
    ignored = key_mask(task)
    offset = len(head) - len(_WORKLOAD_COLUMNS)
    head = [None if i >= offset and _WORKLOAD_COLUMNS[i - offset] in ignored else v for i, v in enumerate(head)]
    return (*head, *(None if k in ignored else public_version(v) for k, v in versions.items()))


def build_queue(
    *,
    candidates: Iterable[Candidate],
    dataset_root: Path | None,
    toolchain: Mapping[str, str],
    max_error_retries: int = 2,
    chunk_size: int = MAX_CHUNK,
    planner: Planner | None = None,
    hub: Hub | None = None,
    device: str = "neuron",
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    accelerators: Accelerators | None = None,
    only: Collection[tuple[str, str]] | None = None,
    serving: ServingWorkload | None = None,
    serving_images: ServingWorkload | None = None,
) -> Queue:
    """The benchmark matrices for ``candidates`` (a model and task listed twice runs once), largest and
    longest jobs first.

    Args:
        candidates: From discovery (any views; ineligible ones are skipped with their reason).
        dataset_root: The dataset folder whose ``data/results`` says what was measured; None or missing: none.
        toolchain: Version key -> version the runners run (e.g. from :func:`load_toolchain`).
        max_error_retries: Re-queue a key while it has at most this many ``error`` results.
        chunk_size: Entries per matrix, 1 to 256.
        planner: Candidate -> :class:`~pipeline.plan.Plan`; None for a :class:`HubPlanner` on ``hub``.
        hub: The Hub the default planner reads config.json from (needed when ``planner`` is None).
        device: Device the runners bench on (``neuron``; ``cpu`` for the offline demo).
        dtype: Benchmark dtype.
        instance: Instance type plans are made for (with ``accelerators``: the GPU instance the runners are on).
        accelerators: The GPUs of ``instance``: the queue is then for the GPU runner class (``device`` cuda),
            each job sized in GPUs (:func:`pipeline.queue.gpu.gpus_needed`) on a ``gpu-<N>g`` runner.
        only: (model id casefolded, task) the queue may take (the Selected list's ``gpu: true`` entries for the
            GPU runner class); the other candidates are skipped with that reason. None: every candidate.
        serving: A serving workload: every passing text-generation row of ``device`` in the dataset without its
            serving row at this harness version and workload also gets a serving job
            (:func:`pipeline.queue.serving.serving_jobs`; on the GPU class, the Trainium2 rows' twins).
        serving_images: The image workload beside ``serving``: passing image-text-to-text rows of the architectures
            vLLM Neuron serves with images get a serving job of it (:func:`pipeline.queue.serving.servable`).

    Returns:
        The :class:`Queue`.

    Raises:
        ConfigError: bad chunk size, retry count or toolchain; a cuda queue without the GPUs of its instance.
        DatasetError: an unreadable results file (from :func:`pipeline.dataset.iter_results`).
        HubError: the Hub failed while fetching a config (a missing config is a note, not an error).
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size <= MAX_CHUNK:
        raise ConfigError(f"chunk size must be an integer from 1 to {MAX_CHUNK}, got {chunk_size!r}")
    if isinstance(max_error_retries, bool) or not isinstance(max_error_retries, int) or max_error_retries < 0:
        raise ConfigError(f"max error retries must be a non-negative integer, got {max_error_retries!r}")
    pinned = check_toolchain(toolchain)
    dtype = normalize_dtype(dtype)
    if (device == "cuda") != (accelerators is not None):
        raise ConfigError("the GPU runner class is the cuda device on a GPU instance: pass both, or neither")
    # A GPU job is sized from the plan's bytes, which do not depend on the device planned for.
    family = "gpu" if accelerators is not None else get_instance(instance).family
    plan_instance = DEFAULT_INSTANCE if accelerators is not None else instance
    keyed = row_device(device, hardware=instance) or device  # the device its rows count under (trainium3 on a Trn3)
    if planner is None and hub is None:
        raise ConfigError("build_queue needs a planner or a Hub to plan from")
    plan_one = planner or HubPlanner(hub=hub, dtype=dtype, instance=plan_instance)  # type: ignore[arg-type]
    allowed = None if only is None else {(m.casefold(), t) for m, t in only}
    root = Path(dataset_root) if dataset_root is not None else None
    history, earlier = _history(root, pinned) if root is not None and root.is_dir() else ({}, {})
    groups: dict[int, int] = {}
    durations = DurationModel.from_dataset(root, toolchain=pinned)
    queue = Queue(toolchain=pinned)
    entries: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()

    def skip(c: Candidate, reason: str) -> None:
        queue.skipped.append({"model_id": c.model_id, "task": c.task, "reason": reason})

    for c in candidates:
        if (c.model_id.casefold(), c.task) in seen:
            continue
        seen.add((c.model_id.casefold(), c.task))
        if not c.eligible:
            skip(c, f"{c.kind}: {c.reason}")
            continue
        if allowed is not None and (c.model_id.casefold(), c.task) not in allowed:
            skip(c, "gpu: not marked `gpu: true` in the Selected list")
            continue
        # Ids reach job names, artifact names and `trncat bench` arguments: never trust them unchecked.
        if model_id_problem(c.model_id) is not None or not is_revision(c.sha):
            skip(c, "invalid: bad model id or revision")
            continue
        statuses = history.get(_key(c, device=keyed, dtype=dtype, toolchain=pinned), Counter())
        if statuses["pass"]:
            skip(c, "already passed at this revision, workload and toolchain")
            continue
        if statuses["fail"]:
            skip(c, "failed at this revision, workload and toolchain (not retried until one of them changes)")
            continue
        if statuses["error"] > max_error_retries:
            skip(c, f"infrastructure error {statuses['error']} times at this key (at most {max_error_retries} retries)")
            continue
        entry = _entry(c, plan_one, family=family, device=device, dtype=dtype, instance=instance, gpus=accelerators)
        if isinstance(entry, str):
            skip(c, entry)
            continue
        entry["attempt"] = statuses["error"] + 1
        predicted = durations.predict(task=c.task, cores=runner_cores(entry), params=entry.pop("params"))
        entry["predicted_s"] = round(predicted.total_s)
        queue.duration_sources[predicted.source] = queue.duration_sources.get(predicted.source, 0) + 1
        entry["host_memory_bytes"] = predicted.host_memory_bytes
        group = earlier.get((c.model_id.casefold(), c.task, keyed), "rest")
        groups[id(entry)] = REMEASURE_ORDER.index(group)
        entries.append(entry)
    # The re-measure's order first (what passed, then compile failures, then the rest), each group as matrix_order.
    entries = sorted(matrix_order(entries), key=lambda e: groups[id(e)])
    queue.remeasure = {g: sum(v == i for v in groups.values()) for i, g in enumerate(REMEASURE_ORDER)}
    if serving is not None and root is not None and root.is_dir():
        jobs = serving_jobs(read_latest(root), read_serving(root), device=device, workload=serving, instance=instance,
                            family=family, image_workload=serving_images)  # fmt: skip
        # after the benchmark jobs: a serving job needs its batch-1 row's pass
        kept = [j for j in jobs if allowed is None or (str(j["model_id"]).casefold(), j["task"]) in allowed]
        entries += matrix_order(kept)
    queue.chunks = [{"include": entries[i : i + chunk_size]} for i in range(0, len(entries), chunk_size)]
    logger.info("queued %d jobs in %d chunk(s); skipped %d", len(entries), len(queue.chunks), len(queue.skipped))
    return queue


def runner_cores(entry: Mapping[str, Any]) -> int:
    """The cores a matrix entry's runner holds: its label's (``trn2-8c`` -> 8; ``gpu-2g`` -> 2 GPUs), the plan's
    rounded up."""
    return int(str(entry["runner"]).rsplit("-", 1)[1].removesuffix("c").removesuffix("g"))


def matrix_order(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Largest (runner cores) and longest (predicted seconds) first; ties by model id and task (stable)."""
    return sorted(entries, key=lambda e: (-runner_cores(e), -e.get("predicted_s", 0), e["model_id"], e["task"]))


def _entry(
    c: Candidate,
    planner: Planner,
    *,
    family: str,
    device: str,
    dtype: str,
    instance: str,
    gpus: Accelerators | None = None,
) -> dict[str, Any] | str:
    """The matrix entry of an eligible candidate, or why it cannot run on any runner."""
    assert c.sha is not None
    problem: Exception | None = None
    try:
        plan = planner(c)
    except PlanLimitError as exc:  # a config too large to build: never sent to a runner either
        return f"unplannable config: {exc}"
    except (RepoNotFoundError, PlanError) as exc:
        problem = exc
    except HubError:
        raise  # the Hub failing is no fact about the model
    except Exception as exc:  # noqa: BLE001 - a hostile or odd config.json must not stop the whole queue
        logger.warning("planning %s failed unexpectedly", c.model_id, exc_info=True)
        problem = PlanError(f"{type(exc).__name__}: {exc}")
    if problem is not None:
        # Unplannable is not unrunnable: the benchmark on one core is what tells.
        label = gpu_label(1) if gpus is not None else f"{family}-1c"
        cores, runner, note, params = 1, label, f"not planned ({problem}); runs on 1 core", c.params
    elif gpus is not None:  # the GPU runner class: sized in GPUs of the instance, its quantization its own
        sized = gpus_needed(plan, gpus, instance=instance)
        if isinstance(sized, str):
            return sized
        if sized > 1 and not (source := task_source(c.task)).tensor_parallel:
            return f"needs {sized} GPUs; {source.library} models are benchmarked on one device here"
        cores, runner, note, params = sized, gpu_label(sized), "", plan.params
    else:
        quantization = plan.quantization or {}
        if quantization.get("support") == "unsupported":
            # transformers cannot load the checkpoint on a NeuronCore: a runner hour would only record that.
            return f"unsupported quantization: {quantization['method']}: {quantization['reason']}"
        if not plan.fits:
            return f"does not fit: {plan.advice}"
        if plan.cores > 1 and not (source := task_source(c.task)).tensor_parallel:
            return (
                f"needs {plan.cores} NeuronCores; {source.library} models are benchmarked on one core here "
                f"(its tensor parallelism is not run by this benchmark yet): {plan.advice}"
            )
        cores, runner, note, params = plan.cores, runner_label(plan), "", plan.params
    org, name = c.model_id.split("/")
    return {
        "model_id": c.model_id,
        "revision": c.sha,
        "task": c.task,
        "device": device,
        "dtype": dtype,
        "cores": cores,
        "runner": runner,
        "instance": instance,
        # Artifact names may not hold '/'; '--' cannot occur in a Hub id, so it separates unambiguously. A GPU
        # job's artifact says so: one run uploads the model's Trainium2 record and its GPU record side by side.
        "artifact": f"{org}--{name}--{c.task}--{c.sha[:12]}" + ("--cuda" if gpus is not None else ""),
        "note": note,
        "params": params,
    }
