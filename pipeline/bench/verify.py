"""The runs after the benchmark: the warm start on the filled compile cache, and the answer check.

Both run as children like the benchmark itself (:func:`pipeline.bench.process.run_child`), so a crash or a hang
in them is contained; neither can turn a good run into an error: what they could not observe is a note.

- Warm start: the benchmark compiled into an empty, run-private compile cache (so ``compile_s`` is a cold
  compile). A second process on that cache loads the model and makes the first call: ``warm_start_s``; the
  cache gaining no file is the observation behind ``compile_cache_hit``.
- Answer check: the device's answer (:mod:`pipeline.bench.agreement`) against the CPU float32 reference of the same
  model and prompt, cached per model, revision, task and workload (:mod:`pipeline.bench.agreement`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.backends import Backend
from pipeline.bench import agreement
from pipeline.bench.messages import summarize_message
from pipeline.bench.process import ChildOutcome
from pipeline.bench.spec import BenchSpec

logger = logging.getLogger(__name__)

ChildRunner = Callable[..., ChildOutcome]


@dataclasses.dataclass
class WarmStart:
    """What the warm start observed."""

    warm_start_s: float | None
    cache_hit: bool | None
    note: str | None = None
    cached_graphs: int | None = None


def _outcome_problem(outcome: ChildOutcome) -> str | None:
    if outcome.timed_out:
        return "timed out"
    if outcome.over_memory:
        return "went over the host memory limit"
    error = outcome.report.get("error")
    if error:
        return summarize_message(f"{error.get('type')}: {error.get('message', '')}", limit=300)
    if outcome.returncode != 0 or not outcome.report.get("done"):
        return f"exited with code {outcome.returncode}"
    return None


def warm_start(
    spec: BenchSpec,
    *,
    backend: Backend,
    cache_dir: Path,
    child_runner: ChildRunner,
    timeout_s: float,
    memory_limit_bytes: int | None,
) -> WarmStart:
    """Load and make the first call again in a fresh process on the cache the benchmark filled.

    Returns:
        ``warm_start_s`` (load + first call) and whether the cache served it (no new file), or a note.
    """
    before = backend.compile_cache_files(cache_dir)
    if not before:
        return WarmStart(None, None, f"the compile cache {cache_dir.name} stayed empty: no warm start to measure")
    outcome = child_runner(
        dataclasses.replace(spec, phase="warm_start", capture=None, warmup=0, iterations=1),
        env=backend.environment(cores=spec.cores, compile_cache=cache_dir),
        launcher=lambda module_args: backend.launcher(cores=spec.cores, module_args=module_args),
        timeout_s=timeout_s,
        memory_limit_bytes=memory_limit_bytes,
    )
    problem = _outcome_problem(outcome)
    if problem is not None:
        return WarmStart(None, None, f"warm start failed: {problem}")
    reported = outcome.report.get("metrics", {})
    value = reported.get("warm_start_s")
    hit = backend.compile_cache_hit(cache_dir, before)
    cached, graphs = reported.get("warm_start_cached_graphs"), reported.get("warm_start_graphs")
    if hit and isinstance(cached, int) and isinstance(graphs, int) and cached < graphs:
        # The compiler's own figures say some graph was compiled again (its compile time was not 0).
        hit = False
    note = None if hit else "the warm start compiled again (the NEFF cache missed)"
    counted = isinstance(cached, int) and isinstance(graphs, int)
    if counted:
        served = f"the warm start was served {cached} of {graphs} graphs from the cache"
        note = f"{note}; {served}" if note else served
    seconds = float(value) if value is not None else None
    return WarmStart(seconds, hit, note, cached if counted else None)


def reference_path(cache_root: Path, key: str) -> Path:
    """Where the cached reference answer of ``key`` lives."""
    return cache_root / f"{key}.pt"


def answer_check(
    spec: BenchSpec,
    *,
    device_capture: Path,
    reference_cache: Path,
    key: str,
    params: int | None,
    child_runner: ChildRunner,
    timeout_s: float,
    memory_limit_bytes: int | None,
) -> dict[str, Any]:
    """The record's ``agreement``: the device's capture against the (cached) CPU float32 reference.

    A reference that cannot be made (too large, or its child failed) and a device capture that is missing give
    an agreement with ``skipped`` set to the reason, never a silent pass.
    """
    reason = agreement.skip_reason(params=params, device=spec.device, dtype=spec.dtype)
    if reason is not None:
        return agreement.skipped(reason, task=spec.task)
    if not device_capture.is_file():
        return agreement.skipped("the benchmark saved no answer to compare", task=spec.task)
    reference = reference_path(reference_cache, key)
    if not reference.is_file():
        made = reference.with_name(f".{reference.name}.partial")
        made.parent.mkdir(parents=True, exist_ok=True)
        outcome = child_runner(
            dataclasses.replace(spec, device="cpu", dtype="float32", cores=1, phase="reference", capture=str(made)),
            # The CPU reference never touches an accelerator: no CUDA device, and no device extension autoloaded
            # with torch (TorchNeuron loads on `import torch`; its runtime must not start here).
            env={"CUDA_VISIBLE_DEVICES": "", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
            launcher=lambda module_args: [sys.executable, "-m", *module_args],
            timeout_s=timeout_s,
            memory_limit_bytes=memory_limit_bytes,
        )
        problem = _outcome_problem(outcome)
        if problem is not None or not made.is_file():
            made.unlink(missing_ok=True)
            return agreement.skipped(
                f"the CPU float32 reference failed: {problem or 'it saved nothing'}", task=spec.task
            )
        os.replace(made, reference)  # whole or absent: a killed reference run leaves only the partial file
    try:
        return agreement.compare(device_capture, reference, task=spec.task)
    except (OSError, ValueError, RuntimeError) as exc:
        logger.warning("comparing with the reference failed: %s", exc)
        return agreement.skipped(
            summarize_message(f"the answers could not be compared: {exc}", limit=300), task=spec.task
        )
