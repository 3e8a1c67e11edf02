"""The runs after the benchmark: the warm start on the filled compile cache, and the answer check.

Both run as children like the benchmark itself (:func:`pipeline.bench.process.run_child`), so a crash or a hang
in them is contained; neither can turn a good run into an error: what they could not observe is a note.

- Warm start: the benchmark compiled into an empty, run-private compile cache (so ``compile_s`` is a cold
  compile). A second process on that cache loads the model and makes the first call: ``warm_start_s``; the
  cache gaining no file is the observation behind ``compile_cache_hit``.
- Answer check: the device's answer (:mod:`pipeline.bench.agreement`) against the CPU float32 reference of the same
  model and prompt, with the CPU bfloat16 noise run beside it (fed the reference's tokens), each cached per model,
  revision, task, workload and dtype; a generation capture whose tokens parted from the reference's is made again on
  the device with the reference's tokens forced (teacher forcing).
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
from pipeline.taskspec import task_source

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


def _cpu_capture(
    spec: BenchSpec, *, made: Path, dtype: str, teacher: Path | None, child_runner: ChildRunner, timeout_s: float,
    memory_limit_bytes: int | None,
) -> str | None:  # fmt: skip
    """Run the CPU capture of ``spec`` in ``dtype`` into ``made`` (the reference, or the noise run fed ``teacher``'s
    tokens); the problem when it failed, else None."""
    made.parent.mkdir(parents=True, exist_ok=True)
    outcome = child_runner(
        dataclasses.replace(
            spec,
            device="cpu",
            dtype=dtype,
            cores=1,
            phase="reference",
            capture=str(made),
            teacher=str(teacher) if teacher else None,
        ),  # fmt: skip
        # The CPU reference never touches an accelerator: no CUDA device, and no device extension autoloaded
        # with torch (TorchNeuron loads on `import torch`; its runtime must not start here).
        env={"CUDA_VISIBLE_DEVICES": "", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        launcher=lambda module_args: [sys.executable, "-m", *module_args],
        timeout_s=timeout_s,
        memory_limit_bytes=memory_limit_bytes,
    )
    problem = _outcome_problem(outcome)
    if problem is None and not made.is_file():
        problem = "it saved nothing"
    return problem


def cached_capture(cache: Path, key: str, make: Callable[[Path], str | None]) -> tuple[Path | None, str | None]:
    """The cached capture of ``key``, made by ``make`` (into a partial file) when absent: ``(path, None)``, or
    ``(None, problem)``. Whole or absent: a killed run leaves only the partial file."""
    path = reference_path(cache, key)
    if path.is_file():
        return path, None
    made = path.with_name(f".{path.name}.partial")
    problem = make(made)
    if problem is not None:
        made.unlink(missing_ok=True)
        return None, problem
    os.replace(made, path)
    return path, None


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
    noise_key: str | None = None,
    backend: Backend | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """The record's ``agreement``: the device's capture against the (cached) CPU float32 reference, with the
    (cached) bfloat16 CPU noise run beside it, graded.

    A generation capture whose free-running tokens parted from the reference's is captured again on the device
    (``backend``, on the benchmark's compile cache ``cache_dir``) with the reference's tokens forced. A reference
    that cannot be made (too large, or its child failed) and a device capture that is missing give an agreement with
    ``skipped`` set to the reason, never a silent pass; a noise run that cannot be made is named in
    ``noise_skipped`` (the grade then has no three-way rescue).
    """
    reason = agreement.skip_reason(params=params, device=spec.device, dtype=spec.dtype)
    if reason is not None:
        return agreement.skipped(reason, task=spec.task)
    if not device_capture.is_file():
        return agreement.skipped("the benchmark saved no answer to compare", task=spec.task)
    limits: dict[str, Any] = {
        "child_runner": child_runner, "timeout_s": timeout_s, "memory_limit_bytes": memory_limit_bytes,
    }  # fmt: skip
    reference, problem = cached_capture(
        reference_cache, key, lambda made: _cpu_capture(spec, made=made, dtype="float32", teacher=None, **limits)
    )
    if reference is None:
        return agreement.skipped(f"the CPU float32 reference failed: {problem}", task=spec.task)
    generates = task_source(spec.task).cosine_field == "logits_cosine"  # the generation tasks
    noise_skipped = agreement.noise_skip_reason(dtype=spec.dtype)
    noise: Path | None = None
    if noise_skipped is None:
        made_noise = lambda made: _cpu_capture(  # noqa: E731
            spec, made=made, dtype=agreement.NOISE_DTYPE, teacher=reference if generates else None, **limits
        )
        noise, problem = cached_capture(reference_cache, noise_key or f"{key}-bf16", made_noise)
        noise_skipped = None if noise is not None else f"the CPU bfloat16 run failed: {problem}"
    if generates and backend is not None:
        device_capture = _forced_capture(spec, device_capture, reference, backend=backend, cache_dir=cache_dir,
                                         **limits)  # fmt: skip
    try:
        return agreement.compare(device_capture, reference, task=spec.task, noise=noise, noise_skipped=noise_skipped)
    except (OSError, ValueError, RuntimeError) as exc:
        logger.warning("comparing with the reference failed: %s", exc)
        return agreement.skipped(
            summarize_message(f"the answers could not be compared: {exc}", limit=300), task=spec.task
        )


def _forced_capture(
    spec: BenchSpec, device_capture: Path, reference: Path, *, backend: Backend, cache_dir: Path | None,
    child_runner: ChildRunner, timeout_s: float, memory_limit_bytes: int | None,
) -> Path:  # fmt: skip
    """The device's teacher-forced capture: the benchmark's own when its tokens are the reference's at every step
    (then every step saw the reference's context), else one made again on the device with the reference's tokens
    forced. When that run fails, the benchmark's capture stands (compared up to the step its tokens parted at) and
    the problem is logged."""
    try:
        if agreement.teacher_forced(agreement.load(device_capture), agreement.load(reference)):
            return device_capture
    except (OSError, KeyError, RuntimeError) as exc:
        logger.warning("reading the captures failed: %s", exc)
        return device_capture
    forced = device_capture.with_name(f"{device_capture.stem}.forced.pt")
    outcome = child_runner(
        dataclasses.replace(
            spec, phase="capture", capture=str(forced), teacher=str(reference), warmup=0, iterations=1
        ),  # fmt: skip
        env=backend.environment(cores=spec.cores, compile_cache=cache_dir),
        launcher=lambda module_args: backend.launcher(cores=spec.cores, module_args=module_args),
        timeout_s=timeout_s,
        memory_limit_bytes=memory_limit_bytes,
    )
    problem = _outcome_problem(outcome)
    if problem is not None or not forced.is_file():
        logger.warning("the teacher-forced capture failed: %s", problem or "it saved nothing")
        return device_capture
    return forced
