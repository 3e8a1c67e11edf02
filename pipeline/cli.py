"""The ``trncat`` command: thin commands that parse, call one stage, print, and map errors to exit codes.

Every command's help ends with an example; ``tests/test_cli.py`` checks each is documented in the README.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import __version__
from pipeline.errors import PipelineError

if TYPE_CHECKING:
    from pipeline.hub import Hub
from pipeline.types import DEVICES, DTYPES, TASKS, VIEWS

logger = logging.getLogger("pipeline")

Handler = Callable[[argparse.Namespace], int]
_COMMANDS: list[tuple[str, str, str, Callable[[argparse.ArgumentParser], None], Handler]] = []


def _hub() -> Hub:
    """The one Hub client of a command, on ``HF_ENDPOINT`` with ``HF_TOKEN`` (huggingface_hub's lookup without)."""
    from pipeline import constants
    from pipeline.hub import Hub

    return Hub(endpoint=constants.HF_ENDPOINT, token=constants.HF_TOKEN)


def command(
    name: str, *, help: str, example: str, arguments: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register ``trncat NAME``: ``arguments`` adds its options; the decorated function runs it."""

    def register(handler: Handler) -> Handler:
        _COMMANDS.append((name, help, example, arguments, handler))
        return handler

    return register


# -- validate -------------------------------------------------------------------------------------------


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="record files (*.json) or folders holding them")
    p.add_argument("--json", action="store_true", help="print one JSON object for machines")


@command(
    "validate",
    help="Check result records against the schema and the semantic rules.",
    example="trncat validate results/ extra.json --json",
    arguments=_validate_args,
)
def _validate(args: argparse.Namespace) -> int:
    from pipeline.records import validate_paths

    report = validate_paths(args.paths)
    if args.json:
        print(
            json.dumps(
                {
                    "files": report.files,
                    "valid": len(report.records),
                    "invalid": len(report.bad_files),
                    "problems": [p.to_dict() for p in report.problems],
                },
                indent=2,
            )
        )
    else:
        for problem in report.problems:
            print(problem)
        print(f"{report.files} file(s): {len(report.records)} valid, {len(report.bad_files)} invalid", file=sys.stderr)
    if report.files == 0:
        print("error: no record files found", file=sys.stderr)
        return 1
    return 0 if report.ok else 1


# -- bench ----------------------------------------------------------------------------------------------


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="Hub model id (org/name) or a local folder with config.json")
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--device", default="neuron", choices=DEVICES, help="default: %(default)s")
    p.add_argument("--cores", type=int, default=None, help="cores to shard over (default: the plan's, else 1)")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default: float32 on cpu, bfloat16 elsewhere")
    p.add_argument("--out", required=True, type=Path, metavar="FILE", help="where to write the record (JSON)")
    p.add_argument("--model-id", default=None, help="record this Hub id for a local folder")
    p.add_argument("--revision", default=None, help="40-hex commit (Hub: default the main branch's head)")
    p.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="seconds before the run is killed")
    p.add_argument("--memory-limit-gb", type=float, default=None, help="kill the run past this host memory")
    p.add_argument("--iterations", type=int, default=5, help="timed calls (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls after the first (default: %(default)s)")
    p.add_argument("--source", default="local", choices=["local", "ci", "community"], help="provenance to record")
    p.add_argument("--escalate", action="store_true", help="on out-of-memory, retry on twice the cores")


@command(
    "bench",
    help="Benchmark one model on one device and write its result record.",
    example="trncat bench ./tiny-llama --task text-generation --device cpu --out result.json",
    arguments=_bench_args,
)
def _bench(args: argparse.Namespace) -> int:
    from pipeline.bench.backends import get_backend
    from pipeline.bench.run import bench_model

    record = bench_model(
        args.model,
        task=args.task,
        backend=get_backend(args.device),
        cores=args.cores,
        dtype=args.dtype,
        out=args.out,
        model_id=args.model_id,
        revision=args.revision,
        timeout_s=args.timeout,
        memory_limit_bytes=int(args.memory_limit_gb * 1024**3) if args.memory_limit_gb else None,
        iterations=args.iterations,
        warmup=args.warmup,
        source=args.source,
        escalate=args.escalate,
        hub=None if Path(args.model).is_dir() else _hub(),
    )
    failure = record["failure"]
    verdict = record["status"] if failure is None else f"{record['status']} ({failure['stage']}/{failure['code']})"
    print(f"{record['model_id']} {record['task']} on {record['device']}: {verdict} -> {args.out}")
    return 0


# -- build ----------------------------------------------------------------------------------------------


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULT", help="record files or folders")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the dataset folder (created if needed)")


@command(
    "build",
    help="Add result records to a dataset folder: Parquet, latest view, scripts, card.",
    example="trncat build results/ --out dataset/",
    arguments=_build_args,
)
def _build(args: argparse.Namespace) -> int:
    from pipeline.dataset import build
    from pipeline.records import validate_paths

    report = validate_paths(args.results)
    for problem in report.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if not report.records:
        print("error: no valid record to build from", file=sys.stderr)
        return 1
    summary = build((record for _, record in report.records), args.out)
    if summary.changed:
        print(
            f"added {summary.added} row(s) to {args.out} ({summary.results_file}); "
            f"{len(summary.scripts)} script folder(s) updated"
        )
    else:
        print(f"nothing new: {summary.duplicates} record(s) already in {args.out}")
    return 1 if report.problems else 0


# -- discover -------------------------------------------------------------------------------------------


def _discover_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="all", choices=[*TASKS, "all"], help="default: %(default)s")
    p.add_argument("--view", default="all", choices=[*VIEWS, "all"], help="default: %(default)s")
    p.add_argument("--limit", type=int, default=100, help="top models per ranked view (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the candidates as JSON")
    p.add_argument(
        "--out-dir",
        type=Path,
        metavar="DIR",
        help="write DIR/candidates/<task>-<view>.json, DIR/data/rankings/*.parquet, DIR/data/exclusions.parquet",
    )
    p.add_argument("--selected", type=Path, metavar="FILE", help="default: dataset/selected.yaml")
    p.add_argument("--exclusions", type=Path, metavar="FILE", help="default: dataset/exclusions.yaml")
    p.add_argument("--allow-gated", action="store_true", help="keep gated models (the runners' token must have access)")


@command(
    "discover",
    help="Read the Hub's rankings (and the Selected list) into candidates, a rankings snapshot and exclusions.",
    example="trncat discover --task text-generation --view trending --limit 100 --out-dir discovery/",
    arguments=_discover_args,
)
def _discover(args: argparse.Namespace) -> int:
    from pipeline.discover import discover_all, write_outputs
    from pipeline.selection import load_exclusions, load_selected

    tasks = TASKS if args.task == "all" else (args.task,)
    views = VIEWS if args.view == "all" else (args.view,)
    selected = load_selected(args.selected) if "selected" in views else None
    exclusions = load_exclusions(args.exclusions)
    discoveries = discover_all(
        hub=_hub(),
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


def _queue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidates",
        type=Path,
        nargs="+",
        required=True,
        metavar="PATH",
        help="discovery JSON files or folders of them (trncat discover --out-dir DIR: DIR/candidates)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--dataset", type=Path, metavar="DIR", help="a local dataset folder (data/results)")
    source.add_argument("--dataset-repo", metavar="ORG/NAME", help="the Hub dataset (its data/results is read)")
    p.add_argument("--toolchain", type=Path, default=None, metavar="FILE", help="default: runners/toolchain.yaml")
    p.add_argument("--device", choices=DEVICES, default="neuron")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="default: float32 on cpu, bfloat16 elsewhere")
    p.add_argument("--instance", default="trn2.48xlarge")
    p.add_argument("--max-error-retries", type=int, default=2)
    p.add_argument("--chunk-size", type=int, default=256)
    p.add_argument("--chunk", type=int, default=None, metavar="K", help='write only chunk K\'s {"include": [...]}')
    p.add_argument("--out", type=Path, default=None, metavar="FILE", help="default: print to stdout")


@command(
    "queue",
    help="Candidates minus what is already measured and what is excluded -> GitHub Actions matrix chunks.",
    example="trncat queue --candidates discovery/candidates --dataset dataset/ --out matrix.json",
    arguments=_queue_args,
)
def _queue(args: argparse.Namespace) -> int:
    import tempfile

    from pipeline import fsatomic
    from pipeline.bench.backends import backend_class
    from pipeline.queue import build_queue, fetch_results, load_candidates, load_toolchain

    files: list[Path] = []
    for path in args.candidates:
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    hub = _hub()
    with tempfile.TemporaryDirectory(prefix="trncat-queue-") as tmp:
        root = args.dataset
        if args.dataset_repo:
            root = fetch_results(hub, args.dataset_repo, into=Path(tmp) / "dataset")
        queue = build_queue(
            candidates=load_candidates(files),
            dataset_root=root,
            toolchain=load_toolchain(args.toolchain),
            max_error_retries=args.max_error_retries,
            chunk_size=args.chunk_size,
            hub=hub,
            device=args.device,
            dtype=args.dtype or backend_class(args.device).default_dtype,
            instance=args.instance,
        )
    text = queue.chunk_json(args.chunk) if args.chunk is not None else queue.to_json(indent=2)
    if args.out:
        fsatomic.write_text(args.out, text + "\n")
    else:
        print(text)
    print(f"{len(queue.entries)} job(s) in {len(queue.chunks)} chunk(s); {len(queue.skipped)} skipped", file=sys.stderr)
    return 0


# -- publish --------------------------------------------------------------------------------------------


def _publish_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULT", help="record files or folders (validated again here)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--repo", metavar="ORG/NAME", help="the Hub dataset repo (endpoint from HF_ENDPOINT)")
    target.add_argument("--to-folder", type=Path, metavar="DIR", help="offline target: a local dataset folder")
    p.add_argument(
        "--overlay", type=Path, metavar="DIR", help="discovery outputs to include (data/rankings, exclusions)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be committed; change nothing")


@command(
    "publish",
    help="Publish result records to the Hub dataset as one pull request (or into a local folder).",
    example="trncat publish results/ --repo trncat/results --overlay discovery/ --dry-run",
    arguments=_publish_args,
)
def _publish(args: argparse.Namespace) -> int:
    from pipeline.publish import publish, publish_to_folder
    from pipeline.records import validate_paths

    report = validate_paths(args.results)
    for problem in report.problems:
        print(f"set aside: {problem}", file=sys.stderr)
    records = [record for _, record in report.records]
    if not records and not args.overlay:
        print("error: no valid record to publish", file=sys.stderr)
        return 1
    if args.to_folder:
        result = publish_to_folder(records, out=args.to_folder, overlay=args.overlay)
    else:
        result = publish(
            records,
            repo=args.repo,
            hub=_hub(),
            overlay=args.overlay,
            dry_run=args.dry_run,
            invalid=len(report.bad_files),
        )
    if result.dry_run:
        print(
            f"dry run: would commit {len(result.files)} file(s) to {result.repo}"
            + (f" (onto open PR #{result.pr_num})" if result.pr_num else " (as a new PR)")
        )
        for path in result.files:
            print(f"  {path}")
        print(result.description)
    elif not result.files:
        print(f"nothing to publish: {result.repo} already holds these results")
    elif result.pr_num is not None:
        print(f"published {len(result.files)} file(s) to {result.repo} PR #{result.pr_num}: {result.pr_url or ''}")
    else:
        print(f"published {len(result.files)} file(s) to {result.repo}")
    return 1 if report.problems else 0


# -- demo -----------------------------------------------------------------------------------------------


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("demo-out"), metavar="DIR", help="default: %(default)s")
    p.add_argument("--work", type=Path, default=None, metavar="DIR", help="keep models and records here")


@command(
    "demo",
    help="Run the whole flow offline through the embedded local hub, with tiny models, into DIR.",
    example="trncat demo --out demo-out",
    arguments=_demo_args,
)
def _demo(args: argparse.Namespace) -> int:
    from pipeline.demo import run_demo

    summary = run_demo(out=args.out, work=args.work, echo=lambda line: print(line, file=sys.stderr))
    print(summary.table())
    return 0 if summary.ok else 1


# -- plan -----------------------------------------------------------------------------------------------


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="Hub model id or a local folder with config.json")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="default: %(default)s")
    p.add_argument("--instance", default="trn2.48xlarge", help="default: %(default)s")
    p.add_argument("--lnc", type=int, choices=[1, 2], default=None, help="logical core config (trn2 default 2)")
    p.add_argument("--revision", default=None)
    p.add_argument("--task", choices=TASKS, default="text-generation", help="workload to size the KV cache for")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--input-tokens", type=int, default=None)
    p.add_argument("--output-tokens", type=int, default=None)
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
    from pipeline.workload import default_workload

    workload = default_workload(args.task)
    changes = {
        k: v
        for k, v in (
            ("batch_size", args.batch_size),
            ("input_tokens", args.input_tokens),
            ("output_tokens", args.output_tokens),
        )
        if v is not None
    }
    workload = dataclasses.replace(workload, **changes)
    local = Path(args.model).is_dir()
    plan = plan_model(
        Path(args.model) if local else args.model,
        revision=args.revision,
        dtype=args.dtype,
        instance=args.instance,
        lnc=args.lnc,
        workload=workload,
        hub=None if local else _hub(),
    )
    print(json.dumps(plan.to_dict(), indent=2) if args.json else format_plan(plan))
    return 0


# -- localhub -------------------------------------------------------------------------------------------


def _localhub_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["serve"])
    p.add_argument("--root", type=Path, required=True, metavar="DIR", help="where repos are stored")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")


@command(
    "localhub",
    help="Serve the embedded Hub-compatible server (for offline runs and tests).",
    example="trncat localhub serve --root /tmp/hub --port 8999",
    arguments=_localhub_args,
)
def _localhub(args: argparse.Namespace) -> int:
    from pipeline.localhub import serve

    serve(
        root=args.root,
        host=args.host,
        port=args.port,
        ready=lambda url: print(f"local hub serving at {url}", flush=True),
    )
    return 0


# -- main -----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trncat",
        description="Which Hugging Face models run unmodified on AWS Trainium2, and how well.",
        epilog="Run 'trncat COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"trncat {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug logs")
    parser.add_argument("-q", "--quiet", action="store_true", help="show warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text, example, add_arguments, handler in _COMMANDS:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        add_arguments(p)
        p.set_defaults(handler=handler)
    return parser


def commands() -> dict[str, str]:
    """name -> example, for the documentation test."""
    return {name: example for name, _, example, _, _ in _COMMANDS}


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (tests and embedding callers swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _configure_logging(*, verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s"))
    root = logging.getLogger("pipeline")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    from pipeline import constants

    if constants.IS_CI:  # progress bars only clutter CI logs
        from pipeline.hub import quiet_progress_bars

        quiet_progress_bars()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(verbose=args.verbose, quiet=args.quiet)
    try:
        return int(args.handler(args))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `trncat plan ... --json | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
