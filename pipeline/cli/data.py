"""Commands over records and the dataset: validate, build, collect, publish, page, demo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.cli.registry import (
    add_price_args,
    add_publish_target_args,
    command,
    in_file,
    in_folder,
    make_hub,
    out_folder,
    pricing_of,
    say_set_aside,
    valid_records,
)
from pipeline.errors import ConfigError

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
    counts = {"files": report.files, "valid": len(report.records), "invalid": len(report.bad_files)}
    if args.json:
        print(json.dumps({**counts, "problems": [p.to_dict() for p in report.problems]}, indent=2))
    else:
        for problem in report.problems:
            print(problem)
        print("{files} file(s): {valid} valid, {invalid} invalid".format(**counts), file=sys.stderr)
    if report.files == 0:
        print("error: no record files found", file=sys.stderr)
        return 1
    return 0 if report.ok else 1


# -- build ----------------------------------------------------------------------------------------------


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULT", help="record files or folders")
    p.add_argument(
        "--out", required=True, type=out_folder, metavar="DIR", help="the dataset folder (created if needed)"
    )
    add_price_args(p, what="the new rows' price and cost columns")


@command(
    "build",
    help="Add result records to a dataset folder: Parquet, latest view, scripts, card.",
    example="trncat build results/ --out dataset/",
    arguments=_build_args,
)
def _build(args: argparse.Namespace) -> int:
    from pipeline.dataset import build

    report, records = valid_records(args.results, label="skipped")
    if not records:
        print("error: no valid record to build from", file=sys.stderr)
        return 1
    summary = build(records, args.out, pricing=pricing_of(args))
    say_set_aside(summary.set_aside)
    if summary.changed:
        print(
            f"added {summary.added} row(s) to {args.out} ({summary.results_file}); "
            f"{len(summary.scripts)} script folder(s) updated"
        )
    else:
        print(f"nothing new: {summary.duplicates} record(s) already in {args.out}")
    return 1 if report.problems or summary.set_aside else 0


# -- collect --------------------------------------------------------------------------------------------


def _collect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("downloaded", type=in_folder, metavar="DIR", help="one folder per downloaded record-* artifact")
    p.add_argument(
        "--queue",
        required=True,
        type=in_file,
        nargs="+",
        metavar="FILE",
        help="the run's queue.json (and the GPU runners' queue-gpu.json)",
    )
    p.add_argument("--run-id", required=True, metavar="ID", help="the run whose records these must be")
    p.add_argument("--out", required=True, type=out_folder, metavar="DIR", help="where the accepted records go")


@command(
    "collect",
    help="Accept only the benchmark artifacts a run's queues asked for (model, revision, task, device, cores, run id).",
    example="trncat collect artifacts/downloaded --queue discovery/queue.json --run-id 123 --out artifacts/records",
    arguments=_collect_args,
)
def _collect(args: argparse.Namespace) -> int:
    from pipeline.records import collect_records

    collected = collect_records(args.downloaded, queue_file=args.queue, run_id=args.run_id, out=args.out)
    say_set_aside(collected.problems)
    print(f"{len(collected.accepted)} record(s) accepted, {len(collected.problems)} set aside")
    return 1 if collected.problems else 0


# -- publish --------------------------------------------------------------------------------------------


def _publish_args(p: argparse.ArgumentParser) -> None:
    from pipeline import constants

    p.add_argument("results", nargs="+", metavar="RESULT", help="record files or folders (validated again here)")
    add_publish_target_args(p)
    p.add_argument(
        "--overlay", type=in_folder, metavar="DIR", help="discovery outputs to include (data/rankings, exclusions)"
    )
    p.add_argument(
        "--compiled-repo",
        default=constants.TRNCAT_COMPILED_REPO,
        metavar="ORG/NAME",
        help="the Hub model repo the compiled-cache bundles beside CI neuron passes go to (with --repo; default "
        "%(default)s)",
    )
    p.add_argument(
        "--release-diff",
        nargs=2,
        type=in_file,
        metavar=("OLD", "NEW"),
        help="two toolchain files (before and after a Neuron bump): when records measured on NEW's pins come, also "
        "write data/releases/<old>--<new>.parquet (trncat diff --toolchain OLD NEW --write) into the same commit",
    )
    add_price_args(p, what="the new rows' price and cost columns")


@command(
    "publish",
    help="Publish result records to the Hub dataset as one pull request (or into a local folder).",
    example="trncat publish results/ --repo trncat/results --overlay discovery/ --dry-run",
    arguments=_publish_args,
)
def _publish(args: argparse.Namespace) -> int:
    from pipeline.publish import drop_named_bundles, provenance_problems, publish, publish_bundles, publish_to_folder

    report, _ = valid_records(args.results, label="set aside")
    misplaced = provenance_problems(report.records)
    say_set_aside(misplaced)
    report.problems.extend(misplaced)
    bad = {p.file for p in misplaced}
    kept = [(name, record) for name, record in report.records if name not in bad]
    records = [record for _, record in kept]
    if not records and not args.overlay:
        print("error: no valid record to publish", file=sys.stderr)
        return 1
    pricing = pricing_of(args)
    derived = None
    if args.release_diff:
        from pipeline.cli.release import release_diff_derived

        old_file, new_file = args.release_diff
        derived, said = release_diff_derived(old_file, new_file, records)
        print(said)
    from pipeline.cli.matrix import matrix_derived

    hub = None if args.to_folder else make_hub()
    derived = matrix_derived(hub, also=derived)  # every publish rewrites the stage matrix
    if args.to_folder:
        from pipeline.backends.neuron import bundle_beside

        if shipped := sum(1 for name, _ in report.records if bundle_beside(Path(name)).is_file()):
            print(f"note: {shipped} compiled-cache bundle(s) left out: only a Hub publish (--repo) uploads them",
                  file=sys.stderr)  # fmt: skip
        say_set_aside(drop_named_bundles(kept))
        result = publish_to_folder(records, out=args.to_folder, overlay=args.overlay, pricing=pricing, derived=derived)
    else:
        assert hub is not None
        # The bundles first: each record then names the commit that holds its bundle, in the PR reviewed below.
        bundles = publish_bundles(kept, hub=hub, repo=args.compiled_repo, dry_run=args.dry_run)
        say_set_aside(bundles.set_aside)  # the record goes on without its bundle
        if bundles.uploaded or bundles.reused:
            verb = "would upload" if args.dry_run else "uploaded"
            print(f"compiled caches: {verb} {len(bundles.uploaded)} to {args.compiled_repo}, "
                  f"{len(bundles.reused)} already there")  # fmt: skip
        result = publish(
            records,
            repo=args.repo,
            hub=hub,
            overlay=args.overlay,
            dry_run=args.dry_run,
            invalid=len(report.bad_files),
            pricing=pricing,
            derived=derived,
        )
    say_set_aside(result.set_aside)  # discovery's rows: reported, and the rest was published (no failure)
    say_set_aside(result.summary.set_aside)  # validated above: only a validator gap lands here
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


# -- page -----------------------------------------------------------------------------------------------


def _page_args(p: argparse.ArgumentParser) -> None:
    from pipeline import constants

    p.add_argument("--dataset-repo", required=True, metavar="ORG/NAME", help="the Hub dataset, built from its main")
    p.add_argument("--from-folder", type=Path, metavar="DIR", help="offline: build from this local copy of it instead")
    p.add_argument(
        "--space", default=constants.TRNCAT_SPACE, metavar="ORG/NAME", help="the static Space (default: %(default)s)"
    )
    p.add_argument("--site-url", default="", metavar="URL", help="the page's address (default: the Space's page)")
    p.add_argument(
        "--out",
        type=out_folder,
        metavar="DIR",
        help="also keep the built tree here (--from-folder: required); a script the Space already holds as the "
        "dataset has it is not fetched, so not in it",
    )
    p.add_argument("--dry-run", action="store_true", help="build and compare with the Space; commit nothing")


@command(
    "page",
    help="Rebuild the catalog Space (index.html, feed.xml, scripts) from the dataset's main branch.",
    example="trncat page --dataset-repo trncat/results --space trncat/catalog --dry-run",
    arguments=_page_args,
)
def _page(args: argparse.Namespace) -> int:
    from pipeline.ids import validate_model_id
    from pipeline.space import SiteNames, publish_space, write_site

    if args.from_folder:
        if args.out is None:
            raise ConfigError("--from-folder needs --out DIR")
        names = SiteNames(
            dataset_repo=validate_model_id(args.dataset_repo),
            space_repo=validate_model_id(args.space),
            site_url=args.site_url,
        )
        from pipeline.dataset import require_dataset

        write_site(require_dataset(args.from_folder), args.out, names=names)
        print(f"wrote the Space tree of {args.from_folder} into {args.out}")
        return 0
    result = publish_space(
        hub=make_hub(),
        dataset_repo=args.dataset_repo,
        space_repo=args.space,
        site_url=args.site_url,
        dry_run=args.dry_run,
        out=args.out,
    )
    changed = len(result.changed) + len(result.deleted)
    where = f"{result.space} from {args.dataset_repo}@{result.dataset_sha[:12]}"
    if result.dry_run:
        print(f"dry run: would change {changed} file(s) of {where}")
        for path in result.changed:
            print(f"  {path}")
        for path in result.deleted:
            print(f"  (delete) {path}")
    elif result.published:
        print(f"updated {changed} file(s) of {where}: commit {result.commit}")
    else:
        print(f"the page is up to date: {where}")
    return 0


# -- demo -----------------------------------------------------------------------------------------------


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=out_folder, default=Path("demo-out"), metavar="DIR", help="default: %(default)s")
    p.add_argument("--work", type=out_folder, metavar="DIR", help="keep models and records here")


@command(
    "demo",
    help="Run the whole flow offline through the embedded local hub, with tiny models, into DIR.",
    example="trncat demo --out demo-out",
    arguments=_demo_args,
)
def _demo(args: argparse.Namespace) -> int:
    from pipeline.cli.demo import run_demo

    summary = run_demo(out=args.out, work=args.work, echo=lambda line: print(line, file=sys.stderr))
    print(summary.table())
    return 0 if summary.ok else 1
