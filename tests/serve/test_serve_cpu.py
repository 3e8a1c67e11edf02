"""The serving test of ``transformers serve``, the CPU engine where vLLM cannot serve (issue 46): the real load
generator (guidellm) against the real ``transformers serve`` on the CPU, the tiny Llama at its default size (4
heads of 16, a head_dim vLLM's CPU attention refuses), concurrency 1, 2, 4: a valid serving record with every field;
one point's $/1M tokens and the headline at the service level recomputed by hand; the real lm-eval's task score on
the shipped tiny task, taken on the same engine (issue 31). vLLM's own: tests/serve/test_serve_vllm_cpu.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pipeline.prices import load_pricing
from pipeline.records import validate_record
from pipeline.serve import DEFAULT_SLO, EVAL_TASKS, ServeOptions, serve_folder, serving_workload
from tests.serve.conftest import engines_left

# one engine start, one guidellm run over the three points, one warm restart: about a minute on two free cores
pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    from pipeline.testing import build_tiny_llama
    from tests.serve.conftest import PRICES_YAML

    folder = tmp_path_factory.mktemp("serve")
    model = build_tiny_llama(folder / "tiny-llama")
    prices = folder / "instances.yaml"
    prices.write_text(PRICES_YAML, encoding="utf-8")
    out = folder / "serving.json"
    record = serve_folder(
        model,
        model_id="trncat-demo/tiny-llama",
        revision="0" * 40,
        options=ServeOptions(
            device="cpu",
            workload=serving_workload("cpu-tiny"),
            out=out,
            pricing=load_pricing(prices),
            instance_type="c7i.xlarge",
            eval_task=EVAL_TASKS["trncat-tiny-arith"],
        ),
    )
    return record, out


def test_the_record_is_valid_and_has_every_field(served: tuple[dict[str, Any], Path]) -> None:
    record, out = served
    assert validate_record(record) == [], record.get("notes")
    assert record["schema_version"] == "2.0" and record["status"] == "pass", record["failure"]
    assert record["device"] == "cpu" and not record["hardware"].get("emulated")
    serving = record["serving"]
    assert serving["tool"]["name"] == "guidellm" and serving["tool"]["version"] not in ("", "unknown")
    assert serving["engine"]["name"] == "transformers-serve"
    assert "head_dim=16" in serving["engine"]["options"]["vllm_refused"]  # why not vLLM, in the record
    assert "transformers serve trncat-demo/tiny-llama@" + "0" * 40 in serving["engine"]["command"]
    assert "--continuous-batching" in serving["engine"]["command"]
    assert serving["engine"]["ready_s"] > 0 and serving["engine"]["warm_ready_s"] > 0
    assert serving["workload"]["ignore_eos"] is True and serving["workload"]["warmups"] == "2 x concurrency"
    assert serving["workload"]["dataset"].startswith("random")
    assert serving["weight_dtype"] == "float32" and serving["kv_dtype"] == "float32"
    assert [p["concurrency"] for p in serving["points"]] == [1, 2, 4]
    workload = serving_workload("cpu-tiny")
    per_stream = workload.warmup_per_stream + workload.measured_per_stream
    for point in serving["points"]:
        assert point["success_rate"] == 1.0
        # the measured requests: the point's budget less guidellm's warm-ups. Which requests count as warm-up is
        # decided as they complete, so a request in flight at the boundary can land on either side (CI once saw 25
        # measured at concurrency 4, budget 32, warm-ups 8): bounded by the whole budget, and at least one per stream
        assert point["concurrency"] <= point["requests"] <= per_stream * point["concurrency"]
        assert point["output_tok_s"] > 0 and point["tok_s_per_user"] > 0
        for name in ("ttft_s", "tpot_ms", "itl_ms", "e2e_s"):
            assert 0 < point[name]["p50"] <= point[name]["p90"] <= point[name]["p99"]
    assert serving["price"]["usd_per_hour"] == 0.357 and serving["price"]["as_of"] == "2026-11"
    assert serving["slo"] == DEFAULT_SLO.to_record()
    assert out.is_file() and (out.parent / "serving.serve.sh").is_file()


def test_lm_eval_scored_the_served_model_on_the_shipped_task(served: tuple[dict[str, Any], Path]) -> None:
    """lm-eval's requests reach transformers serve's completions endpoint and come back scored: a score (the random
    tiny Llama's, whatever it is), its standard error, and the stated test floor 0.0 it is judged against."""
    record, _ = served
    evaluation = record["serving"]["eval"]
    assert evaluation["score"] is not None, evaluation["output_tail"]
    assert 0.0 <= evaluation["score"] <= 1.0 and evaluation["passed"] is True
    assert (evaluation["task"], evaluation["metric"]) == ("trncat-tiny-arith", "exact_match,first-number")
    assert evaluation["floor"] == 0.0 and "stated test floor" in evaluation["floor_source"]
    assert evaluation["tool"] == {"name": "lm-eval", "version": "0.4.13"}


def test_one_points_cost_and_the_headline_recomputed_by_hand(served: tuple[dict[str, Any], Path]) -> None:
    record, _ = served
    serving = record["serving"]
    point = serving["points"][-1]
    # $0.357 an hour for the whole instance (share 1), over the output tokens of one hour, per million
    assert point["usd_per_million_tokens"] == pytest.approx(0.357 / (point["output_tok_s"] * 3600) * 1e6)
    # the headline: the highest tok/s per chip among the points whose p99 TTFT <= 2 s and p99 1/TPOT >= 10 tok/s
    meeting = [
        p
        for p in serving["points"]
        if p["success_rate"] == 1.0 and p["ttft_s"]["p99"] <= 2.0 and 1000 / p["tpot_ms"]["p99"] >= 10.0
    ]
    best = max(meeting, key=lambda p: p["tok_s_per_chip"]) if meeting else None
    assert serving["headline"]["tok_s_per_chip"] == (best["tok_s_per_chip"] if best else None)
    assert serving["headline"]["usd_per_million_tokens"] == (best["usd_per_million_tokens"] if best else None)
    # at a lenient service level, every point meets it: the headline is the fastest point
    lenient = dataclasses.replace(DEFAULT_SLO, ttft_s=3600.0, tok_s_per_user=1e-6)
    from pipeline.serve import headline

    fastest = max(serving["points"], key=lambda p: p["tok_s_per_chip"])
    assert headline(serving["points"], lenient)["concurrency"] == fastest["concurrency"]


def test_no_engine_process_is_left_behind(served: tuple[dict[str, Any], Path]) -> None:
    record, _ = served
    assert engines_left(record) == []
