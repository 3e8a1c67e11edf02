"""``trncat serve``: serve one model folder on this machine's device, sweep it with the load generator, write its
serving record (schema 1.4) and serve.sh."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.registry import command


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=Path, help="the model's folder (its own files; nothing is downloaded)")
    p.add_argument("--device", choices=("cpu", "cuda", "neuron"), default="cpu")
    p.add_argument("--workload", default="cpu-tiny", help="1k/1k, 8k/1k or cpu-tiny (default)")
    p.add_argument("--concurrency", help="the sweep, comma-separated (default: the workload's)")
    p.add_argument("--chips", type=int, default=1, help="Trainium2 chips or GPUs the engine holds (default 1)")
    p.add_argument("--instance-type", help="the instance the row is priced at (default: the backend's)")
    p.add_argument("--instance-chips", type=int, help="the instance's chips (the share a cost is charged)")
    p.add_argument("--lnc", type=int, choices=(1, 2), help="logical NeuronCore config on Trainium2 (default 2)")
    p.add_argument("--dtype", help="weights dtype (default float32 on the CPU, else bfloat16)")
    p.add_argument("--prices", type=Path, help="price table (default runners/instances.yaml)")
    p.add_argument("--price-option", default="on_demand")
    p.add_argument("--ttft-s", type=float, help="the service level's TTFT limit (default 2 s at p99)")
    p.add_argument("--tok-s-per-user", type=float, help="the service level's per-user speed (default 10 tok/s)")
    p.add_argument("--group", type=int, help="points per load-generator run (default: all on the CPU, else 1)")
    p.add_argument("--no-warm-restart", action="store_true", help="skip timing a second start")
    p.add_argument("--model-id", default="trncat-demo/tiny-llama")
    p.add_argument("--revision", default="0" * 40)
    p.add_argument("--source", choices=("local", "ci", "community"), default="local")
    p.add_argument("--out", type=Path, default=Path("serving.json"))


@command(
    "serve",
    help="Serve one model and sweep its concurrency with guidellm; write its serving record and serve.sh.",
    example="trncat serve ./tiny-llama --device cpu --workload cpu-tiny --out serving.json",
    arguments=_serve_args,
)
def _serve(args: argparse.Namespace) -> int:
    import dataclasses

    from pipeline.prices import load_pricing
    from pipeline.serve import DEFAULT_SLO, serve_folder, serving_workload

    workload = serving_workload(args.workload)
    if args.concurrency:
        levels = tuple(int(c) for c in args.concurrency.split(",") if c.strip())
        workload = dataclasses.replace(workload, concurrencies=levels)
    slo = DEFAULT_SLO
    if args.ttft_s or args.tok_s_per_user:
        slo = dataclasses.replace(
            slo,
            ttft_s=args.ttft_s or slo.ttft_s,
            tok_s_per_user=args.tok_s_per_user or slo.tok_s_per_user,
            source="given on the command line",
        )
    record = serve_folder(
        args.model,
        device=args.device,
        workload=workload,
        model_id=args.model_id,
        revision=args.revision,
        out=args.out,
        chips=args.chips,
        dtype=args.dtype,
        lnc=args.lnc,
        slo=slo,
        pricing=load_pricing(args.prices, option=args.price_option),
        instance_chips=args.instance_chips,
        instance_type=args.instance_type,
        group=args.group,
        warm_restart=not args.no_warm_restart,
        source=args.source,
    )
    serving = record["serving"]
    best = serving["headline"]
    print(f"{record['status']}: {len(serving['points'])} point(s); {args.out}")
    for point in serving["points"]:
        print(
            f"  concurrency {point['concurrency']}: {point['output_tok_s'] or 0:.1f} tok/s, "
            f"{point['tok_s_per_user'] or 0:.1f} tok/s per user, success {point['success_rate']:.2f}"
        )
    if serving["stopped"]:
        print(f"  stopped: {serving['stopped'][:300]}")
    if record["failure"]:
        print(f"  {record['failure']['code']}: {record['failure']['message'][:300]}")
    print(
        f"  at the service level: {best['tok_s_per_chip']} tok/s per chip, ${best['usd_per_million_tokens']}/1M tokens"
    )
    return 0 if record["status"] == "pass" else 1
