"""A benchmark's workload: what every benchmark of a task runs, recorded in the record (each task's own is in
:mod:`pipeline.taskspec`), and the speech-recognition workload's clips."""

from __future__ import annotations

import json
import wave
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError


@dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    Args:
        batch_size: prompts per call.
        input_tokens: prompt length in tokens (text part; image tokens come on top for VLMs).
        output_tokens: tokens generated per call (greedy, no early stop); 0 for tasks that generate no text.
        image_size: square image side in pixels, or None for text-only tasks (text-to-image: the resolution).
        steps: denoising steps per image (text-to-image), else None.
        batch_sizes: every batch size the run measures latency at (sentence-embeddings), else None.
        guidance_scale: classifier-free guidance (text-to-image); None keeps the pipeline's default.
        audio_clips: the clips transcribed per call (automatic-speech-recognition: :func:`speech_clips`), else None.
    """

    batch_size: int = 1
    input_tokens: int = 128
    output_tokens: int = 64
    image_size: int | None = None
    steps: int | None = None
    batch_sizes: tuple[int, ...] | None = None
    guidance_scale: float | None = None
    audio_clips: int | None = None

    def __post_init__(self) -> None:
        for name in (*_COUNTS, "image_size", "steps", "audio_clips"):
            value, optional, low = getattr(self, name), name not in _COUNTS, int(name != "output_tokens")
            if not (value is None and optional) and (not _is_int(value) or value < low):
                kind, none = "positive" if low else "non-negative", " or None" if optional else ""
                raise ConfigError(f"workload {name} must be a {kind} integer{none}, got {value!r}")
        if self.guidance_scale is not None and (
            isinstance(self.guidance_scale, bool)
            or not isinstance(self.guidance_scale, int | float)
            or not 0 <= self.guidance_scale <= 100
        ):
            raise ConfigError(f"workload guidance_scale must be a number in [0, 100] or None: {self.guidance_scale!r}")
        if self.batch_sizes is not None and (
            not isinstance(self.batch_sizes, tuple)
            or not self.batch_sizes
            or not all(_is_int(b) and b >= 1 for b in self.batch_sizes)
            or self.batch_size not in self.batch_sizes
        ):
            raise ConfigError(
                f"workload batch_sizes must be a non-empty tuple of positive integers holding batch_size "
                f"{self.batch_size}, got {self.batch_sizes!r}"
            )

    @property
    def total_tokens(self) -> int:
        """Sequence length the KV cache must hold: input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """The record's ``workload``: the generation fields always; ``steps``, ``batch_sizes`` and
        ``guidance_scale`` and ``audio_clips`` only when set, so that a task's workload holds only its own fields."""
        out = {name: value for name, value in asdict(self).items() if value is not None or name not in _UNSET_LEFT_OUT}
        if "batch_sizes" in out:
            out["batch_sizes"] = list(out["batch_sizes"])
        return out


#: The counts every workload has; and the fields a task sets only when it has them, left out of the record when unset.
_COUNTS = ("batch_size", "input_tokens", "output_tokens")
_UNSET_LEFT_OUT = ("steps", "batch_sizes", "guidance_scale", "audio_clips")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def library_key(library: str) -> str:
    """The record's ``versions`` key of a library (``sentence-transformers`` -> ``sentence_transformers``)."""
    return library.replace("-", "_")


#: The speech-recognition workload's clips and their transcripts (pipeline/clips/synthesise.sh made them).
CLIPS_DIR = Path(__file__).resolve().parent / "clips"
#: The clips' sampling rate: what Whisper-style feature extractors take without resampling.
CLIP_RATE = 16_000


@dataclass(frozen=True)
class Clip:
    """One clip of the speech-recognition workload: 16 kHz mono samples in [-1, 1] (float32) and its transcript."""

    name: str
    samples: Any
    transcript: str

    @property
    def seconds(self) -> float:
        return len(self.samples) / CLIP_RATE


def read_wav(path: Path) -> Any:
    """A 16 kHz mono 16-bit PCM WAV file's samples as float32 in [-1, 1] (stdlib ``wave`` and numpy only).

    Raises:
        ConfigError: the file is unreadable or not 16 kHz mono 16-bit PCM.
    """
    import numpy as np

    try:
        with wave.open(str(path), "rb") as w:
            shape = (w.getnchannels(), w.getsampwidth(), w.getframerate())
            frames = w.readframes(w.getnframes())
    except (OSError, EOFError, wave.Error) as exc:
        raise ConfigError(f"{path.name}: not a readable WAV file ({exc})") from exc
    if shape != (1, 2, CLIP_RATE):
        raise ConfigError(
            f"{path.name}: {shape[0]} channel(s), {8 * shape[1]}-bit, {shape[2]} Hz; want mono 16-bit 16 kHz"
        )
    return np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0


def speech_clips(folder: Path = CLIPS_DIR) -> list[Clip]:
    """The clips of ``folder`` in ``transcripts.json``'s order (``[{"file", "text"}, ...]``).

    Raises:
        ConfigError: the list or a clip is missing, malformed or names a file outside ``folder``.
    """
    try:
        listed = json.loads((folder / "transcripts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder}: no readable transcripts.json ({exc})") from exc
    clips: list[Clip] = []
    for item in listed if isinstance(listed, list) else [None]:
        name, text = (item.get("file"), item.get("text")) if isinstance(item, dict) else (None, None)
        if (
            not isinstance(name, str)
            or not isinstance(text, str)
            or Path(name).name != name
            or not name.endswith(".wav")
        ):
            raise ConfigError(
                f"{folder}/transcripts.json: each entry is {{'file': 'NAME.wav', 'text': ...}}: {item!r:.80}"
            )
        clips.append(Clip(name, read_wav(folder / name), text))
    if not clips:
        raise ConfigError(f"{folder}/transcripts.json lists no clip")
    return clips
