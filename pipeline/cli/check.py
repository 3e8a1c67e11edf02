"""``trncat check``: does a model run on Trainium2? The catalog's answer, for a model it may not have measured."""

from __future__ import annotations

import argparse
import json

from pipeline.cli.registry import command, dataset_folder, hub_id, make_hub, out_file
from pipeline.types import TASKS


def _check_args(p: argparse.ArgumentParser) -> None:
    from pipeline import constants
    from pipeline.check import CACHE_REPO

    p.add_argument(
        "model", type=hub_id, metavar="MODEL_ID", help="a Hub model id (a fine-tune, adapter, quantization, ...)"
    )
    p.add_argument("--revision", metavar="REV", help="the model's revision (default: main's head)")
    p.add_argument("--task", choices=TASKS, help="default: from its library and pipeline tag")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset", metavar="REPO_ID",
        help=f"the Hub dataset whose merged main is read (default: TRNCAT_DATASET, else {constants.TRNCAT_DATASET})",
    )  # fmt: skip
    source.add_argument("--dataset-dir", type=dataset_folder, metavar="DIR", help="a local dataset folder instead")
    p.add_argument("--instance", default="trn2.48xlarge", metavar="NAME", help="the instance the plan sizes for")
    p.add_argument("--cache-repo", default=CACHE_REPO, metavar="ORG/NAME", help="optimum-neuron's cache repo")
    p.add_argument("--no-cache", action="store_true", help="do not look for precompiled configurations")
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object (run.py included)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--run-py", type=out_file, metavar="FILE", help="write the run.py to try into FILE")
    shown.add_argument("--show-run-py", action="store_true", help="print the run.py to try after the answer")


@command(
    "check",
    help="Does a model run on Trainium2? Its own result, else its base model's, else its architecture's.",
    example="trncat check someone/llama-3.1-8b-finetune --json",
    arguments=_check_args,
)
def _check(args: argparse.Namespace) -> int:
    import sys

    from pipeline import constants, fsatomic
    from pipeline.check import NOT_FOUND_EXIT, check_model

    answer = check_model(
        args.model,
        hub=make_hub(),
        revision=args.revision,
        task=args.task,
        dataset_repo=None if args.dataset_dir else (args.dataset or constants.TRNCAT_DATASET),
        dataset_dir=args.dataset_dir,
        instance=args.instance,
        cache_repo=None if args.no_cache else args.cache_repo,
    )
    written = None
    if args.run_py is not None and answer.run_py is not None:
        fsatomic.write_bytes(args.run_py, answer.run_py.encode("utf-8"))
        written = str(args.run_py)
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2))
    else:
        print(answer.text(show_run_py=args.show_run_py, run_py_file=written))
    if answer.missing:  # an answer on a model the Hub does not have is no answer: its own exit code
        print(f"error: {args.model}: {answer.missing}", file=sys.stderr)
        return NOT_FOUND_EXIT
    return 0
