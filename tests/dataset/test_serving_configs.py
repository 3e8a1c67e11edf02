"""The serving points as data: the ``serving`` config (one row per point) and the ``inferencex`` config (each point
in InferenceX's aggregated result keys, as its ``utils/process_result.py`` computes them), written by the dataset
build beside data/serving.json, listed in the card, and read by ``datasets``, pandas and DuckDB."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.dataset import (
    INFERENCEX_FILE,
    SERVING_POINTS_FILE,
    build,
    inferencex_rows,
    point_rows,
    read_serving,
)
from pipeline.records import record_id, validate_record
from tests.support.records import sample_record, sample_serving

#: InferenceX's single-node result keys the issue names (utils/process_result.py, and its app's mock rows).
INFERENCEX_KEYS = (
    "hw", "conc", "image", "model", "framework", "precision", "spec_decoding", "disagg", "isl", "osl",
    "is_multinode", "tp", "ep", "dp_attention", "tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu",
    "median_ttft", "median_tpot", "median_intvty", "median_e2el",
)  # fmt: skip


def known_record() -> dict[str, Any]:
    """A Trainium2 record on 2 chips (TP 8 at LNC=2) with one point of known figures, by a tool other than guidellm."""
    record = sample_serving(device="neuron")
    serving = record["serving"]
    serving["chips"] = record["cores"] = 2
    serving["engine"]["options"]["tensor_parallel"] = 8
    serving["tool"] = {"name": "vllm bench serve", "version": "0.32.0", "commands": ["vllm bench serve ..."]}
    serving["versions"].update(vllm="0.29.0", vllm_neuron="0.29.0.1.2.0", libtorch_neuronx_lite=None)
    point = serving["points"][0]
    point.update(concurrency=4, output_tok_s=300.0, input_tok_s=600.0, tok_s_per_chip=150.0, tok_s_per_user=50.0)
    point.update(ttft_s={"p50": 0.25, "p90": 0.4, "p99": 0.5}, tpot_ms={"p50": 20.0, "p90": 25.0, "p99": 40.0})
    point.update(itl_ms={"p50": 18.0, "p90": 24.0, "p99": 39.0}, e2e_s={"p50": 5.0, "p90": 6.0, "p99": 8.0})
    serving["points"] = [point]
    serving["headline"] = {"concurrency": 4, "tok_s_per_chip": 150.0, "usd_per_million_tokens": None}
    point["usd_per_million_tokens"] = None
    assert validate_record(record) == []
    return record


def test_a_point_in_inferencex_keys_is_computed_as_process_result_computes_it() -> None:
    record = known_record()
    (row,) = inferencex_rows(record)
    assert set(INFERENCEX_KEYS) <= set(row)
    # by hand: 2 chips; (600 + 300) / 2, 300 / 2, 600 / 2; ms -> s; intvty = 1000 / 20 ms
    expected = {
        "hw": "trn2", "conc": 4, "model": record["model_id"], "framework": "vllm-neuron", "precision": "bf16",
        "image": "vllm==0.29.0 vllm-neuron==0.29.0.1.2.0", "spec_decoding": "none", "disagg": False, "isl": 1024,
        "osl": 1024, "is_multinode": False, "tp": 8, "ep": 1, "dp_attention": "false", "tput_per_gpu": 450.0,
        "output_tput_per_gpu": 150.0, "input_tput_per_gpu": 300.0, "median_ttft": 0.25, "median_tpot": 0.02,
        "median_intvty": 50.0, "median_e2el": 5.0, "p99_ttft": 0.5, "p99_tpot": 0.04, "p99_intvty": 25.0,
        "median_itl": 0.018, "gpus": 2, "tool": "vllm bench serve", "record_id": record_id(record),
    }  # fmt: skip
    assert {k: row[k] for k in expected} == pytest.approx(expected)


def test_a_gpu_twin_is_keyed_by_its_gpu_and_a_point_without_the_input_rate_has_no_total() -> None:
    (first, *_) = inferencex_rows(sample_serving(device="cuda"))
    assert (first["hw"], first["tp"], first["framework"], first["image"]) == ("l40s", 1, "vllm", "vllm")
    assert first["tput_per_gpu"] is None and first["input_tput_per_gpu"] is None
    assert first["output_tput_per_gpu"] == pytest.approx(60.0)  # 40 x 1.5 tok/s on 1 GPU
    cpu = sample_serving(device="neuron")
    cpu["device"], cpu["hardware"]["accelerator"] = "cpu", "Intel(R) Xeon(R) Processor @ 2.80GHz"
    assert inferencex_rows(cpu)[0]["hw"] == "cpu"


def test_one_serving_row_per_point_with_its_tool_and_engine() -> None:
    record = sample_serving(device="neuron")
    rows = point_rows(record)
    assert [r["concurrency"] for r in rows] == [1, 2, 4, 8]
    assert [r["headline"] for r in rows] == [False, False, False, True]
    first = rows[0]
    engine = (first["tool"], first["engine"], first["tensor_parallel"], first["chips"])
    assert engine == ("guidellm", "vllm-neuron", 4, 1)
    assert (first["ttft_p99_s"], first["tpot_p50_ms"], first["output_tok_s"]) == (0.08, 25.0, 40.0)
    assert first["record_id"] == record_id(record) and first["source"] == "ci"
    tool = known_record()
    assert point_rows(tool)[0]["tool"] == "vllm bench serve"  # the record's tool, whichever it is


def _configs(folder: Path) -> dict[str, str]:
    card = (folder / "README.md").read_text(encoding="utf-8")
    return {c["config_name"]: c["data_files"] for c in yaml.safe_load(card.split("---")[1])["configs"]}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A dataset built from a batch-1 row and three serving records (Trainium2, its GPU twin, one of known
    figures for another model)."""
    other = known_record()
    other["model_id"] = "acme/known"
    build([sample_record(), sample_serving(device="neuron"), sample_serving(device="cuda"), other], tmp_path)
    return tmp_path


def test_the_build_writes_both_configs_and_the_card_lists_them(folder: Path) -> None:
    assert len(read_serving(folder)) == 3
    configs = _configs(folder)
    assert configs["serving"] == SERVING_POINTS_FILE and configs["inferencex"] == INFERENCEX_FILE
    assert "InferenceX" in (folder / "README.md").read_text(encoding="utf-8")


def test_a_serving_only_build_lists_the_configs_too(tmp_path: Path) -> None:
    build([sample_serving(device="neuron")], tmp_path)
    assert {"serving", "inferencex"} <= set(_configs(tmp_path))


def test_datasets_pandas_and_duckdb_read_the_serving_configs(folder: Path, tmp_path: Path) -> None:
    import datasets
    import pandas as pd

    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    points = datasets.load_dataset(
        "parquet", data_files=str(folder / SERVING_POINTS_FILE), split="train", cache_dir=str(tmp_path / "c")
    )
    assert points.num_rows == 9 and points.features["finished_at"] == datasets.Value("timestamp[us, tz=UTC]")
    frame = pd.read_parquet(folder / INFERENCEX_FILE, dtype_backend="pyarrow")
    assert list(frame.columns[: len(INFERENCEX_KEYS)]) != [] and set(INFERENCEX_KEYS) <= set(frame.columns)
    assert str(frame["conc"].dtype) == "int64[pyarrow]" and str(frame["tput_per_gpu"].dtype) == "double[pyarrow]"
    known = frame[frame.model == "acme/known"].iloc[0]
    assert (known["tput_per_gpu"], known["median_intvty"]) == (450.0, 50.0)
    # set beside InferenceX's own GPU rows (the shape of its app's mock row), no glue: one frame, one plot's axes
    theirs = pd.DataFrame([{"hw": "h100", "conc": 4, "model": "acme/known", "framework": "vllm", "precision": "bf16",
                            "tp": 1, "tput_per_gpu": 900.0, "median_intvty": 60.0}])  # fmt: skip
    both = pd.concat([theirs, frame[frame.model == "acme/known"]], ignore_index=True)
    assert list(both["hw"]) == ["h100", "trn2"]
    rows = duckdb.sql(
        f"SELECT hw, conc, median_intvty FROM read_parquet('{folder / INFERENCEX_FILE}') "
        "WHERE model = 'acme/known' ORDER BY conc"
    ).fetchall()
    assert rows == [("trn2", 4, 50.0)]
    curve = duckdb.sql(
        f"SELECT device, concurrency, tok_s_per_chip FROM read_parquet('{folder / SERVING_POINTS_FILE}') "
        "WHERE tool = 'guidellm' AND device = 'neuron' ORDER BY concurrency"
    ).fetchall()
    assert [c for _, c, _ in curve] == [1, 2, 4, 8]


def test_an_unchanged_serving_file_rewrites_nothing(folder: Path) -> None:
    before = (folder / INFERENCEX_FILE).read_bytes()
    summary = build([copy.deepcopy(sample_serving(device="neuron"))], folder)
    assert summary.serving == 0 and (folder / INFERENCEX_FILE).read_bytes() == before
