"""The load generator's scenario, read by guidellm's own schema, and its report read into points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import RecordError
from pipeline.serve import (
    FULL_CONCURRENCIES,
    ServeOptions,
    points_of,
    read_report,
    scenario,
    serve_script,
    serving_workload,
    transformers_serve,
    vllm_serve,
)
from tests.serve.conftest import REPORT, report_of
from tests.support.records import sample_serving


@pytest.mark.parametrize("levels", [[1, 2, 4], list(FULL_CONCURRENCIES)])
def test_guidellm_reads_the_scenario_with_warmups_at_twice_the_concurrency(levels: list[int]) -> None:
    schema = pytest.importorskip("guidellm.schemas.benchmark.entrypoints")
    workload = serving_workload("1k/1k")
    spec = vllm_serve(Path("/m"), port=8000, neuron=True, tensor_parallel=4, lnc=2)
    doc = scenario(spec, workload, levels, tokenizer=Path("/m"), report=Path("/r.json"))
    benchmarks = schema.BenchmarkScenario.model_validate(doc).get_benchmarks()
    assert [b.profile.streams for b in benchmarks] == [[c] for c in levels]
    for benchmark, concurrency in zip(benchmarks, levels, strict=True):
        budget = benchmark.constraints[0].count
        assert budget == 8 * concurrency
        assert benchmark.profile.warmup.compute_limits(budget, None)[1] == 2 * concurrency
    data = doc["spec"]["data"][0]
    # vLLM: guidellm's own ignore-EOS (output_tokens set); prompts in [input x (1 - range ratio), input]
    assert (data["output_tokens"], data["prompt_tokens_min"], data["prompt_tokens_max"]) == (1024, 204, 1024)


def test_transformers_serve_gets_its_fixed_output_length_from_its_own_generation_config() -> None:
    workload = serving_workload("cpu-tiny")
    doc = scenario(transformers_serve(Path("/m"), port=1), workload, [1], tokenizer=Path("/m"), report=Path("/r"))
    backend = doc["spec"]["backend"]
    assert "output_tokens" not in doc["spec"]["data"][0]  # guidellm would send ignore_eos, which it refuses
    config = json.loads(backend["extras"]["body"]["generation_config"])
    assert config["min_new_tokens"] == config["max_new_tokens"] == backend["max_tokens"] == workload.output_tokens


def test_a_report_becomes_points_with_guidellm_figures() -> None:
    (point,) = points_of(report_of((4, 30, 2, 120.0)))
    assert point["concurrency"] == 4 and point["requests"] == 32
    assert point["success_rate"] == pytest.approx(30 / 32)
    assert point["output_tok_s"] == 120.0 and point["tok_s_per_user"] == pytest.approx(50.0)  # 1000 / 20 ms
    assert point["ttft_s"] == pytest.approx({"p50": 0.1, "p90": 0.15, "p99": 0.19})
    assert point["e2e_s"]["p99"] == 1.5


def test_a_report_guidellm_s_model_refuses_or_a_missing_one_reads_as_none(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    assert read_report(report) is None  # guidellm wrote none
    report.write_text("{not json", encoding="utf-8")
    assert read_report(report) is None
    report.write_text(json.dumps({"benchmarks": [{"metrics": {}}]}), encoding="utf-8")
    assert read_report(report) is None  # its report model refuses it
    report.write_text(REPORT.read_text(encoding="utf-8"), encoding="utf-8")
    (point,) = points_of(read_report(report))  # type: ignore[arg-type]
    assert point["concurrency"] == 1 and point["requests"] == 5 and point["success_rate"] == 1.0


def test_serve_sh_pins_and_quotes() -> None:
    record = sample_serving(device="cuda")
    record["versions"]["transformers"] = "5.0.0"
    record["serving"]["engine"]["command"] = (
        "VLLM_X=1 /opt/venv/bin/vllm serve /data/m --port 8000 --dtype '$(rm -rf /)'"
    )
    text = serve_script(record)
    assert "guidellm==0.8.1" in text and "transformers==5.0.0" in text
    # the engine line is rebuilt from the engine's name and options (issue 47.7): no word of the recorded command
    assert 'vllm serve "$MODEL" --host 127.0.0.1 --port "$PORT" --tensor-parallel-size 1' in text
    assert "/opt/venv" not in text and "rm -rf" not in text and "VLLM_X" not in text
    record["serving"]["engine"]["options"]["dtype"] = "$(rm -rf /)"
    with pytest.raises(RecordError, match="not a plain word"):
        serve_script(record)


def test_the_serving_smoke_summarises_what_a_first_run_settles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.serve import serving_smoke, serving_smoke_line
    from pipeline.serve import smoke as smoke_module
    from pipeline.serve.cache import compile_cache_dir, run_cache_root

    seen: dict[str, object] = {}

    def fake(folder: Path, *, options: ServeOptions, **names: object) -> dict:
        seen.update(names, folder=folder, device=options.device, workload=options.workload)
        assert options.work is not None
        entry = compile_cache_dir(run_cache_root(options.work)) / "ab12"
        entry.mkdir(parents=True)  # what the engine left in its run-private cache, and the bundle beside the record
        (entry / "model.neff").write_bytes(b"NEFF")
        (entry / "meta.json").write_text("{}")
        (tmp_path / "serving-smoke.neff-cache.tar.gz").write_bytes(b"bundle")
        return sample_serving(device="neuron")

    monkeypatch.setattr(smoke_module, "serve_folder", fake)
    summary = serving_smoke("neuron", work=tmp_path)
    assert (seen["folder"] / "config.json").is_file()  # type: ignore[operator]  # the tiny Llama, built here
    assert seen["device"] == "neuron" and seen["workload"].concurrencies == (1, 2)  # type: ignore[attr-defined]
    assert summary["engine"] == "vllm-neuron" and summary["success_rates"] == [1.0] * 4
    assert (summary["ready_s"], summary["warm_ready_s"]) == (300.0, 60.0)
    assert "serving smoke on neuron (vllm-neuron): pass" in serving_smoke_line(summary)
    assert summary["compile_cache_files"] == {".json": 1, ".neff": 1} and summary["bundle"] == "packed"
    assert "compile cache {'.json': 1, '.neff': 1}, bundle: packed" in serving_smoke_line(summary)
