"""The stage matrix: ``data/matrix.parquet`` (the ``matrix`` config), one row per model x task x device class x
stage or feature, with its state, the record that decided it and what the docs promise (issue 49). The rows are
computed elsewhere (:mod:`pipeline.queue.stage_matrix`); this module owns the file: every publish rewrites it whole,
sorted, so a publish that changed nothing writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import fsatomic
from pipeline.dataset.layout import MATRIX_FILE, parquet_bytes, read_table
from pipeline.types import DEVICE_CLASSES
from pipeline.types import MATRIX_FEATURES as FEATURES
from pipeline.types import MATRIX_STAGES as STAGES

_S = pa.string()
#: The row contract shared with the page (the page takes mappings with exactly these keys).
MATRIX_SCHEMA = pa.schema(
    [
        pa.field("model_id", _S, nullable=False), ("revision", _S), pa.field("task", _S, nullable=False),
        pa.field("device_class", _S, nullable=False), pa.field("kind", _S, nullable=False),
        pa.field("item", _S, nullable=False), pa.field("state", _S, nullable=False), ("documented", _S),
        ("documented_source", _S), ("documented_as_of", _S),
        pa.field("documented_but_fails", pa.bool_(), nullable=False), ("detail", _S), ("record_id", _S),
        ("source", _S), ("decided_at", pa.timestamp("us", tz="UTC")), ("params", pa.int64()),
        ("neuron_cores", pa.int32()), ("instance", _S), ("parallelism", _S),
    ]
)  # fmt: skip
STATES = ("passing", "failing", "untested", "cpu", "emulated", "predicted")
_ORDER = {name: i for i, name in enumerate((*DEVICE_CLASSES, *STAGES, *FEATURES))}


def _sort_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["task"], str(row["model_id"]).lower(), _ORDER[row["device_class"]], row["kind"] != "stage",
            _ORDER[row["item"]])  # fmt: skip


def write_matrix(folder: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Rewrite ``data/matrix.parquet`` of the dataset folder with ``rows`` (the contract's keys), in a fixed order.

    With no rows the file is removed rather than written empty (a 0-row file breaks ``datasets``).
    """
    path = folder / MATRIX_FILE
    ordered = sorted(rows, key=_sort_key)
    if not ordered:
        path.unlink(missing_ok=True)
        return path
    # Column by column: at 10k models (220,000 rows) from_pylist took ten times as long.
    columns = {name: [row.get(name) for row in ordered] for name in MATRIX_SCHEMA.names}
    table = pa.Table.from_pydict(columns, MATRIX_SCHEMA)
    fsatomic.write_bytes(path, parquet_bytes(table))
    return path


def read_matrix(folder: Path, *, model_id: str | None = None) -> list[dict[str, Any]]:
    """The matrix rows of the dataset folder (only ``model_id``'s, any case, when given), or [] when it has none.

    Raises:
        DatasetError: the file is unreadable or not the matrix.
    """
    path = folder / MATRIX_FILE
    if not path.is_file():
        return []
    table = read_table(path, MATRIX_SCHEMA.names)
    if model_id is not None:  # filtered as Arrow: `trncat check` turns one model's rows into Python, not 10k models'
        table = table.filter(pc.equal(pc.utf8_lower(table["model_id"]), model_id.lower()))
    # Column by column, each repeated value one object (a model's id, a state, the docs' URL): at 10k models (220,000
    # rows) to_pylist's rows, every cell a new object, peaked at 479 MB, these at 333 MB (a refresh: 608 -> 454 MB).
    names, columns = MATRIX_SCHEMA.names, []
    for name in names:
        seen: dict[Any, Any] = {}
        columns.append([seen.setdefault(value, value) for value in table[name].to_pylist()])
    del table
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
