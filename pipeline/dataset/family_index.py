"""Reading the family index the way ``trncat check`` asks it: which file(s) hold it, and only the rows a check needs.

A check wants the rows of a handful of models (the checked one and its bases) and of one family (architecture,
model_type, task). The index is read into one Arrow table (columnar, no Python object per row), and each question
is answered by a vectorised filter over it; only the rows that match become Python dicts. At 100,000 models that
is a few thousand rows at most instead of every row with its timezone-aware ``finished_at``
(``benchmarks/check_scale.py``).

:func:`family_index_paths` is the one place that says which files of the dataset repo hold the index: a check
downloads exactly those.
"""

from __future__ import annotations

import datetime as dt
import itertools
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.dataset.families import families_current, families_schema, family_rows
from pipeline.dataset.layout import DATA_DIR, read_table
from pipeline.dataset.read import read_latest, require_dataset
from pipeline.dataset.shards import family_index_paths
from pipeline.errors import DatasetError

_TIME = "finished_at"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def folder_family_index(root: Path) -> FamilyIndex:
    """The family index of a local dataset folder: its index files, else projected from its whole latest view.

    Raises:
        DatasetError: no such folder, it holds no dataset, or a file is unreadable.
    """
    root = require_dataset(root)
    files = [p.relative_to(root).as_posix() for p in (root / DATA_DIR).rglob("*.parquet")]
    index = FamilyIndex.read(root, family_index_paths(files))
    return index if index is not None else FamilyIndex.of_latest(read_latest(root))


class FamilyIndex:
    """The family rows of one dataset as an Arrow table, asked by model id and by family.

    Model ids compare without case (the Hub resolves them so), as :func:`pipeline.records.rows_of` does; rows come
    back in the index's order (by key), as the whole list would give them.
    """

    def __init__(self, table: pa.Table) -> None:
        self._table = table.cast(families_schema()) if not table.schema.equals(families_schema()) else table
        self._ids = pc.utf8_lower(self._table.column("model_id"))

    def __len__(self) -> int:
        return self._table.num_rows

    @classmethod
    def read(cls, root: Path, paths: Iterable[str]) -> FamilyIndex | None:
        """The index held in ``paths`` under ``root``, or None when they are none or not in the current schema.

        Raises:
            DatasetError: a file is unreadable.
        """
        paths = list(paths)
        if not paths or not all(families_current(root, path) for path in paths):
            return None
        tables = [read_table(root / path) for path in paths]
        try:
            return cls(pa.concat_tables(tables) if len(tables) > 1 else tables[0])
        except pa.ArrowException as exc:
            raise DatasetError(f"{root}: the family index does not read as one table: {exc}") from exc

    @classmethod
    def of_latest(cls, latest: Iterable[Mapping[str, Any]]) -> FamilyIndex:
        """The index projected from latest rows (a dataset without one: read from its latest view)."""
        return cls(pa.Table.from_pylist(family_rows(latest), schema=families_schema()))

    def select(
        self, *, model_ids: Iterable[str] = (), family: tuple[str, str | None, str] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of ``model_ids`` (any task) and of ``family`` = (architecture, model_type, task), each once.

        A ``model_type`` of None matches rows without one, as :func:`pipeline.records.family_stat` compares.
        """
        table = self._table
        wanted = sorted({m.lower() for m in model_ids})
        # is_in against value sets without a null: never null itself, so the masks combine without a fill.
        mask = pc.is_in(self._ids, value_set=_strings(wanted)) if wanted else None
        if family is not None:
            architecture, model_type, task = family
            same = pc.and_(_equal(table.column("architecture"), architecture), _equal(table.column("task"), task))
            kind = table.column("model_type")
            same = pc.and_(same, pc.is_null(kind) if model_type is None else _equal(kind, model_type))
            mask = same if mask is None else pc.or_(mask, same)
        if mask is None:
            return []
        return _pylist(table.filter(mask))


def _strings(values: list[str]) -> pa.Array:
    """A string array built from its buffers: ``pa.array`` of a Python list (or a Python scalar in a compute call)
    imports pandas, which pyarrow looks for first, and a check has no other use for it."""
    data = [value.encode("utf-8") for value in values]
    offsets = array("i", itertools.accumulate((len(d) for d in data), initial=0))
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data)))


def _equal(column: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    return pc.is_in(column, value_set=_strings([value]))


def _pylist(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as dicts, the timezone-aware ``finished_at`` converted here (pyarrow converts such a column through
    pandas): the same values, UTC datetimes, in the same column order."""
    micros = table.column(_TIME).cast(pa.int64()).to_pylist()  # the schema's unit: microseconds
    rows = table.drop_columns([_TIME]).to_pylist()
    names = table.column_names
    out = []
    for row, us in zip(rows, micros, strict=True):
        row[_TIME] = None if us is None else _EPOCH + dt.timedelta(microseconds=us)
        out.append({name: row[name] for name in names})
    return out
