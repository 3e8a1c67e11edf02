"""The parent side of a benchmark: start the child, watch it, and turn whatever happened into one record.

A crash, a hang, a memory blow-up or an exception in the child all end as a valid record with a classified
failure; only a record that cannot be written at all is an error of the harness itself.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pipeline import constants
from pipeline.bench.backends import Backend
from pipeline.bench.failures import HOST_OOM_HINT, classify
from pipeline.bench.messages import summarize_message
from pipeline.bench.models import ResolvedModel, check_remote_code
from pipeline.bench.spec import BenchSpec
from pipeline.errors import BenchError, RemoteCodeRefused
from pipeline.records import SCHEMA_VERSION, load_schema, validate_record
from pipeline.types import HOST_MEMORY_SHORT

logger = logging.getLogger(__name__)

#: The record's metrics, from the schema (the child reports more, e.g. raw latencies, that stay out).
METRIC_FIELDS: tuple[str, ...] = tuple(load_schema()["properties"]["metrics"]["properties"])
_POLL_S = 0.2


@dataclass(frozen=True)
class ChildOutcome:
    """What the parent saw of one child run."""

    report: dict[str, Any]
    returncode: int | None
    timed_out: bool
    over_memory: bool
    log_tail: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


_STAGE_WORDS = {"load": "loading the model", "compile": "first call (compiling)", "run": "timed runs"}


def _stage_of(report_file: Path) -> str | None:
    """The stage the child reported last (its file is replaced atomically, so a read sees a whole one)."""
    try:
        stage = json.loads(report_file.read_text(encoding="utf-8")).get("stage")
    except (OSError, ValueError, AttributeError):
        return None
    return stage if isinstance(stage, str) else None


def run_child(
    spec: BenchSpec,
    *,
    env: dict[str, str],
    launcher: Callable[[Sequence[str]], list[str]] | None,
    timeout_s: float,
    memory_limit_bytes: int | None,
) -> ChildOutcome:
    """Run the benchmark child for ``spec`` and wait for it under a timeout and a memory limit.

    Args:
        spec: What to run.
        env: Variables added to the child's environment (the backend's, for its cores).
        launcher: Builds the command from the module and its arguments (plain python when None; torchrun
            for several cores).
        timeout_s: Wall-clock limit; the child's whole process group is killed past it.
        memory_limit_bytes: Host memory limit of the child's process tree (RSS), or None.

    Returns:
        What the parent saw.
    """
    with tempfile.TemporaryDirectory(prefix="trncat-bench-") as tmp:
        work = Path(tmp)
        spec_file, report_file, log_file = work / "spec.json", work / "report.json", work / "child.log"
        spec_file.write_text(spec.to_json(), encoding="utf-8")
        module_args = ["pipeline.bench.child", str(spec_file), str(report_file)]
        command = launcher(module_args) if launcher else [sys.executable, "-m", *module_args]
        child_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        timed_out = over_memory = False
        with log_file.open("wb") as log:
            # A new session makes the child a process group leader, so a kill reaches its helpers too.
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env,
                start_new_session=True,
            )
            watched = psutil.Process(proc.pid)
            started = time.monotonic()
            deadline = started + timeout_s
            stage = None
            while True:
                try:
                    proc.wait(timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now_at = _stage_of(report_file)
                if now_at and now_at != stage:  # progress: a Neuron compile can take many minutes
                    stage = now_at
                    logger.info("  %s (%.0f s)", _STAGE_WORDS.get(stage, stage), time.monotonic() - started)
                if time.monotonic() > deadline:
                    timed_out = True
                    _kill_group(proc)
                    break
                if memory_limit_bytes is not None and _tree_rss(watched) > memory_limit_bytes:
                    over_memory = True
                    _kill_group(proc)
                    break
        try:
            report = json.loads(report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = {"stage": "load", "metrics": {}, "error": None, "done": False}
        log_tail = log_file.read_bytes()[-20000:].decode("utf-8", errors="replace")
    return ChildOutcome(report, proc.returncode, timed_out, over_memory, log_tail)


def _failure_from(outcome: ChildOutcome, *, timeout_s: float) -> tuple[str, dict[str, str]] | None:
    report = outcome.report
    stage = report.get("stage") or "load"
    if outcome.timed_out:
        c = classify(timed_out=True, stage_hint=stage)
        message = f"no result after {timeout_s:g} s (was at stage {stage})"
        return c.status, {"stage": c.stage, "code": c.code, "message": message}
    if outcome.over_memory:
        message = f"{HOST_OOM_HINT}: killed at stage {stage}"
        c = classify(signal=signal.SIGKILL, message=message, stage_hint=stage)
        return c.status, {"stage": c.stage, "code": c.code, "message": message}
    error = report.get("error")
    if error:
        c = classify(exc_type=error.get("type"), message=error.get("message", ""), stage_hint=stage)
        return c.status, {"stage": c.stage, "code": c.code, "message": summarize_message(error.get("message", ""))}
    if outcome.returncode != 0 or not report.get("done"):
        code = outcome.returncode
        sig = -code if code is not None and code < 0 else None
        c = classify(signal=sig, exit_code=None if sig else code, message=outcome.log_tail, stage_hint=stage)
        what = f"killed by {signal.Signals(sig).name}" if sig else f"exited with code {code}"
        tail = summarize_message(outcome.log_tail, limit=1500)
        return c.status, {"stage": c.stage, "code": c.code, "message": f"child {what} at stage {stage}. {tail}".strip()}
    return None


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
        if waited >= wait_s:
            return free
        step = min(poll_s, wait_s - waited)
        sleep(step)
        waited += step
    return None


def bench_once(
    spec: BenchSpec,
    model: ResolvedModel,
    *,
    backend: Backend,
    timeout_s: float = 1800.0,
    memory_limit_bytes: int | None = None,
    source: str = "local",
    plan: dict[str, Any] | None = None,
    child_runner: Callable[..., ChildOutcome] = run_child,
    host_memory_bytes: int | None = None,
    host_memory_wait_s: float = 0.0,
    memory_check: Callable[..., int | None] = host_memory_short,
) -> dict[str, Any]:
    """Benchmark ``model`` as ``spec`` says, in a child process, and return a valid result record.

    Args:
        spec: What to run.
        model: The resolved model (folder, id, revision).
        backend: The backend of ``spec.device``, resolved (and checked) once by the caller.
        timeout_s: Wall-clock limit of the child.
        memory_limit_bytes: Host memory limit of the child's process tree.
        source: The record's ``run.source``.
        plan: The planner's advice, recorded as is.
        child_runner: Runs the child (:func:`run_child`; tests inject an in-process one).
        host_memory_bytes: Host memory the compile needs (the queue's prediction); when the host does not have
            it available after ``host_memory_wait_s``, the run is refused: an ``error`` record with the code
            :data:`HOST_MEMORY_SHORT`, retried by a later queue, never a ``fail``.
        host_memory_wait_s: How long to wait for that memory.
        memory_check: :func:`host_memory_short` (tests inject one).

    Returns:
        The record, validated.

    Raises:
        BenchError: the record that came out is not valid (a harness bug: nothing is written).
    """
    if backend.name != spec.device:
        raise BenchError(f"the {backend.name} backend cannot run a spec for {spec.device}")
    started = _now()
    metrics: dict[str, Any] = dict.fromkeys(METRIC_FIELDS)
    failure: dict[str, str] | None = None
    status = "pass"
    refused: RemoteCodeRefused | None = None
    if model.error is None:
        try:
            check_remote_code(model.path)
        except RemoteCodeRefused as exc:
            refused = exc
    short = memory_check(host_memory_bytes, wait_s=host_memory_wait_s)
    if short is not None:
        gib = 1024**3
        status = "error"
        message = (
            f"refused before loading: the host had {short / gib:.1f} GiB available after waiting "
            f"{host_memory_wait_s:g} s, the compile needs {(host_memory_bytes or 0) / gib:.1f} GiB; retried later"
        )
        failure = {"stage": "load", "code": HOST_MEMORY_SHORT, "message": message}
    elif model.error is not None:  # the files could not be fetched: the revision is known, so it is a record
        c = classify(exc_type="HubError", message=model.error, stage_hint="load")
        status, failure = c.status, {"stage": c.stage, "code": c.code, "message": summarize_message(model.error)}
    elif refused is not None:
        c = classify(exc_type="RemoteCodeRefused", message=str(refused), stage_hint="load")
        status, failure = c.status, {"stage": c.stage, "code": c.code, "message": str(refused)}
    else:
        outcome = child_runner(
            spec,
            env=backend.environment(cores=spec.cores),
            launcher=lambda module_args: backend.launcher(cores=spec.cores, module_args=module_args),
            timeout_s=timeout_s,
            memory_limit_bytes=memory_limit_bytes,
        )
        reported = outcome.report.get("metrics", {})
        metrics.update({k: v for k, v in reported.items() if k in METRIC_FIELDS})
        found = _failure_from(outcome, timeout_s=timeout_s)
        if found is not None:
            status, failure = found
            # A failed run keeps what it measured before failing, but no speed figures of a run that did not finish.
            for name in ("ttft_s", "latency_s", "decode_tokens_per_s", "roofline_fraction", "iterations"):
                metrics[name] = None
    finished = _now()
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model_id": model.model_id,
        "revision": model.revision,
        "task": spec.task,
        "status": status,
        "failure": failure,
        "device": spec.device,
        "hardware": backend.hardware(cores=spec.cores),
        "cores": spec.cores,
        "dtype": spec.dtype,
        "workload": spec.workload.to_dict(),
        "metrics": metrics,
        "versions": backend.versions(),
        "run": {
            "started_at": started,
            "finished_at": finished,
            "runner": constants.RUNNER_NAME,
            "github_run_id": constants.GITHUB_RUN_ID,
            "github_sha": constants.GITHUB_SHA,
            "source": source,
        },
        "attempts": [],
        "plan": plan,
    }
    problems = validate_record(record)
    if problems:
        details = "; ".join(f"{field}: {message}" for field, message in problems)
        raise BenchError(f"the harness built an invalid record for {model.model_id}: {details}")
    return record
