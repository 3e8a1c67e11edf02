"""The Arrow types of the record's flat columns: the fixed schema of every results and latest Parquet file."""

from __future__ import annotations

import functools
from typing import Any

from pipeline.records.columns import (
    _ATTEMPTS,
    _BATCH_LATENCY,
    _BOOL,
    _FLOAT,
    _INT,
    _INTS,
    _LAYOUT,
    _OPS,
    _STR,
    _STRS,
    _TIME,
    _TOPK,
    _TOPK_FIELDS,
    ATTEMPT_FIELDS,
    COLUMNS,
)


@functools.cache
def arrow_schema() -> Any:
    """The fixed Arrow schema of the results and latest Parquet files."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind), nullable=True) for name, _, kind in COLUMNS])


def arrow_type(kind: str) -> Any:
    """The Arrow type of a column kind (``string``, ``int64``, ``float64``, ``bool``, ``timestamp``, ...)."""
    import pyarrow as pa

    if kind == _ATTEMPTS:
        return pa.list_(pa.struct([pa.field(name, arrow_type(k)) for name, k in ATTEMPT_FIELDS]))
    if kind == _TOPK:
        return pa.list_(pa.struct([pa.field(name, arrow_type(k)) for name, k in _TOPK_FIELDS]))
    return {
        _STR: pa.string(),
        _INT: pa.int64(),
        _LAYOUT: pa.int32(),
        _FLOAT: pa.float64(),
        _BOOL: pa.bool_(),
        _TIME: pa.timestamp("us", tz="UTC"),
        _OPS: pa.list_(pa.struct([pa.field("op", pa.string()), pa.field("count", pa.int64())])),
        _STRS: pa.list_(pa.string()),
        _INTS: pa.list_(pa.int64()),
        _BATCH_LATENCY: pa.list_(
            pa.struct(
                [pa.field("batch_size", pa.int64()), pa.field("p50", pa.float64()), pa.field("p90", pa.float64())]
            )
        ),
    }[kind]
