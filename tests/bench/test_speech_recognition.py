"""automatic-speech-recognition end to end on the CPU: the tiny Whisper through transformers' pipeline.

It passes with its own metric set and a valid record; its answer check grades the transcripts against the CPU
float32 reference's by word error rate (a wrong answer fails at stage accuracy); a broken config fails at load
with a classified reason; remote code is refused before any import.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import BenchOptions, bench_model
from pipeline.records import parse_record, validate_record
from pipeline.testing import build_tiny_whisper
from pipeline.workload import Workload, speech_clips
from tests.support import hostile

ASR = "automatic-speech-recognition"
#: The catalog's workload with fewer tokens per clip (64 there): the same clips, the same shapes into the encoder.
WORKLOAD = Workload(batch_size=1, input_tokens=1500, output_tokens=6, audio_clips=4)


@pytest.fixture(scope="module")
def whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_whisper(tmp_path_factory.mktemp("asr") / "tiny-whisper")


def _bench(folder: Path, out_dir: Path, **kwargs) -> dict:
    kwargs.setdefault("workload", WORKLOAD)
    kwargs.setdefault("iterations", 1)
    kwargs.setdefault("warmup", 0)
    out = out_dir / f"{folder.name}-{kwargs.get('dtype', 'float32')}-{kwargs.get('fault')}.json"
    record = bench_model(str(folder), task=ASR, backend=get_backend("cpu"), out=out, options=BenchOptions(**kwargs))
    assert parse_record(out.read_text()) == record
    assert validate_record(record) == []
    return record


def test_the_tiny_whisper_passes_with_its_metric_set(whisper: Path, tmp_path: Path) -> None:
    record = _bench(whisper, tmp_path, iterations=2)
    assert record["status"] == "pass", record["failure"]
    assert record["schema_version"] == "2.0" and record["workload"]["audio_clips"] == 4
    m = record["metrics"]
    audio_s = sum(clip.seconds for clip in speech_clips())
    assert m["audio_seconds"] == pytest.approx(audio_s)
    # RTF is a pass's seconds over the audio's: at least the per-clip median times the clips can hold it
    assert m["real_time_factor"] > 0 and m["latency_s"]["p50"] <= m["latency_s"]["p90"]
    assert m["decode_tokens_per_s"] > 0 and m["ttft_s"] is None
    assert m["wer"] > 0.5  # random weights transcribe nothing right: the figure is honest about it
    assert m["params"] > 100_000 and record["architecture"] == "WhisperForConditionalGeneration"
    assert record["model_type"] == "whisper"
    assert record["agreement"]["skipped"] == "the run itself is the CPU float32 reference"
    assert "transcript_wer" in record["agreement"] and record["agreement"]["threshold"] == 0.02
    for other in ("sentences_per_s", "seconds_per_image", "steps_per_s"):
        assert other not in m


@pytest.mark.e2e  # six benchmark processes: the run, its CPU float32 and bfloat16 references, the wrong run's
def test_the_answer_check_grades_the_transcripts_against_the_cpu_reference(whisper: Path, tmp_path: Path) -> None:
    record = _bench(whisper, tmp_path, dtype="bfloat16")
    assert record["status"] == "pass", record["failure"]
    agreement = record["agreement"]
    assert agreement["skipped"] is None and agreement["noise_reference"] == "cpu-bfloat16"
    assert agreement["grade"] in ("exact", "within tolerance", "bfloat16 noise")
    assert agreement["transcript_wer"] <= max(agreement["threshold"], agreement["noise_wer"])
    wrong = _bench(whisper, tmp_path / "wrong", dtype="bfloat16", fault="perturb")
    assert (wrong["status"], wrong["failure"]["stage"], wrong["failure"]["code"]) == (
        "fail",
        "accuracy",
        "wrong_answer",
    )
    assert wrong["agreement"]["grade"] == "diverges" and wrong["agreement"]["transcript_wer"] > 0.02
    assert "word error rate" in wrong["failure"]["message"]
    assert wrong["metrics"]["real_time_factor"] is not None  # it ran: its figures stay beside the verdict


def test_a_broken_config_fails_at_load_with_a_classified_reason(whisper: Path, tmp_path: Path) -> None:
    folder = hostile.break_config(shutil.copytree(whisper, tmp_path / "broken"))
    record = _bench(folder, tmp_path)
    assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == ("fail", "load", "bad_config")
    assert record["metrics"]["real_time_factor"] is None and record["metrics"]["wer"] is None


@pytest.mark.parametrize("model_type", ["whisper", "evil-asr"])
def test_a_speech_model_asking_for_its_own_code_never_runs_it(model_type: str, whisper: Path, tmp_path: Path) -> None:
    """Attack: config.json maps the pipeline's auto class to the repo's own module, as a custom ASR model does.
    A model type transformers knows runs with transformers' own class (the repo's code never imported); an
    unknown one is refused before anything is imported."""
    sentinel = tmp_path / "repo-code-ran"
    folder = shutil.copytree(whisper, tmp_path / "hostile")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSpeechSeq2Seq": "modeling_evil.EvilForSpeechSeq2Seq"}
    config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_evil.py").write_text(f"import pathlib\npathlib.Path({str(sentinel)!r}).write_text('ran')\n")
    record = _bench(folder, tmp_path)
    if model_type == "whisper":
        assert record["status"] == "pass", record["failure"]
    else:
        assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == (
            "fail", "load", "remote_code"
        )  # fmt: skip
    assert not sentinel.exists()
