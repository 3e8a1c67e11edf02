"""``data/families.parquet``: one small row per latest key, so that ``trncat check`` reads one file instead of the
whole latest view.

Each row is :func:`pipeline.records.family_row` of a latest row: how its model fared (the latest run, or its newest
pass or fail when that run was an infrastructure error), the model's family (architecture, model_type,
base_model) and the versions of its toolchain. A full build writes it from the whole latest view; a publish's
partial build folds its changes into the file it mirrored (:func:`update_families`); a dataset without it (written
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
import pyarrow.parquet as pq

from pipeline import fsatomic
from pipeline.dataset.layout import FAMILIES_FILE, parquet_bytes, read_rows
from pipeline.dataset.read import earlier_runs, read_latest
from pipeline.errors import DatasetError
from pipeline.records import FAMILY_COLUMNS, arrow_type, family_row

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


def families_current(root: Path, name: str = FAMILIES_FILE) -> bool:
    """Whether ``root`` holds the family index (or the part of it at ``name``) in the current schema.

    Raises:
        DatasetError: the file is there but unreadable.
    """
    path = root / name
    if not path.is_file():
        return False
    try:
        return pq.read_schema(path).remove_metadata().equals(families_schema())
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc


def read_families(root: Path) -> list[dict[str, Any]] | None:
    """The rows of the folder's family index, or None when it has none in the current schema.

    Raises:
        DatasetError: the file is unreadable.
    """
    return read_rows(root / FAMILIES_FILE) if families_current(root) else None


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
