"""How commands register: ``@command`` adds a subcommand; the helpers every command shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
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
