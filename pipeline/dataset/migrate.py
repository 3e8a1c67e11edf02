"""Rewriting a dataset folder written by an older layout in the current one (see ``columns.LAYOUT_VERSION``).

The rows and file names stay; only the column types change (layout 1 -> 2: ``attempts_json`` and
``history_json`` become the nested ``attempts`` and ``history``, ``rankings.date`` a date, ``threads`` and
``layout_version`` are added). A reader of the Hub dataset (``datasets``, DuckDB) needs every file of a config
in one layout, so a publish migrates every file of the repo it finds in an older layout in the same PR.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import fsatomic
from pipeline.dataset.layout import LATEST_DIR, RANKINGS_DIR, RESULTS_DIR, parquet_bytes, read_rows
from pipeline.dataset.rankings import SNAPSHOT_SCHEMA
from pipeline.dataset.read import latest_schema, layout_of, upgrade_row
from pipeline.records import LAYOUT_VERSION, arrow_schema

logger = logging.getLogger(__name__)


def _old_rankings(root: Path) -> list[Path]:
    return [
        p
        for p in sorted((root / RANKINGS_DIR).glob("*.parquet"))
        if pq.read_schema(p).field("date").type != pa.date32()
    ]


def _old_rows_files(root: Path) -> list[Path]:
    files = [*sorted((root / RESULTS_DIR).glob("*.parquet")), *sorted((root / LATEST_DIR).glob("*.parquet"))]
    return [p for p in files if layout_of(p) < LAYOUT_VERSION]


def needs_migration(root: Path) -> bool:
    """Whether a results, latest or rankings file of the folder is in an older layout.

    Raises:
        DatasetError: a file is unreadable.
    """
    return bool(_old_rows_files(root) or _old_rankings(root))


def migrate(root: Path) -> list[str]:
    """Rewrite every file of ``root`` in an older layout in the current one, all at once.

    Returns:
        The paths rewritten (relative to ``root``).

    Raises:
        DatasetError: a file is unreadable.
    """
    rewritten: list[str] = []
    with fsatomic.staged_folder(root) as stage:
        for path in _old_rows_files(root):
            relative = path.relative_to(root)
            schema = latest_schema() if relative.as_posix().startswith(LATEST_DIR) else arrow_schema()
            rows = [upgrade_row(row) for row in read_rows(path)]
            fsatomic.write_bytes(stage / relative, parquet_bytes(pa.Table.from_pylist(rows, schema=schema)))
            rewritten.append(relative.as_posix())
        for path in _old_rankings(root):
            rows = read_rows(path)
            for row in rows:
                row["date"] = dt.date.fromisoformat(str(row["date"])[:10]) if row.get("date") else None
            relative = path.relative_to(root)
            fsatomic.write_bytes(stage / relative, parquet_bytes(pa.Table.from_pylist(rows, schema=SNAPSHOT_SCHEMA)))
            rewritten.append(relative.as_posix())
    logger.info("migrated %d file(s) of %s to dataset layout %d", len(rewritten), root, LAYOUT_VERSION)
    return rewritten
