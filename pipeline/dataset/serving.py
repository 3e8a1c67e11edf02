"""The dataset's serving records: ``data/serving.json``, the latest serving record per (model, hardware,
workload), a CI record before any other, then the newest (the rule of the latest view, :mod:`shards`).

Serving records (a ``serving`` section) are kept apart from the results' Parquet: a serving run of a
model is not another run of its batch-1 row (their latest keys would collide), and the page reads them whole
(the curve needs every point). The file holds whole, validated records, at most :data:`MAX_SERVING` of them.

From the same records, rewritten whenever the file changes, two Parquet views a subscriber queries like the others
(docs/methodology.md, "Serving as data"): ``data/serving_points.parquet`` (the ``serving`` config, one row per point:
:func:`point_rows`) and ``data/inferencex.parquet`` (the ``inferencex`` config, each point in the keys of
InferenceX's aggregated results, ``utils/process_result.py``: :func:`inferencex_rows`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from pipeline import fsatomic
from pipeline.dataset.layout import INFERENCEX_FILE, SERVING_FILE, SERVING_POINTS_FILE, parquet_bytes
from pipeline.errors import DatasetError
from pipeline.hardware import FAMILY_OF_ACCELERATOR
from pipeline.records import parse_time, record_id, validate_record

_Entry = TypeVar("_Entry")


def keep_newest(
    current: dict[Any, _Entry],
    entries: Iterable[_Entry],
    *,
    key: Callable[[_Entry], Hashable],
    rank: Callable[[_Entry], Any],
) -> int:
    """Merge ``entries`` into ``current`` (key -> entry, changed in place), an entry replacing its key's only when
    it ranks higher: the rule of the dataset's JSON and small Parquet files (serving records, warm checks).

    Returns:
        How many entries were taken.
    """
    taken = 0
    for entry in entries:
        at = key(entry)
        old = current.get(at)
        if old is None or rank(entry) > rank(old):
            current[at] = entry
            taken += 1
    return taken


#: The file's bound: one entry per model, hardware and workload (a catalog of thousands of models fits).
MAX_SERVING = 20_000


def serving_key(record: dict[str, Any]) -> tuple[str, str, str]:
    return (
        str(record["model_id"]).lower(),
        str(record["hardware"]["name"]),
        str(record["serving"]["workload"]["name"]),
    )


def _rank(record: dict[str, Any]) -> tuple[bool, str, str]:
    run = record["run"]
    return (run["source"] == "ci", run["finished_at"], run["started_at"])


def read_serving(root: Path) -> list[dict[str, Any]]:
    """The dataset's serving records (each valid; an invalid one is left out), or [] when it has none.

    Raises:
        DatasetError: the file is not a JSON list.
    """
    path = root / SERVING_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: not a list of serving records")
    return [r for r in data if isinstance(r, dict) and r.get("serving") and not validate_record(r)]


def add_serving(root: Path, records: Iterable[dict[str, Any]]) -> int:
    """Merge valid serving ``records`` into ``data/serving.json`` (atomically); returns how many entries changed."""
    current = {serving_key(r): r for r in read_serving(root)}
    changed = keep_newest(current, records, key=serving_key, rank=_rank)
    if changed:
        if len(current) > MAX_SERVING:
            raise DatasetError(f"{SERVING_FILE}: more than {MAX_SERVING} serving entries")
        ordered = [current[k] for k in sorted(current)]
        fsatomic.write_text(root / SERVING_FILE, json.dumps(ordered, indent=1, sort_keys=True) + "\n")
        write_serving_views(root, ordered)
    return changed


_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_PCT = ("p50", "p90", "p99")
#: A point's intervals (its ``spread``), as columns: ``<column>_low``, ``<column>_high`` (issue 50).
_SPREAD = {"ttft_p50_s": "ttft_s", "tpot_p50_ms": "tpot_ms", "e2e_p50_s": "e2e_s", "output_tok_s": "output_tok_s"}
#: The ``serving`` config: one row per point of each serving record (figures as the record holds them).
POINTS_SCHEMA = pa.schema(
    [
        ("record_id", _S), ("model_id", _S), ("revision", _S), ("task", _S), ("status", _S), ("source", _S),
        ("finished_at", pa.timestamp("us", tz="UTC")), ("hardware", _S), ("instance_type", _S), ("accelerator", _S),
        ("device", _S), ("chips", _I), ("engine", _S), ("engine_version", _S), ("engine_command", _S),
        ("tensor_parallel", _I), ("data_parallel", _I), ("tool", _S), ("tool_version", _S), ("workload", _S),
        ("input_tokens", _I), ("output_tokens", _I), ("range_ratio", _F), ("images_per_request", _I),
        ("weight_dtype", _S), ("concurrency", _I), ("headline", _B), ("requests", _I), ("success_rate", _F),
        ("output_tok_s", _F), ("input_tok_s", _F), ("tok_s_per_chip", _F), ("tok_s_per_user", _F),
        *((f"{figure}_{p}_{unit}", _F) for figure, unit in (("ttft", "s"), ("tpot", "ms"), ("itl", "ms"),
                                                             ("e2e", "s")) for p in _PCT),
        ("duration_s", _F), ("usd_per_million_tokens", _F), ("price_usd_per_hour", _F), ("price_option", _S),
        ("spread_requests", _I), ("spread_rounds", _I), *((f"{figure}_{end}", _F) for figure in _SPREAD
                                                          for end in ("low", "high")),
    ]
)  # fmt: skip
#: The ``inferencex`` config: InferenceX's single-node aggregated keys (``utils/process_result.py``: latencies in
#: seconds, ``*_intvty`` = 1000 / the TPOT in ms), then trncat's own (which chips and which record).
INFERENCEX_SCHEMA = pa.schema(
    [
        ("hw", _S), ("conc", _I), ("image", _S), ("model", _S), ("framework", _S), ("precision", _S),
        ("spec_decoding", _S), ("disagg", _B), ("isl", _I), ("osl", _I), ("is_multinode", _B), ("tp", _I),
        ("pp", _I), ("dcp_size", _I), ("pcp_size", _I), ("ep", _I), ("dp_attention", _S), ("tput_per_gpu", _F),
        ("output_tput_per_gpu", _F), ("input_tput_per_gpu", _F),
        *((f"{p}_{key}", _F) for key in ("ttft", "tpot", "intvty", "itl", "e2el") for p in ("median", "p90", "p99")),
        ("gpus", _I), ("device", _S), ("revision", _S), ("tool", _S), ("workload", _S), ("record_id", _S),
    ]
)  # fmt: skip
#: A record's weight dtype in InferenceX's ``precision`` words.
PRECISION = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float8_e4m3fn": "fp8"}
#: The engine packages a serving record's versions name, as pip spells them (InferenceX's ``image`` stand-in).
ENGINE_PACKAGES = (("vllm", "vllm"), ("vllm_neuron", "vllm-neuron"), ("libtorch_neuronx_lite", "libtorch-neuronx-lite"))


def _engine_version(serving: dict[str, Any]) -> str | None:
    versions = serving.get("versions") or {}
    return versions.get("vllm_neuron") if serving["engine"]["name"] == "vllm-neuron" else versions.get("vllm")


def point_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``serving`` config's rows of one valid serving record: one per point, the record's figures as they
    are, with what a reader filters on (model, revision, hardware, engine, tool and their versions, workload)."""
    serving, hardware, workload = record["serving"], record["hardware"], record["serving"]["workload"]
    engine, price = serving["engine"], serving.get("price") or {}
    options = engine.get("options") or {}
    base = {
        "record_id": record_id(record), "model_id": record["model_id"], "revision": record["revision"],
        "task": record["task"], "status": record["status"], "source": record["run"]["source"],
        "finished_at": parse_time(record["run"]["finished_at"]), "hardware": hardware["name"],
        "instance_type": hardware.get("instance_type"), "accelerator": hardware.get("accelerator"),
        "device": record["device"], "chips": serving["chips"], "engine": engine["name"],
        "engine_version": _engine_version(serving), "engine_command": engine.get("command"),
        "tensor_parallel": options.get("tensor_parallel"), "data_parallel": options.get("data_parallel", 1),
        "tool": serving["tool"]["name"], "tool_version": serving["tool"].get("version"), "workload": workload["name"],
        "input_tokens": workload["input_tokens"], "output_tokens": workload["output_tokens"],
        "range_ratio": workload.get("range_ratio"), "images_per_request": workload.get("images_per_request", 0),
        "weight_dtype": serving.get("weight_dtype"), "price_usd_per_hour": price.get("usd_per_hour"),
        "price_option": price.get("option"),
    }  # fmt: skip
    headline = (serving.get("headline") or {}).get("concurrency")
    rows = []
    for point in serving["points"]:
        row = {**base, "concurrency": point["concurrency"], "headline": point["concurrency"] == headline}
        for key in ("requests", "success_rate", "output_tok_s", "input_tok_s", "tok_s_per_chip", "tok_s_per_user",
                    "duration_s", "usd_per_million_tokens"):  # fmt: skip
            row[key] = point.get(key)
        for figure, unit in (("ttft", "s"), ("tpot", "ms"), ("itl", "ms"), ("e2e", "s")):
            for p in _PCT:
                row[f"{figure}_{p}_{unit}"] = (point.get(f"{figure}_{unit}") or {}).get(p)
        spread = point.get("spread") or {}
        row["spread_requests"], row["spread_rounds"] = spread.get("requests"), spread.get("rounds")
        for column, name in _SPREAD.items():
            row[f"{column}_low"], row[f"{column}_high"] = spread.get(name) or (None, None)
        rows.append(row)
    return rows


def _hw(record: dict[str, Any]) -> str:
    """InferenceX's ``hw`` (a runner type: ``h100``, ``mi300x``): the Trainium family (``trn2``), the GPU's name
    without its vendor (``l40s``), or ``cpu``."""
    if record["device"] == "cpu":  # the accelerator field names the host's processor
        return "cpu"
    accelerator = str(record["hardware"].get("accelerator") or record["device"])
    family = FAMILY_OF_ACCELERATOR.get(accelerator.lower())
    if family:
        return family
    return accelerator.lower().removeprefix("nvidia ").removeprefix("amd ").replace(" ", "-")


def _per(value: float | None, gpus: int) -> float | None:
    return None if value is None else value / gpus


def inferencex_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each point of a valid serving record in InferenceX's aggregated result keys, computed as
    ``utils/process_result.py`` computes them for a single-node run: ``tput_per_gpu`` = (input + output tokens/s)
    / GPUs, ``output_tput_per_gpu``, ``input_tput_per_gpu``, every latency in seconds, ``*_intvty`` = 1000 / the
    TPOT in ms. A GPU is one accelerator package: a GPU of the cuda twin, a Trainium2 chip (its 8 NeuronCores, 4
    logical at LNC=2; ``tp`` stays the engine's tensor-parallel size, in NeuronCores there), the CPU host as one.
    Without the input token rate (a record from before it was measured) the two throughputs that need it are null.
    """
    serving, workload = record["serving"], record["serving"]["workload"]
    engine, gpus = serving["engine"], int(serving["chips"])
    options = engine.get("options") or {}
    versions = serving.get("versions") or {}
    packages = [f"{pip}=={versions[key]}" for key, pip in ENGINE_PACKAGES if versions.get(key)]
    dtype = serving.get("weight_dtype")
    base = {
        "hw": _hw(record), "image": " ".join(packages) or engine["name"], "model": record["model_id"],
        "framework": engine["name"], "precision": PRECISION.get(str(dtype), dtype),
        "spec_decoding": "none", "disagg": False, "isl": workload["input_tokens"], "osl": workload["output_tokens"],
        "is_multinode": False, "tp": options.get("tensor_parallel") or gpus, "pp": 1, "dcp_size": 1, "pcp_size": 1,
        "ep": 1, "dp_attention": "false", "gpus": gpus, "device": record["device"], "revision": record["revision"],
        "tool": serving["tool"]["name"], "workload": workload["name"], "record_id": record_id(record),
    }  # fmt: skip
    rows = []
    for point in serving["points"]:
        output, prompt = point.get("output_tok_s"), point.get("input_tok_s")
        total = output + prompt if output is not None and prompt is not None else None
        row = {**base, "conc": point["concurrency"], "tput_per_gpu": _per(total, gpus),
               "output_tput_per_gpu": _per(output, gpus), "input_tput_per_gpu": _per(prompt, gpus)}  # fmt: skip
        for p, name in zip(_PCT, ("median", "p90", "p99"), strict=True):
            tpot, itl = point["tpot_ms"].get(p), point["itl_ms"].get(p)
            row[f"{name}_ttft"], row[f"{name}_e2el"] = point["ttft_s"].get(p), point["e2e_s"].get(p)
            row[f"{name}_tpot"] = None if tpot is None else tpot / 1000.0
            row[f"{name}_intvty"] = 1000.0 / tpot if tpot else None
            row[f"{name}_itl"] = None if itl is None else itl / 1000.0
        rows.append(row)
    return rows


def write_serving_views(root: Path, records: list[dict[str, Any]]) -> None:
    """``data/serving_points.parquet`` and ``data/inferencex.parquet`` from the serving records (all of them)."""
    for path, schema, rows_of in ((SERVING_POINTS_FILE, POINTS_SCHEMA, point_rows),
                                  (INFERENCEX_FILE, INFERENCEX_SCHEMA, inferencex_rows)):  # fmt: skip
        rows = [row for record in records for row in rows_of(record)]
        if rows:  # a 0-row file breaks `datasets`
            fsatomic.write_bytes(root / path, parquet_bytes(pa.Table.from_pylist(rows, schema=schema)))
