"""Reading the dataset folder: the latest view, results columns, rankings, exclusions and scripts."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    FAMILIES_FILE,
    LATEST_DIR,
    RANKINGS_DIR,
    RESULTS_DIR,
    SCRIPT_FILES,
    SCRIPTS_DIR,
    newest_rankings,
    read_rows,
    script_folder,
)
from pipeline.dataset.shards import family_files
from pipeline.errors import DatasetError
from pipeline.records import LAYOUT_MARKERS, LAYOUT_VERSION, arrow_schema

#: The latest view has one more column than the results: the key's earlier runs, newest first, as a list of
#: structs (at most ``HISTORY_LIMIT`` of them: the full history is data/results).
HISTORY_COLUMN = "history"
#: Layout 1 names of the nested columns (JSON text), read and upgraded by :func:`upgrade_row`.
LEGACY_HISTORY_COLUMN, LEGACY_ATTEMPTS_COLUMN = "history_json", "attempts_json"
RANKING_COLUMNS = ["date", "task", "view", "rank", "model_id"]
#: The record's family (schema 1.3), the columns layout 4 added.
FAMILY_FIELDS = ("architecture", "model_type", "base_model")
EXCLUSION_COLUMNS = ["model_id", "task", "reason", "kind"]
#: One history entry: a past run of the key (a subset of the results columns).
HISTORY_FIELDS: tuple[str, ...] = (
    "record_id", "finished_at", "source", "status", "failure_stage", "failure_code", "revision", "device", "cores",
    "neuronx_cc_version", "torch_neuronx_version", "transformers_version", "torch_version", "compile_s", "ttft_s",
    "decode_tokens_per_s", "peak_device_memory_bytes",
)  # fmt: skip


def history_type() -> pa.DataType:
    """``list<struct<...>>`` of :data:`HISTORY_FIELDS`, each typed as its results column."""
    schema = arrow_schema()
    return pa.list_(pa.struct([schema.field(name) for name in HISTORY_FIELDS]))


def latest_schema() -> pa.Schema:
    """The Arrow schema of a latest shard: the results columns, then ``history``."""
    return arrow_schema().append(pa.field(HISTORY_COLUMN, history_type(), nullable=False))


def _time(value: Any) -> Any:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value


def upgrade_row(row: dict[str, Any]) -> dict[str, Any]:
    """A results or latest row of any layout in the current one (layout 1's JSON columns parsed)."""
    if LEGACY_ATTEMPTS_COLUMN in row:
        row["attempts"] = json.loads(row.pop(LEGACY_ATTEMPTS_COLUMN) or "[]")
    if LEGACY_HISTORY_COLUMN in row:
        entries = json.loads(row.pop(LEGACY_HISTORY_COLUMN) or "[]")
        row[HISTORY_COLUMN] = [{**e, "finished_at": _time(e.get("finished_at"))} for e in entries]
    row.setdefault("threads", None)
    for name in FAMILY_FIELDS:  # layout 4 (schema 1.3): unknown in older files until migrate fills what it can
        row.setdefault(name, None)
    row["layout_version"] = LAYOUT_VERSION
    return row


def column_names(path: Path) -> list[str]:
    """The columns of a Parquet file, from its footer.

    Raises:
        DatasetError: the file is unreadable (truncated, or no Parquet file).
    """
    try:
        return list(pq.read_schema(path).names)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc


def layout_of(path: Path) -> int:
    """The layout a results or latest file was written in (the newest whose column it has, see
    ``columns.LAYOUT_MARKERS``; 1 when it has no ``layout_version`` column).

    Raises:
        DatasetError: the file is unreadable.
    """
    names = column_names(path)
    return next((layout for layout, column in LAYOUT_MARKERS if column in names), 1)


def require_dataset(root: Path) -> Path:
    """``root`` when it is a dataset folder that holds rows (a latest shard or the family index).

    A command given a folder to read (``trncat check --dataset-dir``, ``trncat page --from-folder``) calls it
    first: a missing or empty folder is the caller's mistake, never an empty catalog.

    Raises:
        DatasetError: no such folder, or it holds no dataset.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder")
    if not any((root / LATEST_DIR).glob("*.parquet")) and not family_files(root):
        raise DatasetError(f"{root}: holds no dataset (no {LATEST_DIR}/*.parquet, no {FAMILIES_FILE})")
    return root


def read_latest(root: Path) -> list[dict[str, Any]]:
    """Every row of the latest view (flat rows, with ``history``), in the current layout whatever the file's.

    Raises:
        DatasetError: a shard is unreadable.
    """
    rows: list[dict[str, Any]] = []
    for path in sorted((root / LATEST_DIR).glob("*.parquet")):
        rows.extend(upgrade_row(row) for row in read_rows(path))
    return rows


def earlier_runs(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The earlier runs of a latest row's key, newest first (from its ``history``)."""
    if LEGACY_HISTORY_COLUMN in row:
        upgrade_row(row)
    return list(row.get(HISTORY_COLUMN) or [])


def iter_results(root: Path, columns: list[str]) -> Iterator[dict[str, Any]]:
    """``columns`` of every row of every results file, file by file in name order (a column a file of an older
    layout lacks reads as None).

    Raises:
        DatasetError: a results file is unreadable.
    """
    for path in sorted((root / RESULTS_DIR).glob("*.parquet")):
        present = set(column_names(path))
        for row in read_rows(path, [c for c in columns if c in present]):
            yield {column: row.get(column) for column in columns}


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


def script_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every file under the folder's ``scripts/``, as (path relative to ``root``, bytes), in path order."""
    for source in sorted((root / SCRIPTS_DIR).rglob("*")):
        if source.is_file():
            yield source.relative_to(root).as_posix(), source.read_bytes()
