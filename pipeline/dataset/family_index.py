"""Reading the family index the way ``trncat check`` asks it: which file(s) hold it, and only the rows a check needs.

A check wants the rows of a handful of models (the checked one and its bases) and of one family (architecture,
model_type, task). The index is read into one Arrow table (columnar, no Python object per row), and each question
is answered by a vectorised filter over it: the model's own rows (and its bases') become Python dicts, and the
family is counted over the columns (:meth:`FamilyIndex.family_stat`), a row of it becoming a dict only when the
verdict reads it. At 100,000 models a family holds a few thousand rows: none is read whole
(``benchmarks/check_scale.py``).

:func:`family_index_paths` is the one place that says which files of the dataset repo hold the index: a check
downloads exactly those.

The family is counted by :func:`family_stat`: :func:`pipeline.records.family_stat` (the architecture rule)
computed with ``pyarrow.compute`` (filters, sorts, counts), no Python object per row. Turning each of a family's
rows into a dict (with its timezone-aware ``finished_at``), labelling each one's toolchain and sorting them by the
text of their times cost more than the pandas lookup a user would write instead. Here the counts come from the
columns, the toolchain is labelled once per distinct set of versions, the evidence is four columns read as Python
values, and a row becomes a dict only when a reader asks for it (:class:`ArrowRows`: ``trncat check`` reads the
first one, the toolchain its run.py pins). The result equals :func:`pipeline.records.family_stat` of the same rows
(tests/dataset/test_family_arrow.py).

Values go into compute calls as arrays built from buffers, never as Python lists or scalars: pyarrow converts
those through pandas, which a check never imports.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.dataset.layout import families_schema, read_table
from pipeline.dataset.read import require_dataset
from pipeline.dataset.shards import family_files
from pipeline.errors import DatasetError
from pipeline.records import FAMILY_COLUMNS, MEASURED, TRAINIUM, FamilyStat, toolchain_label


def folder_family_index(root: Path) -> FamilyIndex:
    """The family index of a local dataset folder.

    Raises:
        DatasetError: no such folder, it holds no dataset, or a file is unreadable.
    """
    root = require_dataset(root)
    return FamilyIndex.read(root, [path.relative_to(root).as_posix() for path in family_files(root)])


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
    def read(cls, root: Path, paths: Iterable[str]) -> FamilyIndex:
        """The index held in ``paths`` under ``root`` (empty when they are none).

        Raises:
            DatasetError: a file is unreadable, or the files do not read as one table.
        """
        tables = [read_table(root / path) for path in paths]
        try:
            return cls(pa.concat_tables(tables) if tables else families_schema().empty_table())
        except pa.ArrowException as exc:
            raise DatasetError(f"{root}: the family index does not read as one table: {exc}") from exc

    def select(
        self, *, model_ids: Iterable[str] = (), family: tuple[str, str | None, str] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of ``model_ids`` (any task) and of ``family`` = (architecture, model_type, task), each once.

        A ``model_type`` of None matches rows without one, as :func:`pipeline.records.family_stat` compares.
        """
        wanted = sorted({m.lower() for m in model_ids})
        # is_in against value sets without a null: never null itself, so the masks combine without a fill.
        mask = pc.is_in(self._ids, value_set=strings(wanted)) if wanted else None
        if family is not None:
            same = family_mask(self._table, *family)
            mask = same if mask is None else pc.or_(mask, same)
        if mask is None:
            return []
        return pylist(self._table.filter(mask))

    def family_stat(self, architecture: str, model_type: str | None, task: str) -> FamilyStat:
        """How the family (architecture, model_type, task) fared: :func:`pipeline.records.family_stat` of its
        rows, counted over the index's columns (:func:`family_stat`)."""
        return family_stat(self._table, architecture=architecture, model_type=model_type, task=task)


_TIME = "finished_at"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: The columns a toolchain label is read from (every backend's label names ``<package>_version`` columns).
_VERSIONS = tuple(name for name, _ in FAMILY_COLUMNS if name.endswith("_version"))
#: Helper columns added while counting, dropped before a row is read.
_POSITION, _PASS, _RANK = "_position", "_pass", "_rank"


def strings(values: Sequence[str]) -> pa.Array:
    """A string array built from its buffers (``pa.array`` of a Python list imports pandas)."""
    data = [value.encode("utf-8") for value in values]
    offsets = array("i", itertools.accumulate((len(d) for d in data), initial=0))
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data)))


def equal(column: pa.ChunkedArray | pa.Array, value: str) -> pa.ChunkedArray:
    """``column == value``, false (never null) where the column is null."""
    return pc.is_in(column, value_set=strings([value]))


def family_mask(table: pa.Table, architecture: str, model_type: str | None, task: str) -> pa.ChunkedArray:
    """The rows of one family; a ``model_type`` of None matches rows without one (as records' rule compares)."""
    same = pc.and_(equal(table.column("architecture"), architecture), equal(table.column("task"), task))
    kind = table.column("model_type")
    return pc.and_(same, pc.is_null(kind) if model_type is None else equal(kind, model_type))


def pylist(table: pa.Table) -> list[dict[str, Any]]:
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


class ArrowRows(Sequence[dict[str, Any]]):
    """The rows of a table as a sequence of dicts, each read (once) when it is asked for."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table
        self._read: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return self._table.num_rows

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = operator.index(index)
        i = i + len(self) if i < 0 else i
        if not 0 <= i < len(self):
            raise IndexError(index)
        if i not in self._read:
            self._read[i] = pylist(self._table.slice(i, 1))[0]
        return self._read[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self[:])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ArrowRows({len(self)} rows)"


def _positions(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(array("q", range(n)).tobytes())])


def _true(mask: pa.ChunkedArray) -> pa.ChunkedArray:
    """True where ``mask`` is true, false where it is false or null."""
    return pc.and_kleene(mask, pc.is_valid(mask))


def _toolchains(rows: pa.Table) -> tuple[pa.ChunkedArray, dict[str, str]]:
    """Each Trainium2 row's key of versions, and the toolchain label of each key (one label per distinct key)."""
    separator = strings(["\x1f"])[0]
    columns = [rows.column(name) for name in _VERSIONS]
    keys = pc.binary_join_element_wise(*columns, separator, null_handling="replace", null_replacement="\x1e")
    distinct = pc.unique(keys)
    first = pc.index_in(distinct, value_set=keys).to_pylist()  # each key's first row
    labels = {}
    for key, i in zip(distinct.to_pylist(), first, strict=True):
        versions = {name: rows.column(name)[i].as_py() for name in _VERSIONS}
        labels[key] = toolchain_label({"device": TRAINIUM, **versions})
    return keys, labels


def _one_per_model(rows: pa.Table) -> pa.Table:
    """:func:`pipeline.records.one_per_model`: per model its pass before a failure, then the newest, then the first
    in the index; by model id."""
    keys = [("model_id", "ascending"), (_PASS, "descending"), (_TIME, "descending"), (_POSITION, "ascending")]
    order = pc.sort_indices(rows, sort_keys=[(*key, "at_end") for key in keys])
    rows = rows.take(order)
    if rows.num_rows < 2:
        return rows
    ids = rows.column("model_id")
    first = pc.not_equal(ids.slice(1), ids.slice(0, rows.num_rows - 1))
    return pa.concat_tables([rows.slice(0, 1), rows.slice(1).filter(first)])


def family_stat(table: pa.Table, *, architecture: str, model_type: str | None, task: str) -> FamilyStat:
    """:func:`pipeline.records.family_stat` of the family index ``table`` (the family's rows filtered from it)."""
    members = table.filter(family_mask(table, architecture, model_type, task))
    members = members.append_column(_POSITION, _positions(members.num_rows))
    neuron = equal(members.column("device"), TRAINIUM)
    trainium3 = pc.and_(neuron, _true(pc.starts_with(members.column("hardware"), pattern="trn3")))
    trainium2 = pc.and_(neuron, pc.invert(trainium3))
    measured = pc.is_in(members.column("status"), value_set=strings(list(MEASURED)))
    on_trainium = members.filter(pc.and_(trainium2, measured))
    toolchain = None
    counted = on_trainium.slice(0, 0)
    if on_trainium.num_rows:
        keys, labels = _toolchains(on_trainium)
        newest = pc.sort_indices(on_trainium, sort_keys=[(_TIME, "descending", "at_end"),
                                                         (_POSITION, "ascending", "at_end")])[0]  # fmt: skip
        toolchain = labels[keys[newest.as_py()].as_py()]
        same = strings([key for key, label in labels.items() if label == toolchain])
        counted = on_trainium.filter(pc.is_in(keys, value_set=same))
    counted = counted.append_column(_PASS, equal(counted.column("status"), "pass"))
    counted = _one_per_model(counted)
    failing = pc.invert(counted.column(_PASS))
    failed = counted.filter(failing).num_rows
    codes = Counter(str(code) for code in counted.filter(failing).column("failure_code").to_pylist() if code)
    cores = pc.min_max(counted.column("cores")).as_py()
    others = members.filter(pc.and_(pc.invert(trainium2), measured)).column("model_id")
    ids = on_trainium.column("model_id").chunks
    ids_on_trainium = pa.concat_arrays(ids) if ids else strings([])  # combine_chunks of no chunk imports pandas
    elsewhere = pc.count_distinct(others.filter(pc.invert(pc.is_in(others, value_set=ids_on_trainium))))
    counted = counted.append_column(_RANK, _positions(counted.num_rows))
    ordered = counted.take(pc.sort_indices(counted, sort_keys=[(_PASS, "descending", "at_start"),
                                                               (_TIME, "ascending", "at_start"),
                                                               (_RANK, "ascending", "at_start")]))  # fmt: skip
    brief = zip(*(ordered.column(name).to_pylist() for name in ("model_id", "status", "cores", "failure_code")),
                strict=True)  # fmt: skip
    helpers = [_POSITION, _PASS, _RANK]
    return FamilyStat(
        architecture=str(architecture),
        model_type=model_type,
        task=str(task),
        toolchain=toolchain,
        passed=counted.num_rows - failed,
        failed=failed,
        cores_min=cores["min"],
        cores_max=cores["max"],
        failure_codes=tuple(sorted(codes.items(), key=lambda item: (-item[1], item[0]))),
        elsewhere=elsewhere.as_py(),
        rows=ArrowRows(counted.drop_columns(helpers)),
        ordered=ArrowRows(ordered.drop_columns(helpers)),
        brief=tuple(brief),
        trainium3=bool(pc.any(trainium3).as_py()),
    )
