"""Running the benchmark child: a process group under a timeout and a host-memory watchdog, with progress.

The child (:mod:`pipeline.bench.child`) reports through a JSON file it rewrites atomically at each stage; the
parent reads it while waiting (to show progress) and once the child is gone (to build the record).

The child runs in its own session, so nothing aimed at the parent reaches it. Inside :func:`stopping_on_signals`
a SIGTERM, SIGINT or SIGHUP to the parent ends the running child's process group, starts no other child, and
the caller writes an ``error`` record (:func:`stopped_by` says which signal). A parent killed outright (SIGKILL)
cannot: each child is registered in :func:`children_dir` while it runs, and :func:`reap_orphans` (run before
every bench, and by ``trncat reap`` in the benchmark job's cleanup) ends the group of every registered child
whose parent is gone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pipeline.backends import stop_group
from pipeline.bench.spec import BenchSpec

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


def _tree_rss(process: psutil.Process) -> int:
    total = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the child's whole process group at once and reap the child (its exit status is the record's)."""
    stop_group(proc, grace_s=None, ask_first=False)


# -- a stop asked for from outside ----------------------------------------------------------------------
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_stop: list[int] = []  # the signal received inside stopping_on_signals, if any


def stopped_by() -> int | None:
    """The signal that asked this bench to stop (inside :func:`stopping_on_signals`), or None."""
    return _stop[0] if _stop else None


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP do not end the process: they end the running child's process
    group (:func:`run_child` polls for it), no other child starts, and :func:`stopped_by` names the signal, so
    that the caller still writes a record. Outside the main thread (no handler can be set there) it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: object) -> None:
        if not _stop:
            _stop.append(signum)
            logger.warning("%s received: ending the benchmark child, then writing an error record",
                           signal.Signals(signum).name)  # fmt: skip

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop.clear()


# -- children a killed parent left behind ---------------------------------------------------------------
def children_dir() -> Path:
    """This user's folder of running benchmark children (one file per child's process group)."""
    return Path(tempfile.gettempdir()) / f"trncat-children-{os.getuid()}"


def _own_dir() -> Path | None:
    """:func:`children_dir`, made private to this user; None when another user owns it or it is a link."""
    folder = children_dir()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if folder.is_symlink() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        logger.warning("%s is not this user's private folder: benchmark children are not registered", folder)
        return None
    return folder


def _started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@contextlib.contextmanager
def registered(pid: int) -> Iterator[None]:
    """Register the child ``pid`` (its process group's id) while the block runs, for :func:`reap_orphans`."""
    folder = _own_dir()
    entry = folder / f"{pid}.json" if folder is not None else None
    if entry is not None:
        me = {"pgid": pid, "child_started": _started(pid), "parent": os.getpid()}
        me["parent_started"] = _started(os.getpid())
        with contextlib.suppress(OSError):
            entry.write_text(json.dumps(me), encoding="utf-8")
    try:
        yield
    finally:
        if entry is not None:
            entry.unlink(missing_ok=True)


def reap_orphans() -> list[int]:
    """End the process group of every registered child whose parent is gone (killed outright); returns them.

    A group is ended only while its leader is the registered process (the same start time), or gone with
    members of its group left: a reused pid is never taken for a child of ours.
    """
    folder = _own_dir()
    if folder is None:
        return []
    ended: list[int] = []
    for entry in sorted(folder.glob("*.json")):
        try:
            me = json.loads(entry.read_text(encoding="utf-8"))
            pgid, parent = int(me["pgid"]), int(me["parent"])
        except (OSError, ValueError, TypeError, KeyError):
            entry.unlink(missing_ok=True)
            continue
        if me.get("parent_started") is not None and _started(parent) == me["parent_started"]:
            continue  # its bench is still running
        leader = _started(pgid)
        if leader is None or leader == me.get("child_started"):
            try:
                os.killpg(pgid, signal.SIGKILL)
                ended.append(pgid)
                logger.warning("ended the process group %d of a benchmark child whose trncat bench was killed", pgid)
            except (ProcessLookupError, PermissionError):
                pass
        entry.unlink(missing_ok=True)
    return ended


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
        stopped: int | None = None
        if (stop := stopped_by()) is not None:  # asked to stop before this child started: none starts
            unstarted: dict[str, Any] = {"stage": "load", "metrics": {}, "error": None, "done": False}
            return ChildOutcome(unstarted, None, False, False, "", stopped_by=stop)
        with log_file.open("wb") as log, contextlib.ExitStack() as stack:
            # A new session makes the child a process group leader, so a kill reaches its helpers too.
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env,
                start_new_session=True,
            )
            stack.enter_context(registered(proc.pid))
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
                if (stopped := stopped_by()) is not None:
                    _kill_group(proc)
                    break
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
    return ChildOutcome(report, proc.returncode, timed_out, over_memory, log_tail, stopped_by=stopped)


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
