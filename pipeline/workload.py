"""The fixed workload of each task: what every benchmark of that task runs, recorded in the record."""

from __future__ import annotations

import json
import wave
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.types import TASKS, Task


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
        for name in ("batch_size", "input_tokens"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"workload {name} must be a positive integer, got {value!r}")
        if not _is_int(self.output_tokens) or self.output_tokens < 0:
            raise ConfigError(f"workload output_tokens must be a non-negative integer, got {self.output_tokens!r}")
        for name in ("image_size", "steps", "audio_clips"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ConfigError(f"workload {name} must be a positive integer or None, got {value!r}")
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
        ``guidance_scale`` when set (schema 1.2), ``audio_clips`` when set (schema 1.5), so that a generation
        task's workload is the same object it was under schema 1.1."""
        out: dict[str, Any] = asdict(self)
        for name in ("steps", "batch_sizes", "guidance_scale", "audio_clips"):
            if out[name] is None:
                del out[name]
        if "batch_sizes" in out:
            out["batch_sizes"] = list(out["batch_sizes"])
        return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


DEFAULT_WORKLOADS: dict[str, Workload] = {
    "text-generation": Workload(batch_size=1, input_tokens=128, output_tokens=64),
    "image-text-to-text": Workload(batch_size=1, input_tokens=64, output_tokens=32, image_size=224),
    # Fixed sentences cut to exactly 128 tokens; latency at batch 1 and 32, throughput at 32 (issue 13).
    "sentence-embeddings": Workload(batch_size=32, input_tokens=128, output_tokens=0, batch_sizes=(1, 32)),
    # A fixed prompt, 20 denoising steps, batch 1; image_size is the fallback resolution (512 x 512) used when
    # the pipeline names no default (the run records the resolution and steps it used; few-step models run 4).
    "text-to-image": Workload(batch_size=1, input_tokens=77, output_tokens=0, image_size=512, steps=20),
    # The project's clips (pipeline/clips), one at a time through the pipeline, at most 64 tokens of transcript
    # each (greedy; a transcript may end sooner). input_tokens is what the decoder attends to: Whisper's encoder
    # positions for its 30 s window (3000 log-mel frames, stride 2), which the planner sizes the cache by.
    "automatic-speech-recognition": Workload(batch_size=1, input_tokens=1500, output_tokens=64, audio_clips=4),
}
assert set(DEFAULT_WORKLOADS) == set(TASKS)


@dataclass(frozen=True)
class TaskSource:
    """Where a task's models come from on the Hub, and whether the benchmark child runs the task yet.

    Args:
        library: The Hub library a model must declare (``library_name``) to be eligible.
        pipeline_tags: The Hub pipeline tags ranked for the task (several are merged into one ranking).
        library_filter: Rank only models of ``library`` (the Hub's ``filter`` by library), and hold a model to
            ``pipeline_tags`` too (the library spans tasks); False keeps the whole tag's ranking, the models of
            other libraries listed as ineligible with their reason.
        metrics: The record's metrics only this task carries (schema 1.2); a record has its task's and none
            of another's.
        base_model: The library loads the bare transformers model (``AutoModel``), so the planner counts that
            and not the class ``architectures`` names. (A ``diffusers`` task's models are pipelines: the planner
            counts their components, :mod:`pipeline.plan.diffusion`.)
        cosine_field: The record's ``agreement`` field holding the cosine the answer check judges.
        cosine_threshold: The cosine with the CPU float32 reference that grades an answer ``within tolerance``
            (embeddings and text-to-image; generation records it as older records did, its grade decides).
        answer: What the answer check compares, in words (the methodology and the failure message say it).
        tensor_parallel: The library shards a model over several cores (transformers' ``tp_plan``); the others
            run on one core, and an out-of-memory run is not retried on more.
    """

    library: str
    pipeline_tags: tuple[str, ...]
    library_filter: bool = False
    metrics: tuple[str, ...] = ()
    base_model: bool = False
    cosine_field: str = "logits_cosine"
    cosine_threshold: float = 0.98
    answer: str = "teacher-forced logits"
    tensor_parallel: bool = True


TASK_SOURCES: dict[str, TaskSource] = {
    "text-generation": TaskSource("transformers", ("text-generation",)),
    "image-text-to-text": TaskSource("transformers", ("image-text-to-text",)),
    # sentence-transformers models are tagged sentence-similarity or feature-extraction on the Hub; the two
    # tags are full of plain transformers encoders too, so the ranking is of sentence-transformers models only.
    "sentence-embeddings": TaskSource(
        "sentence-transformers",
        ("sentence-similarity", "feature-extraction"),
        library_filter=True,
        metrics=("sentences_per_s", "embedding_dim", "latency_by_batch_s"),
        base_model=True,
        cosine_field="embedding_cosine",
        cosine_threshold=0.99,
        answer="sentence embeddings",
        tensor_parallel=False,
    ),
    "text-to-image": TaskSource(
        "diffusers",
        ("text-to-image",),
        library_filter=True,
        metrics=("seconds_per_image", "steps_per_s", "vae_decode_s"),
        cosine_field="denoiser_cosine",
        answer="second denoising step's update of the latents",
        tensor_parallel=False,
    ),
    # The transformers pipeline of the task (Whisper-style encoder-decoders, CTC models, the decoder-style ASR
    # models it takes). The answer check compares transcripts: the word error rate against the CPU float32
    # reference's (pipeline.bench.wer), at most cosine_threshold (here a WER, lower is better).
    "automatic-speech-recognition": TaskSource(
        "transformers",
        ("automatic-speech-recognition",),
        metrics=("real_time_factor", "audio_seconds", "wer"),
        cosine_field="transcript_wer",
        cosine_threshold=0.02,
        answer="transcripts of the clips",
        tensor_parallel=False,
    ),
}
assert set(TASK_SOURCES) == set(TASKS)


def library_key(library: str) -> str:
    """The record's ``versions`` key of a library (``sentence-transformers`` -> ``sentence_transformers``)."""
    return library.replace("-", "_")


def key_mask(task: Task | str) -> frozenset[str]:
    """What does not decide a result of ``task`` in the queue's "already measured" key: the versions of the
    other tasks' libraries, and for text-to-image the resolution, which each pipeline's own configs set (the
    revision, which is in the key, decides it)."""
    own = task_source(task).library
    others = {library_key(s.library) for s in TASK_SOURCES.values() if s.library not in ("transformers", own)}
    return frozenset(others | ({"image_size"} if task == "text-to-image" else set()))


def check_task(task: object) -> None:
    """Raises ConfigError naming the tasks when ``task`` is none of them (the one message for it everywhere)."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")


def task_source(task: Task | str) -> TaskSource:
    """The Hub facts of ``task``.

    Raises:
        ConfigError: unknown task.
    """
    check_task(task)
    return TASK_SOURCES[task]


def default_workload(task: Task | str) -> Workload:
    """The catalog's fixed workload for ``task``.

    Raises:
        ConfigError: unknown task.
    """
    check_task(task)
    return DEFAULT_WORKLOADS[task]


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
