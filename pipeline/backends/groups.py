"""Ending a process group: what a device's run (the benchmark child, a serving engine) leaves behind when it stops.

Both the benchmark's child (:mod:`pipeline.bench.process`) and a serving engine (:mod:`pipeline.serve.engine`)
start in a session of their own, so their workers (torchrun's ranks, an engine's model executors) share the
leader's process group; one stop ends them all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


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
