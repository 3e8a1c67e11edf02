"""Each task declared once: its workload, its Hub facts, its record fields with their Parquet columns, its page
columns, its cost and its run.py template. Every list of tasks or of a task's metrics is derived from here.

A new task is one module and one registry line: the module holds the task's runner (a
:class:`pipeline.bench.tasks.base.TaskRunner`) and a ``SPEC`` (a :class:`TaskSpec`), and the line is the module's
name in :data:`REGISTRY`. ``TRNCAT_TASK_MODULES`` (:mod:`pipeline.constants`) adds modules the same way without
editing this file (a test's task; the benchmark's child process reads it too).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace

from pipeline import constants
from pipeline.errors import ConfigError
from pipeline.types import Task
from pipeline.workload import Workload, library_key


@dataclass(frozen=True)
class TaskSource:
    """Where a task's models come from on the Hub, and how its answer is checked.

    Args:
        library: The Hub library a model must declare (``library_name``) to be eligible.
        pipeline_tags: The Hub pipeline tags ranked for the task (several are merged into one ranking).
        library_filter: Rank only models of ``library`` (the Hub's ``filter`` by library), and hold a model to
            ``pipeline_tags`` too (the library spans tasks); False keeps the whole tag's ranking, the models of
            other libraries listed as ineligible with their reason.
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
    base_model: bool = False
    cosine_field: str = "logits_cosine"
    cosine_threshold: float = 0.98
    answer: str = "teacher-forced logits"
    tensor_parallel: bool = True


@dataclass(frozen=True)
class Field:
    """A record field only one task carries, and its Parquet column.

    Args:
        column: The column's name.
        path: Where the record holds it (``("metrics", "wer")``).
        kind: The column's kind (:mod:`pipeline.records.columns`: ``float64``, ``int64``, ``string``, ``ints``,
            ``batch_latency``); the Arrow type and the JSON Schema type come from it.
        unit: What one of it is, in words (the schema's description).
        figure: A figure of a finished run: a run that failed keeps none of it.
        required: Every record of the task carries it (else it is optional, and a null column gives no field back).
    """

    column: str
    path: tuple[str, ...]
    kind: str = "float64"
    unit: str = ""
    figure: bool = False
    required: bool = True


@dataclass(frozen=True)
class Metric:
    """One metric column of a task on the page.

    Args:
        key: The page entry's key.
        label: The header.
        title: The header's hover text.
        fmt: How a cell is written (:data:`pipeline.page.task_columns.FORMATS`).
        table: Shown in the table; False: only in the row's details.
        cell_title: The entry key whose text is the cell's title (where its figure comes from); None: a cost
            cell's title is the row's price (:func:`pipeline.page.catalog.price_text`), other cells have none.
        column: The row column the entry's value is read from (None: the page computes it).
        digits: The digits the entry's value is rounded to (None: as the row holds it).
    """

    key: str
    label: str
    title: str
    fmt: str
    table: bool = True
    cell_title: str | None = None
    column: str | None = None
    digits: int | None = None


@dataclass(frozen=True)
class Speed:
    """The task's speed metric for the per-task plot (a latest-row column) and the history table."""

    column: str
    key: str
    label: str
    fmt: str


@dataclass(frozen=True)
class Cost:
    """What a task's run costs, per how many of its outputs (:func:`pipeline.prices.row_costs`).

    Args:
        column: The build column of the cost.
        speed: The row column the cost is computed from.
        per: How many outputs the cost is for (1e6 tokens, 1e3 images, ...).
        seconds_each: ``speed`` is seconds per output (else outputs per second).
        label: The page column's header.
        title: What the cost is for, in words (the page column's hover text begins with it).
    """

    column: str
    speed: str
    per: float
    seconds_each: bool
    label: str
    title: str


_COST = "at the run's share of its instance's price (its cores over the instance's); hover for the price"
_WALL = Metric("wall", "Wall", "compilation included", "secs", column="wall_s", digits=4)


@dataclass(frozen=True)
class TaskSpec:
    """Everything trncat knows of one task.

    Args:
        name: The Hub task's name (``automatic-speech-recognition``).
        label: Its name on the page.
        runner: Its :class:`pipeline.bench.tasks.base.TaskRunner` as ``"module:Class"`` (imported on first use).
        workload: The catalog's fixed workload.
        source: Where its models come from and how its answer is checked.
        cost: What its run costs.
        fields: The record fields only it carries (its metrics among them), in column order.
        metrics: Its page columns, between compile and peak memory (a wall column and its cost are added).
        speed: Its speed metric for the plot and the history table (None: none).
        run_template: Its run.py template (:mod:`pipeline.render`).
        measure: What the answer check's figure is (the page says "cosine 0.999" or "word error rate 0.0").
        color: Its colour on the page's plots.
        page_extra: Page columns after its cost (the served figures; the guidance scale in the details).
        wall_in_table: The wall time is a table column (else only in the row's details).
    """

    name: str
    label: str
    runner: str
    workload: Workload
    source: TaskSource
    cost: Cost
    fields: tuple[Field, ...] = ()
    metrics: tuple[Metric, ...] = ()
    speed: Speed | None = None
    run_template: str = "run.py.j2"
    measure: str = "cosine"
    color: str = "#6b7280"
    wall_in_table: bool = False
    page_extra: tuple[Metric, ...] = ()

    @property
    def metric_fields(self) -> tuple[str, ...]:
        """The record's metrics only this task carries: a record has its task's and none of another's."""
        return tuple(f.path[1] for f in self.fields if f.path[0] == "metrics")

    @property
    def page_metrics(self) -> tuple[Metric, ...]:
        """Its page columns in order: its own, its cost, the served figures; the wall time after its own when it is a
        table column, else last (in the row's details only)."""
        cost = Metric("cost", self.cost.label, f"{self.cost.title}, {_COST}", "usd")
        if self.wall_in_table:
            return (*self.metrics, _WALL, cost, *self.page_extra)
        return (*self.metrics, cost, *self.page_extra, replace(_WALL, table=False))


_AT_SLO = (
    "{} served at the highest concurrency that meets the service level (TTFT p99 and tok/s per user) in the "
    "model's serving sweep on this hardware; none where no sweep ran"
)


def _generation(name: str, label: str, runner: str, workload: Workload, color: str) -> TaskSpec:
    return TaskSpec(
        name, label, runner, workload, TaskSource("transformers", (name,)),
        Cost("cost_usd_per_million_tokens", "decode_tokens_per_s", 1e6, False, "$ / 1M tokens",
             "USD per million decoded tokens (batch 1)"),
        metrics=(Metric("ttft", "TTFT", "time to first token", "secs", column="ttft_s", digits=4),
                 Metric("tps", "Decode tok/s", "tokens per second while decoding", "rate",
                        column="decode_tokens_per_s", digits=2)),
        # issue 28: the serving sweep's headline (pipeline/serve), on the row's own hardware; hover for its
        # workload, engine, load generator, service level and price
        page_extra=(Metric("slo", "Served tok/s per chip at SLO", _AT_SLO.format("output tokens per second per chip"),
                           "rate", cell_title="slop"),
                    Metric("slou", "$ / 1M tokens at SLO", _AT_SLO.format("USD per million output tokens"), "usd",
                           cell_title="slop")),
        speed=Speed("decode_tokens_per_s", "tps", "Decode tok/s", "rate"),
        color=color, wall_in_table=True,
    )  # fmt: skip


_BUILT_IN: tuple[TaskSpec, ...] = (
    _generation("text-generation", "Text generation", "pipeline.bench.tasks.text_generation:TextGeneration",
                Workload(batch_size=1, input_tokens=128, output_tokens=64), "#2563eb"),
    _generation("image-text-to-text", "Image-text-to-text", "pipeline.bench.tasks.image_text_to_text:ImageTextToText",
                Workload(batch_size=1, input_tokens=64, output_tokens=32, image_size=224), "#ea580c"),
    TaskSpec(
        "sentence-embeddings", "Sentence embeddings", "pipeline.bench.tasks.sentence_embeddings:SentenceEmbeddings",
        # Fixed sentences cut to exactly 128 tokens; latency at batch 1 and 32, throughput at 32 (issue 13).
        Workload(batch_size=32, input_tokens=128, output_tokens=0, batch_sizes=(1, 32)),
        # sentence-transformers models are tagged sentence-similarity or feature-extraction on the Hub; the two
        # tags are full of plain transformers encoders too, so the ranking is of sentence-transformers models only.
        TaskSource("sentence-transformers", ("sentence-similarity", "feature-extraction"), library_filter=True,
                   base_model=True, cosine_field="embedding_cosine", cosine_threshold=0.99,
                   answer="sentence embeddings", tensor_parallel=False),
        Cost("cost_usd_per_million_sentences", "sentences_per_s", 1e6, False, "$ / 1M sentences",
             "USD per million sentences at batch 32"),
        fields=(Field("batch_sizes", ("workload", "batch_sizes"), "ints"),
                Field("sentences_per_s", ("metrics", "sentences_per_s"), unit="sentences per second", figure=True),
                Field("embedding_dim", ("metrics", "embedding_dim"), "int64"),
                Field("latency_by_batch_s", ("metrics", "latency_by_batch_s"), "batch_latency", figure=True),
                Field("agreement_embedding_cosine", ("agreement", "embedding_cosine")),
                Field("sentence_transformers_version", ("versions", "sentence_transformers"), "string")),
        metrics=(Metric("sps", "Sentences/s", "sentences per second at batch 32", "rate", column="sentences_per_s",
                        digits=2),
                 Metric("l1", "p50 batch 1", "median time of one encode call at batch 1", "secs"),
                 Metric("l32", "p50 batch 32", "median time of one encode call at batch 32", "secs"),
                 Metric("dim", "Dim", "embedding dimension", "int", column="embedding_dim")),
        speed=Speed("sentences_per_s", "sps", "Sentences/s (batch 32)", "rate"),
        run_template="run_sentence_embeddings.py.j2", color="#16a34a",
    ),
    TaskSpec(
        "text-to-image", "Text-to-image", "pipeline.bench.tasks.text_to_image:TextToImage",
        # A fixed prompt, 20 denoising steps, batch 1; image_size is the fallback resolution (512 x 512) used when
        # the pipeline names no default (the run records the resolution and steps it used; few-step models run 4).
        Workload(batch_size=1, input_tokens=77, output_tokens=0, image_size=512, steps=20),
        TaskSource("diffusers", ("text-to-image",), library_filter=True, cosine_field="denoiser_cosine",
                   answer="second denoising step's update of the latents", tensor_parallel=False),
        Cost("cost_usd_per_thousand_images", "seconds_per_image", 1e3, True, "$ / 1k images",
             "USD per thousand images"),
        fields=(Field("steps", ("workload", "steps"), "int64"),
                Field("seconds_per_image", ("metrics", "seconds_per_image"), unit="seconds", figure=True),
                Field("steps_per_s", ("metrics", "steps_per_s"), unit="steps per second", figure=True),
                Field("vae_decode_s", ("metrics", "vae_decode_s"), unit="seconds", figure=True),
                Field("diffusers_version", ("versions", "diffusers"), "string"),
                Field("guidance_scale", ("workload", "guidance_scale"), required=False),
                Field("agreement_denoiser_cosine", ("agreement", "denoiser_cosine"))),
        metrics=(Metric("spi", "s / image", "seconds per image, VAE decode included", "secs",
                        column="seconds_per_image", digits=4),
                 Metric("stps", "Steps/s", "denoising steps per second", "rate", column="steps_per_s", digits=2),
                 Metric("vae", "VAE decode", "seconds of the VAE decode per image", "secs", column="vae_decode_s",
                        digits=4),
                 Metric("isz", "Resolution · steps", "image side in pixels and denoising steps", "res",
                        column="image_size")),
        page_extra=(Metric("gs", "Guidance scale", "classifier-free guidance scale (none: the model runs without)",
                           "rate", table=False, column="guidance_scale", digits=2),),
        speed=Speed("seconds_per_image", "spi", "Seconds per image", "secs"),
        run_template="run_text_to_image.py.j2", color="#9333ea",
    ),
    TaskSpec(
        "automatic-speech-recognition", "Speech recognition",
        "pipeline.bench.tasks.speech_recognition:SpeechRecognition",
        # The project's clips (pipeline/clips), one at a time through the pipeline, at most 64 tokens of transcript
        # each (greedy; a transcript may end sooner). input_tokens is what the decoder attends to: Whisper's encoder
        # positions for its 30 s window (3000 log-mel frames, stride 2), which the planner sizes the cache by.
        Workload(batch_size=1, input_tokens=1500, output_tokens=64, audio_clips=4),
        # The transformers pipeline of the task (Whisper-style encoder-decoders, CTC models, the decoder-style ASR
        # models it takes). The answer check compares transcripts: the word error rate against the CPU float32
        # reference's (pipeline.bench.wer), at most cosine_threshold (here a WER, lower is better).
        TaskSource("transformers", ("automatic-speech-recognition",), cosine_field="transcript_wer",
                   cosine_threshold=0.02, answer="transcripts of the clips", tensor_parallel=False),
        # the real-time factor is seconds of compute per second of audio: an hour of audio takes 3600 of them
        Cost("cost_usd_per_audio_hour", "real_time_factor", 3600.0, True, "$ / audio hour",
             "USD per hour of audio transcribed"),
        fields=(Field("audio_clips", ("workload", "audio_clips"), "int64"),
                Field("real_time_factor", ("metrics", "real_time_factor"), unit="seconds per second of audio",
                      figure=True),
                Field("audio_seconds", ("metrics", "audio_seconds"), unit="seconds"),
                Field("wer", ("metrics", "wer"), unit="word error rate", figure=True),
                Field("agreement_transcript_wer", ("agreement", "transcript_wer")),
                # a speech-recognition agreement without a bfloat16 run has no noise_wer
                Field("agreement_noise_wer", ("agreement", "noise_wer"), required=False)),
        metrics=(Metric("rtf", "RTF", "real-time factor: seconds of transcription per second of audio (below 1: "
                        "faster)", "num", column="real_time_factor", digits=4),
                 Metric("lat", "s / clip", "median seconds to transcribe one clip (3 to 5 s of speech)", "secs",
                        column="latency_p50_s", digits=4),
                 Metric("tps", "Tokens/s", "transcript tokens per second", "rate", column="decode_tokens_per_s",
                        digits=2),
                 Metric("wer", "WER", "word error rate against the clips' true transcripts (synthesised speech)",
                        "num", column="wer", digits=4)),
        speed=Speed("latency_p50_s", "lat", "Seconds per clip", "secs"),
        run_template="run_automatic_speech_recognition.py.j2", measure="word error rate",
    ),
)  # fmt: skip

#: name -> the task's spec. Adding a task = one module with its runner and ``SPEC`` + one line: ``register(SPEC)``
#: in :func:`_extra`'s way, or its spec here.
REGISTRY: dict[str, TaskSpec] = {spec.name: spec for spec in _BUILT_IN}


def register(spec: TaskSpec) -> None:
    """Add a task (a task of ``TRNCAT_TASK_MODULES``, or a test's)."""
    REGISTRY[spec.name] = spec


for _module in filter(None, (m.strip() for m in constants.TRNCAT_TASK_MODULES.split(","))):
    register(importlib.import_module(_module).SPEC)

TASK_SOURCES: dict[str, TaskSource] = {name: spec.source for name, spec in REGISTRY.items()}


def check_task(task: object) -> None:
    """Raises ConfigError naming the tasks when ``task`` is none of them (the one message for it everywhere)."""
    if task not in REGISTRY:
        raise ConfigError(f"unknown task {task!r}; choose from {', '.join(REGISTRY)}")


def task_spec(task: Task | str) -> TaskSpec:
    """The spec of ``task``.

    Raises:
        ConfigError: unknown task.
    """
    check_task(task)
    return REGISTRY[task]


def task_source(task: Task | str) -> TaskSource:
    """The Hub facts of ``task``.

    Raises:
        ConfigError: unknown task.
    """
    return task_spec(task).source


def default_workload(task: Task | str) -> Workload:
    """The catalog's fixed workload for ``task``.

    Raises:
        ConfigError: unknown task.
    """
    return task_spec(task).workload


def key_mask(task: Task | str) -> frozenset[str]:
    """What does not decide a result of ``task`` in the queue's "already measured" key: the versions of the
    other tasks' libraries, and for text-to-image the resolution, which each pipeline's own configs set (the
    revision, which is in the key, decides it)."""
    own = task_source(task).library
    others = {library_key(s.library) for s in TASK_SOURCES.values() if s.library not in ("transformers", own)}
    return frozenset(others | ({"image_size"} if task == "text-to-image" else set()))


#: Each cost column once, in registry order.
COST_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(spec.cost.column for spec in REGISTRY.values()))
