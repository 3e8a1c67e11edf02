"""What the bfloat16 noise run of the answer check costs a row's host time (issue 31: at most double).

Benchmarks the tiny Llama on the CPU in bfloat16 through the whole harness (``bench_model``: the benchmark child,
the CPU float32 reference, the answer check), each run with a fresh reference cache so the references are made,
not read: once with the bfloat16 noise run and once without it (``agreement.noise_skip_reason`` answering "skip").
Prints each run's wall seconds and the ratio. Nothing is downloaded.

    python benchmarks/noise_cost.py [--runs 3] [--output-tokens 64] [--input-tokens 128] [--size tiny|medium]

``--size medium`` widens the tiny Llama to 1024 hidden, 8 layers and a 32000-token vocabulary (about 0.13B
parameters, random weights, the tiny tokenizer), so that the CPU work, not process starts, dominates the row.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--size", choices=("tiny", "medium"), default="tiny")
    args = parser.parse_args()

    from pipeline import constants
    from pipeline.backends import get_backend
    from pipeline.bench import agreement
    from pipeline.bench.run import bench_model
    from pipeline.testing import tiny
    from pipeline.workload import Workload

    workload = Workload(batch_size=1, input_tokens=args.input_tokens, output_tokens=args.output_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = tiny.build_tiny_llama(root / "tiny-llama")
        if args.size == "medium":
            _widen(folder)
        seconds: dict[str, list[float]] = {"with": [], "without": []}
        for run in range(args.runs):
            for mode in ("without", "with"):  # interleaved: the machine's load drifts alike for both
                constants.TRNCAT_REFERENCE_CACHE = root / f"ref-{mode}-{run}"
                skip = "skipped by the benchmark" if mode == "without" else None
                patch = mock.patch.object(agreement, "noise_skip_reason", lambda *, dtype, s=skip: s)
                start = time.perf_counter()
                with patch:
                    record = bench_model(str(folder), task="text-generation", backend=get_backend("cpu"),
                                         out=root / f"{mode}-{run}.json", dtype="bfloat16", workload=workload,
                                         iterations=5, warmup=1)  # fmt: skip
                seconds[mode].append(time.perf_counter() - start)
                grade = record["agreement"].get("grade")
                print(f"run {run} {mode:>7} the noise run: {seconds[mode][-1]:7.2f} s  grade {grade}", flush=True)
        without, with_noise = statistics.median(seconds["without"]), statistics.median(seconds["with"])
        print(f"median: {without:.2f} s without, {with_noise:.2f} s with: ratio {with_noise / without:.2f} (goal <= 2)")
    return 0


def _widen(folder: Path) -> None:
    """The tiny Llama's folder with a wider, deeper model of random weights (its tokenizer kept)."""
    from transformers import AutoConfig, LlamaForCausalLM

    config = AutoConfig.from_pretrained(folder)
    config.update({"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8, "num_attention_heads": 16,
                   "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000})  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)


if __name__ == "__main__":
    raise SystemExit(main())
