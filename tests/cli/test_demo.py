"""`trncat demo` end to end: the README's main command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from pipeline.cli import main
from tests.conftest import DemoRun


@pytest.mark.slow
@pytest.mark.e2e
def test_demo_builds_a_dataset_with_a_pass_per_task(
    demo_run: DemoRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, work, table = demo_run.root, demo_run.work, demo_run.printed
    assert demo_run.code == 0, table
    out, space = root / "dataset", root / "space"
    latest = pd.read_parquet(out / "data" / "latest")
    passes = latest[latest.status == "pass"]
    assert set(passes.task) == {
        "text-generation", "image-text-to-text", "sentence-embeddings", "text-to-image", "automatic-speech-recognition"
    }  # fmt: skip
    by_task = passes.set_index("task")
    assert (by_task.loc[["text-generation", "image-text-to-text"], "decode_tokens_per_s"] > 0).all()
    assert by_task.loc["sentence-embeddings", "sentences_per_s"] > 0 and by_task.loc["text-to-image", "steps_per_s"] > 0
    assert by_task.loc["text-to-image", "image_size"] == 32 and by_task.loc["text-to-image", "steps"] == 20
    speech = by_task.loc["automatic-speech-recognition"]  # the fifth task: its WER on the page and in the table
    assert speech.real_time_factor > 0 and speech.wer > 0.5 and speech.audio_clips == 4
    assert speech.device == "cpu" and speech.agreement_skipped == "the run itself is the CPU float32 reference"
    assert len(list((out / "data" / "results").glob("*.parquet"))) == 1
    for model_id in latest.model_id:
        assert (out / "scripts" / model_id / "run.py").is_file()
    assert "trncat-demo/tiny-llama" in table and "pass" in table
    speech_line = next(line for line in table.splitlines() if line.startswith("trncat-demo/tiny-whisper"))
    assert "automatic-speech-recognition CPU    pass" in speech_line and "Seconds per clip, WER " in speech_line
    # the demo went through the local hub: discovery kept the remote-code and gated models out, with reasons
    assert "kept out: remote_code" in table and "kept out: gated" in table
    exclusions = pd.read_parquet(out / "data" / "exclusions.parquet")
    assert set(exclusions.kind) == {"remote_code", "gated"}
    assert set(latest.model_id) == {
        "trncat-demo/tiny-llama", "trncat-demo/tiny-llava", "trncat-demo/tiny-sentence-bert", "trncat-demo/tiny-sd",
        "trncat-demo/tiny-whisper",
    }  # fmt: skip
    rankings = pd.read_parquet(out / "data" / "rankings")
    assert set(rankings.view) == {"trending", "downloads"}
    # Issue 49: the stage matrix. The benched models' stages are cpu (never passing); the config-only candidates
    # discovery found and the demo never benched are planned (predicted), with what vLLM Neuron's docs say.
    matrix = pd.read_parquet(out / "data" / "matrix.parquet")
    assert not (matrix.state == "passing").any() and 'config_name: "matrix"' in (out / "README.md").read_text()
    stages = matrix[matrix.device_class == "trn2"].set_index(["model_id", "item"])
    assert stages.loc[("trncat-demo/tiny-llama", "compile"), "state"] == "cpu"
    assert stages.loc[("trncat-demo/tiny-llama", "serve"), "state"] == "cpu"
    # its serve ran with prefix caching's flags and probe: that feature's cell is cpu too, with what was seen
    assert stages.loc[("trncat-demo/tiny-llama", "prefix_caching"), "state"] == "cpu"
    assert "prefix-cache hit rate" in stages.loc[("trncat-demo/tiny-llama", "prefix_caching"), "detail"]
    for model in ("trncat-demo/tiny-llama-chat", "trncat-demo/tiny-qwen3", "trncat-demo/tiny-gpt2"):
        assert stages.loc[(model, "plan"), "state"] == "predicted" and stages.loc[(model, "plan"), "neuron_cores"] >= 1
        assert set(matrix[matrix.model_id == model].state) == {"predicted", "untested"}
    assert stages.loc[("trncat-demo/tiny-qwen3", "plan"), "documented"] == "supported"
    assert stages.loc[("trncat-demo/tiny-gpt2", "plan"), "documented"] == "not_listed"
    assert "PR #1 on trncat-demo/results (merged)" in table  # published as a PR, merged, then the page rebuilt
    # trncat check on a fine-tune the catalog has not measured: its base has CPU rows only, so no Trainium answer.
    assert "$ trncat check trncat-demo/tiny-llama-finetune\ntrncat-demo/tiny-llama-finetune @ " in table
    assert "(text-generation): unknown" in table and "trncat-demo/tiny-llama was measured on cpu only" in table
    assert "trncat-demo/tiny-llama-finetune" not in set(latest.model_id)  # never benchmarked
    # Issue 37: check's answer without the whole run.py; how to check the demo's models after it ends.
    assert "MODEL_ID" not in table and "--run-py FILE writes it" in table
    assert f"trncat localhub serve --root {work / 'hub'} --port 8999 &" in table
    assert "HF_ENDPOINT=http://127.0.0.1:8999 trncat check trncat-demo/tiny-llama-finetune" in table
    _check_against_the_kept_hub(work, capsys)
    # Issue 37: every row priced at the demo's labelled price, so the page shows costs and the Compare section.
    assert set(latest.instance_type) == {"demo.cpu"} and set(latest.device) == {"cpu"}
    assert set(latest.price_source) == {"trncat demo: an invented round price for this machine's CPU, not a quote"}
    assert (passes.cost_usd_per_million_tokens.notna() | passes.cost_usd_per_million_sentences.notna()
            | passes.cost_usd_per_thousand_images.notna() | passes.cost_usd_per_audio_hour.notna()).all()  # fmt: skip
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "trncat-demo/results" in card and "https://huggingface.co/spaces/trncat-demo/catalog" in card
    assert "sdk: static" in (space / "README.md").read_text(encoding="utf-8")
    page = (space / "index.html").read_text(encoding="utf-8")
    assert "every row below was measured on this machine&#39;s CPU with tiny models" in page
    assert "No Trainium2 results yet." in page and 'href="feed.xml"' in page
    assert '<section id="compare">' in page and 'id="compare-demo"' in page and "b-trn" not in page.split("<main>")[1]

    # the tiny Llama served on the CPU by vLLM (swept by guidellm): its curve, labelled CPU
    assert 'class="serving-line" data-device="cpu"' in page and "trncat-demo/tiny-llama: served throughput" in page
    assert '<span class="badge b-dev">CPU</span>' in page
    assert (out / "data" / "serving.json").is_file() and "served (CPU)" in table
    assert (out / "data" / "serving_points.parquet").is_file() and (out / "data" / "inferencex.parquet").is_file()
    published = (out / "data" / "serving.json").read_text(encoding="utf-8")
    served = next(r for r in json.loads(published) if r["model_id"] == "trncat-demo/tiny-llama")
    assert served["serving"]["engine"]["name"] == "vllm" and served["status"] == "pass"
    assert [p["concurrency"] for p in served["serving"]["points"]] == [1, 2, 4]
    # its command reproduces the run anywhere: vllm serve, the Hub id at its revision, no path of this machine
    command = served["serving"]["engine"]["command"]
    assert f"vllm serve trncat-demo/tiny-llama --revision {served['revision']} " in command
    assert str(work) not in published and "venv" not in published and "/tmp/" not in command
    assert (space / "feed.xml").is_file() and (space / "scripts/trncat-demo/tiny-llama/run.py").is_file()
    assert "DiffusionPipeline" in (out / "scripts/trncat-demo/tiny-sd/run.py").read_text(encoding="utf-8")
    requirements = (out / "scripts/trncat-demo/tiny-sentence-bert/requirements.txt").read_text(encoding="utf-8")
    assert "sentence-transformers==" in requirements
    assert (latest.plan_advice.str.contains("NeuronCore")).all()
    # A release diff rehearsed on CPU rows (two tiny models measured twice on this stack), kept in data/releases/,
    # shown on the page as its own section badged CPU and in the feed; the demo says it is no Neuron release.
    diff = pd.read_parquet(out / "data/releases/cpu-first-run--cpu-second-run.parquet")
    assert set(diff.model_id) == {"trncat-demo/tiny-llama", "trncat-demo/tiny-sentence-bert"}
    assert set(diff.kind) == {"still_passing"} and diff.speed_pct.notna().all() and diff.new_device.eq("cpu").all()
    assert "$ trncat diff (a rehearsal on CPU rows: the same CPU stack measured twice, no Neuron release)" in table
    assert "cpu-first-run -> cpu-second-run: 2 model(s) and task(s), 2 compared" in table
    # the same stack measured twice is noise (issue 50): every timed figure reads so, none is a change
    assert diff.speed_pct_verdict.eq("within_noise").all() and diff.first_call_s_verdict.eq("within_noise").all()
    assert "  speed_pct: 2 unchanged (within noise)" in table and "(changed)" not in table
    assert "cpu-first-run → cpu-second-run" in page and 'title="measured on a CPU: not a Trainium2 result">CPU' in page
    assert "Release diff: cpu-first-run → cpu-second-run" in (space / "feed.xml").read_text(encoding="utf-8")
    # A second demo into the same folder adds a second results file (new runs), never rewrites the first. Into a
    # copy: the session's demo run is shared with the browser tests, which read it as one demo made it.
    again = tmp_path / "demo-out"
    shutil.copytree(root, again)
    first = {p.name: p.read_bytes() for p in (again / "dataset" / "data" / "results").glob("*.parquet")}
    assert main(["demo", "--out", str(again)]) == 0
    second = {p.name: p.read_bytes() for p in (again / "dataset" / "data" / "results").glob("*.parquet")}
    assert len(second) == 2 and all(second[name] == data for name, data in first.items())


def _check_against_the_kept_hub(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The commands the demo printed: its local hub served again from --work, then `trncat check` against it."""
    import threading

    from pipeline import constants
    from pipeline.localhub import LocalHubServer, LocalHubStore

    server = LocalHubServer(LocalHubStore(work / "hub"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint, constants.HF_ENDPOINT = constants.HF_ENDPOINT, server.url
    try:
        capsys.readouterr()
        assert main(["check", "trncat-demo/tiny-llama-finetune", "--dataset", "trncat-demo/results"]) == 0
        assert "(text-generation): unknown" in capsys.readouterr().out
    finally:
        constants.HF_ENDPOINT = endpoint
        server.shutdown()
        server.server_close()
