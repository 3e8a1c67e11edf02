"""Reading the dataset folder: the latest view, results columns, rankings, exclusions and scripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    LATEST_DIR,
    RANKINGS_DIR,
    RESULTS_DIR,
    SCRIPT_FILES,
    newest_rankings,
    read_rows,
    script_folder,
)
from pipeline.records import arrow_schema

#: The latest view has one more column than the results: the key's earlier runs, newest first, as JSON
#: (at most ``HISTORY_LIMIT`` of them: the full history is data/results).
HISTORY_COLUMN = "history_json"
RANKING_COLUMNS = ["date", "task", "view", "rank", "model_id"]
EXCLUSION_COLUMNS = ["model_id", "task", "reason", "kind"]


def latest_schema() -> pa.Schema:
    """The Arrow schema of a latest shard: the results columns and ``history_json``."""
    return arrow_schema().append(pa.field(HISTORY_COLUMN, pa.string(), nullable=False))


def read_latest(root: Path) -> list[dict[str, Any]]:
    """Every row of the latest view (flat rows, with ``history_json``).

    Raises:
        DatasetError: a shard is unreadable.
    """
    rows: list[dict[str, Any]] = []
    for path in sorted((root / LATEST_DIR).glob("*.parquet")):
        rows.extend(read_rows(path))
    return rows


def earlier_runs(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The earlier runs of a latest row's key, newest first (from its ``history_json``)."""
    return json.loads(row.get(HISTORY_COLUMN) or "[]")


def iter_results(root: Path, columns: list[str]) -> Iterator[dict[str, Any]]:
    """``columns`` of every row of every results file, file by file in name order.

    Raises:
        DatasetError: a results file is unreadable.
    """
    for path in sorted((root / RESULTS_DIR).glob("*.parquet")):
        yield from read_rows(path, columns)


def read_rankings(root: Path) -> list[dict[str, Any]]:
    """The rows of the newest snapshot per task and view (a file named otherwise is read in full).

    Raises:
        DatasetError: a snapshot is unreadable.
    """
    names = [p.relative_to(root).as_posix() for p in (root / RANKINGS_DIR).glob("*.parquet")]
    newest, others = newest_rankings(names)
    rows: list[dict[str, Any]] = []
    for name in [*newest, *others]:
        rows.extend(read_rows(root / name, RANKING_COLUMNS))
    return rows


def read_exclusions(root: Path) -> list[dict[str, Any]]:
    """The rows of ``data/exclusions.parquet`` (none when absent).

    Raises:
        DatasetError: the file is unreadable.
    """
    path = root / EXCLUSIONS_FILE
    return read_rows(path, EXCLUSION_COLUMNS) if path.is_file() else []


def read_scripts(root: Path, model_ids: Iterator[str] | list[str] | set[str]) -> dict[str, dict[str, str]]:
    """model id -> ``{"run.py": text, "requirements.txt": text}`` for the models that have scripts."""
    scripts: dict[str, dict[str, str]] = {}
    for model_id in sorted(set(model_ids)):
        folder = root / script_folder(model_id)
        files = {
            name: (folder / name).read_text(encoding="utf-8") for name in SCRIPT_FILES if (folder / name).is_file()
        }
        if files:
            scripts[model_id] = files
    return scripts
