"""The result record's flat Arrow form: one row per record, snake_case columns, fixed types.

Users filter the Parquet files with pandas without unnesting JSON: every field of the record is a column
(``failure.stage`` -> ``failure_stage``, ``metrics.latency_s.p50`` -> ``latency_p50_s``, ...). The order of
:data:`COLUMNS` is the column order of every results and latest file. A record's times are ISO 8601 with a
timezone, within the years a record may fall in (:func:`parse_time`), and UTC datetimes in a row. Each column's
kind has its Arrow type (:func:`arrow_type`): the fixed schema of every results and latest file (:func:`arrow_schema`).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
from typing import Any

from pipeline.taskspec import COST_COLUMNS
from pipeline.taskspec import REGISTRY as TASK_SPECS

#: The years a record's time may fall in: from long before any accelerator this catalog measures existed, to the
#: last year whose stamps convert to UTC with any offset (a stamp of 9999 at -05:00 is past datetime's range).
EARLIEST_YEAR, LATEST_YEAR = 2000, 9998


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 time with a timezone (``Z`` allowed) between :data:`EARLIEST_YEAR` and :data:`LATEST_YEAR`,
    in UTC, or None when it is not one (a stamp that would not convert to UTC is none: it crashed every build)."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, TypeError, AttributeError):
        return None
    if value.tzinfo is None or not EARLIEST_YEAR <= value.year <= LATEST_YEAR:
        return None
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        return None


def record_id(record: dict[str, Any]) -> str:
    """A stable id of a record's content (sha256 of its canonical JSON), used to deduplicate."""
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


_STR, _INT, _FLOAT, _BOOL, _TIME = "string", "int64", "float64", "bool", "timestamp"
#: Nested columns: a list of ``{op, count}`` structs, and a list of strings.
_OPS, _STRS = "ops", "strings"
_ATTEMPTS, _LAYOUT = "attempts", "layout"
#: Nested columns: a list of ``{batch_size, p50, p90}`` structs, and a list of integers.
_BATCH_LATENCY, _INTS = "batch_latency", "ints"
#: Nested column: a list of the answer check's figures per top-k group (fields as the schema's).
_TOPK = "topk"
_TOPK_FIELDS = (("k", _STR), *((n, _FLOAT) for n in ("atol", "rtol", "max_abs_error", "max_rel_error")), ("step", _INT))

#: The version of the dataset's file layout, stored in every row of every results and latest file
#: (``layout_version``): the one layout there is (``pipeline/dataset/layout.py``).
LAYOUT_VERSION = 1
#: The fields of one attempt (``attempts`` column, a list of these structs), as the schema defines them.
ATTEMPT_FIELDS: tuple[tuple[str, str], ...] = (("cores", _INT), ("status", _STR), ("stage", _STR), ("code", _STR))

#: (column, path in the record, type). The order is the column order of every Parquet file.
COLUMNS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("record_id", (), _STR),
    ("schema_version", ("schema_version",), _STR),
    ("model_id", ("model_id",), _STR),
    ("revision", ("revision",), _STR),
    ("task", ("task",), _STR),
    ("status", ("status",), _STR),
    ("failure_stage", ("failure", "stage"), _STR),
    ("failure_code", ("failure", "code"), _STR),
    ("failure_message", ("failure", "message"), _STR),
    ("device", ("device",), _STR),
    ("hardware", ("hardware", "name"), _STR),
    ("instance_type", ("hardware", "instance_type"), _STR),
    ("accelerator", ("hardware", "accelerator"), _STR),
    ("core_config", ("hardware", "core_config"), _STR),
    ("memory_per_core_bytes", ("hardware", "memory_per_core_bytes"), _INT),
    ("cores_available", ("hardware", "cores_available"), _INT),
    ("cores", ("cores",), _INT),
    ("threads", ("threads",), _INT),
    ("dtype", ("dtype",), _STR),
    ("batch_size", ("workload", "batch_size"), _INT),
    ("input_tokens", ("workload", "input_tokens"), _INT),
    ("output_tokens", ("workload", "output_tokens"), _INT),
    ("image_size", ("workload", "image_size"), _INT),
    ("params", ("metrics", "params"), _INT),
    ("weights_bytes", ("metrics", "weights_bytes"), _INT),
    ("load_s", ("metrics", "load_s"), _FLOAT),
    ("compile_s", ("metrics", "compile_s"), _FLOAT),
    ("ttft_s", ("metrics", "ttft_s"), _FLOAT),
    ("latency_p50_s", ("metrics", "latency_s", "p50"), _FLOAT),
    ("latency_p90_s", ("metrics", "latency_s", "p90"), _FLOAT),
    ("decode_tokens_per_s", ("metrics", "decode_tokens_per_s"), _FLOAT),
    ("wall_s", ("metrics", "wall_s"), _FLOAT),
    ("peak_device_memory_bytes", ("metrics", "peak_device_memory_bytes"), _INT),
    ("peak_host_memory_bytes", ("metrics", "peak_host_memory_bytes"), _INT),
    ("roofline_fraction", ("metrics", "roofline_fraction"), _FLOAT),
    ("iterations", ("metrics", "iterations"), _INT),
    ("compile_cache_hit", ("metrics", "compile_cache_hit"), _BOOL),
    ("pipeline_version", ("versions", "pipeline"), _STR),
    ("python_version", ("versions", "python"), _STR),
    ("torch_version", ("versions", "torch"), _STR),
    ("transformers_version", ("versions", "transformers"), _STR),
    ("torch_neuronx_version", ("versions", "torch_neuronx"), _STR),
    ("neuronx_cc_version", ("versions", "neuronx_cc"), _STR),
    ("runtime_version", ("versions", "runtime"), _STR),
    ("driver_version", ("versions", "driver"), _STR),
    ("sdk_version", ("versions", "sdk"), _STR),
    ("container_image", ("versions", "container_image"), _STR),
    ("cuda_version", ("versions", "cuda"), _STR),
    ("started_at", ("run", "started_at"), _TIME),
    ("finished_at", ("run", "finished_at"), _TIME),
    ("runner", ("run", "runner"), _STR),
    ("github_run_id", ("run", "github_run_id"), _STR),
    ("github_sha", ("run", "github_sha"), _STR),
    ("source", ("run", "source"), _STR),
    ("machine", ("run", "machine"), _STR),
    ("plan_cores", ("plan", "cores"), _INT),
    ("plan_fits", ("plan", "fits"), _BOOL),
    ("plan_advice", ("plan", "advice"), _STR),
    ("plan_instance", ("plan", "instance"), _STR),
    ("plan_tp_degree", ("plan", "tp_degree"), _INT),
    ("plan_total_bytes", ("plan", "total_bytes"), _INT),
    ("attempts", ("attempts",), _ATTEMPTS),
    # the warm start, the CPU fallbacks and the answer check
    ("warm_start_s", ("metrics", "warm_start_s"), _FLOAT),
    ("cpu_fallback_ops", ("metrics", "cpu_fallback_ops"), _OPS),
    ("recompiles_during_timed", ("metrics", "recompiles_during_timed"), _INT),
    ("agreement_reference", ("agreement", "reference"), _STR),
    ("agreement_logits_cosine", ("agreement", "logits_cosine"), _FLOAT),
    ("agreement_prefix_tokens", ("agreement", "prefix_tokens"), _INT),
    ("agreement_compared_tokens", ("agreement", "compared_tokens"), _INT),
    ("agreement_threshold", ("agreement", "threshold"), _FLOAT),
    ("agreement_skipped", ("agreement", "skipped"), _STR),
    ("torchvision_version", ("versions", "torchvision"), _STR),
    ("notes", ("notes",), _STRS),
    ("layout_version", (), _LAYOUT),
    # each task's own fields, from its spec (pipeline.taskspec)
    *((f.column, f.path, f.kind) for spec in TASK_SPECS.values() for f in spec.fields),
    # the model's family, what `trncat check` answers unmeasured models from
    ("architecture", ("architecture",), _STR),
    ("model_type", ("model_type",), _STR),
    ("base_model", ("base_model",), _STRS),
    # the Neuron run's own figures, optional in the record
    ("neuronx_cc_s", ("metrics", "neuronx_cc_s"), _FLOAT),
    ("compiled_graphs", ("metrics", "compiled_graphs"), _INT),
    ("cached_graphs", ("metrics", "cached_graphs"), _INT),
    ("warm_start_cached_graphs", ("metrics", "warm_start_cached_graphs"), _INT),
    ("peak_device_memory_reserved_bytes", ("metrics", "peak_device_memory_reserved_bytes"), _INT),
    ("prefill_mode", ("metrics", "prefill_mode"), _STR),
    ("nki_version", ("versions", "nki"), _STR),
    ("emulated", ("hardware", "emulated"), _BOOL),
    # the compiled-cache bundle a passing CI neuron run ships, and why a run has none
    ("compiled_cache_repo_id", ("compiled_cache", "repo_id"), _STR),
    ("compiled_cache_revision", ("compiled_cache", "revision"), _STR),
    ("compiled_cache_path", ("compiled_cache", "path"), _STR),
    ("compiled_cache_sha256", ("compiled_cache", "sha256"), _STR),
    ("compiled_cache_bytes", ("compiled_cache", "bytes"), _INT),
    ("compiled_cache_files", ("compiled_cache", "files"), _INT),
    ("compiled_cache_skipped", ("compiled_cache_skipped",), _STR),
    # no record field. The price of the row's instance under the build's purchase option and its task's
    # cost, computed when the row is built (pipeline.prices.row_costs) and kept with it.
    ("price_usd_per_hour", (), _FLOAT),
    ("price_option", (), _STR),
    ("price_region", (), _STR),
    ("price_source", (), _STR),
    ("price_as_of", (), _STR),
    *((name, (), _FLOAT) for name in COST_COLUMNS),
    # the graded answer check, optional (a record without one has an unknown grade)
    *((f"agreement_{n}", ("agreement", n), k) for n, k in (
        ("grade", _STR), ("failed_step", _INT), ("steps", _INT), ("teacher_forced", _BOOL),
        ("greedy_match_rate", _FLOAT), ("first_divergence_step", _INT), ("topk", _TOPK), ("sigma_ratio", _FLOAT),
        ("bc", _FLOAT), ("noise_reference", _STR), ("noise_skipped", _STR))),
    # the timed calls' spread, optional (pipeline/records/spread.py): their count, the 95 % intervals of the median call
    # time and of the task's speed figure
    ("spread_repeats", ("metrics", "spread", "repeats"), _INT),
    ("latency_p50_low_s", ("metrics", "spread", "latency_low_s"), _FLOAT),
    ("latency_p50_high_s", ("metrics", "spread", "latency_high_s"), _FLOAT),
    ("speed_low", ("metrics", "spread", "speed_low"), _FLOAT),
    ("speed_high", ("metrics", "spread", "speed_high"), _FLOAT),
)  # fmt: skip
COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _, _ in COLUMNS)
#: The columns of the fields only one task carries, by task (a record of another task has none of them, so its
#: row gives none back).
TASK_ONLY_COLUMNS: dict[str, frozenset[str]] = {
    name: frozenset(f.column for f in spec.fields) for name, spec in TASK_SPECS.items() if spec.fields
}
_ALL_TASK_ONLY: frozenset[str] = frozenset().union(*TASK_ONLY_COLUMNS.values())
#: The columns of the optional fields (and ``threads``, ``guidance_scale``): a record without the field
#: gives a null column, and a null column gives no field back.
_SINCE_1_3 = (
    "architecture",
    "model_type",
    "base_model",
    *COLUMN_NAMES[COLUMN_NAMES.index("neuronx_cc_s") : COLUMN_NAMES.index("compiled_cache_skipped") + 1],
)
_SINCE_1_4 = COLUMN_NAMES[COLUMN_NAMES.index("agreement_grade") :]
#: (and a task's optional fields: a speech-recognition agreement without a bfloat16 run has no noise_wer)
OPTIONAL_COLUMNS: frozenset[str] = frozenset(
    {
        "threads",
        "machine",
        *(f.column for s in TASK_SPECS.values() for f in s.fields if not f.required),
        *_SINCE_1_3,
        *_SINCE_1_4,
    }
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


_PATHS: dict[str, tuple[str, ...]] = {name: path for name, path, _ in COLUMNS}


def column_value(record: dict[str, Any], name: str) -> Any:
    """One column of a record's flat row, as the record holds it (a time stays text), without flattening the
    rest (:func:`flatten` hashes the whole record for ``record_id``): a missing or non-object step gives None."""
    value: Any = record
    for key in _PATHS[name]:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _batch_latency(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"batch_size": int(v["batch_size"]), "p50": float(v["p50"]), "p90": float(v["p90"])} for v in value]


def _topk(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{n: None if item.get(n) is None else (int if k == _INT else float if k == _FLOAT else str)(item[n])
             for n, k in _TOPK_FIELDS} for item in value]  # fmt: skip


#: How each kind's value becomes its column's (None: as the record holds it).
_TO_COLUMN: dict[str, Any] = {
    _TIME: parse_time,
    _FLOAT: float,  # JSON writes 3 for 3.0; Arrow takes no large int into a float64 column
    _BATCH_LATENCY: _batch_latency,
    _TOPK: _topk,
}


@functools.cache
def _flatten_plan() -> tuple[tuple[str, str, str | None, str | None, Any], ...]:
    """Each column of :func:`flatten` read from a record's path, as (name, first key, second key, third key,
    conversion); the special columns (``record_id``, ``layout_version``, ``attempts``) and the build columns (no
    path) are not among them. Paths are at most three deep."""
    plan: list[tuple[str, str, str | None, str | None, Any]] = []
    for name, path, kind in COLUMNS:
        if name == "attempts" or not path:
            continue
        assert 1 <= len(path) <= 3, path
        second, third = (path[1] if len(path) > 1 else None), (path[2] if len(path) > 2 else None)
        plan.append((name, path[0], second, third, _TO_COLUMN.get(kind)))
    return tuple(plan)


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    """A valid record as one flat row (``COLUMNS`` order); times become aware datetimes; the build columns
    (the price and cost: the columns without a record path) are null until the dataset build fills them."""
    row: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    for name, first, second, third, convert in _flatten_plan():
        # (as column_value: a missing or non-object step gives None)
        value = record.get(first)
        if second is not None:
            value = value.get(second) if isinstance(value, dict) else None
            if third is not None:
                value = value.get(third) if isinstance(value, dict) else None
        if value is not None and convert is not None:
            value = convert(value)
        row[name] = value
    row["record_id"] = record_id(record)
    row["layout_version"] = LAYOUT_VERSION
    row["attempts"] = [{key: a.get(key) for key, _ in ATTEMPT_FIELDS} for a in record.get("attempts") or []]
    return row


#: How each kind's column value becomes the record's (None: as the column holds it).
_TO_RECORD: dict[str, Any] = {
    _TIME: lambda value: value.astimezone(dt.UTC).isoformat(timespec="seconds"),
    _INT: int,
    _FLOAT: float,
    _BOOL: bool,
    _INTS: lambda value: [int(v) for v in value],
    _BATCH_LATENCY: _batch_latency,
    _TOPK: _topk,
}


@functools.cache
def _unflatten_plan() -> tuple[tuple[str, tuple[str, ...], str, Any, bool, bool], ...]:
    """Each record field of :func:`unflatten` but ``attempts`` as (column, parent keys, key, conversion, carried by
    one task only, optional in the record)."""
    return tuple(
        (name, path[:-1], path[-1], _TO_RECORD.get(kind), name in _ALL_TASK_ONLY, name in OPTIONAL_COLUMNS)
        for name, path, kind in COLUMNS
        if path and name != "attempts"
    )  # fmt: skip


def unflatten(row: dict[str, Any]) -> dict[str, Any]:
    """The record a flat row came from (the inverse of :func:`flatten`)."""
    record: dict[str, Any] = {}
    task_columns = TASK_ONLY_COLUMNS.get(row.get("task") or "", frozenset())
    for name, parents, key, convert, task_only, optional in _unflatten_plan():
        if task_only and name not in task_columns:
            continue
        value = row.get(name)
        if value is None:
            if optional:
                continue  # optional in the record: threads, guidance_scale and the optional metrics
        elif convert is not None:
            value = convert(value)
        target = record
        for parent in parents:
            target = target.setdefault(parent, {})
        target[key] = value
    if record["metrics"]["latency_s"].get("p50") is None:
        record["metrics"]["latency_s"] = None
    for section, key in (("failure", "stage"), ("plan", "cores"), ("agreement", "reference")):
        if record.get(section, {}).get(key) is None:
            record[section] = None
    if record.get("notes") is None:
        record["notes"] = []
    record["attempts"] = [dict(a) for a in row.get("attempts") or []]
    return record
