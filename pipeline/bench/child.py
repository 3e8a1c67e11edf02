"""The benchmark child: loads the model, runs the workload, measures, and reports through a JSON file.

It runs as ``python -m pipeline.bench.child SPEC OUT`` in its own process, so that a crash, a hang or a
memory blow-up kills only it. It rewrites OUT atomically at each stage, so the parent always knows how far
it got: ``{"stage": ..., "metrics": {...}, "error": {"type", "message"} | null, "done": bool}``.

Its ``phase`` (:data:`pipeline.bench.spec.PHASES`) says how much it does: the whole benchmark, only the warm
start (load + first call on a filled compile cache) or only the CPU float32 reference answer.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.bench.agreement import capture
from pipeline.bench.backends import get_backend
from pipeline.bench.backends.base import world_of
from pipeline.bench.spec import BenchSpec
from pipeline.bench.tasks import get_task


class Progress:
    """The child's report, rewritten atomically (temp file + rename) at each change.

    Under torchrun every rank runs the benchmark, but only rank 0 writes (``enabled``), so the parent reads
    one report.
    """

    def __init__(self, path: Path, *, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled
        self.state: dict[str, Any] = {
            "stage": "load",
            "metrics": {},
            "error": None,
            "done": False,
            "extra": {},
            "notes": [],
        }
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


def _first_token_streamer(backend: Any, clock: Callable[[], float] = time.perf_counter) -> Any:
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
                self.first_token_at = clock()

        def end(self) -> None:
            pass

    return FirstTokenTimer()


def model_load_kwargs(*, dtype: Any, world_size: int) -> dict[str, Any]:
    """Keyword arguments for ``from_pretrained``: ``tp_plan="auto"`` shards the model under torchrun.

    Args:
        dtype: torch dtype of the weights.
        world_size: ``WORLD_SIZE`` (1 outside torchrun).

    Returns:
        The kwargs; remote code is always refused.
    """
    kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": False}
    if world_size > 1:
        kwargs["tp_plan"] = "auto"
    return kwargs


def kv_bytes_per_token(config: Any, *, element_size: int) -> int:
    """Bytes of KV cache one token adds across all layers: ``2 x layers x kv_heads x head_dim x element``.

    Args:
        config: The model's config (a VLM's text config is used when it has one).
        element_size: Bytes per cache element (the weights' dtype).

    Returns:
        Bytes, 0 when the config does not describe standard attention.
    """
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = getattr(text, "num_hidden_layers", None)
    heads = getattr(text, "num_attention_heads", None)
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    hidden = getattr(text, "hidden_size", None)
    head_dim = getattr(text, "head_dim", None) or (hidden // heads if hidden and heads else None)
    if not (layers and kv_heads and head_dim):
        return 0
    return 2 * int(layers) * int(kv_heads) * int(head_dim) * element_size


def decode_bytes_per_step(*, weights_bytes: int, kv_bytes_per_token: int, workload: Any) -> int:
    """Bytes one decode step reads: every weight once, plus each sequence's KV cache at its mean length.

    Args:
        weights_bytes: Bytes of parameters and buffers.
        kv_bytes_per_token: From :func:`kv_bytes_per_token`.
        workload: The fixed workload (batch, input and output tokens).

    Returns:
        Bytes per step (one step yields ``batch_size`` tokens).
    """
    mean_context = workload.input_tokens + workload.output_tokens / 2
    return int(weights_bytes + workload.batch_size * mean_context * kv_bytes_per_token)


def roofline_fraction(
    *, tokens_per_s: float | None, bandwidth: float | None, bytes_per_step: int, batch_size: int
) -> float | None:
    """Measured decode tokens/s over the memory-bandwidth bound ``bandwidth / bytes_per_step x batch``."""
    if not tokens_per_s or not bandwidth or bytes_per_step <= 0:
        return None
    return tokens_per_s / (bandwidth / bytes_per_step * batch_size)


def _load_model(task: Any, path: Path, kwargs: dict[str, Any]) -> Any:
    extra = {k: v for k, v in kwargs.items() if k not in ("dtype", "trust_remote_code")}
    return task.load_model(path, dtype=kwargs["dtype"], **extra)


def _count_weights(model: Any) -> tuple[int, int]:
    import torch

    seen: set[int] = set()
    params = weights_bytes = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        if id(tensor) in seen:  # tied weights count once
            continue
        seen.add(id(tensor))
        if isinstance(tensor, torch.nn.Parameter):
            params += tensor.numel()
        weights_bytes += tensor.numel() * tensor.element_size()
    return params, weights_bytes


def timed_generate(
    model: Any,
    inputs: dict[str, Any],
    kwargs: dict[str, Any],
    *,
    backend: Any,
    iterations: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float], Any]:
    """The timed loop: ``iterations`` synchronized ``generate()`` calls, each with its time to first token.

    Args:
        model: The prepared model.
        inputs: Model inputs on the device.
        kwargs: ``generate()`` arguments of the workload.
        backend: Synchronizes the device.
        iterations: Timed calls.
        clock: Wall clock by default (benchmarks/harness_overhead.py also uses CPU time).

    Returns:
        ``(latencies_s, ttfts_s, last_output)``.
    """
    latencies: list[float] = []
    ttfts: list[float] = []
    output = None
    for _ in range(iterations):
        streamer = _first_token_streamer(backend, clock)
        start = clock()
        output = model.generate(**inputs, streamer=streamer, **kwargs)
        backend.synchronize()
        end = clock()
        latencies.append(end - start)
        ttfts.append((streamer.first_token_at or end) - start)
    return latencies, ttfts, output


def _compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (dynamo's own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def run(spec: BenchSpec, progress: Progress) -> None:
    """Load, compile, run and measure ``spec``; everything measured goes to ``progress``."""
    _inject(spec.fault)
    import torch

    wall_start = time.perf_counter()
    backend = get_backend(spec.device)
    task = get_task(spec.task)
    compiles = backend.will_compile(requested=spec.compile)
    torch.set_grad_enabled(False)
    dtype = getattr(torch, spec.dtype)
    path = Path(spec.path)
    world_size = world_of()[2]

    start = time.perf_counter()
    # The model first: an unknown architecture should fail as such, not as the tokenizer it brings.
    model = _load_model(task, path, model_load_kwargs(dtype=dtype, world_size=world_size))
    processor = task.load_processor(path)
    # Counted before sharding: under tp_plan each rank holds a slice, the record wants the whole model.
    params, weights_bytes = _count_weights(model)
    element_size = torch.empty((), dtype=dtype).element_size()
    bytes_per_step = decode_bytes_per_step(
        weights_bytes=weights_bytes,
        kv_bytes_per_token=kv_bytes_per_token(model.config, element_size=element_size),
        workload=spec.workload,
    )
    backend.reset_peak_memory()
    model = backend.prepare(model, compile=compiles and spec.phase != "reference", fullgraph=spec.fullgraph)
    backend.synchronize()
    load_s = time.perf_counter() - start
    progress.metrics(params=params, weights_bytes=weights_bytes, load_s=load_s)
    if spec.phase == "full":
        progress.state["notes"].extend(backend.observations())

    device = backend.device()
    inputs = {k: v.to(device) for k, v in task.make_inputs(processor, spec.workload).items()}
    kwargs = task.generate_kwargs(processor, spec.workload)
    if spec.phase == "reference":
        capture(model, inputs, kwargs, path=Path(spec.capture or "reference.pt"))
        return
    progress.stage("compile")
    fallback_before = backend.fallback_counts()
    start = time.perf_counter()
    model.generate(**inputs, **kwargs)
    backend.synchronize()
    first_call_s = time.perf_counter() - start
    if spec.phase == "warm_start":
        progress.metrics(warm_start_s=load_s + first_call_s, first_call_s=first_call_s)
        return

    progress.stage("run")
    for _ in range(spec.warmup):
        model.generate(**inputs, **kwargs)
    backend.synchronize()
    graphs_before = _compiled_graphs() if compiles else None
    latencies, ttfts, output = timed_generate(model, inputs, kwargs, backend=backend, iterations=spec.iterations)
    recompiles = _compiled_graphs() - graphs_before if graphs_before is not None else None
    generated = int(output.shape[-1] - inputs["input_ids"].shape[-1])
    if generated != spec.workload.output_tokens:
        raise RuntimeError(f"generated {generated} tokens instead of {spec.workload.output_tokens}")
    wall_s = time.perf_counter() - wall_start
    peak_device = backend.peak_memory_bytes()  # every rank takes part (a host collective sums the ranks)
    fallback = backend.fallback_ops(fallback_before)
    if fallback is None and backend.cpu_fallback:
        progress.state["notes"].append(
            "CPU fallback not observable: this torch-neuronx has no get_fallback_ops, so ops it ran on the CPU "
            "are unknown (docs/neuron-facts.md)"
        )
    if spec.capture:  # after the timed calls and the memory peak: the check never touches the figures
        capture(model, inputs, kwargs, path=Path(spec.capture), perturb=spec.fault == "perturb")

    p50, p90 = percentile(latencies, 50), percentile(latencies, 90)
    ttft = percentile(ttfts, 50)
    decode_tokens = spec.workload.batch_size * (spec.workload.output_tokens - 1)
    decode_s = p50 - ttft
    tokens_per_s = decode_tokens / decode_s if decode_tokens > 0 and decode_s > 0 else None
    # The steady-state call is the p50 of the timed calls; the first call's excess is compilation.
    compile_s = max(0.0, first_call_s - p50) if compiles else 0.0
    bandwidth = backend.bandwidth_bytes_per_s(cores=spec.cores) if progress.enabled else None
    progress.state["extra"].update(bytes_per_decode_step=bytes_per_step, bandwidth_bytes_per_s=bandwidth, ttfts_s=ttfts)
    progress.metrics(
        compile_s=compile_s,
        ttft_s=ttft,
        latency_s={"p50": p50, "p90": p90},
        decode_tokens_per_s=tokens_per_s,
        wall_s=max(wall_s, load_s, compile_s, ttft),
        peak_device_memory_bytes=peak_device,
        peak_host_memory_bytes=peak_host_memory_bytes(),
        roofline_fraction=roofline_fraction(
            tokens_per_s=tokens_per_s,
            bandwidth=bandwidth,
            bytes_per_step=bytes_per_step,
            batch_size=spec.workload.batch_size,
        ),
        iterations=spec.iterations,
        cpu_fallback_ops=fallback,
        recompiles_during_timed=recompiles,
        first_call_s=first_call_s,
        latencies_s=latencies,
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
    spec = BenchSpec.read(Path(args[0]))
    progress = Progress(Path(args[1]), enabled=world_of()[0] == 0)
    try:
        progress.state["extra"]["threads"] = limit_threads(thread_count(spec.cores, world_of()[2]))
        progress.write()
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
