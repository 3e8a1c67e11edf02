"""Writing discovery's outputs into a dataset folder: rankings snapshots and the exclusions."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import fsatomic
from pipeline.dataset.layout import EXCLUSIONS_FILE, parquet_bytes, rankings_path

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
