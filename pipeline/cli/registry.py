"""How commands register: ``@command`` adds a subcommand; the helpers every command shares, and the one layer
that checks every argument before any work (argparse ``type=`` functions: counts in range, a file where a file is
expected, a folder that exists, an output path that can be written)."""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

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


# -- the arguments' checks ------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are a :class:`ConfigError`: one line (``error: trncat serve: argument
    --chips: ...``), exit 2, as every other refused input."""

    def error(self, message: str) -> NoReturn:
        from pipeline.errors import ConfigError

        raise ConfigError(f"{self.prog}: {' '.join(message.split())[:400]}")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


def count(low: int = 1, high: int = 10**6) -> Callable[[str], int]:
    """A whole number from ``low`` to ``high`` (never a 5,000-digit one: it is refused before ``int`` reads it)."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?\d{1,19}", text.strip()) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{_shown(text)}: give a whole number from {low} to {high}")
        return int(text)

    return parse


def number(low: float = 0.0, high: float = math.inf, *, above: bool = True) -> Callable[[str], float]:
    """A finite number above ``low`` (or from it, ``above=False``) up to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value > high or (value <= low if above else value < low):
            shown = f"above {low}" if above else f"from {low}"
            raise argparse.ArgumentTypeError(f"{_shown(text)}: give a number {shown}" + (
                f" up to {high}" if math.isfinite(high) else ""))  # fmt: skip
        return value

    return parse


def _existing(text: str, *, folder: bool) -> Path:
    """``text`` as a folder (``folder=True``) or a file that exists."""
    path, kind, other = Path(text), "folder" if folder else "file", "file" if folder else "folder"
    if path.exists() and path.is_dir() != folder:
        raise argparse.ArgumentTypeError(f"{text}: a {other}, not a {kind}")
    if not (path.is_dir() if folder else path.is_file()):
        raise argparse.ArgumentTypeError(f"{text}: no such {kind}")
    return path


#: A file that exists, and a folder that exists.
in_file = functools.partial(_existing, folder=False)
in_folder = functools.partial(_existing, folder=True)


def in_path(text: str) -> Path:
    """A file or a folder that exists."""
    if not Path(text).exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return Path(text)


def _writable(text: str, *, folder: bool) -> Path:
    """``text`` as a path a file (``folder=False``) or a folder can be written at: not one of the other kind, no
    file among the folders above it, the nearest that exists writable."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    path = Path(text)
    if path.exists() and path.is_dir() != folder:
        raise argparse.ArgumentTypeError(f"{text}: a {'file' if folder else 'folder'}, not a "
                                         f"{'folder' if folder else 'file'}")  # fmt: skip
    above = path.absolute().parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {above} is a file, not a folder")
    if not os.access(path if path.exists() else above, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: {path if path.exists() else above} is not writable")
    return path


#: A path a file can be written at (checked before the work that makes it, never after), and one a folder can be made
#: or written in.
out_file = functools.partial(_writable, folder=False)
out_folder = functools.partial(_writable, folder=True)


def dataset_folder(text: str) -> Path:
    """A dataset folder that holds rows (:func:`pipeline.dataset.require_dataset`)."""
    from pipeline.dataset import require_dataset
    from pipeline.errors import DatasetError

    try:
        return require_dataset(Path(text))
    except DatasetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def hub_id(text: str) -> str:
    """A Hub repo id, ``org/name``."""
    from pipeline.ids import model_id_problem

    if problem := model_id_problem(text):
        raise argparse.ArgumentTypeError(f"invalid model id: {problem}")
    return text


def sha256(text: str) -> str:
    """64 lowercase hex digits."""
    if not re.fullmatch(r"[0-9a-f]{64}", text):
        raise argparse.ArgumentTypeError(f"a sha256 is 64 lowercase hex digits, not {_shown(text)}")
    return text


def model_argument(text: str) -> str:
    """``text`` when it is a local folder or could be a Hub id; a path to nothing is said to be one.

    ``./x``, ``../x``, ``/x``, ``~/x`` and anything that exists are paths, never Hub ids: a missing one is a
    missing folder, not a bad model id.
    """
    path = Path(text).expanduser()
    if path.is_dir():
        return text
    if path.exists():
        raise argparse.ArgumentTypeError(f"{text}: a file, not a model folder (a folder with config.json, or a Hub "
                                         "id org/name)")  # fmt: skip
    if text.startswith(("./", "../", "/", "~")) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text}: no such folder (a local model is a folder with config.json)")
    return text


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
    target.add_argument("--to-folder", type=out_folder, metavar="DIR", help="offline target: a local dataset folder")
    p.add_argument("--dry-run", action="store_true", help="print what would be committed; change nothing")


def add_price_args(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--prices FILE`` and ``--price-option`` (build, publish, queue --estimate): the price table and option."""
    from pipeline.types import PRICE_KINDS

    p.add_argument(
        "--prices",
        "--instances",
        type=in_file,
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
