"""Rewriting a dataset folder written by an older layout in the current one (see ``columns.LAYOUT_VERSION``).

The rows and file names stay; only the column types change (layout 1 -> 2: ``attempts_json`` and
``history_json`` become the nested ``attempts`` and ``history``, ``rankings.date`` a date, ``threads`` and
``layout_version`` are added; 3 -> 4: the family columns of schema 1.3, filled where another row of the same model
and revision holds them, else null, and ``data/families.parquet`` written from the whole latest view). A reader of
the Hub dataset (``datasets``, DuckDB) needs every file of a config in one layout, so a publish migrates every file
of the repo it finds in an older layout in the same PR.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import fsatomic
from pipeline.dataset.families import families_current, family_rows, family_table, write_families
from pipeline.dataset.layout import (
    FAMILIES_FILE,
    LATEST_DIR,
    RANKINGS_DIR,
    RESULTS_DIR,
    parquet_bytes,
    read_rows,
    read_table,
)
from pipeline.dataset.rankings import SNAPSHOT_SCHEMA
from pipeline.dataset.read import (
    FAMILY_FIELDS,
    LEGACY_ATTEMPTS_COLUMN,
    LEGACY_HISTORY_COLUMN,
    column_names,
    latest_schema,
    layout_of,
    read_latest,
    upgrade_row,
)
from pipeline.dataset.shards import family_files, family_shard_path, named_by_model
from pipeline.dataset.summary import read_summary
from pipeline.errors import DatasetError
from pipeline.records import LAYOUT_VERSION, arrow_schema

logger = logging.getLogger(__name__)


def _old_rankings(root: Path) -> list[Path]:
    return [
        p
        for p in sorted((root / RANKINGS_DIR).glob("*.parquet"))
        if pq.read_schema(p).field("date").type != pa.date32()
    ]


#: The columns every results or latest file of every layout has: a file without them is no file of this dataset.
KEY_COLUMNS = ("record_id", "model_id", "revision", "task", "status", "finished_at")


def _known_columns() -> frozenset[str]:
    legacy = {LEGACY_ATTEMPTS_COLUMN, LEGACY_HISTORY_COLUMN}
    return frozenset({*latest_schema().names, *legacy})


def _old_rows_files(root: Path) -> list[Path]:
    """The results and latest files in an older layout.

    Raises:
        DatasetError: one is unreadable, or has columns of no layout (nothing is migrated then).
    """
    files = [*sorted((root / RESULTS_DIR).glob("*.parquet")), *sorted((root / LATEST_DIR).glob("*.parquet"))]
    old = [p for p in files if layout_of(p) < LAYOUT_VERSION]
    known = _known_columns() if old else frozenset()
    for path in old:
        names = column_names(path)
        missing = [c for c in KEY_COLUMNS if c not in names]
        foreign = sorted(set(names) - known)
        if missing or foreign:
            what = f"no {missing[0]!r} column" if missing else f"a column of no layout, {foreign[0][:80]!r}"
            raise DatasetError(f"{path}: not a results or latest file of this dataset ({what}); nothing was migrated")
    return old


def _families_missing(root: Path, *, families_held: bool = False) -> bool:
    """Whether the folder has latest rows but no family index in the current schema. ``families_held``: the folder
    is a publish's partial mirror of a dataset that holds its index in the repo (by model: each family shard is
    written from its latest shard, so the mirror holds none of it)."""
    if not any((root / LATEST_DIR).glob("*.parquet")):
        return False
    if families_held and not family_files(root):
        return False
    return not families_current(root)


def needs_migration(root: Path, *, families_held: bool = False) -> bool:
    """Whether a results, latest or rankings file of the folder is in an older layout, or the folder has latest
    rows but no family index (layout 4; ``families_held``: the repo a partial mirror comes from holds it).

    Raises:
        DatasetError: a file is unreadable, or an old one has columns of no layout.
    """
    return bool(_old_rows_files(root) or _old_rankings(root) or _families_missing(root, families_held=families_held))


def _known_families(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(model id, revision) -> the family a current-layout row of the folder gives it (the family is the files'
    at that revision, so every row of the same model and revision shares it)."""
    known: dict[tuple[str, str], dict[str, Any]] = {}
    files = [*sorted((root / RESULTS_DIR).glob("*.parquet")), *sorted((root / LATEST_DIR).glob("*.parquet"))]
    for path in files:
        if layout_of(path) < 4:
            continue
        for row in read_rows(path, ["model_id", "revision", *FAMILY_FIELDS]):
            if any(row.get(name) for name in FAMILY_FIELDS):
                known.setdefault((row["model_id"], row["revision"]), {name: row.get(name) for name in FAMILY_FIELDS})
    return known


def migrate(root: Path, *, families_held: bool = False) -> list[str]:
    """Rewrite every file of ``root`` in an older layout in the current one, all at once.

    Returns:
        The paths rewritten (relative to ``root``).

    Raises:
        DatasetError: a file is unreadable.
    """
    rewritten: list[str] = []
    old = _old_rows_files(root)
    known = _known_families(root) if old else {}
    with fsatomic.staged_folder(root) as stage:
        for path in old:
            relative = path.relative_to(root)
            schema = latest_schema() if relative.as_posix().startswith(LATEST_DIR) else arrow_schema()
            rows = [upgrade_row(row) for row in read_rows(path)]
            for row in rows:
                if not any(row.get(name) for name in FAMILY_FIELDS):
                    row.update(known.get((row["model_id"], row["revision"]), {}))
            fsatomic.write_bytes(stage / relative, parquet_bytes(pa.Table.from_pylist(rows, schema=schema)))
            rewritten.append(relative.as_posix())
        for path in _old_rankings(root):
            rows = read_rows(path)
            for row in rows:
                row["date"] = dt.date.fromisoformat(str(row["date"])[:10]) if row.get("date") else None
            relative = path.relative_to(root)
            fsatomic.write_bytes(stage / relative, parquet_bytes(pa.Table.from_pylist(rows, schema=SNAPSHOT_SCHEMA)))
            rewritten.append(relative.as_posix())
        if _families_missing(stage, families_held=families_held):  # every latest shard is here, current now
            if named_by_model(read_summary(stage), stage):  # each shard's family rows beside it
                for path in sorted((stage / LATEST_DIR).glob("*.parquet")):
                    family = family_shard_path(path.stem)
                    fsatomic.write_bytes(stage / family, parquet_bytes(family_table(read_table(path))))
                    rewritten.append(family)
            else:
                write_families(stage, family_rows(read_latest(stage)))
                rewritten.append(FAMILIES_FILE)
    logger.info("migrated %d file(s) of %s to dataset layout %d", len(rewritten), root, LAYOUT_VERSION)
    return rewritten
