"""The second-machine check of a published bundle: the row's run.py in strict mode on a runner that did not make it.

After a passing row's bundle is published, :func:`warm_check` runs the row's generated ``run.py`` with
``--require-warm`` in a fresh process, with an empty NEFF cache and an empty user cache of its own (so nothing of
this machine's earlier runs can serve it), and reads what run.py prints: ``warm_start    hits=N misses=M
first_call_s=S``, or ``require-warm: refused|failed: ...``. The result (:class:`WarmCheck`) says ``verified`` only
when run.py exited 0 with every graph served by the cache; ``missed`` when a graph compiled, ``refused`` when run.py
would not start warm (another key, toolchain, no bundle), ``error`` when run.py failed otherwise. ``emulated`` says
when the machine is the Neuron emulator: never a Trainium2 verification.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.records import WarmCheck, WarmStatus
from pipeline.render import run_script
from pipeline.workload import CLIPS_DIR, speech_clips

_COUNTS = re.compile(r"^warm_start\s+hits=(\d+) misses=(\d+) first_call_s=([\d.]+)$", re.M)
_STRICT = re.compile(r"^require-warm: (refused|failed): (.*)$", re.M)


def parse_run_output(returncode: int, output: str) -> tuple[WarmStatus, int | None, int | None, float | None, str]:
    """(status, hits, misses, first call seconds, message) from run.py's exit code and its printed lines."""
    counts = _COUNTS.search(output)
    hits, misses, first = (int(counts[1]), int(counts[2]), float(counts[3])) if counts else (None, None, None)
    strict = _STRICT.search(output)
    if returncode == 0 and counts and misses == 0 and hits:
        return "verified", hits, misses, first, f"{hits} of {hits} graph(s) served by the cache"
    if strict and strict[1] == "refused":
        return "refused", hits, misses, first, strict[2][:500]
    if counts and (misses or not hits):
        return "missed", hits, misses, first, (strict[2] if strict else f"{misses} graph(s) missed")[:500]
    tail = output.strip().splitlines()[-1:] or ["no output"]
    return "error", hits, misses, first, f"run.py exited {returncode}: {tail[0][:400]}"


def warm_check(
    record: Mapping[str, Any],
    *,
    model: str,
    runner: str | None = None,
    machine: str | None = None,
    emulated: bool = False,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 3600,
) -> WarmCheck:
    """Run the row's run.py ``--require-warm`` on this machine, in a fresh process with empty caches.

    Args:
        record: the published row's record (it names its bundle: ``compiled_cache``).
        model: the model to load (its folder, or the Hub id).
        runner: this runner's name, recorded.
        machine: this machine's identity (:func:`pipeline.backends.this_machine`), recorded: publish compares it
            with the machine that made the bundle.
        emulated: whether this machine is the Neuron emulator.
        env: the process's environment (default: this process's).
        timeout_s: how long run.py may take.
    """
    cache = record.get("compiled_cache") or {}
    with tempfile.TemporaryDirectory(prefix="trncat-warm-check-") as tmp:
        work = Path(tmp)
        (work / "run.py").write_text(run_script(dict(record)), encoding="utf-8")
        environ = dict(os.environ if env is None else env)
        # Nothing of this machine's caches: an empty NEFF cache and user cache, a Hub cache of its own.
        environ.update(TORCH_NEURONX_NEFF_CACHE_DIR=str(work / "neff"), XDG_CACHE_HOME=str(work / "xdg"),
                       HF_HUB_CACHE=str(work / "hf"))  # fmt: skip
        command = [sys.executable, "run.py", "--model", model, "--iterations", "1", "--require-warm"]
        if record.get("task") == "automatic-speech-recognition":  # its run.py transcribes files: the row's clips
            command += [str(CLIPS_DIR / clip.name) for clip in speech_clips()]
        try:
            done = subprocess.run(command, cwd=work, env=environ, capture_output=True, text=True, timeout=timeout_s)
            returncode, output = done.returncode, done.stdout + done.stderr[-2000:]
        except subprocess.TimeoutExpired:
            returncode, output = 124, f"run.py ran past {timeout_s:g} s"
    status, hits, misses, first, message = parse_run_output(returncode, output)
    return WarmCheck(
        model_id=str(record["model_id"]), revision=str(record["revision"]), sha256=str(cache.get("sha256") or ""),
        status=status, hits=hits, misses=misses, first_call_s=first, message=message, runner=runner,
        emulated=emulated, checked_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        machine=machine,
    )  # fmt: skip
