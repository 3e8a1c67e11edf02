"""The benchmark child: loads the model, runs the workload, measures, and reports through a JSON file.

It runs as ``python -m pipeline.bench.child SPEC OUT`` in its own process, so that a crash, a hang or a
memory blow-up kills only it. It rewrites OUT atomically at each stage, so the parent always knows how far
it got: ``{"stage": ..., "metrics": {...}, "error": {"type", "message"} | null, "done": bool}``.

Its ``phase`` (:data:`pipeline.bench.spec.PHASES`) says how much it does: the whole benchmark, only the warm
start (load + first call on a filled compile cache), only a CPU reference answer, or only the device's answer fed the
reference's tokens.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pipeline.backends import Backend, get_backend, world_of
from pipeline.bench.spec import BenchSpec, blank_report
from pipeline.bench.tasks import get_task
from pipeline.bench.tasks.base import Run


class Progress:
    """The child's report, rewritten atomically (temp file + rename) at each change.

    Under torchrun every rank runs the benchmark, but only rank 0 writes (``enabled``), so the parent reads
    one report.
    """

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self.state = blank_report()
        self.write()

    def write(self) -> None:
        if not self.enabled:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state), encoding="utf-8")
        os.replace(tmp, self.path)

    def stage(self, name: str) -> None:
        self.state["stage"] = name
        self.write()

    def metrics(self, **values: Any) -> None:
        self.state["metrics"].update(values)
        self.write()


def peak_host_memory_bytes() -> int:
    # ru_maxrss is in kilobytes on Linux.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _inject(fault: str | None) -> None:
    if fault in ("segfault", "sigkill"):
        os.kill(os.getpid(), signal.SIGSEGV if fault == "segfault" else signal.SIGKILL)
    elif fault == "hang":
        while True:  # a model that never returns; the parent's timeout ends it
            time.sleep(3600)
    elif fault == "allocate":
        hog = []
        while True:
            hog.append(bytearray(64 * 1024 * 1024))
            time.sleep(0.01)
    elif fault == "raise":
        raise RuntimeError("injected failure")


def count_weights(modules: list[Any]) -> tuple[int, int]:
    """Parameters and bytes (parameters and buffers) of ``modules``; a tensor shared by several counts once."""
    import torch

    seen: set[int] = set()
    params = weights_bytes = 0
    for module in modules:
        for tensor in list(module.parameters()) + list(module.buffers()):
            if id(tensor) in seen:  # tied weights count once
                continue
            seen.add(id(tensor))
            if isinstance(tensor, torch.nn.Parameter):
                params += tensor.numel()
            weights_bytes += tensor.numel() * tensor.element_size()
    return params, weights_bytes


def _compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (dynamo's own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _perturbs(spec: BenchSpec) -> bool:
    """Whether the spec's test fault makes a wrong answer (one of the ``perturb*`` faults)."""
    return bool(spec.fault and spec.fault.startswith("perturb"))


def run(spec: BenchSpec, progress: Progress, backend: Backend) -> None:
    """Load, compile, run and measure ``spec``; everything measured goes to ``progress``."""
    _inject(spec.fault)
    import torch

    wall_start = time.perf_counter()
    task = get_task(spec.task)
    compiles = backend.will_compile(requested=spec.compile)
    torch.set_grad_enabled(False)
    dtype = getattr(torch, spec.dtype)
    path = Path(spec.path)

    start = time.perf_counter()
    # The device's process group before the model: sharding under tp_plan runs collectives over it.
    backend.start_distributed()
    # The model first: an unknown architecture should fail as such, not as the tokenizer it brings.
    model = task.load(path, dtype=dtype, world_size=world_of()[2])
    processor = task.load_processor(path)
    # Counted before sharding: under tp_plan each rank holds a slice, the record wants the whole model.
    params, weights_bytes = count_weights(task.modules(model))
    backend.reset_peak_memory()
    compile_now = compiles and spec.phase != "reference"
    # How a generation task's prompt runs: compiled (chunked prefill through the compiled forward) or eager (op by
    # op: its ttft_s and first call then include eager kernels); None without compilation or for a task that does
    # not generate.
    prefill = None
    if compile_now and task.prefill is not None:
        prefill = "compiled" if task.prefill == "chunked" and backend.compiles_prefill else "eager"
    chunk = spec.workload.input_tokens if prefill == "compiled" else None
    model = task.prepare(model, backend, compile=compile_now, fullgraph=spec.fullgraph, prefill_chunk=chunk)
    backend.synchronize()
    load_s = time.perf_counter() - start
    progress.metrics(params=params, weights_bytes=weights_bytes, load_s=load_s, prefill_mode=prefill)
    if spec.phase == "full":
        progress.state["notes"].extend(backend.observations())

    job = Run(spec, backend, model, processor, compile_now, weights_bytes=weights_bytes, primary=progress.enabled)
    task.setup(job)
    if spec.phase in ("reference", "capture"):  # the device's answer again (capture) is perturbed like the first
        task.capture(job, Path(spec.capture or "reference.pt"), perturb=spec.phase == "capture" and _perturbs(spec))
        return
    progress.stage("compile")
    fallback_before = backend.fallback_counts()
    start = time.perf_counter()
    task.call(job)
    backend.synchronize()
    first_call_s = time.perf_counter() - start
    if spec.phase == "warm_start":
        figures = backend.compile_figures()
        progress.metrics(warm_start_s=load_s + first_call_s, first_call_s=first_call_s,
                         warm_start_cached_graphs=figures.get("cached_graphs"),
                         warm_start_graphs=figures.get("compiled_graphs"))  # fmt: skip
        return

    progress.stage("run")
    for _ in range(spec.warmup):
        task.call(job)
    backend.synchronize()
    graphs_before = _compiled_graphs() if compiles else None
    measured = task.measure(job)
    recompiles = _compiled_graphs() - graphs_before if graphs_before is not None else None
    wall_s = time.perf_counter() - wall_start
    peak_device = backend.peak_memory_bytes()  # every rank takes part (a host collective sums the ranks)
    memory = backend.memory_figures()
    fallback = backend.fallback_ops(fallback_before)
    if fallback is None and backend.cpu_fallback:
        progress.state["notes"].append(
            "CPU fallback not observable: this torch-neuronx has no get_fallback_ops, so ops it ran on the CPU "
            "are unknown (docs/neuron-facts.md)"
        )
    if spec.capture:  # after the timed calls and the memory peak: the check never touches the figures
        task.capture(job, Path(spec.capture), perturb=_perturbs(spec))

    # The steady-state call is the p50 of the timed calls; the first call's excess is its overhead: compilation,
    # and with it whatever else the first call paid (eager kernels, loading the NEFFs). The compiler's own time,
    # where the backend reports it, is recorded beside it.
    compile_s = max(0.0, first_call_s - measured.steady_s) if compiles else 0.0
    progress.state["extra"].update(measured.extra)
    progress.state["notes"].extend(backend.run_notes())
    progress.metrics(
        **measured.metrics,
        **memory,
        **(backend.compile_figures() if compiles else {}),
        compile_s=compile_s,
        wall_s=max(wall_s, load_s, compile_s),
        peak_device_memory_bytes=peak_device,
        peak_host_memory_bytes=peak_host_memory_bytes(),
        iterations=spec.iterations,
        cpu_fallback_ops=fallback,
        recompiles_during_timed=recompiles,
        first_call_s=first_call_s,
    )


def thread_count(cores: int, world_size: int) -> int:
    """torch's threads in one benchmark process: the record's ``cores`` shared by the processes torchrun started
    (one each when it started one per core). Left to its default, torch takes every CPU of the machine, and a
    CPU figure then swings with whatever else runs there."""
    return max(1, cores // max(1, world_size))


def limit_threads(threads: int) -> int:
    """Set torch's intra- and inter-op threads (and OpenMP's and MKL's, before torch starts); returns torch's
    thread count as set.

    ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` must be in the environment before torch is imported; then
    ``torch.set_num_threads`` and ``torch.set_num_interop_threads`` (the latter only once per process, before any
    inter-op work: https://pytorch.org/docs/stable/generated/torch.set_num_interop_threads.html).
    """
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # already set, or inter-op work already started in this process: intra-op still holds
        pass
    return int(torch.get_num_threads())


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.bench.child SPEC OUT``: run the spec, report to OUT; exit 1 on failure."""
    args = sys.argv[1:] if argv is None else argv
    spec = BenchSpec.from_json(Path(args[0]).read_text(encoding="utf-8"))
    progress = Progress(Path(args[1]), enabled=world_of()[0] == 0)
    try:
        backend = get_backend(spec.device)
        backend.setup_process()  # before torch starts: the device runtime reads its environment once
        progress.state["extra"]["threads"] = limit_threads(thread_count(spec.cores, world_of()[2]))
        progress.write()
        run(spec, progress, backend)
    except BaseException as exc:  # every failure must reach the parent as text, then the child exits
        progress.state["error"] = {
            "type": type(exc).__name__,
            "module": type(exc).__module__,
            "message": "".join(traceback.format_exception(exc))[-8000:],
        }
        progress.write()
        return 1
    progress.state["done"] = True
    progress.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
