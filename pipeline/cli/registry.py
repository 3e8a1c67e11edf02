"""How commands register: ``@command`` adds a subcommand; the helpers every command shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.hub import Hub

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One ``trncat`` subcommand: its name, one-line help, an example, its options and its handler."""

    name: str
    help: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Handler


COMMANDS: list[Command] = []


def command(
    name: str, *, help: str, example: str, arguments: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register ``trncat NAME``: ``arguments`` adds its options; the decorated function runs it."""

    def register(handler: Handler) -> Handler:
        COMMANDS.append(Command(name, help, example, arguments, handler))
        return handler

    return register


def make_hub() -> Hub:
    """The one Hub client of a command, on ``HF_ENDPOINT`` with ``HF_TOKEN`` (huggingface_hub's lookup without)."""
    from pipeline import constants
    from pipeline.hub import Hub

    return Hub(endpoint=constants.HF_ENDPOINT, token=constants.HF_TOKEN)


def valid_records(paths: Sequence[str | Path], *, label: str) -> tuple[Any, list[dict[str, Any]]]:
    """Validate the record files at ``paths``; print each problem as ``<label>: <problem>`` on stderr.

    Returns:
        The validation report and the valid records.
    """
    from pipeline.records import validate_paths

    report = validate_paths(paths)
    for problem in report.problems:
        print(f"{label}: {problem}", file=sys.stderr)
    return report, [record for _, record in report.records]


def say_set_aside(items: Iterable[Any]) -> None:
    """Print each thing set aside as ``set aside: <it>`` on stderr (a (file, field, message) triple joined by ': ')."""
    for item in items:
        print(f"set aside: {': '.join(map(str, item)) if isinstance(item, tuple) else item}", file=sys.stderr)


def add_publish_target_args(p: argparse.ArgumentParser) -> None:
    """``--repo`` or ``--to-folder``, and ``--dry-run`` (publish, warm-publish): where a publish goes."""
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--repo", metavar="ORG/NAME", help="the Hub dataset repo (endpoint from HF_ENDPOINT)")
    target.add_argument("--to-folder", type=Path, metavar="DIR", help="offline target: a local dataset folder")
    p.add_argument("--dry-run", action="store_true", help="print what would be committed; change nothing")


def add_price_args(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--prices FILE`` and ``--price-option`` (build, publish, queue --estimate): the price table and option."""
    from pipeline.types import PRICE_KINDS

    p.add_argument(
        "--prices",
        "--instances",
        dest="prices",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"instance prices for {what}, each with its source and date (default: runners/instances.yaml)",
    )
    p.add_argument(
        "--price-option",
        choices=PRICE_KINDS,
        default="on_demand",
        help="the purchase option prices are taken at (default: %(default)s)",
    )


def pricing_of(args: argparse.Namespace) -> Any:
    """The :class:`pipeline.prices.Pricing` of ``--prices`` and ``--price-option``."""
    from pipeline.prices import load_pricing

    return load_pricing(args.prices, option=args.price_option)
