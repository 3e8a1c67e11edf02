"""``trncat bench``: resolve the model, size it, run the harness (escalating cores on OOM), write the record."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import fsatomic
from pipeline.backends import Backend, reap_orphans, stopped_by, stopping_on_signals
from pipeline.backends.neuron import bundle_beside
from pipeline.bench import harness
from pipeline.bench.process import address_space_short
from pipeline.bench.spec import BenchOptions, BenchSpec
from pipeline.errors import BenchError, ConfigError, HubError, PlanError
from pipeline.models import Family, ResolvedModel, folder_family, resolve_hub, resolve_local
from pipeline.plan import resolve_workload
from pipeline.records import dump_record
from pipeline.taskspec import default_workload
from pipeline.workload import Workload

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)


def resolve(
    model: str, *, model_id: str | None, revision: str | None, hub: Hub | None, task: str | None = None
) -> ResolvedModel:
    """A local folder as it is, or a Hub id downloaded (weights, configs and tokenizer; never code files).

    Raises:
        ConfigError: a Hub id without a Hub client, or a model id given for a Hub model.
    """
    folder = Path(model)
    if folder.is_dir():
        return resolve_local(folder, model_id=model_id, revision=revision)
    if model_id is not None and model_id != model:
        raise ConfigError("a model id is given for local folders only; a Hub model is recorded under its own id")
    if hub is None:
        raise ConfigError(f"{model} is not a folder, and there is no Hub client to download it with")
    # The plan's checkpoint bytes, from the config alone, bound the download (pipeline.models.select).
    plan = _plan(model, task=task, missing="checkpoint size", revision=revision, hub=hub)
    expected = plan.download_bytes if plan is not None else None
    return resolve_hub(model, revision=revision, hub=hub, task=task, expected_bytes=expected)


def _plan(model: str | Path, *, task: str | None, missing: str, **options: Any) -> Any:
    """The planner's plan of ``model`` for ``task``'s fixed workload, or None when it cannot be planned (logged as
    no ``missing``)."""
    from pipeline.plan import plan_model

    try:
        return plan_model(model, task=task, workload=default_workload(task) if task else None, **options)
    except (PlanError, HubError) as exc:
        logger.info("no %s for %s: %s", missing, model, exc)
        return None


def family_of(resolved: ResolvedModel) -> Family:
    """The record's family: from the fetched folder's files, and the base models the Hub's card
    metadata names when the folder holds no card (a Hub download fetches none)."""
    # Nothing fetched (an error): the family is unknown, not the working directory's.
    family = folder_family(resolved.path) if resolved.error is None else Family()
    return family if family.base_model else dataclasses.replace(family, base_model=resolved.base_model)


def plan_summary(folder: Path, *, task: str, dtype: str, instance: str = "trn2.48xlarge") -> dict[str, Any] | None:
    """The planner's verdict for the record (cores and advice on Trainium2, whatever device runs the bench).

    None when the model cannot be planned: the benchmark itself is what tells then.
    """
    plan = _plan(
        folder, task=task, missing="plan", dtype=dtype if dtype != "float32" else "bfloat16", instance=instance
    )
    if plan is None:
        return None
    return {name: getattr(plan, name) for name in ("cores", "fits", "advice", "instance", "tp_degree", "total_bytes")}


#: How ``--workload KEY=VALUE`` reads a value: a whole number, but for these fields.
_WORKLOAD_VALUE: dict[str, Callable[[str], Any]] = {
    "batch_sizes": lambda text: tuple(int(v) for v in text.split(",")),
    "guidance_scale": float,
}


def changed_workload(workload: Workload, changes: Mapping[str, str] | None) -> Workload:
    """``workload`` with fields set from ``KEY=VALUE`` text (``batch_sizes`` as ``1,4``).

    Raises:
        ConfigError: an unknown field, or a value the workload refuses.
    """
    if not changes:
        return workload
    fields = {f.name: f for f in dataclasses.fields(Workload)}
    values: dict[str, Any] = {}
    for key, text in changes.items():
        if key not in fields:
            raise ConfigError(f"--workload {key}: not a workload field; choose from {', '.join(fields)}")
        try:
            values[key] = _WORKLOAD_VALUE.get(key, int)(text)
        except ValueError:
            raise ConfigError(f"--workload {key}={text!r}: not a number") from None
    return dataclasses.replace(workload, **values)


def bench_model(
    model: str, *, task: str, backend: Backend, out: Path, options: BenchOptions | None = None
) -> dict[str, Any]:
    """Benchmark one model as ``options`` say and write its record to ``out`` (atomically). Returns the record.

    The backend is resolved once by the caller (``get_backend``) and used for everything: the device check,
    the default dtype, the cores (the plan's, on a backend that follows it), the child's environment.

    A pass on a backend with a compile cache (neuron) packs the run's cache into the compiled-cache bundle beside
    ``out`` (``result.json`` -> ``result.neff-cache.tar.gz``; :mod:`pipeline.backends.neuron.bundle`), which
    publish uploads with the record; when it cannot, the record's ``compiled_cache_skipped`` says why.

    The record carries the workload it ran, and the queue keys results by it.

    Raises:
        ConfigError: bad arguments (unknown task, device or dtype, a bad id or revision).
        BenchError: no record could be made (the model could not even be resolved).
    """
    if out.exists() and out.is_dir():
        raise ConfigError(f"the record's path {out} is a folder; give a file name")
    o = options or BenchOptions()
    reap_orphans()  # children an earlier bench left when it was killed outright hold the device and memory
    backend.check_available()  # before any download: a missing runtime is one clear line
    dtype = o.dtype or backend.default_dtype
    resolved = resolve(model, model_id=o.model_id, revision=o.revision, hub=o.hub, task=task)
    plan = o.plan
    if plan is None and resolved.error is None and address_space_short() is None:  # else: record at once
        plan = plan_summary(resolved.path, task=task, dtype=dtype)
    spec = BenchSpec(
        path=str(resolved.path),
        task=task,
        device=backend.name,
        dtype=dtype,
        cores=backend.cores_for(requested=o.cores, planned=(plan or {}).get("cores")),
        workload=changed_workload(
            o.workload or resolve_workload(task, folder=resolved.path, model_id=resolved.model_id), o.workload_changes
        ),
        warmup=o.warmup,
        iterations=o.iterations,
        fault=o.fault,
    )
    logger.info("benchmarking %s (%s) on %s, %d core(s)", resolved.model_id, task, backend.name, spec.cores)
    from pipeline.bench.escalation import run_with_escalation

    # A pass packs its compile cache beside the record; a bundle of an earlier run there must not outlive it.
    bundle = bundle_beside(out) if backend.has_compile_cache else None
    if bundle is not None:
        bundle.unlink(missing_ok=True)

    def once(current: BenchSpec) -> dict[str, Any]:
        """One attempt: the harness, with this bench's bundle and host memory guard."""
        return harness.bench_once(current, resolved, backend=backend, options=o, plan=plan, bundle_out=bundle)

    with stopping_on_signals():  # a SIGTERM or SIGINT ends the child and still gives a record
        if o.escalate:  # attempt after attempt, doubling the cores after each out-of-memory
            record = run_with_escalation(spec, attempt=once, backend=backend, model_id=resolved.model_id)
        else:
            record = once(spec)
        stop = stopped_by()
    record.update(family_of(resolved).record_fields())
    # The family's names were validated when read: an invalid record here is a bug.
    write_record(out, dump_record(harness.checked(record, built_by="adding its family")))
    logger.debug("record: %s", json.dumps(record["metrics"]))
    if stop is not None:  # the record says so; the command still ends as a stopped one does
        error = BenchError(f"stopped by {signal.Signals(stop).name}: the error record is at {out}")
        error.exit_code = 128 + stop
        raise error
    return record


def fallback_dirs() -> list[Path]:
    """Where a record goes when its ``--out`` cannot take it (a full disk), in order."""
    return [Path(tempfile.gettempdir()) / "trncat-records", Path.home() / ".cache" / "trncat" / "records"]


def write_record(out: Path, text: str) -> None:
    """Write the record's ``text`` to ``out``; when that fails (a full disk), to the first fallback folder that
    takes it, and say where.

    Raises:
        BenchError: ``out`` could not be written (the message names where the record is instead; as a last
            resort the record is logged whole).
    """
    try:
        fsatomic.write_text(out, text)
        return
    except OSError as exc:
        reason = exc.strerror or str(exc)
    for folder in fallback_dirs():
        place = folder / f"{out.stem}.{uuid.uuid4().hex[:8]}{out.suffix or '.json'}"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fsatomic.write_text(place, text)
        except OSError:
            continue
        logger.error("cannot write %s (%s): the record is at %s", out, reason, place)
        raise BenchError(f"cannot write {out}: {reason}; the record was written to {place} instead")
    logger.error("cannot write %s (%s) nor any fallback; the record:\n%s", out, reason, text)
    raise BenchError(f"cannot write {out}: {reason}; no fallback folder took it either: the record is in the log")
