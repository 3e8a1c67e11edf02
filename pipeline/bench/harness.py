"""The parent side of a benchmark: start the child, watch it, and turn whatever happened into one record.

A crash, a hang, a memory blow-up or an exception in the child all end as a valid record with a classified
failure; only a record that cannot be written at all is an error of the harness itself.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from pipeline import constants
from pipeline.backends import Backend, CompiledRun, package_version, stopped_by, this_machine
from pipeline.bench import agreement, verify
from pipeline.bench.messages import summarize_message
from pipeline.bench.process import ChildOutcome, address_space_short, classified, interrupted, now_iso, run_child
from pipeline.bench.spec import BenchOptions, BenchSpec
from pipeline.errors import BenchError
from pipeline.models import ResolvedModel, refusal
from pipeline.records import (
    OPTIONAL_METRICS,
    SCHEMA_VERSION,
    VERSION_TEXT,
    ResultRecord,
    RunInfo,
    load_schema,
    printable,
    record_spread,
    validate_record,
)
from pipeline.taskspec import REGISTRY, task_source, task_spec
from pipeline.types import HOST_MEMORY_SHORT

#: The record's metrics, from the schema (the child reports more, e.g. raw latencies, that stay out).
METRIC_FIELDS: tuple[str, ...] = tuple(load_schema()["properties"]["metrics"]["properties"])
_TASK_ONLY: frozenset[str] = frozenset(m for spec in REGISTRY.values() for m in spec.metric_fields)


#: The figures of a finished run: a run that failed keeps none of them.
SPEED_FIELDS = (
    "ttft_s", "latency_s", "decode_tokens_per_s", "roofline_fraction", "iterations",  # text generation
    *(f.path[1] for spec in REGISTRY.values() for f in spec.fields if f.figure),  # each task's own (its spec)
)  # fmt: skip


def metric_fields(task: str) -> tuple[str, ...]:
    """The metrics a record of ``task`` always carries: the common ones and its own, no other task's (the
    :data:`~pipeline.records.OPTIONAL_METRICS` are added when measured)."""
    own = set(task_spec(task).metric_fields)
    return tuple(m for m in METRIC_FIELDS if (m not in _TASK_ONLY or m in own) and m not in OPTIONAL_METRICS)


def _run_and_verify(
    spec: BenchSpec,
    model: ResolvedModel,
    *,
    work: Path,
    metrics: dict[str, Any],
    notes: list[str],
    observed: dict[str, Any],
    children: verify.Children,
) -> tuple[str, dict[str, str] | None, dict[str, Any] | None]:
    """The benchmark child, then (when it passed) the warm start and the answer check; fills ``metrics``."""
    if children.cache_dir is not None:
        children.cache_dir.mkdir()  # empty and the run's own: the first call is a cold compile
    started = time.time()
    captured = work / "answer.pt"
    outcome = children.on_device(dataclasses.replace(spec, capture=str(captured)))
    reported = outcome.report.get("metrics", {})
    metrics.update({k: v for k, v in reported.items() if k in metrics})
    metrics.update({k: v for k, v in reported.items() if k in OPTIONAL_METRICS and v is not None})
    extra = outcome.report.get("extra") or {}
    if (spread := record_spread(spec.task, spec.workload.batch_size, metrics, reported, extra)) is not None:
        metrics["spread"] = spread
    observed["threads"] = extra.get("threads")
    notes.extend(str(n) for n in outcome.report.get("notes") or [])
    if (found := outcome.failure(timeout_s=children.timeout_s)) is not None:
        status, failure = found
        error = outcome.report.get("error") or {}
        if failure["code"] == "device_oom" and error.get("type"):
            # The docs do not name the exception a device OOM raises (docs/neuron-facts.md): record what it was.
            notes.append(f"the device out-of-memory surfaced as {error.get('module', '?')}.{error['type']}")
        notes.extend(children.backend.failure_notes(code=failure["code"], since=started))
        _drop_speed(metrics)  # a failed run keeps what it measured before failing, but no speed figures
        return status, failure, None
    figures, note = verify.warm_start(spec, children)
    metrics.update(figures)
    if note:
        notes.append(note)
    if (stop := stopped_by()) is not None:  # stopped while checking the run: no verdict on it
        return _stopped(metrics, stop)
    agreed = verify.answer_check(spec, model, device_capture=captured, params=metrics.get("params"), children=children)
    if (stop := stopped_by()) is not None:
        return _stopped(metrics, stop)
    if agreement.disagrees(agreed):
        message = agreement.failure_message(agreed, task=spec.task)
        return "fail", {"stage": "accuracy", "code": "wrong_answer", "message": message}, agreed
    return "pass", None, agreed


def _drop_speed(metrics: dict[str, Any]) -> None:
    metrics.update({name: None for name in SPEED_FIELDS if name in metrics})
    metrics.pop("spread", None)


def _stopped(metrics: dict[str, Any], signum: int) -> tuple[str, dict[str, str], None]:
    _drop_speed(metrics)
    return "error", interrupted(signum, "run"), None


def run_versions(backend: Backend, task: str, notes: list[str]) -> dict[str, str | None]:
    """The record's ``versions``: the backend's, and the task's library when it is not transformers. A value that
    is no version string (a tool's odd output) is left out ("unknown" where one is required), noted in ``notes``."""
    versions = backend.versions()
    library = task_source(task).library
    if library != "transformers":
        versions[library.replace("-", "_")] = package_version(library) or "unknown"
    for name, value in versions.items():
        if value is not None and not VERSION_TEXT.fullmatch(value):
            versions[name] = "unknown" if name in {"pipeline", "python", "torch", "transformers"} else None
            notes.append(f"versions.{name}: {printable(repr(value))[:200]} is not a version string; left out")
    return versions


def host_memory_short(
    need_bytes: int | None,
    *,
    wait_s: float,
    available: Callable[[], int] = lambda: int(psutil.virtual_memory().available),
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 15.0,
) -> int | None:
    """Wait up to ``wait_s`` for ``need_bytes`` of available host memory (other runners' compiles end).

    Returns:
        None when the memory is there (or nothing is needed); else the bytes available at the deadline.
    """
    if not need_bytes:
        return None
    waited = 0.0
    while (free := available()) < need_bytes:
        if waited >= wait_s or stopped_by() is not None:
            return free
        step = min(poll_s, wait_s - waited)
        sleep(step)
        waited += step
    return None


def runner_memory_share(*, total: int, cores: int, cores_available: int | None) -> int:
    """The host memory that is this runner's: ``total`` times its cores over the instance's (all of it when the
    instance's core count is unknown, as on a CPU host). The runners of one instance split its cores, and so its
    memory: a guard that asks more than the share waits for memory the neighbours are entitled to."""
    if not cores_available or cores >= cores_available:
        return total
    return total * max(1, cores) // cores_available


def bench_once(
    spec: BenchSpec,
    model: ResolvedModel,
    *,
    backend: Backend,
    options: BenchOptions | None = None,
    plan: dict[str, Any] | None = None,
    child_runner: Callable[..., ChildOutcome] = run_child,
    bundle_out: Path | None = None,
) -> dict[str, Any]:
    """Benchmark ``model`` as ``spec`` says, in a child process, and return a valid result record.

    Args:
        spec: What to run.
        model: The resolved model (folder, id, revision).
        backend: The backend of ``spec.device``, resolved (and checked) once by the caller.
        options: The run's limits (``timeout_s``, ``memory_limit_bytes``), its ``source`` and host memory guard:
            ``host_memory_bytes``, the host memory the compile needs (the queue's prediction); when the host does not
            have it available after ``host_memory_wait_s``, the run is refused: an ``error`` record with the code
            :data:`HOST_MEMORY_SHORT`, retried by a later queue, never a ``fail``. ``memory_check`` replaces
            :func:`host_memory_short` (tests).
        plan: The planner's advice, recorded as is.
        child_runner: Runs the child (:func:`run_child`; tests inject an in-process one).
        bundle_out: Where a pass on a backend with a compile cache packs it (:meth:`Backend.bundle_compile_cache`,
            its key manifest in ``compiled_cache_key``); else the record's ``compiled_cache_skipped`` says why.

    Returns:
        The record, validated.
    Raises:
        BenchError: the record that came out is not valid (a harness bug: nothing is written).
    """
    o = options or BenchOptions()
    host_memory_bytes, memory_check = o.host_memory_bytes, o.memory_check or host_memory_short
    if backend.name != spec.device:
        raise BenchError(f"the {backend.name} backend cannot run a spec for {spec.device}")
    started = now_iso()
    metrics: dict[str, Any] = dict.fromkeys(metric_fields(spec.task))
    notes: list[str] = []
    agreed: dict[str, Any] | None = None
    observed: dict[str, Any] = {}
    status, failure = "pass", None
    unready = backend.preflight()
    if host_memory_bytes and unready is None:
        # A prediction comes from history (one outlier, or a record that lies): never more than this runner's share.
        available_cores = backend.hardware(cores=spec.cores).get("cores_available")
        total = int(psutil.virtual_memory().total)
        share = runner_memory_share(total=total, cores=spec.cores, cores_available=available_cores)
        if host_memory_bytes > share:
            notes.append(
                f"host memory guard: the queue asked {host_memory_bytes} bytes; capped at the runner's share of "
                f"the host, {share} bytes"
            )
            host_memory_bytes = share
    short = memory_check(host_memory_bytes, wait_s=o.host_memory_wait_s) if unready is None else None
    limited = address_space_short()  # no child could start: out of memory before a model loads, said at once
    if unready is not None:  # the machine cannot give a trustworthy run: retried elsewhere, never published
        status, failure = "error", {"stage": "load", "code": "device_unknown", "message": summarize_message(unready)}
    elif limited is not None:
        status, failure = "error", {"stage": "load", "code": HOST_MEMORY_SHORT, "message": limited}
    elif short is not None:
        gib = 1024**3
        message = (
            f"refused before loading: the host had {short / gib:.1f} GiB available after waiting "
            f"{o.host_memory_wait_s:g} s, the compile needs {(host_memory_bytes or 0) / gib:.1f} GiB; retried later"
        )
        status, failure = "error", {"stage": "load", "code": HOST_MEMORY_SHORT, "message": message}
    elif model.error is not None:  # the files could not be fetched: the revision is known, so it is a record
        status, failure = classified(
            summarize_message(model.error), exc_type="HubError", message=model.error, stage_hint="load"
        )
    elif refused := refusal(model.path):
        status, failure = classified(refused, exc_type="RemoteCodeRefused", message=refused, stage_hint="load")
    else:
        with tempfile.TemporaryDirectory(prefix="trncat-run-") as tmp:
            cache = Path(tmp) / "compile-cache" if backend.has_compile_cache else None
            status, failure, agreed = _run_and_verify(
                spec,
                model,
                work=Path(tmp),
                metrics=metrics,
                notes=notes,
                observed=observed,
                children=verify.Children(child_runner, o.timeout_s, o.memory_limit_bytes, backend, cache),
            )
            if status == "pass" and bundle_out is not None and cache is not None:
                compiled = CompiledRun(model.path, spec.task, spec.dtype, spec.workload.to_dict(), spec.cores)
                observed["bundle_skipped"], observed["cache_key"] = backend.bundle_compile_cache(
                    cache, bundle_out, compiled
                )
    finished = now_iso()
    if failure is not None:  # a log's text: what XML and the catalog cannot show is dropped
        failure["message"] = printable(failure["message"])
    ci = o.source == "ci"  # the CI-only fields name the project's own run; validation refuses them on any other
    threads = observed.get("threads")
    skipped = observed.get("bundle_skipped")
    record = ResultRecord(
        schema_version=SCHEMA_VERSION,
        model_id=model.model_id,
        revision=model.revision,
        task=spec.task,
        status=status,
        failure=failure,
        device=spec.device,
        hardware=backend.hardware(cores=spec.cores),
        cores=spec.cores,
        dtype=spec.dtype,
        workload=spec.workload.to_dict(),
        metrics=metrics,
        versions=run_versions(backend, spec.task, notes),
        run=RunInfo(
            started_at=started,
            finished_at=finished,
            runner=constants.RUNNER_NAME if ci else None,
            github_run_id=constants.GITHUB_RUN_ID if ci else None,
            github_sha=constants.GITHUB_SHA if ci else None,
            source=o.source,
            machine=this_machine() if ci else None,  # what a second-machine warm check compares (issue 47.4)
        ),
        attempts=[],
        plan=plan,
        agreement=agreed,
        notes=[printable(note)[:500] for note in notes if printable(note).strip()],
        # what the child set torch to (pipeline.bench.child.thread_count)
        threads=threads if isinstance(threads, int) and threads >= 1 else None,
        compiled_cache_skipped=printable(skipped) if skipped else None,
        # what the bundle beside the record is keyed by
        compiled_cache_key=None if skipped else observed.get("cache_key") or None,
    ).to_dict()
    return checked(record, built_by="the harness")


def checked(record: dict[str, Any], *, built_by: str) -> dict[str, Any]:
    """``record`` when it is valid, as an emulated run's too (`trncat validate` and publish refuse an emulated
    record; the harness writes it).

    Raises:
        BenchError: it is not: a bug of ``built_by``, and nothing is written.
    """
    if problems := validate_record(record, allow_emulated=True):
        details = "; ".join(f"{field}: {message}" for field, message in problems)
        raise BenchError(f"{built_by} built an invalid record for {record['model_id']}: {details}")
    return record
