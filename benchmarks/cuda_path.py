"""The cuda path measured on a real GPU: random-weight models of real sizes, built from real configs.

For each config (default: Llama-3.2-1B and Llama-3.1-8B from tests/fixtures/configs/; nothing is downloaded) the
model is built on the meta device, then given random bfloat16 weights on the GPU (the rotary tables, which are
computed rather than loaded, are computed again there), and on the catalog's text-generation workload (batch 1,
128 input tokens, 64 output tokens, greedy, exactly 64 tokens) it prints:

- decode tokens/s against the GPU's HBM roofline: the bandwidth over the bytes one decode step reads (every
  weight once and the KV cache at its mean length, as the harness's ``roofline_fraction`` counts them);
- the harness's timed loop (``timed_generate`` on the cuda backend: the first-token streamer, a synchronize per
  call) against a bare ``generate()`` loop on the same model, calls paired and interleaved (goal: within 3 %);
- the whole benchmark (``bench_model`` on the cuda backend: the child process, its load, warm-up and record) on a
  saved copy of the same weights: its decode tokens/s against the bare loop's (goal: within 3 %), and the peak
  device memory it records against ``torch.cuda.max_memory_allocated`` of the bare loop.

    python benchmarks/cuda_path.py [--config llama-3.2-1b --config llama-3.1-8b] [--rounds 5] [--iterations 5]
        [--input-tokens 128] [--output-tokens 64] [--bandwidth-gbps B] [--no-bench-model] [--keep DIR]

Needs an NVIDIA GPU and a CUDA build of torch; without one it says so and exits 2. CI never runs it (the tests run
its CPU parts: the arguments, the roofline arithmetic, the meta-device build of a real config). The whole benchmark
also computes the CPU float32 reference of the answer check (once per model, cached in TRNCAT_REFERENCE_CACHE):
for an 8B model that takes 32 GiB of host memory and a few minutes; --no-bench-model skips it.
Exit status: 0 when every goal is met, 1 when one is missed.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIGS = ROOT / "tests" / "fixtures" / "configs"
DEFAULT_CONFIGS = ("llama-3.2-1b", "llama-3.1-8b")
#: The harness against a bare generate() loop: decode tokens/s within this fraction.
GOAL = 0.03
#: Peak device memory: the record's against torch's own count of the bare loop, within this fraction.
MEMORY_GOAL = 0.05
NO_CUDA = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The script's arguments (``--config`` may repeat: a fixture name or a config.json path)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config",
        action="append",
        default=None,
        metavar="NAME|PATH",
        help=f"a config of tests/fixtures/configs/ or a config.json (default: {', '.join(DEFAULT_CONFIGS)})",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of paired calls (default: %(default)s)")
    parser.add_argument("--iterations", type=int, default=5, help="paired calls per round (default: %(default)s)")
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="of the random weights")
    parser.add_argument(
        "--bandwidth-gbps",
        type=float,
        default=None,
        help="the GPU's HBM bandwidth in GB/s when pipeline/backends/cuda.py does not know it",
    )
    parser.add_argument("--no-bench-model", action="store_true", help="skip the whole benchmark (bench_model)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR", help="keep the saved models and records")
    args = parser.parse_args(argv)
    for name in ("rounds", "iterations", "input_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.output_tokens < 2:
        parser.error("--output-tokens must be at least 2 (decode starts after the first token)")
    args.config = args.config or list(DEFAULT_CONFIGS)
    return args


def config_path(name: str) -> Path:
    """A fixture name (``llama-3.2-1b``) or a path to a config.json."""
    path = Path(name)
    if path.suffix == ".json" or path.exists():
        return path
    return CONFIGS / f"{name}.json"


def load_config(path: Path) -> Any:
    """The transformers config of a config.json (read as data: no code from anywhere is run)."""
    import transformers

    data = json.loads(path.read_text(encoding="utf-8"))
    model_type = data.get("model_type")
    if model_type not in transformers.CONFIG_MAPPING:
        raise SystemExit(f"{path}: transformers {transformers.__version__} does not know model_type {model_type!r}")
    return transformers.CONFIG_MAPPING[model_type].from_dict(data)


def build_on_meta(config: Any, *, dtype: Any) -> Any:
    """The causal LM of ``config`` on the meta device in ``dtype``: shapes, no storage (an 8B model costs nothing)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    return model.to(dtype).eval()


def param_count(model: Any) -> int:
    """Parameters, each tied one counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def weights_bytes(model: Any) -> int:
    """Bytes of the parameters (tied ones once) and the buffers, as the harness counts what a decode step reads."""
    params = {id(p): p for p in model.parameters()}.values()
    return sum(t.numel() * t.element_size() for t in [*params, *model.buffers()])


def roofline_tokens_per_s(*, bandwidth_bytes_per_s: float, bytes_per_step: int, batch_size: int) -> float:
    """The memory-bandwidth bound on decode: each step reads ``bytes_per_step`` and yields ``batch_size`` tokens."""
    if bandwidth_bytes_per_s <= 0 or bytes_per_step <= 0:
        raise ValueError("bandwidth and bytes per step must be positive")
    return bandwidth_bytes_per_s / bytes_per_step * batch_size


def decode_tokens_per_s(*, batch_size: int, output_tokens: int, latency_s: float, first_token_s: float) -> float | None:
    """The harness's formula: the tokens after the first over the time after the first (None when not positive)."""
    decode_s = latency_s - first_token_s
    tokens = batch_size * (output_tokens - 1)
    return tokens / decode_s if tokens > 0 and decode_s > 0 else None


def relative(value: float | None, reference: float | None) -> float | None:
    """``value / reference - 1`` (None when either is missing)."""
    return None if value is None or not reference else value / reference - 1


def require_cuda() -> Any:
    """``torch`` when a CUDA device is visible; otherwise a clear message and exit status 2."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        build = torch.version.cuda or "a CPU-only build"
        print(
            f"cuda_path.py needs an NVIDIA GPU and a CUDA build of torch; this torch {torch.__version__} is "
            f"{build} and sees no GPU: nothing was measured",
            file=sys.stderr,
        )
        raise SystemExit(NO_CUDA)
    return torch


def materialize(model: Any, *, device: Any, seed: int) -> Any:
    """Storage for a meta model on ``device`` with random weights: normal(0, initializer_range) for matrices and
    embeddings, ones for norm scales; the rotary embeddings (buffers computed at build time, on meta) rebuilt.

    Raises:
        RuntimeError: a rotary embedding that cannot be rebuilt from the config (its buffers would be garbage).
    """
    import torch

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    std = float(getattr(config, "initializer_range", 0.02) or 0.02)
    model = model.to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, param in {id(p): (n, p) for n, p in model.named_parameters()}.values():
            if param.dim() == 1 and "norm" in name:
                param.fill_(1.0)
            elif param.dim() == 1:
                param.zero_()  # biases
            else:
                param.normal_(0.0, std, generator=generator)
        for parent_name, parent in list(model.named_modules()):
            for child_name, child in list(parent.named_children()):
                if "RotaryEmbedding" not in type(child).__name__:
                    continue
                setattr(parent, child_name, _rebuilt(child, config, device, f"{parent_name}.{child_name}".lstrip(".")))
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval()


def _rebuilt(rotary: Any, config: Any, device: Any, where: str) -> Any:
    """A rotary embedding built again from its config (transformers 5: ``(config)``; 4.x: ``(config, device)``),
    its float32 tables computed on the CPU and moved to ``device``."""
    own = getattr(rotary, "config", None) or config
    for kwargs in ({"config": own}, {"config": own, "device": "cpu"}):
        try:
            return type(rotary)(**kwargs).to(device)
        except TypeError:
            continue
    raise RuntimeError(
        f"cannot rebuild {type(rotary).__name__} at {where} from its config: its tables would be garbage"
    )


def bare_loop(model: Any, inputs: dict[str, Any], kwargs: dict[str, Any], *, sync: Callable[[], None]) -> float:
    """What a user would time: one generate() call and a synchronize."""
    start = time.perf_counter()
    model.generate(**inputs, **kwargs)
    sync()
    return time.perf_counter() - start


@dataclass
class Figures:
    """One model's measurements (all times in seconds)."""

    harness_call_s: float
    bare_call_s: float
    harness_ttft_s: float
    bare_first_s: float
    bare_peak_bytes: int
    overhead: float


def measure_in_process(
    model: Any, inputs: dict[str, Any], kwargs: dict[str, Any], *, backend: Any, rounds: int, iterations: int
) -> Figures:
    """The harness's timed loop against a bare generate() loop, paired calls in alternating order."""
    import torch

    from pipeline.bench.tasks.generation import timed_generate

    sync = backend.synchronize
    first = {**kwargs, "max_new_tokens": 1, "min_new_tokens": 1}
    for _ in range(2):  # warm both paths (kernels, the allocator's pools)
        bare_loop(model, inputs, kwargs, sync=sync)
        timed_generate(model, inputs, kwargs, backend=backend, iterations=1)
    torch.cuda.reset_peak_memory_stats()
    harness: list[float] = []
    bare: list[float] = []
    ttfts: list[float] = []
    ratios: list[float] = []
    for _ in range(rounds):
        round_h, round_b = [], []
        for call in range(iterations):
            for which in ("harness", "bare") if call % 2 == 0 else ("bare", "harness"):
                if which == "harness":
                    latencies, first_tokens, _ = timed_generate(model, inputs, kwargs, backend=backend, iterations=1)
                    round_h += latencies
                    ttfts += first_tokens
                else:
                    round_b.append(bare_loop(model, inputs, kwargs, sync=sync))
        harness += round_h
        bare += round_b
        ratios.append(statistics.median(h / b for h, b in zip(round_h, round_b, strict=True)))
    peak = int(torch.cuda.max_memory_allocated())
    # The bare loop's prefill (a one-token generate()) stands for its time to first token.
    bare_first = statistics.median(bare_loop(model, inputs, first, sync=sync) for _ in range(max(3, iterations)))
    return Figures(
        harness_call_s=statistics.median(harness),
        bare_call_s=statistics.median(bare),
        harness_ttft_s=statistics.median(ttfts),
        bare_first_s=bare_first,
        bare_peak_bytes=peak,
        overhead=statistics.median(ratios) - 1,
    )


def save_for_bench(model: Any, tokenizer: Any, folder: Path) -> Path:
    """The random model as a model folder ``bench_model`` loads like any other (safetensors, no code file)."""
    folder.mkdir(parents=True, exist_ok=True)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def run_one(name: str, args: argparse.Namespace, torch: Any, work: Path) -> bool:
    """Measure one config; prints its lines and returns whether its goals were met."""
    from pipeline.backends import get_backend
    from pipeline.backends.cuda import gpu_bandwidth
    from pipeline.bench.run import BenchOptions, bench_model
    from pipeline.bench.tasks import get_task
    from pipeline.bench.tasks.generation import decode_bytes_per_step, kv_bytes_per_token
    from pipeline.testing.tiny import build_tokenizer
    from pipeline.workload import Workload

    path = config_path(name)
    config = load_config(path)
    workload = Workload(batch_size=1, input_tokens=args.input_tokens, output_tokens=args.output_tokens)
    backend = get_backend("cuda")
    device = torch.device("cuda", 0)
    gpu = torch.cuda.get_device_name(0)
    bandwidth = args.bandwidth_gbps * 1e9 if args.bandwidth_gbps else gpu_bandwidth(gpu)

    meta = build_on_meta(config, dtype=torch.bfloat16)
    params, weights = param_count(meta), weights_bytes(meta)
    model = materialize(meta, device=device, seed=args.seed)
    task = get_task("text-generation")
    tokenizer = build_tokenizer()  # a local tokenizer: its ids are a subset of any real vocabulary
    inputs = {k: v.to(device) for k, v in task.make_inputs(tokenizer, workload).items()}
    kwargs = task.generate_kwargs(tokenizer, workload)
    print(
        f"{name} ({path.name}): {params / 1e9:.2f}B params, {_gb(weights)} of bfloat16 weights on {gpu}"
        f" ({'bandwidth unknown' if not bandwidth else f'{bandwidth / 1e12:.2f} TB/s HBM'})"
    )

    with torch.inference_mode():
        figures = measure_in_process(
            model, inputs, kwargs, backend=backend, rounds=args.rounds, iterations=args.iterations
        )
    bare_tps = decode_tokens_per_s(
        batch_size=1,
        output_tokens=args.output_tokens,
        latency_s=figures.bare_call_s,
        first_token_s=figures.bare_first_s,
    )
    harness_tps = decode_tokens_per_s(
        batch_size=1,
        output_tokens=args.output_tokens,
        latency_s=figures.harness_call_s,
        first_token_s=figures.harness_ttft_s,
    )
    step = decode_bytes_per_step(
        weights_bytes=weights, workload=workload, kv_bytes_per_token=kv_bytes_per_token(config, element_size=2)
    )
    if bandwidth:
        bound = roofline_tokens_per_s(bandwidth_bytes_per_s=bandwidth, bytes_per_step=step, batch_size=1)
        share = f"{bare_tps / bound:.0%}" if bare_tps else "n/a"
        print(
            f"  roofline: {_gb(step)} read per decode step -> at most {bound:,.0f} tok/s; bare loop "
            f"{bare_tps or 0:,.1f} tok/s = {share} of it, the harness's timed loop {harness_tps or 0:,.1f} tok/s"
        )
    else:
        print(
            f"  roofline: unknown bandwidth for {gpu!r} (pass --bandwidth-gbps); bare loop {bare_tps or 0:,.1f} tok/s"
        )
    ok = abs(figures.overhead) <= GOAL
    print(
        f"  harness timed loop vs bare generate(): call p50 {figures.harness_call_s * 1e3:,.1f} ms vs "
        f"{figures.bare_call_s * 1e3:,.1f} ms, paired {_pct(figures.overhead)} (goal within {GOAL:.0%})"
    )
    print(f"  bare loop peak: torch.cuda.max_memory_allocated {_gb(figures.bare_peak_bytes)}")

    if not args.no_bench_model:
        folder = save_for_bench(model, tokenizer, work / path.stem)
        del model, meta
        gc.collect()
        torch.cuda.empty_cache()  # the child gets the whole GPU
        record = bench_model(
            str(folder),
            task="text-generation",
            backend=backend,
            out=work / f"{path.stem}.json",
            options=BenchOptions(cores=1, dtype="bfloat16", workload=workload, iterations=args.iterations),
        )
        if record["status"] != "pass":
            print(f"  whole benchmark: {record['status']} {record['failure']}")
            return False
        metrics = record["metrics"]
        tps, peak = metrics["decode_tokens_per_s"], metrics["peak_device_memory_bytes"]
        speed, memory = relative(tps, bare_tps), relative(peak, figures.bare_peak_bytes)
        print(
            f"  whole benchmark (bench_model, cuda): decode {tps or 0:,.1f} tok/s vs bare {bare_tps or 0:,.1f}: "
            f"{_pct(speed)} (goal within {GOAL:.0%}); roofline_fraction {metrics['roofline_fraction']}; "
            f"peak device memory {_gb(peak or 0)} vs {_gb(figures.bare_peak_bytes)}: {_pct(memory)} "
            f"(goal within {MEMORY_GOAL:.0%})"
        )
        ok = ok and speed is not None and abs(speed) <= GOAL and memory is not None and abs(memory) <= MEMORY_GOAL
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    missing = [name for name in args.config if not config_path(name).is_file()]
    if missing:
        print(f"no such config: {', '.join(missing)} (names of {CONFIGS} or paths to a config.json)", file=sys.stderr)
        return NO_CUDA
    torch = require_cuda()
    torch.manual_seed(args.seed)
    print(
        f"workload: batch 1, {args.input_tokens} input tokens, {args.output_tokens} output tokens (greedy); "
        f"torch {torch.__version__}, CUDA {torch.version.cuda}; {args.rounds} x {args.iterations} paired calls"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="trncat-cuda-path-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in args.config:
            results.append(run_one(name, args, torch, work))
            gc.collect()
            torch.cuda.empty_cache()
    print("goals " + ("met" if all(results) else "NOT met"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
