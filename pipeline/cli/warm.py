"""The second-machine warm check's commands: warm-queue (which bundles to check), warm-check (run one on this
runner) and warm-publish (the checks a run made, validated, into the dataset as one PR)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.cli.registry import (
    add_publish_target_args,
    command,
    count,
    dataset_folder,
    in_file,
    in_folder,
    make_hub,
    model_argument,
    out_file,
    out_folder,
    say_set_aside,
    sha256,
)
from pipeline.errors import ConfigError

#: What warm-queue writes into its ``--out`` folder: the matrix, and one record per entry under records/.
QUEUE_FILE = "warm-queue.json"

# -- warm-queue -----------------------------------------------------------------------------------------


def _warm_queue_args(p: argparse.ArgumentParser) -> None:
    from pipeline.queue import MAX_WARM_ENTRIES

    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset-repo", metavar="ORG/NAME", help="the Hub dataset, read from its main (no token)")
    source.add_argument("--dataset", type=dataset_folder, metavar="DIR", help="offline: a local dataset folder instead")
    said = f"writes DIR/{QUEUE_FILE} (the matrix) and DIR/records/<artifact>.json (their records)"
    p.add_argument("--out", required=True, type=out_folder, metavar="DIR", help=said)
    p.add_argument("--limit", type=count(1, MAX_WARM_ENTRIES), default=64, metavar="N",
                   help=f"at most N checks this run (at most {MAX_WARM_ENTRIES}; default %(default)s)")  # fmt: skip


@command(
    "warm-queue",
    help="Pick the published compiled-cache bundles a second trn2 runner checks next (CI Trainium2 passes whose "
    "bundle no real machine has verified yet): a matrix and each entry's record.",
    example="trncat warm-queue --dataset-repo trncat/results --out warm-queue/",
    arguments=_warm_queue_args,
)
def _warm_queue(args: argparse.Namespace) -> int:
    import tempfile

    from pipeline import fsatomic
    from pipeline.dataset import read_latest, read_warm_checks, require_dataset, warm_queue_paths
    from pipeline.queue import fetch_results, warm_queue

    with tempfile.TemporaryDirectory(prefix="trncat-warm-queue-") as tmp:
        if args.dataset_repo:
            root = fetch_results(make_hub(), args.dataset_repo, into=Path(tmp) / "dataset", pick=warm_queue_paths)
            root.mkdir(exist_ok=True)
        else:
            root = require_dataset(args.dataset)
        queue = warm_queue(read_latest(root), read_warm_checks(root), limit=args.limit)
    for artifact, record in queue.records.items():
        fsatomic.write_text(args.out / "records" / f"{artifact}.json", json.dumps(record, indent=1, default=str) + "\n")
    fsatomic.write_text(args.out / QUEUE_FILE, json.dumps(queue.to_dict(), indent=2) + "\n")
    print(f"{len(queue.entries)} bundle(s) to check; {len(queue.skipped)} row(s) skipped", file=sys.stderr)
    return 0


# -- warm-check -----------------------------------------------------------------------------------------


def _warm_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("record", type=in_file, metavar="RECORD", help="the published row's record (it names its bundle)")
    p.add_argument(
        "--model",
        required=True,
        type=model_argument,
        metavar="MODEL",
        help="the model to load: its folder or its Hub id",
    )
    p.add_argument(
        "--sha256", type=sha256, metavar="HEX", help="refuse unless the record's bundle has this digest (the queue's)"
    )
    p.add_argument("--out", type=out_file, metavar="FILE", help="write the check as JSON")


@command(
    "warm-check",
    help="Run a published row's run.py --require-warm with empty caches on this runner (another than the one that "
    "made the bundle): hits, misses and the warm start's seconds; exit 0 only when every graph hit.",
    example="trncat warm-check results/acme--tiny-llama.json --model ./tiny-llama --out warm.json",
    arguments=_warm_check_args,
)
def _warm_check(args: argparse.Namespace) -> int:
    from pipeline import constants, fsatomic
    from pipeline.backends import backend_class, this_machine
    from pipeline.publish import warm_check
    from pipeline.records import validate_paths

    report = validate_paths([args.record])
    records = [record for _, record in report.records]
    if len(records) != 1 or not records[0].get("compiled_cache"):
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        needed = f"{args.record}: one valid record that names its compiled-cache bundle is needed"
        raise ConfigError(f"{report.problems[0]}{more}" if report.problems else needed)
    record = records[0]
    if args.sha256 is not None and record["compiled_cache"].get("sha256") != args.sha256:
        raise ConfigError(f"{args.record}: its bundle is not {args.sha256[:64]!r}")
    # Runner names are per job (a JIT runner is <host>-<label>-<index>-<epoch>): the machines are compared.
    made_on, here = (record.get("run") or {}).get("machine"), this_machine()
    if not made_on:
        raise ConfigError(f"{args.record}: it names no machine that made its bundle: another one cannot be told apart")
    if made_on == here:
        raise ConfigError(f"this machine ({here}) made this bundle: the check runs on another machine")
    # validate refuses an emulated record, so what is checked here is a real row's bundle; the machine may still be
    # the Neuron emulator (its neuron-ls says so), and the check says it.
    inventory = backend_class("neuron")().inventory  # type: ignore[attr-defined]
    emulated = bool(inventory is not None and inventory.emulated)
    checked = warm_check(record, model=args.model, runner=constants.RUNNER_NAME, machine=here, emulated=emulated)
    if args.out:
        fsatomic.write_text(args.out, json.dumps(checked.to_dict(), indent=2) + "\n")
    print(f"{checked.model_id}: {checked.status}: {checked.message}" + (" (emulated)" if emulated else ""))
    return 0 if checked.verified else 1


# -- warm-publish ---------------------------------------------------------------------------------------


def _warm_publish_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("downloaded", type=in_folder, metavar="DIR", help="one folder per downloaded warm-* artifact")
    p.add_argument("--queue", required=True, type=in_file, metavar="FILE", help=f"the run's {QUEUE_FILE}")
    add_publish_target_args(p)


@command(
    "warm-publish",
    help="Validate the warm checks a warm-check run's queue asked for and merge them into the dataset's "
    "data/warm_checks.parquet, their models' stage-matrix rows refreshed, as one pull request (or into a folder).",
    example="trncat warm-publish artifacts/warm --queue warm-queue/warm-queue.json --repo trncat/results --dry-run",
    arguments=_warm_publish_args,
)
def _warm_publish(args: argparse.Namespace) -> int:
    from pipeline.cli.matrix import matrix_derived
    from pipeline.publish import collect_warm_checks, publish, publish_to_folder, warm_derived

    collected = collect_warm_checks(args.downloaded, queue_file=args.queue)
    say_set_aside(collected.problems)
    if not collected.accepted:
        print("error: no valid warm check to publish", file=sys.stderr)
        return 1
    hub = None if args.to_folder else make_hub()
    derived = matrix_derived(hub, also=warm_derived(collected.accepted))  # the checked models' matrix rows too
    if args.to_folder:
        args.to_folder.mkdir(parents=True, exist_ok=True)
        result = publish_to_folder([], out=args.to_folder, derived=derived)
    else:
        assert hub is not None
        result = publish([], repo=args.repo, hub=hub, dry_run=args.dry_run, derived=derived)
    verb = "would commit" if result.dry_run else "nothing to publish:" if not result.files else "published"
    where = f" (PR #{result.pr_num})" if result.pr_num is not None else ""
    print(f"{len(collected.accepted)} warm check(s); {verb} {len(result.files)} file(s) to {result.repo}{where}")
    return 1 if collected.problems else 0
