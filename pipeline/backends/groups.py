"""Owning a process group: what a device's run (the benchmark child, a serving engine, its load generator) leaves
behind when it stops.

Each starts in a session of its own, so its workers (torchrun's ranks, an engine's model executors, guidellm's
workers) share the leader's process group; one stop ends them all. Three things make sure one does:
:func:`stop_group` (the stop), :func:`stopping_on_signals` (a SIGTERM, SIGINT or SIGHUP to trncat ends the groups
and still lets it write its record) and :func:`registered` / :func:`reap_orphans` (each group is registered while
it runs, so that ``trncat reap`` ends the groups of a trncat killed outright). :func:`owned_group` does all three
for one tool.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil

logger = logging.getLogger(__name__)


def group_members(group: int, proc: Path = Path("/proc")) -> list[int]:
    """The live (not zombie) processes of process group ``group``, from ``/proc/<pid>/stat``."""
    out = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == group:
            out.append(int(stat.parent.name))
    return out


def stop_group(process: subprocess.Popen[Any], *, grace_s: float | None = 10.0, ask_first: bool = True) -> None:
    """End the process group ``process`` leads: SIGTERM first when ``ask_first`` (an engine may shut down
    cleanly), then SIGKILL to whatever is left. After each signal the leader is reaped and the group's other
    members are given ``grace_s`` to go; ``grace_s=None`` waits for the leader without a bound and for no member
    (the benchmark child's stop, which must return its exit status)."""
    group = process.pid
    for signum in (signal.SIGTERM, signal.SIGKILL) if ask_first else (signal.SIGKILL,):
        if process.poll() is not None and not group_members(group):
            return  # the whole group is gone already
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
        if grace_s is None:
            continue
        deadline = time.monotonic() + grace_s
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.1)


# -- a stop asked for from outside ----------------------------------------------------------------------
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_stop: list[int] = []  # the signal received inside stopping_on_signals, if any
_owned: dict[int, subprocess.Popen[bytes]] = {}  # this process's live groups started by owned_group


def stopped_by() -> int | None:
    """The signal that asked this run to stop (inside :func:`stopping_on_signals`), or None."""
    return _stop[0] if _stop else None


class Stopped(Exception):  # noqa: N818 - a stop asked for, not an error
    """A stop was asked for (:func:`stopped_by`) before :func:`owned_group` could start its tool."""


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP do not end the process: they send SIGTERM to every group
    :func:`owned_group` started here, no other group starts, and :func:`stopped_by` names the signal, so that the
    caller still writes a record (the benchmark's parent also polls for it and kills its child's group). Outside
    the main thread (no handler can be set there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: object) -> None:
        if _stop:
            return
        _stop.append(signum)
        name = signal.Signals(signum).name
        logger.warning("%s received: ending the running processes, then writing the record", name)
        for group in list(_owned):  # only a signal here: the caller's own stop (owned_group's exit) waits and kills
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGTERM)

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop.clear()


@contextlib.contextmanager
def owned_group(
    argv: Sequence[str], *, log: Path, env: dict[str, str], cwd: Path | None = None, grace_s: float | None = 10.0
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (a tool: an engine, a load generator, an evaluator, the benchmark child) in a session of its
    own, its output to ``log``, and own its whole process group while the block runs: registered for
    :func:`reap_orphans` (``trncat reap`` ends it after a SIGKILL of this process), sent SIGTERM by
    :func:`stopping_on_signals`'s handler, and ended by :func:`stop_group` when the block is left, however it is
    left: asked first and given ``grace_s``, or with ``grace_s=None`` killed at once (the leader waited for).

    Raises:
        Stopped: a stop was asked for already: the tool is ended at once.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - the caller's argv, no shell
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
            start_new_session=True,
        )  # fmt: skip
    with registered(process.pid):
        _owned[process.pid] = process
        try:
            if stopped_by() is not None:  # the signal came before it was owned: the handler could not end it
                raise Stopped(f"stopped by {signal.Signals(stopped_by() or 0).name} before {argv[0]} started")
            yield process
        finally:
            _owned.pop(process.pid, None)
            stop_group(process, grace_s=grace_s, ask_first=grace_s is not None)


# -- groups a killed parent left behind -----------------------------------------------------------------
def children_dir() -> Path:
    """This user's folder of running children (one file per owned process group: a benchmark child, a serving
    engine, a load generator)."""
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
        logger.warning("%s is not this user's private folder: children are not registered", folder)
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
            continue  # its trncat is still running
        leader = _started(pgid)
        if leader is None or leader == me.get("child_started"):
            try:
                os.killpg(pgid, signal.SIGKILL)
                ended.append(pgid)
                logger.warning("ended the process group %d of a child whose trncat was killed", pgid)
            except (ProcessLookupError, PermissionError):
                pass
        entry.unlink(missing_ok=True)
    return ended
