"""The one process-group stop (the benchmark child's and a serving engine's): nothing of the group outlives it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.backends import group_members
from pipeline.backends.groups import stop_group

#: A leader that ignores SIGTERM and starts a worker that ignores it too (as an engine's executor may).
STUBBORN = r"""
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
worker = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", worker])
print("up", flush=True)
time.sleep(600)
"""
#: A leader that exits on SIGTERM, leaving a worker that ignores it.
ORPHANING = r"""
import subprocess, sys, time
worker = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", worker])
print("up", flush=True)
time.sleep(600)
"""


def _start(code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "up"
    assert len(group_members(process.pid)) == 2
    return process


@pytest.mark.parametrize("code", [STUBBORN, ORPHANING])
def test_asked_then_ended_the_whole_group_goes(code: str) -> None:
    process = _start(code)
    stop_group(process, grace_s=2.0)
    assert process.returncode is not None and group_members(process.pid) == []


def test_ended_at_once_the_leader_is_reaped_with_its_exit_status() -> None:
    process = _start(STUBBORN)
    stop_group(process, grace_s=None, ask_first=False)
    assert process.returncode == -9
    stop_group(process)  # a second stop of a gone group does nothing
