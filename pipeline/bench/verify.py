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
import functools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline import constants
from pipeline.backends import Backend
from pipeline.bench import agreement
from pipeline.bench.messages import summarize_message
from pipeline.bench.process import ChildOutcome
from pipeline.bench.spec import BenchSpec
from pipeline.models import ResolvedModel
from pipeline.taskspec import task_source

logger = logging.getLogger(__name__)

ChildRunner = Callable[..., ChildOutcome]


@dataclasses.dataclass(frozen=True)
class Children:
    """How a benchmark's children start: the runner (:func:`pipeline.bench.process.run_child`; tests inject one),
    each child's limits, and the device they run on with the benchmark's compile cache (None: the backend has
    none)."""

    runner: ChildRunner
    timeout_s: float
    memory_limit_bytes: int | None
    backend: Backend
    cache_dir: Path | None

    def on_device(self, spec: BenchSpec) -> ChildOutcome:
        """Run ``spec`` on the backend's device, on the benchmark's compile cache."""
        return self.run(
            spec,
            self.backend.environment(cores=spec.cores, compile_cache=self.cache_dir),
            lambda module_args: self.backend.launcher(cores=spec.cores, module_args=module_args),
        )

    def on_cpu(self, spec: BenchSpec) -> ChildOutcome:
        """Run ``spec`` on the CPU, never touching an accelerator: no CUDA device, and no device extension
        autoloaded with torch (TorchNeuron loads on `import torch`; its runtime must not start here)."""
        env = {"CUDA_VISIBLE_DEVICES": "", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        return self.run(spec, env, lambda module_args: [sys.executable, "-m", *module_args])

    def run(self, spec: BenchSpec, env: dict[str, str], launcher: Callable[[Sequence[str]], list[str]]) -> ChildOutcome:
        """Run ``spec`` with ``env`` added to the environment, started by ``launcher``, under the limits."""
        return self.runner(
            spec, env=env, launcher=launcher, timeout_s=self.timeout_s, memory_limit_bytes=self.memory_limit_bytes
        )


def _outcome_problem(outcome: ChildOutcome, children: Children) -> str | None:
    """What went wrong in a child run after the benchmark (its failure's message, short), or None."""
    found = outcome.failure(timeout_s=children.timeout_s)
    return summarize_message(found[1]["message"], limit=300) if found else None


def warm_start(spec: BenchSpec, children: Children) -> tuple[dict[str, Any], str | None]:
    """Load and make the first call again in a fresh process on the cache the benchmark filled.

    Returns:
        The record's figures: ``warm_start_s`` (load + first call), ``compile_cache_hit`` (the cache served it: no
        new file) and, when the compiler counted them, ``warm_start_cached_graphs``; and a note on what was seen.
    """
    unknown: dict[str, Any] = {"warm_start_s": None, "compile_cache_hit": None}
    backend, cache_dir = children.backend, children.cache_dir
    if cache_dir is None:  # no compile cache: no warm start
        return {}, None
    before = backend.compile_cache_files(cache_dir)
    if not before:
        return unknown, f"the compile cache {cache_dir.name} stayed empty: no warm start to measure"
    again = dataclasses.replace(spec, phase="warm_start", capture=None, warmup=0, iterations=1)
    outcome = children.on_device(again)
    problem = _outcome_problem(outcome, children)
    if problem is not None:
        return unknown, f"warm start failed: {problem}"
    reported = outcome.report.get("metrics", {})
    value = reported.get("warm_start_s")
    hit = backend.compile_cache_hit(cache_dir, before)
    cached, graphs = reported.get("warm_start_cached_graphs"), reported.get("warm_start_graphs")
    counted = isinstance(cached, int) and isinstance(graphs, int)
    if hit and counted and cached < graphs:
        # The compiler's own figures say some graph was compiled again (its compile time was not 0).
        hit = False
    note = None if hit else "the warm start compiled again (the NEFF cache missed)"
    if counted:
        served = f"the warm start was served {cached} of {graphs} graphs from the cache"
        note = f"{note}; {served}" if note else served
    figures = {"warm_start_s": float(value) if value is not None else None, "compile_cache_hit": hit}
    return figures | ({"warm_start_cached_graphs": cached} if counted else {}), note


def _cpu_capture(spec: BenchSpec, made: Path, *, dtype: str, teacher: str | None, children: Children) -> str | None:
    """Run the CPU capture of ``spec`` in ``dtype`` into ``made`` (the reference, or the noise run fed ``teacher``'s
    tokens); the problem when it failed, else None."""
    made.parent.mkdir(parents=True, exist_ok=True)
    cpu = dataclasses.replace(
        spec, device="cpu", dtype=dtype, cores=1, phase="reference", capture=str(made), teacher=teacher
    )
    problem = _outcome_problem(children.on_cpu(cpu), children)
    return problem or (None if made.is_file() else "it saved nothing")


def cached_capture(cache: Path, key: str, make: Callable[[Path], str | None]) -> tuple[Path | None, str | None]:
    """The cached capture of ``key`` (``<cache>/<key>.pt``), made by ``make`` (into a partial file) when absent:
    ``(path, None)``, or ``(None, problem)``. Whole or absent: a killed run leaves only the partial file."""
    path = cache / f"{key}.pt"
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
    spec: BenchSpec, model: ResolvedModel, *, device_capture: Path, params: int | None, children: Children
) -> dict[str, Any]:
    """The record's ``agreement``: the device's capture against the (cached) CPU float32 reference, with the
    (cached) bfloat16 CPU noise run beside it, graded; each cached in :data:`pipeline.constants.TRNCAT_REFERENCE_CACHE`
    by :func:`pipeline.bench.agreement.reference_key` of the model at its revision.

    A generation capture whose free-running tokens parted from the reference's is captured again on the device
    (``children``'s backend, on the benchmark's compile cache) with the reference's tokens forced. A reference
    that cannot be made (too large, or its child failed) and a device capture that is missing give an agreement with
    ``skipped`` set to the reason, never a silent pass; a noise run that cannot be made is named in
    ``noise_skipped`` (the grade then has no three-way rescue).
    """
    reason = agreement.skip_reason(params=params, device=spec.device, dtype=spec.dtype)
    if reason is not None:
        return agreement.skipped(reason, task=spec.task)
    if not device_capture.is_file():
        return agreement.skipped("the benchmark saved no answer to compare", task=spec.task)

    key = functools.partial(agreement.reference_key, model_id=model.model_id, revision=model.revision, task=spec.task)

    def capture(dtype: str, teacher: str | None) -> tuple[Path | None, str | None]:
        make = functools.partial(_cpu_capture, spec, dtype=dtype, teacher=teacher, children=children)
        named = key(workload=spec.workload.to_dict(), dtype=dtype)
        return cached_capture(constants.TRNCAT_REFERENCE_CACHE, named, make)

    reference, problem = capture("float32", None)
    if reference is None:
        return agreement.skipped(f"the CPU float32 reference failed: {problem}", task=spec.task)
    generates = task_source(spec.task).cosine_field == "logits_cosine"  # the generation tasks
    noise_skipped = agreement.noise_skip_reason(dtype=spec.dtype)
    noise: Path | None = None
    if noise_skipped is None:
        noise, problem = capture(agreement.NOISE_DTYPE, str(reference) if generates else None)
        noise_skipped = None if noise is not None else f"the CPU bfloat16 run failed: {problem}"
    if generates:
        device_capture = _forced_capture(spec, device_capture, reference, children)
    try:
        return agreement.compare(device_capture, reference, task=spec.task, noise=noise, noise_skipped=noise_skipped)
    except (OSError, ValueError, RuntimeError) as exc:
        logger.warning("comparing with the reference failed: %s", exc)
        message = summarize_message(f"the answers could not be compared: {exc}", limit=300)
        return agreement.skipped(message, task=spec.task)


def _forced_capture(spec: BenchSpec, device_capture: Path, reference: Path, children: Children) -> Path:
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
    again = dataclasses.replace(
        spec, phase="capture", capture=str(forced), teacher=str(reference), warmup=0, iterations=1
    )
    problem = _outcome_problem(children.on_device(again), children)
    if problem is not None or not forced.is_file():
        logger.warning("the teacher-forced capture failed: %s", problem or "it saved nothing")
        return device_capture
    return forced
