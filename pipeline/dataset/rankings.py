"""Writing discovery's outputs into a dataset folder (rankings snapshots, the exclusions), and checking them."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import fsatomic
from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    RANKINGS_DIR,
    parquet_bytes,
    parse_rankings_name,
    rankings_path,
)
from pipeline.ids import model_id_problem
from pipeline.types import TASKS

logger = logging.getLogger(__name__)

SNAPSHOT_SCHEMA = pa.schema(
    [
        ("date", pa.date32()),
        ("task", pa.string()),
        ("view", pa.string()),
        ("rank", pa.int64()),
        ("model_id", pa.string()),
    ]
)
EXCLUSIONS_SCHEMA = pa.schema([(name, pa.string()) for name in ("model_id", "task", "reason", "kind")])


def write_rankings(rows: Sequence[dict[str, Any]], root: Path, *, date: dt.date, task: str, view: str) -> Path:
    """Write ``data/rankings/<YYYY-MM-DD>-<task>-<view>.parquet`` under the dataset folder ``root``.

    The same task and view written again on the same day replace that day's file (atomically).

    Args:
        rows: ``date, task, view, rank, model_id`` rows, best first.
        root: The dataset folder.
        date: The snapshot's date.
        task: Its task.
        view: Its view.

    Returns:
        The file written.
    """
    path = Path(root) / rankings_path(date, task, view)
    rows = [
        {**row, "date": dt.date.fromisoformat(row["date"]) if isinstance(row["date"], str) else row["date"]}
        for row in rows
    ]
    return _write(path, rows, SNAPSHOT_SCHEMA)


def write_exclusions(rows: Sequence[dict[str, Any]], root: Path) -> Path:
    """Replace ``data/exclusions.parquet`` under the dataset folder ``root`` (atomically).

    Args:
        rows: ``model_id, task, reason, kind`` rows (the file is replaced, so give every exclusion of the run).
        root: The dataset folder.

    Returns:
        The file written.
    """
    return _write(Path(root) / EXCLUSIONS_FILE, rows, EXCLUSIONS_SCHEMA)


def _write(path: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema) -> Path:
    fsatomic.write_bytes(path, parquet_bytes(pa.Table.from_pylist(list(rows), schema=schema)))
    logger.info("wrote %s (%d rows)", path, len(rows))
    return path


#: An overlay file larger than this is set aside (a snapshot is a few hundred rows; the exclusions, a few thousand).
MAX_OVERLAY_BYTES = 16 * 1024 * 1024
#: The longest exclusion reason published: one line a reader of the catalog takes in (discovery's own reasons
#: quote Hub text only up to a bound, :mod:`pipeline.discover.candidates`, so they always fit).
MAX_REASON_CHARS = 1000
_KIND = re.compile(r"[a-z0-9_-]{1,40}")


def _text_problem(value: object, limit: int) -> str | None:
    if not isinstance(value, str) or not value or len(value) > limit:
        return f"must be text of 1 to {limit} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "holds a control character"
    return None


def _table(path: Path, schema: pa.Schema) -> tuple[pa.Table | None, str | None]:
    if path.is_symlink() or not path.is_file():
        return None, "not a regular file"
    if path.stat().st_size > MAX_OVERLAY_BYTES:
        return None, f"larger than {MAX_OVERLAY_BYTES} bytes"
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        return None, f"unreadable Parquet: {exc}"
    if not table.schema.remove_metadata().equals(schema):
        return None, f"columns {table.schema.names} do not match the schema {schema.names} (with its types)"
    return table, None


def _exclusion_problems(row: dict[str, Any]) -> dict[str, str | None]:
    return {
        "model_id": _text_problem(row["model_id"], 256),
        "reason": _text_problem(row["reason"], MAX_REASON_CHARS),
        "task": None if row["task"] is None or row["task"] in TASKS else f"unknown task {row['task']!r}",
        "kind": None if isinstance(row["kind"], str) and _KIND.fullmatch(row["kind"]) else "not a kind",
    }


def _snapshot_problems(row: dict[str, Any], date: str, task: str, view: str) -> dict[str, str | None]:
    day = row["date"].isoformat() if hasattr(row["date"], "isoformat") else row["date"]
    same = (day, row["task"], row["view"]) == (date, task, view)
    return {
        "date, task and view": None if same else "differ from the file name",
        "rank": None if isinstance(row["rank"], int) and row["rank"] >= 1 else "must be >= 1",
        "model_id": model_id_problem(row["model_id"]),
    }


def clean_overlay(files: dict[str, Path]) -> tuple[dict[str, bytes], list[str]]:
    """The overlay files (path in repo -> file, :func:`pipeline.dataset.overlay_files`) that may be published,
    each without its bad rows, and what was set aside.

    An artifact is untrusted input: each rankings snapshot is named as :func:`write_rankings` names it and
    holds that date, task and view with ranks >= 1 and valid model ids; the exclusions hold short plain text.
    Both have exactly the schema discovery writes. A file that is no such output is set aside whole; a bad row
    is set aside alone (one odd listing never stops the rest of a publish), each with a message naming it.

    Returns:
        (path in repo -> the bytes to publish, one message per file or row set aside).
    """
    kept: dict[str, bytes] = {}
    problems: list[str] = []
    for name, path in sorted(files.items()):
        if name == EXCLUSIONS_FILE:
            schema, checks = EXCLUSIONS_SCHEMA, _exclusion_problems
        else:
            parsed = parse_rankings_name(name)
            if parsed is None or not name.startswith(f"{RANKINGS_DIR}/") or parsed[1] not in TASKS:
                problems.append(f"{name}: not a rankings snapshot name (<YYYY-MM-DD>-<task>-<view>.parquet)")
                continue
            schema = SNAPSHOT_SCHEMA
            checks = functools.partial(_snapshot_problems, date=parsed[0], task=parsed[1], view=parsed[2])
        table, problem = _table(path, schema)
        if problem or table is None:
            problems.append(f"{name}: {problem}")
            continue
        good = []
        for index, row in enumerate(table.to_pylist()):
            found = [f"{name}: row {index}: {k}: {v}" for k, v in checks(row).items() if v]
            problems.extend(found)
            if not found:
                good.append(row)
        if len(good) == table.num_rows:
            kept[name] = path.read_bytes()
        elif good:
            kept[name] = parquet_bytes(pa.Table.from_pylist(good, schema=schema))
    for problem in problems:
        logger.warning("overlay: set aside: %s", problem)
    return kept, problems
