"""Running the benchmark child: a process group under a timeout and a host-memory watchdog, with progress, and what
its outcome says (:meth:`ChildOutcome.failure`: the one reading of a child that did not finish).

The child (:mod:`pipeline.bench.child`) reports through a JSON file it rewrites atomically at each stage; the
parent reads it while waiting (to show progress) and once the child is gone (to build the record).

The child runs in its own session, so nothing aimed at the parent reaches it. Inside :func:`stopping_on_signals`
a SIGTERM, SIGINT or SIGHUP to the parent ends the running child's process group, runs no other child, and
the caller writes an ``error`` record (:func:`stopped_by` says which signal). A parent killed outright (SIGKILL)
cannot: each child is registered while it runs, and :func:`reap_orphans` (run before every bench, and by ``trncat
reap`` in the benchmark job's cleanup) ends the group of every registered child whose parent is gone. The signal
handler and the register are :mod:`pipeline.backends.groups`'s, which ``trncat serve`` shares.
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

from pipeline.backends import Stopped, owned_group, stopped_by
from pipeline.bench.failures import HOST_OOM_HINT, INTERRUPTED, classify
from pipeline.bench.messages import summarize_message
from pipeline.bench.spec import BenchSpec, blank_report
from pipeline.types import STAGES

logger = logging.getLogger(__name__)

_POLL_S = 0.2


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second (the record's time format)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ChildOutcome:
    """What the parent saw of one child run."""

    report: dict[str, Any]
    returncode: int | None
    timed_out: bool
    over_memory: bool
    log_tail: str
    #: The signal that stopped the bench (its child's group was ended), or None.
    stopped_by: int | None = None

    def failure(self, *, timeout_s: float) -> tuple[str, dict[str, str]] | None:
        """The status and failure of a child that did not finish (classified by the failure rules), or None."""
        report = self.report
        stage = report.get("stage") or "load"
        if self.stopped_by is not None:
            return "error", interrupted(self.stopped_by, stage)
        if self.timed_out:
            return classified(
                f"no result after {timeout_s:g} s (was at stage {stage})", timed_out=True, stage_hint=stage
            )
        if self.over_memory:
            message = f"{HOST_OOM_HINT}: killed at stage {stage}"
            return classified(message, signal=signal.SIGKILL, message=message, stage_hint=stage)
        if error := report.get("error"):
            text = error.get("message", "")
            return classified(summarize_message(text), exc_type=error.get("type"), message=text, stage_hint=stage)
        if self.returncode != 0 or not report.get("done"):
            code = self.returncode
            sig = -code if code is not None and code < 0 else None
            what = f"killed by {signal.Signals(sig).name}" if sig else f"exited with code {code}"
            message = f"child {what} at stage {stage}. {summarize_message(self.log_tail, limit=1500)}".strip()
            return classified(
                message, signal=sig, exit_code=None if sig else code, message=self.log_tail, stage_hint=stage
            )
        return None


def interrupted(signum: int, stage: str) -> dict[str, str]:
    """The failure of a bench stopped by ``signum`` at ``stage`` (its child's process group ended)."""
    name = signal.Signals(signum).name
    message = f"trncat bench was stopped by {name} at stage {stage}: its child's process group was ended"
    return {"stage": stage if stage in STAGES else "load", "code": INTERRUPTED, "message": message}


def classified(shown: str, /, **evidence: Any) -> tuple[str, dict[str, str]]:
    """The status and failure the rules give ``evidence`` (:func:`classify`), with the message ``shown``."""
    c = classify(**evidence)
    return c.status, {"stage": c.stage, "code": c.code, "message": shown}


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


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
        try:
            # A group of its own, so a kill reaches the child's helpers too; past a limit or stopped, the whole group
            # is killed at once.
            with owned_group(command, log=log_file, env=child_env, grace_s=None) as proc:
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
                    if stopped_by() is not None:
                        break
                    if time.monotonic() > deadline:
                        timed_out = True
                        break
                    if memory_limit_bytes is not None and _tree_rss(watched) > memory_limit_bytes:
                        over_memory = True
                        break
        except Stopped:  # asked to stop before the child could run: it was ended as it started
            return ChildOutcome(blank_report(), None, False, False, "", stopped_by=stopped_by())
        try:
            report = json.loads(report_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = blank_report()
        log_tail = log_file.read_bytes()[-20000:].decode("utf-8", errors="replace")
    return ChildOutcome(report, proc.returncode, timed_out, over_memory, log_tail, stopped_by=stopped_by())


#: The address space (``RLIMIT_AS``, ``ulimit -v``) below which a benchmark cannot even start: the bench's own
#: import of transformers and torch maps 0.9 GiB (VmPeak, measured on the CPU image), and under a 1 GiB limit
#: OpenBLAS's thread start-up retried its failed allocations for ever, with no record (issue 48.6).
MIN_ADDRESS_SPACE_BYTES = 2 * 1024**3


def address_space_short() -> str | None:
    """Why this process cannot start a benchmark: its address-space limit is below :data:`MIN_ADDRESS_SPACE_BYTES`
    (a record's failure message: out of memory); None when it is not."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY or limit >= MIN_ADDRESS_SPACE_BYTES:
        return None
    gib = 1024**3
    return (f"out of memory: the address-space limit (ulimit -v) is {limit / gib:.2f} GiB, below the "
            f"{MIN_ADDRESS_SPACE_BYTES / gib:.0f} GiB a benchmark needs to start; refused before loading")  # fmt: skip
