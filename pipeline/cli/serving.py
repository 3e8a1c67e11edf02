"""``trncat serve``: serve one model (a folder, or a Hub id at a revision) on this machine's device, sweep it
with the load generator, write its serving record and serve.sh.

:func:`concurrencies` is the one parser of a sweep's ``--concurrency`` (benchmarks/cuda_serving.py uses it too).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from pipeline.cli.registry import (
    add_price_args,
    command,
    count,
    in_file,
    make_hub,
    model_argument,
    number,
    out_file,
    out_folder,
    pricing_of,
    sha256,
)
from pipeline.errors import ConfigError
from pipeline.hardware import INSTANCE_NAMES, get_instance
from pipeline.types import (
    DEVICES,
    DTYPES,
    EVAL_TASK_NAMES,
    FLAG_FEATURES,
    LNCS,
    LOAD_GENERATOR_NAMES,
    SERVING_WORKLOADS,
    SOURCES,
)

#: The most concurrent streams a sweep point may ask for (the schema's bound on a point's concurrency).
MAX_CONCURRENCY = 65536
#: The most chips (Trainium chips, GPUs) one engine may hold: the largest instance's (16 on a trn2.48xlarge).
MAX_CHIPS = max(get_instance(name).chips for name in INSTANCE_NAMES)


def concurrencies(text: str) -> tuple[int, ...]:
    """``--concurrency``'s value: comma-separated stream counts, each 1 ... 65536, strictly ascending.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse prints it as a usage error).
    """
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give stream counts separated by commas, such as 1,2,4")
    levels = tuple(int(part) for part in parts)
    if not all(1 <= level <= MAX_CONCURRENCY for level in levels):
        raise argparse.ArgumentTypeError(f"{text!r}: each concurrency is 1 to {MAX_CONCURRENCY}")
    if list(levels) != sorted(set(levels)):
        raise argparse.ArgumentTypeError(f"{text!r}: the concurrencies must ascend, each once")
    return levels


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        type=model_argument,
        help="a model folder (its own files), or a Hub id fetched at --revision without any code file",
    )
    p.add_argument("--device", choices=DEVICES, default="cpu", help="default: %(default)s")
    p.add_argument("--workload", choices=SERVING_WORKLOADS, default="cpu-tiny", help="default: %(default)s")
    p.add_argument(
        "--concurrency", type=concurrencies, help="the sweep, comma-separated and ascending (default: the workload's)"
    )
    p.add_argument("--chips", type=count(1, MAX_CHIPS), default=1,
                   help=f"Trainium2 chips or GPUs the engine holds, 1 to {MAX_CHIPS} (default 1)")  # fmt: skip
    p.add_argument("--instance-type", help="the instance the row is priced at (default: the backend's)")
    p.add_argument(
        "--instance-chips", type=count(1, MAX_CHIPS), help="the instance's chips (the share a cost is charged)"
    )
    p.add_argument("--lnc", type=int, choices=LNCS, help="logical NeuronCore config on Trainium2 (default 2)")
    p.add_argument("--dtype", choices=DTYPES, help="weights dtype (default float32 on the CPU, else bfloat16)")
    add_price_args(p, what="the row's price and cost")
    p.add_argument("--ttft-s", type=number(), help="the service level's TTFT limit (default 2 s at p99)")
    p.add_argument("--tok-s-per-user", type=number(), help="the service level's per-user speed (default 10 tok/s)")
    p.add_argument(
        "--load-generator",
        choices=LOAD_GENERATOR_NAMES,
        default="guidellm",
        help="guidellm (any engine, image workloads too) or vllm-bench (`vllm bench serve` on InferenceX's flags, "
        "a vLLM engine and a text workload; from the vLLM environment, `make .venv-vllm`). Default: %(default)s",
    )
    p.add_argument(
        "--feature",
        action="append",
        choices=FLAG_FEATURES,
        default=[],
        help="a stage-matrix feature to serve with (its vllm serve flags), probed after the sweep; repeatable",
    )
    p.add_argument(
        "--group",
        type=count(1, MAX_CONCURRENCY),
        help="points per load-generator run (default 1; more: a crash loses the whole group)",
    )
    p.add_argument("--rounds", type=count(1, 100), default=1, help="rounds of each point (6+: an interval of theirs)")
    p.add_argument("--no-warm-restart", action="store_true", help="skip timing a second start")
    p.add_argument(
        "--ready-timeout",
        type=number(),
        default=900.0,
        metavar="S",
        help="seconds the engine has to answer /health before the run is an error (default: %(default)g)",
    )
    p.add_argument("--model-id", help="the id a local folder is recorded under (default: local/<folder name>)")
    p.add_argument(
        "--revision",
        help="40-hex commit: of the Hub model (default: its main branch's head), or recorded for a folder "
        "(default: from the folder's content)",
    )
    p.add_argument("--source", choices=SOURCES, default="local", help="provenance to record")
    p.add_argument(
        "--eval",
        choices=EVAL_TASK_NAMES,
        help="also score the served model with lm-eval on this pinned task after the sweep",
    )
    p.add_argument(
        "--eval-floor", type=number(0.0, 1.0, above=False), help="the model's floor for --eval (default: the task's)"
    )
    p.add_argument(
        "--warm-from",
        type=in_file,
        metavar="BUNDLE",
        help="on Trainium2: start the engine from this serving bundle's compile cache (a row's published "
        "<record>.neff-cache.tar.gz; needs --sha256)",
    )
    p.add_argument("--sha256", type=sha256, help="the bundle's sha256 (its row's compiled_cache.sha256)")
    p.add_argument(
        "--require-warm",
        action="store_true",
        help="with --warm-from: a cache miss is fatal (VLLM_NEURON_DISABLE_WARMUP_COMPILE=1), never a compile",
    )
    p.add_argument("--out", type=out_file, default=Path("serving.json"), help="the record (default: %(default)s)")
    p.add_argument(
        "--work",
        type=out_folder,
        help="where the engine's logs, guidellm's reports and serve.sh go (default: beside --out)",
    )


@command(
    "serve",
    help="Serve one model and sweep its concurrency with guidellm; write its serving record and serve.sh.",
    example="trncat serve acme/llama-8b --revision 0123456789abcdef0123456789abcdef01234567 --device neuron "
    "--workload 1k/1k --chips 1 --source ci --out serving.json",
    arguments=_serve_args,
)
def _serve(args: argparse.Namespace) -> int:
    import dataclasses

    from pipeline.ids import is_revision
    from pipeline.serve import DEFAULT_SLO, ServeOptions, eval_task, serve_hub_model, serving_workload

    if (args.warm_from is None) != (args.sha256 is None):
        raise ConfigError("--warm-from and --sha256 go together: a bundle is unpacked only when its digest matches")
    if args.require_warm and args.warm_from is None:
        raise ConfigError("--require-warm needs --warm-from: a bundle to start warm from")
    if args.instance_chips is not None and args.instance_chips < args.chips:
        raise ConfigError(f"--chips {args.chips} is more than the instance's --instance-chips {args.instance_chips}")
    if args.revision is not None and not is_revision(args.revision):
        raise ConfigError(f"--revision {args.revision[:60]!r}: a revision is a 40-hex commit")
    # the `vllm` command the engine runs: beside this Python, else on PATH
    if args.device != "cpu" and not (Path(sys.executable).with_name("vllm").is_file() or shutil.which("vllm")):
        raise ConfigError(f"--device {args.device} serves with vLLM: no `vllm` command beside this Python or on PATH "
                          "(install vllm, and vllm-neuron on Trainium2)")  # fmt: skip
    workload = serving_workload(args.workload)
    if args.concurrency:
        workload = dataclasses.replace(workload, concurrencies=args.concurrency)
    slo = DEFAULT_SLO
    if args.ttft_s or args.tok_s_per_user:
        slo = dataclasses.replace(
            slo,
            ttft_s=args.ttft_s or slo.ttft_s,
            tok_s_per_user=args.tok_s_per_user or slo.tok_s_per_user,
            source="given on the command line",
        )
    record = serve_hub_model(
        args.model,
        hub=None if Path(args.model).is_dir() else make_hub(),
        model_id=args.model_id,
        revision=args.revision,
        options=ServeOptions(
            device=args.device,
            workload=workload,
            out=args.out,
            chips=args.chips,
            dtype=args.dtype,
            lnc=args.lnc,
            slo=slo,
            pricing=pricing_of(args),
            instance_chips=args.instance_chips,
            instance_type=args.instance_type,
            group=args.group,
            rounds=args.rounds,
            warm_restart=not args.no_warm_restart,
            ready_timeout_s=args.ready_timeout,
            source=args.source,
            work=args.work,
            eval_task=eval_task(args.eval, floor=args.eval_floor) if args.eval else None,
            warm_from=(args.warm_from, args.sha256) if args.warm_from else None,
            require_warm=args.require_warm,
            load_generator=args.load_generator,
            features=tuple(dict.fromkeys(args.feature)),
        ),
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
    if evaluation := serving.get("eval"):
        print(
            f"  task score: {evaluation['task']} {evaluation['metric']} = {evaluation['score']} "
            f"(floor {evaluation['floor']}: {evaluation['floor_source']})"
        )
    for feature in serving.get("features") or []:
        print(f"  {feature['name']} ({' '.join(feature['flags'])}): {feature['detail']}")
    if record["failure"]:
        print(f"  {record['failure']['code']}: {record['failure']['message'][:300]}")
    print(
        f"  at the service level: {best['tok_s_per_chip']} tok/s per chip, ${best['usd_per_million_tokens']}/1M tokens"
    )
    return 0 if record["status"] == "pass" else 1
