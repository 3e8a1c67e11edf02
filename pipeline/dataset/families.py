"""The family index (``data/families.parquet``, or ``data/families/<prefix>.parquet`` once the latest view has
more than one shard, :mod:`pipeline.dataset.shards`): one small row per latest key, so that ``trncat check`` reads
one file instead of the whole latest view.

Each row is :func:`pipeline.records.family_row` of a latest row: how its model fared (the latest run, or its newest
pass or fail when that run was an infrastructure error), the model's family (architecture, model_type,
base_model) and the versions of its toolchain. A dataset whose shards are named by model gets each family shard
from its latest shard whenever a build rewrites that (:func:`family_table`, in Arrow: the index is never
downloaded by a publish); a dataset of the older scheme (by key) keeps one file, and a publish's partial build
folds its changes into the file it mirrored (:func:`update_families`); a dataset without it (written
before layout 4) gets it when :mod:`pipeline.dataset.migrate` rewrites the dataset, which reads every latest shard
anyway. It is a derived file: the latest view stays the record of truth; the card lists it as the
``families`` config, so a reader loads it like any other view.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import fsatomic
from pipeline.dataset.layout import FAMILIES_FILE, parquet_bytes, read_rows
from pipeline.dataset.read import HISTORY_COLUMN, earlier_runs, read_latest
from pipeline.dataset.shards import family_files
from pipeline.errors import DatasetError
from pipeline.records import FAMILY_COLUMNS, MEASURED, arrow_type, family_row

logger = logging.getLogger(__name__)


@functools.cache
def families_schema() -> pa.Schema:
    """The Arrow schema of ``data/families.parquet`` (each column typed as its results column)."""
    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in FAMILY_COLUMNS])


def _key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(row["model_id"]), str(row["task"]), str(row["hardware"]))


def family_rows(latest: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The family row of every latest row, sorted by key."""
    return sorted((family_row(row, earlier_runs(dict(row))) for row in latest), key=_key)


def family_table(latest: pa.Table) -> pa.Table:
    """The family rows of a latest shard's table (what :func:`family_rows` gives its rows), sorted by key.

    A measured row (pass or fail) is its own family row: those are projected in Arrow. Only the rows of an
    infrastructure error, whose family row comes from an earlier run, become Python rows.
    """
    names = families_schema().names
    measured = pc.fill_null(pc.is_in(latest["status"], value_set=pa.array(MEASURED, pa.string())), False)
    direct = latest.filter(measured).select(names).cast(families_schema())
    others = latest.filter(pc.invert(measured)).to_pylist()
    rest = pa.Table.from_pylist([family_row(r, r.get(HISTORY_COLUMN) or []) for r in others], schema=families_schema())
    both = pa.concat_tables([direct, rest]).combine_chunks()
    return both.sort_by([(name, "ascending") for name in ("model_id", "task", "hardware")])


def families_current(root: Path, name: str | None = None) -> bool:
    """Whether ``root`` holds the family index (every file of it, or only the one at ``name``) in the current schema.

    Raises:
        DatasetError: a file is there but unreadable.
    """
    paths = family_files(root) if name is None else [root / name] if (root / name).is_file() else []
    for path in paths:
        try:
            if not pq.read_schema(path).remove_metadata().equals(families_schema()):
                return False
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc
    return bool(paths)


def read_families(root: Path) -> list[dict[str, Any]] | None:
    """The rows of the folder's family index (every shard of it, in path order), or None when it has none in the
    current schema.

    Raises:
        DatasetError: a file is unreadable.
    """
    if not families_current(root):
        return None
    return [row for path in family_files(root) for row in read_rows(path)]


def family_view(root: Path) -> list[dict[str, Any]]:
    """The family rows of a dataset folder: its index, else projected from the whole latest view.

    Raises:
        DatasetError: a file is unreadable.
    """
    rows = read_families(root)
    return rows if rows is not None else family_rows(read_latest(root))


def write_families(root: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write the family index (rows in key order)."""
    table = pa.Table.from_pylist(sorted((dict(r) for r in rows), key=_key), schema=families_schema())
    fsatomic.write_bytes(root / FAMILIES_FILE, parquet_bytes(table))


def update_families(root: Path, changed: Iterable[Mapping[str, Any]], *, latest: list[dict[str, Any]] | None) -> None:
    """Bring the family index of ``root`` up to date after a build.

    Args:
        root: the (staged) dataset folder.
        changed: the new latest rows of the keys the build changed (with their ``history``).
        latest: the whole latest view when the build read it (the index is then written from it); None on a
            partial mirror, where the index the folder holds takes the changed keys' rows.
    """
    if latest is not None:
        write_families(root, family_rows(latest))
        return
    existing = read_families(root)
    if existing is None:
        # A partial mirror of a dataset without the index: publish migrates such a dataset (which writes it from
        # the whole latest view) before building, so only a hand-made folder gets here.
        logger.warning("%s has no %s to update: it is written when the dataset is migrated", root, FAMILIES_FILE)
        return
    rows = {_key(r): r for r in existing}
    rows.update((_key(r), family_row(r, earlier_runs(dict(r)))) for r in changed)
    write_families(root, rows.values())
