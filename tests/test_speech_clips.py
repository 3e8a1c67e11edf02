"""The speech-recognition workload's clips: committed, read with the stdlib, checked on the way in."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.taskspec import default_workload
from pipeline.workload import CLIP_RATE, CLIPS_DIR, read_wav, speech_clips


def test_the_committed_clips_are_the_workload_with_their_transcripts() -> None:
    clips = speech_clips()
    assert len(clips) == default_workload("automatic-speech-recognition").audio_clips == 4
    for clip in clips:
        assert clip.samples.dtype == np.float32 and 3 < clip.seconds < 6  # a few seconds of speech each
        assert 0.1 < float(np.abs(clip.samples).max()) <= 1.0  # not silence, not clipped past full scale
        assert len(clip.transcript.split()) >= 8
    assert (CLIPS_DIR / "synthesise.sh").is_file()  # how they were made, to make them again


def _wav(path: Path, *, channels: int = 1, width: int = 2, rate: int = CLIP_RATE) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(b"\x00" * width * channels * 160)
    return path


@pytest.mark.parametrize(
    ("kwargs", "said"), [({"channels": 2}, "2 channel"), ({"width": 1}, "8-bit"), ({"rate": 22050}, "22050 Hz")]
)
def test_a_clip_of_another_format_is_refused_by_name(tmp_path: Path, kwargs: dict, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        read_wav(_wav(tmp_path / "x.wav", **kwargs))


def test_a_file_that_is_no_wav_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "x.wav").write_bytes(b"ID3 not a wave file")
    with pytest.raises(ConfigError, match="x.wav: not a readable WAV file"):
        read_wav(tmp_path / "x.wav")


@pytest.mark.parametrize("name", ["../outside.wav", "/etc/passwd", "clip.mp3", None])
def test_a_transcript_list_naming_a_file_outside_its_folder_is_refused(tmp_path: Path, name: object) -> None:
    _wav(tmp_path / "a.wav")
    (tmp_path / "transcripts.json").write_text(
        json.dumps([{"file": "a.wav", "text": "x"}, {"file": name, "text": "y"}])
    )
    with pytest.raises(ConfigError, match="each entry is"):
        speech_clips(tmp_path)


def test_an_empty_or_missing_list_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no readable transcripts.json"):
        speech_clips(tmp_path)
    (tmp_path / "transcripts.json").write_text("[]")
    with pytest.raises(ConfigError, match="lists no clip"):
        speech_clips(tmp_path)
