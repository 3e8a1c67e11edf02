"""The ``trncat`` command: thin commands that parse, call one stage, print, and map errors to exit codes.

Commands live in :mod:`pipeline.cli.stages` (discover, queue, plan, bench), :mod:`pipeline.cli.data` (validate,
build, collect, publish, page, demo), :mod:`pipeline.cli.check` (check), :mod:`pipeline.cli.tools` (doctor,
localhub), :mod:`pipeline.cli.release` (release-watch, diff) and :mod:`pipeline.cli.warm` (warm-queue, warm-check,
warm-publish), and register
with :func:`pipeline.cli.registry.command`.
Every command's help ends with an example; ``tests/cli/test_cli.py`` checks each is documented in the README.

:mod:`pipeline.cli.demo` runs the whole flow offline. May import: every package (the CLI is the edge, where the
collaborators are built). Imported by: ``pipeline.__main__`` and the ``trncat`` console script only.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from pipeline import __version__
from pipeline.cli import check, data, release, serving, stages, tools, warm  # noqa: F401  (importing them registers their commands)
from pipeline.cli.registry import COMMANDS, Parser
from pipeline.errors import PipelineError

logger = logging.getLogger("pipeline")

# -- main -----------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="trncat",
        description="Which Hugging Face models run unmodified on AWS Trainium2, and how well.",
        epilog="Run 'trncat COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"trncat {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug logs")
    parser.add_argument("-q", "--quiet", action="store_true", help="show warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in COMMANDS:
        p = sub.add_parser(
            entry.name,
            help=entry.help,
            description=entry.help,
            epilog=f"example:\n  {entry.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        entry.arguments(p)
        p.set_defaults(handler=entry.handler)
    return parser


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (tests and embedding callers swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


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
    try:
        args = parser.parse_args(argv)  # every argument checked here, before any work (pipeline.cli.registry)
        _configure_logging(verbose=args.verbose, quiet=args.quiet)
        return int(args.handler(args))
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RecursionError:  # a JSON or YAML file nested deeper than its reader recurses
        print("error: an input file is nested too deeply to read (a JSON or YAML file of thousands of levels)",
              file=sys.stderr)  # fmt: skip
        return 2
    except OSError as exc:  # what the arguments' checks cannot see ahead: a disk that fills, a file removed meanwhile
        if isinstance(exc, BrokenPipeError):  # e.g. `trncat plan ... --json | head`
            sys.stderr.close()
            return 0
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
