"""The speech-recognition run.py: rendered from a record, compiled, and run on the CPU over the tiny Whisper and the
project's clips, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

from pipeline import render
from pipeline.testing import build_tiny_whisper
from pipeline.workload import CLIPS_DIR
from tests.support.records import sample_speech_record


def test_generated_run_py_transcribes_wav_files_and_reports_the_task_figures(tmp_path: Path) -> None:
    model = build_tiny_whisper(tmp_path / "tiny-whisper")
    record = sample_speech_record(model_id="acme/tiny", workload={"output_tokens": 4})
    script = tmp_path / "run.py"
    script.write_text(render.run_script(record))
    text = script.read_text()
    compile(text, str(script), "exec")
    assert "trust_remote_code=False" in text and '"automatic-speech-recognition"' in text
    clips = [str(CLIPS_DIR / "clip-1.wav"), str(CLIPS_DIR / "clip-2.wav")]
    done = subprocess.run(
        [sys.executable, str(script), *clips, "--transcripts", str(CLIPS_DIR / "transcripts.json"),
         "--device", "cpu", "--model", str(model), "--iterations", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for line in ("clip-1.wav", "clip-2.wav", "latency_s", "real_time_factor", "tokens_per_s", "wer "):
        assert line in done.stdout, done.stdout
    bad = tmp_path / "stereo.wav"
    with wave.open(str(bad), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\x00" * 640)
    refused = subprocess.run(
        [sys.executable, str(script), str(bad), "--device", "cpu", "--model", str(model)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert refused.returncode != 0 and "want a 16 kHz mono 16-bit WAV file" in refused.stderr
