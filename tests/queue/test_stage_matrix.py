"""The stage matrix's rows (issue 49): states only real hardware decides, documented beside measured, and the
``matrix`` config every publish rewrites, read by datasets, pandas and DuckDB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.dataset import MATRIX_FILE, MATRIX_SCHEMA, read_matrix
from pipeline.queue import load_support, matrix_rows
from pipeline.records import flatten
from tests.support.records import sample_failure, sample_record, sample_serving, sample_warm_check

LLAMA = "LlamaForCausalLM"


def _cell(rows: list[dict[str, Any]], model: str, device_class: str, item: str) -> dict[str, Any]:
    [row] = [r for r in rows if (r["model_id"], r["device_class"], r["item"]) == (model, device_class, item)]
    return row


def test_an_emulated_or_cpu_pass_is_never_passing_and_a_real_run_decides_its_class_only() -> None:
    emulated = flatten(sample_record(model_id="acme/emulated", architecture=LLAMA))
    emulated["emulated"] = True
    cpu = flatten(sample_record(model_id="acme/cpu", device="cpu", dtype="float32", architecture=LLAMA))
    real = flatten(sample_record(model_id="acme/real", architecture=LLAMA))
    warm = sample_warm_check(model_id="acme/real", emulated=True)
    too_big = {"model_id": "acme/real", "task": "text-generation", "device_class": "trn2", "item": "plan",
               "state": "failing", "revision": None, "params": 10**12, "neuron_cores": None, "instance": None,
               "parallelism": None, "detail": "does not fit on trn2.48xlarge (LlamaForCausalLM)"}  # fmt: skip
    rows = matrix_rows(models=[("acme/unmeasured", "text-generation")], latest=[emulated, cpu, real], warm=[warm],
                       previous=[too_big], support=load_support())  # fmt: skip
    plan = _cell(rows, "acme/real", "trn2", "plan")
    assert (plan["state"], plan["documented"], plan["documented_but_fails"]) == ("failing", "supported", False)
    assert {r["state"] for r in rows if r["model_id"] == "acme/emulated" and r["kind"] == "stage"} >= {"emulated"}
    assert _cell(rows, "acme/emulated", "trn2", "compile")["state"] == "emulated"
    assert _cell(rows, "acme/cpu", "trn2", "compile")["state"] == "cpu"
    assert _cell(rows, "acme/cpu", "trn3", "compile")["state"] == "cpu"
    assert not [r for r in rows if r["model_id"] in ("acme/emulated", "acme/cpu") and r["state"] == "passing"]
    assert _cell(rows, "acme/real", "trn2", "compile")["state"] == "passing"
    assert _cell(rows, "acme/real", "trn3", "compile")["state"] == "untested", "a trn2 run says nothing of trn3"
    assert _cell(rows, "acme/real", "trn2", "warm_start")["state"] == "emulated"
    assert _cell(rows, "acme/real", "trn2", "compile")["documented"] == "supported"
    assert {r["state"] for r in rows if r["model_id"] == "acme/unmeasured"} == {"untested"}, "no planner, no run"
    assert not [r for r in rows if r["device_class"] == "gpu"], "no GPU twin measured: no gpu rows"


def _write_records(folder: Path, *records: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index, record in enumerate(records):
        (folder / f"r{index}.json").write_text(json.dumps(record), encoding="utf-8")
    return folder


def test_a_documented_model_whose_run_failed_is_documented_but_fails_and_the_config_reads_after_a_no_op_publish(
    tmp_path: Path,
) -> None:
    failed = sample_failure(model_id="acme/llama-fails", architecture=LLAMA, stage="compile", code="ncc_evrf001")
    passed = sample_record(model_id="acme/other", architecture="GPT2LMHeadModel")
    results, out = _write_records(tmp_path / "results", failed, passed), tmp_path / "dataset"
    assert main(["publish", str(results), "--to-folder", str(out)]) == 0
    rows = read_matrix(out)
    flagged = [(r["model_id"], r["device_class"], r["item"]) for r in rows if r["documented_but_fails"]]
    assert flagged == [("acme/llama-fails", "trn2", "compile")]
    cell = _cell(rows, "acme/llama-fails", "trn2", "compile")
    assert (cell["state"], cell["detail"], cell["source"]) == ("failing", "ncc_evrf001", "ci")
    assert cell["documented_source"].startswith("https://") and cell["record_id"]
    assert _cell(rows, "acme/other", "trn2", "compile")["documented"] == "not_listed"
    assert "matrix" in (out / "README.md").read_text(encoding="utf-8")
    before = (out / MATRIX_FILE).read_bytes()
    assert main(["publish", str(results), "--to-folder", str(out)]) == 0  # nothing new
    assert (out / MATRIX_FILE).read_bytes() == before, "a publish that changed nothing writes the same file"

    import datasets
    import pandas as pd

    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    loaded = datasets.load_dataset("parquet", data_files=str(out / MATRIX_FILE), split="train",
                                   cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert loaded.num_rows == len(rows) and loaded.features["decided_at"] == datasets.Value("timestamp[us, tz=UTC]")
    frame = pd.read_parquet(out / MATRIX_FILE, dtype_backend="pyarrow")
    assert list(frame.columns) == MATRIX_SCHEMA.names and frame["documented_but_fails"].sum() == 1
    path = str(out / MATRIX_FILE)
    found = duckdb.sql(f"select model_id, item from read_parquet('{path}') where documented_but_fails").fetchall()
    assert found == [("acme/llama-fails", "compile")]


def test_discovered_models_are_planned_once_per_device_class_and_kept_out_models_never(tmp_path: Path) -> None:
    import datetime as dt

    from pipeline.dataset import write_exclusions, write_rankings
    from pipeline.errors import PlanError
    from pipeline.plan import plan_config
    from pipeline.queue import refresh_matrix
    from pipeline.testing import CONFIG_ONLY_MODELS

    configs = dict(CONFIG_ONLY_MODELS)
    names = [*configs, "acme/uncountable", "acme/remote"]
    ranked = [{"date": "2026-12-01", "task": "text-generation", "view": "trending", "rank": i + 1, "model_id": m}
              for i, m in enumerate(names)]  # fmt: skip
    write_rankings(ranked, tmp_path, date=dt.date(2026, 12, 1), task="text-generation", view="trending")
    write_exclusions([{"model_id": "acme/remote", "task": "text-generation", "reason": "remote code",
                       "kind": "remote_code"}], tmp_path)  # fmt: skip
    asked: list[tuple[str, str]] = []

    def planner(model_id: str, task: str, instance: str) -> Any:
        asked.append((model_id, instance))
        if model_id not in configs:
            raise PlanError("cannot count the parameters")
        return plan_config(configs[model_id], instance=instance, task=task)

    refresh_matrix(tmp_path, planner=planner)
    rows = read_matrix(tmp_path)
    assert "acme/remote" not in {r["model_id"] for r in rows} and ("acme/remote", "trn2.48xlarge") not in asked
    plan = _cell(rows, "trncat-demo/tiny-qwen3", "trn2", "plan")
    assert (plan["state"], plan["instance"], plan["documented"]) == ("predicted", "trn2.48xlarge", "supported")
    assert plan["neuron_cores"] >= 1 and plan["params"] > 0 and plan["parallelism"].startswith("tp=")
    assert plan["detail"].endswith("(Qwen3ForCausalLM)")
    assert _cell(rows, "trncat-demo/tiny-qwen3", "trn3", "plan")["documented"] == "not_listed"  # the recipe: Trn2 only
    assert _cell(rows, "trncat-demo/tiny-qwen3", "trn3", "plan")["instance"] == "trn3.48xlarge"
    assert _cell(rows, "acme/uncountable", "trn2", "plan")["state"] == "untested"
    before, asked[:] = (tmp_path / MATRIX_FILE).read_bytes(), []
    refresh_matrix(tmp_path, planner=planner)  # kept: only the model that could not be planned is asked again
    assert {m for m, _ in asked} == {"acme/uncountable"} and (tmp_path / MATRIX_FILE).read_bytes() == before


def test_a_kept_row_follows_the_docs_tables_of_the_day(tmp_path: Path) -> None:
    """The documented columns are set again on every refresh (issue 49): a model whose shard a publish does not
    mirror keeps its measured rows, yet a change in runners/vllm-neuron-docs.yaml reaches them, and
    documented_but_fails with it."""
    from pipeline.dataset import LATEST_DIR
    from pipeline.queue import refresh_matrix
    from pipeline.queue.stage_matrix import SUPPORT_FILE

    failed = sample_failure(model_id="acme/llama-fails", architecture=LLAMA, stage="compile", code="ncc_evrf001")
    results, out = _write_records(tmp_path / "results", failed), tmp_path / "dataset"
    assert main(["publish", str(results), "--to-folder", str(out)]) == 0
    assert _cell(read_matrix(out), "acme/llama-fails", "trn2", "compile")["documented_but_fails"]
    for shard in (out / LATEST_DIR).glob("*.parquet"):  # as a publish of another model's record mirrors it
        shard.unlink()
    changed = tmp_path / "docs.yaml"
    text = SUPPORT_FILE.read_text(encoding="utf-8")
    old = "trn2: {model: supported, lora: not_listed, eagle3: supported, prefix_caching: supported, fp8: supported"
    changed.write_text(text.replace(old, old.replace("model: supported", "model: not_supported")), encoding="utf-8")
    assert changed.read_text(encoding="utf-8") != text
    refresh_matrix(out, planner=None, support=changed)
    cell = _cell(read_matrix(out), "acme/llama-fails", "trn2", "compile")
    assert cell["state"] == "failing", "kept (recomputed without its shard it would be untested)"
    assert (cell["documented"], cell["documented_but_fails"]) == ("not_supported", False)
    refresh_matrix(out, planner=None)  # the tables back: the flag back
    assert _cell(read_matrix(out), "acme/llama-fails", "trn2", "compile")["documented_but_fails"]


def _exercised(model: str, passed: bool | None, *, status: str = "pass") -> dict[str, Any]:
    """A Trainium2 serving record that ran with prefix caching's flags, its probe's verdict ``passed``."""
    record = sample_serving(model_id=model)
    if status == "fail":
        failure = {"stage": "load", "code": "engine_exited", "message": "vllm serve exited"}
        record.update(status="fail", failure=failure)
    detail = "8 requests sharing a 2088-token prefix: prefix-cache hit rate " + ("0.85" if passed else "0.00")
    record["serving"]["features"] = [{"name": "prefix_caching", "flags": ["--enable-prefix-caching", "--block-size",
                                      "32"], "passed": passed, "hit_rate": None, "detail": detail}]  # fmt: skip
    return record


def test_a_feature_is_decided_by_the_real_serving_records_that_exercised_it_and_only_those() -> None:
    """Passing from a Trainium2 record whose probe saw the cache hit; failing (and documented but fails, where the
    docs say supported) from one whose probe saw none, or whose run failed with the flag on; untested elsewhere."""
    models = ["acme/hits", "acme/misses", "acme/dies", "acme/plain"]
    latest = [flatten(sample_record(model_id=m, architecture=LLAMA)) for m in models]
    plain = sample_serving(model_id="acme/plain")
    serving = [_exercised("acme/hits", True), _exercised("acme/misses", False),
               _exercised("acme/dies", None, status="fail"), plain]  # fmt: skip
    rows = matrix_rows(models=[], latest=latest, serving=serving, support=load_support())
    hits = _cell(rows, "acme/hits", "trn2", "prefix_caching")
    assert (hits["state"], hits["documented"], hits["documented_but_fails"]) == ("passing", "supported", False)
    assert hits["detail"].startswith("--enable-prefix-caching --block-size 32: 8 requests") and "0.85" in hits["detail"]
    assert hits["record_id"] and hits["source"] == "ci" and hits["decided_at"] is not None
    misses = _cell(rows, "acme/misses", "trn2", "prefix_caching")
    assert (misses["state"], misses["documented_but_fails"]) == ("failing", True) and "0.00" in misses["detail"]
    assert _cell(rows, "acme/misses", "trn2", "serve")["state"] == "passing", "the probe fails the feature only"
    dies = _cell(rows, "acme/dies", "trn2", "prefix_caching")
    assert (dies["state"], dies["documented_but_fails"], dies["detail"]) == (
        "failing", True, "--enable-prefix-caching --block-size 32: engine_exited")  # fmt: skip
    assert _cell(rows, "acme/plain", "trn2", "prefix_caching")["state"] == "untested", "no flag, no evidence"
    assert _cell(rows, "acme/hits", "trn3", "prefix_caching")["state"] == "untested", "a trn2 run says nothing of trn3"
    assert {r["state"] for r in rows if r["item"] in ("lora", "eagle3", "fp8", "mxfp4", "mxfp8")} == {"untested"}
    emulated = _exercised("acme/hits", True)
    emulated["hardware"] = {**emulated["hardware"], "emulated": True}
    rows = matrix_rows(models=[], latest=latest[:1], serving=[emulated], support=load_support())
    assert _cell(rows, "acme/hits", "trn2", "prefix_caching")["state"] == "emulated", "never passing off hardware"
