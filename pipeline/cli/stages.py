"""Commands of the pipeline's stages: discover, queue, plan, bench."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from pipeline.cli.registry import (
    add_price_args,
    command,
    count,
    in_file,
    in_folder,
    in_path,
    make_hub,
    model_argument,
    number,
    out_file,
    out_folder,
    pricing_of,
)
from pipeline.errors import ConfigError
from pipeline.types import DEVICES, DTYPES, LNCS, SERVING_WORKLOADS, SOURCES, TASKS, VIEWS

# -- discover -------------------------------------------------------------------------------------------


def _discover_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="all", choices=[*TASKS, "all"], help="default: %(default)s")
    p.add_argument("--view", default="all", choices=[*VIEWS, "all"], help="default: %(default)s")
    p.add_argument("--limit", type=count(), default=100, help="top models per ranked view (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the candidates as JSON")
    p.add_argument(
        "--out-dir",
        type=out_folder,
        metavar="DIR",
        help="write DIR/candidates/<task>-<view>.json, DIR/data/rankings/*.parquet, DIR/data/exclusions.parquet",
    )
    p.add_argument("--selected", type=in_file, metavar="FILE", help="default: dataset/selected.yaml")
    p.add_argument("--exclusions", type=in_file, metavar="FILE", help="default: dataset/exclusions.yaml")
    p.add_argument(
        "--requests", type=in_file, metavar="FILE", help="accepted model requests join Selected (gh issue list --json)"
    )
    p.add_argument("--allow-gated", action="store_true", help="keep gated models (the runners' token must have access)")


@command(
    "discover",
    help="Read the Hub's rankings (and the Selected list) into candidates, a rankings snapshot and exclusions.",
    example="trncat discover --task text-generation --view trending --limit 100 --out-dir discovery/",
    arguments=_discover_args,
)
def _discover(args: argparse.Namespace) -> int:
    from pipeline.discover import discover_all, load_exclusions, load_requests, load_selected, write_outputs

    tasks = TASKS if args.task == "all" else (args.task,)
    views = VIEWS if args.view == "all" else (args.view,)
    selected = load_selected(args.selected) if "selected" in views else None
    if selected is not None and args.requests:
        selected = load_requests(args.requests, selected)
    exclusions = load_exclusions(args.exclusions)
    discoveries = discover_all(
        hub=make_hub(),
        limit=args.limit,
        tasks=tasks,
        views=views,
        selected=selected,
        exclusions=exclusions,
        allow_gated=args.allow_gated,
    )
    if args.out_dir:
        write_outputs(discoveries, exclusions, args.out_dir)
    if args.json:
        print(json.dumps([d.to_dict() for d in discoveries], indent=2))
    else:
        for discovery in discoveries:
            kept = discovery.ineligible
            print(f"{discovery.task} / {discovery.view}: {len(discovery.eligible)} eligible, {len(kept)} kept out")
            for c in kept:
                print(f"  kept out: {c.model_id} ({c.kind}: {c.reason})")
    return 0


# -- queue ----------------------------------------------------------------------------------------------

#: The GPU instance a cuda queue sizes its jobs for when --instance does not say (8 x H200, 141 GB each).
GPU_INSTANCE = "p5en.48xlarge"


def _queue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidates",
        type=in_path,
        nargs="+",
        required=True,
        metavar="PATH",
        help="discovery JSON files or folders of them (trncat discover --out-dir DIR: DIR/candidates)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--dataset", type=in_folder, metavar="DIR", help="a local dataset folder (data/results)")
    source.add_argument("--dataset-repo", metavar="ORG/NAME", help="the Hub dataset (its data/results is read)")
    p.add_argument("--toolchain", type=in_file, metavar="FILE", help="default: runners/toolchain.yaml")
    p.add_argument(
        "--device",
        choices=DEVICES,
        default="neuron",
        help="neuron (default); cuda: the GPU runner class, for the models --selected marks `gpu: true` only",
    )
    p.add_argument("--dtype", choices=DTYPES, help="default: float32 on cpu, bfloat16 elsewhere")
    p.add_argument(
        "--instance",
        help=f"default: trn2.48xlarge; with --device cuda a GPU instance of the price table, default {GPU_INSTANCE}",
    )
    p.add_argument("--selected", type=in_file, metavar="FILE", help="default: dataset/selected.yaml")
    p.add_argument("--max-error-retries", type=count(0, 1000), default=2)
    p.add_argument("--chunk-size", type=count(), default=256)
    p.add_argument("--chunk", type=count(0), metavar="K", help='write only chunk K\'s {"include": [...]}')
    p.add_argument("--out", type=out_file, metavar="FILE", help="default: print to stdout")
    p.add_argument(
        "--estimate",
        type=out_file,
        metavar="FILE",
        help="also write the sweep's cost and recommended fleet as JSON (its `markdown` key is a summary)",
    )
    p.add_argument("--target-hours", type=number(), default=24.0, help="the sweep should end within (default 24)")
    p.add_argument(
        "--serving",
        metavar="WORKLOAD",
        choices=SERVING_WORKLOADS,
        help="also queue serving jobs (trncat serve) of this workload (1k/1k, 8k/1k) for passing text-generation rows "
        "(and of its image workload, 1k/1k-image for 1k/1k, for passing image-text-to-text rows vLLM Neuron serves)",
    )
    add_price_args(p, what="the estimate's cost")


@command(
    "queue",
    help="Candidates minus what is already measured and what is excluded -> GitHub Actions matrix chunks.",
    example="trncat queue --candidates discovery/candidates --dataset dataset/ --out matrix.json --estimate cost.json",
    arguments=_queue_args,
)
def _queue(args: argparse.Namespace) -> int:
    import tempfile

    from pipeline import fsatomic
    from pipeline.backends import backend_class
    from pipeline.queue import build_queue, fetch_results, load_candidates, load_toolchain
    from pipeline.serve import image_workload, serving_workload

    files = [file for path in args.candidates for file in (sorted(path.glob("*.json")) if path.is_dir() else [path])]
    instance, accelerators, only = args.instance or "trn2.48xlarge", None, None
    pricing = pricing_of(args)
    if args.device == "cuda":  # the GPU runner class: the Selected list's gpu models, sized in the instance's GPUs
        from pipeline.discover import load_selected

        if args.estimate:
            raise ConfigError("--estimate recommends Trainium fleets (runner partitions): a cuda queue has none")
        instance = args.instance or GPU_INSTANCE
        known = pricing.table.get(instance)
        if known is None or known.accelerators is None:
            raise ConfigError(f"--instance {instance}: the price table names no GPUs for it (its `accelerators`)")
        accelerators = known.accelerators
        only = {(s.model_id, s.task) for s in load_selected(args.selected) if s.gpu}
    client = make_hub()
    with tempfile.TemporaryDirectory(prefix="trncat-queue-") as tmp:
        root = args.dataset
        if args.dataset_repo:
            root = fetch_results(client, args.dataset_repo, into=Path(tmp) / "dataset")
        queue = build_queue(
            candidates=load_candidates(files),
            dataset_root=root,
            toolchain=load_toolchain(args.toolchain),
            max_error_retries=args.max_error_retries,
            chunk_size=args.chunk_size,
            hub=client,
            device=args.device,
            dtype=args.dtype or backend_class(args.device).default_dtype,
            instance=instance,
            accelerators=accelerators,
            only=only,
            serving=serving_workload(args.serving) if args.serving else None,
            serving_images=image_workload(args.serving) if args.serving else None,
        )
    text = queue.chunk_json(args.chunk) if args.chunk is not None else queue.to_json(indent=2)
    if args.out:
        fsatomic.write_text(args.out, text + "\n")
    else:
        print(text)
    print(f"{len(queue.entries)} job(s) in {len(queue.chunks)} chunk(s); {len(queue.skipped)} skipped", file=sys.stderr)
    if args.estimate:
        from pipeline.queue import estimate_sweep, format_estimate

        estimate = estimate_sweep(queue.entries, instance=instance, pricing=pricing, target_hours=args.target_hours,
                                  sources=queue.duration_sources)  # fmt: skip
        markdown = format_estimate(estimate)
        if queue.remeasure.get("passed") or queue.remeasure.get("compile_failure"):  # a new toolchain: its order
            r = queue.remeasure
            markdown += (f"\n\nRe-measure order: {r['passed']} job(s) that passed before first, then "
                         f"{r['compile_failure']} that failed at compile, then {r['rest']} other(s).")  # fmt: skip
        fsatomic.write_text(args.estimate, json.dumps({**estimate.to_dict(), "markdown": markdown}, indent=2) + "\n")
        print(markdown, file=sys.stderr)
    return 0


# -- plan -----------------------------------------------------------------------------------------------


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model", type=model_argument, metavar="MODEL", help="Hub model id or a local folder with config.json"
    )
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="default: %(default)s")
    p.add_argument("--instance", default="trn2.48xlarge", help="default: %(default)s")
    p.add_argument("--lnc", type=int, choices=LNCS, help="logical core config (trn2 default 2)")
    p.add_argument("--revision")
    p.add_argument(
        "--task",
        choices=TASKS,
        default="text-generation",
        help="the task it runs under: its workload, and the model class counted",
    )
    p.add_argument("--batch-size", type=count())
    p.add_argument("--input-tokens", type=count())
    p.add_argument("--output-tokens", type=count())
    p.add_argument("--json", action="store_true")


@command(
    "plan",
    help="Size a model from config.json: parameters, bytes, NeuronCores, parallelism advice.",
    example="trncat plan meta-llama/Llama-3.1-8B --instance trn2.48xlarge --json",
    arguments=_plan_args,
)
def _plan(args: argparse.Namespace) -> int:
    import dataclasses

    from pipeline.plan import format_plan, plan_model
    from pipeline.taskspec import default_workload

    sizes = ("batch_size", "input_tokens", "output_tokens")
    changes = {k: getattr(args, k) for k in sizes if getattr(args, k) is not None}
    workload = dataclasses.replace(default_workload(args.task), **changes)
    local = Path(args.model).is_dir()
    plan = plan_model(
        Path(args.model) if local else args.model,
        revision=args.revision,
        dtype=args.dtype,
        instance=args.instance,
        lnc=args.lnc,
        workload=workload,
        hub=None if local else make_hub(),
        task=args.task,
    )
    print(json.dumps(plan.to_dict(), indent=2) if args.json else format_plan(plan))
    return 0


# -- bench ----------------------------------------------------------------------------------------------


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", type=model_argument, metavar="MODEL",
                   help="Hub model id (org/name) or a local folder with config.json")  # fmt: skip
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--device", default="neuron", choices=DEVICES, help="default: %(default)s")
    p.add_argument("--cores", type=count(), help="cores to shard over (default: the plan's, else 1)")
    p.add_argument("--dtype", choices=DTYPES, help="default: float32 on cpu, bfloat16 elsewhere")
    p.add_argument("--out", required=True, type=out_file, metavar="FILE", help="where to write the record (JSON)")
    p.add_argument("--model-id", help="record this Hub id for a local folder")
    p.add_argument("--revision", help="40-hex commit (Hub: default the main branch's head)")
    p.add_argument("--timeout", type=number(), default=1800.0, metavar="S", help="seconds before the run is killed")
    p.add_argument("--memory-limit-gb", type=number(), help="kill the run past this host memory")
    p.add_argument(
        "--iterations", type=count(), default=10, help="timed calls, 6 at least for an interval (default: %(default)s)"
    )
    p.add_argument("--warmup", type=count(0), default=1, help="untimed calls after the first (default: %(default)s)")
    p.add_argument("--source", default="local", choices=SOURCES, help="provenance to record")
    p.add_argument("--escalate", action="store_true", help="on out-of-memory, retry on twice the cores")
    p.add_argument(
        "--host-memory-bytes",
        type=count(0, 2**62),
        metavar="N",
        help="host memory the compile needs (the queue's host_memory_bytes); short of it, the run is refused "
        "with an error record that a later queue retries",
    )
    p.add_argument(
        "--host-memory-wait", type=number(above=False), default=0.0, metavar="S", help="wait this long for it first"
    )
    p.add_argument(
        "--workload",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="change a field of the task's fixed workload for a smaller run, e.g. --workload input_tokens=16 "
        "(the record carries the workload it ran)",
    )


def _key_value(text: str) -> str:
    if not re.fullmatch(r"[a-z_]+=\S+", text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: give KEY=VALUE, such as input_tokens=16")
    return text


@command(
    "bench",
    help="Benchmark one model on one device and write its result record.",
    example="trncat bench ./tiny-llama --task text-generation --device cpu --out result.json",
    arguments=_bench_args,
)
def _bench(args: argparse.Namespace) -> int:
    from pipeline.backends import get_backend
    from pipeline.bench import BenchOptions, bench_model

    changes = dict(item.partition("=")[::2] for item in args.workload)
    record = bench_model(
        args.model,
        task=args.task,
        backend=get_backend(args.device),
        out=args.out,
        options=BenchOptions(
            cores=args.cores,
            dtype=args.dtype,
            model_id=args.model_id,
            revision=args.revision,
            timeout_s=args.timeout,
            memory_limit_bytes=int(args.memory_limit_gb * 1024**3) if args.memory_limit_gb else None,
            iterations=args.iterations,
            warmup=args.warmup,
            source=args.source,
            escalate=args.escalate,
            hub=None if Path(args.model).is_dir() else make_hub(),
            host_memory_bytes=args.host_memory_bytes,
            host_memory_wait_s=args.host_memory_wait,
            workload_changes=changes,
        ),
    )
    failure = record["failure"]
    verdict = record["status"] if failure is None else f"{record['status']} ({failure['stage']}/{failure['code']})"
    print(f"{record['model_id']} {record['task']} on {record['device']}: {verdict} -> {args.out}")
    return 0
