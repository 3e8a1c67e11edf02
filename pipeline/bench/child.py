"""The benchmark child: loads the model, runs the workload, measures, and reports through a JSON file.

It runs as ``python -m pipeline.bench.child SPEC OUT`` in its own process, so that a crash, a hang or a
memory blow-up kills only it. It rewrites OUT atomically at each stage, so the parent always knows how far
it got: ``{"stage": ..., "metrics": {...}, "error": {"type", "message"} | null, "done": bool}``.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pipeline.bench.backends import get_backend
from pipeline.bench.spec import BenchSpec
from pipeline.bench.tasks import get_task


class Progress:
    """The child's report, rewritten atomically (temp file + rename) at each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {"stage": "load", "metrics": {}, "error": None, "done": False, "extra": {}}
        self.write()

    def write(self) -> None:
        import json

        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state), encoding="utf-8")
        os.replace(tmp, self.path)

    def stage(self, name: str) -> None:
        self.state["stage"] = name
        self.write()

    def metrics(self, **values: Any) -> None:
        self.state["metrics"].update(values)
        self.write()


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty list."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def peak_host_memory_bytes() -> int:
    # ru_maxrss is in kilobytes on Linux.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _inject(fault: str | None) -> None:
    if fault == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
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


def _first_token_streamer(backend: Any) -> Any:
    from transformers.generation.streamers import BaseStreamer

    class FirstTokenTimer(BaseStreamer):
        """Notes the time the first generated token arrives (the first put() is the prompt)."""

        def __init__(self) -> None:
            self.calls = 0
            self.first_token_at: float | None = None

        def put(self, value: Any) -> None:
            self.calls += 1
            if self.calls == 2:
                backend.synchronize()
                self.first_token_at = time.perf_counter()

        def end(self) -> None:
            pass

    return FirstTokenTimer()


def run(spec: BenchSpec, progress: Progress) -> None:
    _inject(spec.fault)
    import torch

    wall_start = time.perf_counter()
    backend = get_backend(spec.device)
    task = get_task(spec.task)
    torch.set_grad_enabled(False)
    dtype = getattr(torch, spec.dtype)
    path = Path(spec.path)

    start = time.perf_counter()
    # The model first: an unknown architecture should fail as such, not as the tokenizer it brings.
    model = task.load_model(path, dtype=dtype)
    processor = task.load_processor(path)
    seen: set[int] = set()
    params = weights_bytes = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        if id(tensor) in seen:  # tied weights count once
            continue
        seen.add(id(tensor))
        if isinstance(tensor, torch.nn.Parameter):
            params += tensor.numel()
        weights_bytes += tensor.numel() * tensor.element_size()
    backend.reset_peak_memory()
    model = backend.prepare(model)
    backend.synchronize()
    load_s = time.perf_counter() - start
    progress.metrics(params=params, weights_bytes=weights_bytes, load_s=load_s)

    progress.stage("compile")
    inputs = {k: v.to(backend.device()) for k, v in task.make_inputs(processor, spec.workload).items()}
    kwargs = task.generate_kwargs(processor, spec.workload)
    start = time.perf_counter()
    model.generate(**inputs, **kwargs)
    backend.synchronize()
    first_call_s = time.perf_counter() - start

    progress.stage("run")
    for _ in range(spec.warmup):
        model.generate(**inputs, **kwargs)
    backend.synchronize()
    latencies: list[float] = []
    ttfts: list[float] = []
    for _ in range(spec.iterations):
        streamer = _first_token_streamer(backend)
        start = time.perf_counter()
        output = model.generate(**inputs, streamer=streamer, **kwargs)
        backend.synchronize()
        end = time.perf_counter()
        latencies.append(end - start)
        ttfts.append((streamer.first_token_at or end) - start)
    generated = int(output.shape[-1] - inputs["input_ids"].shape[-1])
    if generated != spec.workload.output_tokens:
        raise RuntimeError(f"generated {generated} tokens instead of {spec.workload.output_tokens}")
    wall_s = time.perf_counter() - wall_start

    p50, p90 = percentile(latencies, 50), percentile(latencies, 90)
    ttft = percentile(ttfts, 50)
    decode_tokens = spec.workload.batch_size * (spec.workload.output_tokens - 1)
    decode_s = p50 - ttft
    tokens_per_s = decode_tokens / decode_s if decode_tokens > 0 and decode_s > 0 else None
    compile_s = max(0.0, first_call_s - p50) if backend.compile_backend else 0.0
    roofline = None
    bandwidth = backend.bandwidth_bytes_per_s(cores=spec.cores)
    if tokens_per_s and bandwidth:
        # Each decode step reads every weight once per batch; the bound is bandwidth / bytes per step.
        bound = bandwidth / weights_bytes * spec.workload.batch_size
        roofline = tokens_per_s / bound
    progress.metrics(
        compile_s=compile_s,
        ttft_s=ttft,
        latency_s={"p50": p50, "p90": p90},
        decode_tokens_per_s=tokens_per_s,
        wall_s=max(wall_s, load_s, compile_s, ttft),
        peak_device_memory_bytes=backend.peak_memory_bytes(),
        peak_host_memory_bytes=peak_host_memory_bytes(),
        roofline_fraction=roofline,
        iterations=spec.iterations,
        compile_cache_hit=None,
        first_call_s=first_call_s,
        latencies_s=latencies,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = BenchSpec.read(Path(args[0]))
    progress = Progress(Path(args[1]))
    try:
        run(spec, progress)
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
