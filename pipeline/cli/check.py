"""``trncat check``: does a model run on Trainium2? The catalog's answer, for a model it may not have measured."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.cli.registry import command, make_hub
from pipeline.types import TASKS


def _check_args(p: argparse.ArgumentParser) -> None:
    from pipeline import constants
    from pipeline.check import CACHE_REPO

    p.add_argument("model", metavar="MODEL_ID", help="a Hub model id (a fine-tune, adapter, quantization, ...)")
    p.add_argument("--revision", default=None, metavar="REV", help="the model's revision (default: main's head)")
    p.add_argument("--task", choices=TASKS, default=None, help="default: from its library and pipeline tag")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset", metavar="REPO_ID", default=None,
        help=f"the Hub dataset whose merged main is read (default: TRNCAT_DATASET, else {constants.TRNCAT_DATASET})",
    )  # fmt: skip
    source.add_argument("--dataset-dir", type=Path, metavar="DIR", help="a local dataset folder instead")
    p.add_argument("--instance", default="trn2.48xlarge", metavar="NAME", help="the instance the plan sizes for")
    p.add_argument("--cache-repo", default=CACHE_REPO, metavar="ORG/NAME", help="optimum-neuron's cache repo")
    p.add_argument("--no-cache", action="store_true", help="do not look for precompiled configurations")
    p.add_argument("--json", action="store_true", help="print the answer as one JSON object")


@command(
    "check",
    help="Does a model run on Trainium2? Its own result, else its base model's, else its architecture's.",
    example="trncat check someone/llama-3.1-8b-finetune --json",
    arguments=_check_args,
)
def _check(args: argparse.Namespace) -> int:
    from pipeline import constants
    from pipeline.check import check_model

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
    print(json.dumps(answer.to_dict(), indent=2) if args.json else answer.text())
    return 0
