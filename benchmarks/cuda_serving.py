"""The vLLM serving sweep on an NVIDIA GPU: ``vllm serve`` driven by guidellm through the catalog's workload
contract, the GPU twin of a Trainium2 serving row (benchmarks/cuda_path.py's sibling).

    python benchmarks/cuda_serving.py --model FOLDER [--workload 1k/1k] [--concurrency 1,2,4,...,256]
        [--gpus 1] [--instance-type g6e.xlarge] [--out cuda-serving.json]

``FOLDER`` is a model's own files (nothing is downloaded: ``HF_HUB_OFFLINE`` is set for the engine and guidellm).
It prints every point (output tok/s, tok/s per GPU and per user, TTFT and TPOT p50/p99, $/1M tokens at the
instance's price) and the headline at the service level, and writes the record and serve.sh. Needs an NVIDIA GPU
and vLLM (``pip install vllm``: CUDA wheels only); without them it says so and exits 2. CI never runs it.
Exit status: 0 when the record passed, 1 when it did not.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.cli.serving import concurrencies  # noqa: E402  (the one parser of a sweep, trncat serve's)
from pipeline.prices import load_pricing  # noqa: E402
from pipeline.serve import serve_folder, serving_workload  # noqa: E402


def _missing() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU here (nvidia-smi not found)"
    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return "vLLM is not installed (pip install vllm)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--workload", default="1k/1k")
    parser.add_argument("--concurrency", type=concurrencies)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--instance-type")
    parser.add_argument("--instance-gpus", type=int)
    parser.add_argument("--model-id", default="local/model")
    parser.add_argument("--revision", default="0" * 40)
    parser.add_argument("--out", type=Path, default=Path("cuda-serving.json"))
    args = parser.parse_args(argv)
    why = _missing()
    if why:
        print(f"cuda_serving: {why}; nothing measured", file=sys.stderr)
        return 2
    workload = serving_workload(args.workload)
    if args.concurrency:
        workload = dataclasses.replace(workload, concurrencies=args.concurrency)
    record = serve_folder(
        args.model,
        device="cuda",
        workload=workload,
        model_id=args.model_id,
        revision=args.revision,
        out=args.out,
        chips=args.gpus,
        instance_chips=args.instance_gpus,
        instance_type=args.instance_type,
        pricing=load_pricing(),
    )
    serving = record["serving"]
    print(f"{record['status']}: {serving['engine']['command']}")
    for p in serving["points"]:
        print(
            f"  c={p['concurrency']:>4} {p['output_tok_s'] or 0:>9.1f} tok/s  {p['tok_s_per_chip'] or 0:>9.1f}/GPU  "
            f"{p['tok_s_per_user'] or 0:>7.1f}/user  TTFT p50 {p['ttft_s']['p50']}  p99 {p['ttft_s']['p99']}  "
            f"TPOT p50 {p['tpot_ms']['p50']}  ${p['usd_per_million_tokens']}/1M  success {p['success_rate']:.2f}"
        )
    print(f"headline at the SLO: {serving['headline']}; stopped: {serving['stopped']}")
    return 0 if record["status"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
