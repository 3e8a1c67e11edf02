"""Writing discovery's outputs into a dataset folder (rankings snapshots, the exclusions), and checking them."""

from __future__ import annotations

import datetime as dt
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
EXCLUSIONS_SCHEMA = pa.schema(
    [("model_id", pa.string()), ("task", pa.string()), ("reason", pa.string()), ("kind", pa.string())]
)


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
    fsatomic.write_bytes(path, parquet_bytes(pa.Table.from_pylist(list(rows), schema=SNAPSHOT_SCHEMA)))
    logger.info("wrote %s (%d rows)", path, len(rows))
    return path


def write_exclusions(rows: Sequence[dict[str, Any]], root: Path) -> Path:
    """Replace ``data/exclusions.parquet`` under the dataset folder ``root`` (atomically).

    Args:
        rows: ``model_id, task, reason, kind`` rows (the file is replaced, so give every exclusion of the run).
        root: The dataset folder.

    Returns:
        The file written.
    """
    path = Path(root) / EXCLUSIONS_FILE
    fsatomic.write_bytes(path, parquet_bytes(pa.Table.from_pylist(list(rows), schema=EXCLUSIONS_SCHEMA)))
    logger.info("wrote %s (%d rows)", path, len(rows))
    return path


#: An overlay file larger than this is refused (a snapshot is a few hundred rows; the exclusions, a few thousand).
MAX_OVERLAY_BYTES = 16 * 1024 * 1024
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


def overlay_problems(files: dict[str, Path]) -> list[str]:
    """Why the overlay files (path in repo -> file, :func:`pipeline.dataset.overlay_files`) must not be published.

    An artifact is untrusted input: each rankings snapshot is named as :func:`write_rankings` names it and
    holds that date, task and view with ranks >= 1 and valid model ids; the exclusions hold short plain text.
    Both have exactly the schema discovery writes.
    """
    problems: list[str] = []
    for name, path in sorted(files.items()):
        if name == EXCLUSIONS_FILE:
            table, problem = _table(path, EXCLUSIONS_SCHEMA)
            if problem or table is None:
                problems.append(f"{name}: {problem}")
                continue
            for index, row in enumerate(table.to_pylist()):
                checks = {
                    "model_id": _text_problem(row["model_id"], 256),
                    "reason": _text_problem(row["reason"], 1000),
                    "task": None if row["task"] is None or row["task"] in TASKS else f"unknown task {row['task']!r}",
                    "kind": None if isinstance(row["kind"], str) and _KIND.fullmatch(row["kind"]) else "not a kind",
                }
                problems.extend(f"{name}: row {index}: {k}: {v}" for k, v in checks.items() if v)
            continue
        parsed = parse_rankings_name(name)
        if parsed is None or not name.startswith(f"{RANKINGS_DIR}/") or parsed[1] not in TASKS:
            problems.append(f"{name}: not a rankings snapshot name (<YYYY-MM-DD>-<task>-<view>.parquet)")
            continue
        table, problem = _table(path, SNAPSHOT_SCHEMA)
        if problem or table is None:
            problems.append(f"{name}: {problem}")
            continue
        date, task, view = parsed
        for index, row in enumerate(table.to_pylist()):
            day = row["date"].isoformat() if hasattr(row["date"], "isoformat") else row["date"]
            if (day, row["task"], row["view"]) != (date, task, view):
                problems.append(f"{name}: row {index}: date, task and view differ from the file name")
            if not isinstance(row["rank"], int) or row["rank"] < 1:
                problems.append(f"{name}: row {index}: rank must be >= 1")
            if (bad := model_id_problem(row["model_id"])) is not None:
                problems.append(f"{name}: row {index}: model_id: {bad}")
    return problems
