"""What the catalog page shows of each task: its tab label, its metric columns, its speed plot and its answer check.

The one definition of a task's columns: :mod:`pipeline.page.catalog` fills the entries from it,
:mod:`pipeline.page.html` renders the first page's header and cells from it and hands it to the page's script
(``tasks`` of the inline JSON), which builds the header and rows of every other tab from the same list;
:mod:`pipeline.page.plots` plots the task's speed metric from it. A task never shows, nor plots, a metric it does
not measure.

Columns common to every task (rank, model, status, device, cores, compile, peak device memory, params, date,
toolchain) stay in the template and the script; a task's own columns sit between compile and peak memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pipeline.workload import library_key, task_source

#: How a cell is written (pipeline/page/html.py ``metric`` and format.js ``metric``): seconds, a rate, an integer,
#: the text-to-image workload ("1024² · 4 steps", from the entry's ``isz`` and ``steps``), dollars (the cost,
#: whose cell's title gives the price it came from: :func:`pipeline.page.catalog.price_text`), or a plain number
#: as rounded (a ratio: the real-time factor, a word error rate).
FORMATS = ("secs", "rate", "int", "res", "usd", "num")


@dataclass(frozen=True)
class Metric:
    """One metric column of a task (an entry key of :data:`pipeline.page.catalog.ENTRY_COLUMNS`)."""

    key: str
    label: str
    title: str
    fmt: str
    #: Shown in the table; False: only in the row's details.
    table: bool = True
    #: The entry key whose text is the cell's title (where its figure comes from); None: a cost cell's title is
    #: the row's price (:func:`pipeline.page.catalog.price_text`), other cells have none.
    cell_title: str | None = None


@dataclass(frozen=True)
class Speed:
    """The task's speed metric for the per-task plot (a latest-row column) and the history table."""

    column: str
    key: str
    label: str
    fmt: str


@dataclass(frozen=True)
class TaskView:
    """How the page shows one task. The answer check's column, what it compares and the task's own library come
    from the task's :class:`pipeline.workload.TaskSource` (:func:`task_view`), not restated here."""

    label: str
    metrics: tuple[Metric, ...]
    speed: Speed | None
    #: The row column of the answer check's cosine, and what it compares (said in the details).
    cosine: str | None = None
    compared: str = ""
    #: The task's own library beside transformers in the toolchain, and its version's row column (None: none).
    library: tuple[str, str] | None = None
    #: What the answer check's figure is (the details say "cosine 0.999" or "word error rate 0.0").
    measure: str = "cosine"


_COST = "at the run's share of its instance's price (its cores over the instance's); hover for the price"
_AT_SLO = (
    "{} served at the highest concurrency that meets the service level (TTFT p99 and tok/s per user) in the "
    "model's serving sweep on this hardware; none where no sweep ran"
)
_GENERATION = (
    Metric("ttft", "TTFT", "time to first token", "secs"),
    Metric("tps", "Decode tok/s", "tokens per second while decoding", "rate"),
    Metric("wall", "Wall", "compilation included", "secs"),
    Metric("cost", "$ / 1M tokens", f"USD per million decoded tokens (batch 1), {_COST}", "usd"),
    # issue 28: the serving sweep's headline (pipeline/serve), on the row's own hardware; hover for its workload,
    # engine, load generator, service level and price
    Metric(
        "slo",
        "Served tok/s per chip at SLO",
        _AT_SLO.format("output tokens per second per chip"),
        "rate",
        cell_title="slop",
    ),
    Metric("slou", "$ / 1M tokens at SLO", _AT_SLO.format("USD per million output tokens"), "usd", cell_title="slop"),
)
_DECODE = Speed("decode_tokens_per_s", "tps", "Decode tok/s", "rate")

_VIEWS: dict[str, TaskView] = {
    "text-generation": TaskView("Text generation", _GENERATION, _DECODE),
    "image-text-to-text": TaskView("Image-text-to-text", _GENERATION, _DECODE),
    "sentence-embeddings": TaskView(
        "Sentence embeddings",
        (
            Metric("sps", "Sentences/s", "sentences per second at batch 32", "rate"),
            Metric("l1", "p50 batch 1", "median time of one encode call at batch 1", "secs"),
            Metric("l32", "p50 batch 32", "median time of one encode call at batch 32", "secs"),
            Metric("dim", "Dim", "embedding dimension", "int"),
            Metric("cost", "$ / 1M sentences", f"USD per million sentences at batch 32, {_COST}", "usd"),
            Metric("wall", "Wall", "compilation included", "secs", table=False),
        ),
        Speed("sentences_per_s", "sps", "Sentences/s (batch 32)", "rate"),
    ),
    "text-to-image": TaskView(
        "Text-to-image",
        (
            Metric("spi", "s / image", "seconds per image, VAE decode included", "secs"),
            Metric("stps", "Steps/s", "denoising steps per second", "rate"),
            Metric("vae", "VAE decode", "seconds of the VAE decode per image", "secs"),
            Metric("isz", "Resolution · steps", "image side in pixels and denoising steps", "res"),
            Metric("cost", "$ / 1k images", f"USD per thousand images, {_COST}", "usd"),
            Metric(
                "gs",
                "Guidance scale",
                "classifier-free guidance scale (none: the model runs without)",
                "rate",
                table=False,
            ),  # fmt: skip
            Metric("wall", "Wall", "compilation included", "secs", table=False),
        ),
        Speed("seconds_per_image", "spi", "Seconds per image", "secs"),
    ),
    "automatic-speech-recognition": TaskView(
        "Speech recognition",
        (
            Metric(
                "rtf", "RTF", "real-time factor: seconds of transcription per second of audio (below 1: faster)", "num"
            ),
            Metric("lat", "s / clip", "median seconds to transcribe one clip (3 to 5 s of speech)", "secs"),
            Metric("tps", "Tokens/s", "transcript tokens per second", "rate"),
            Metric("wer", "WER", "word error rate against the clips' true transcripts (synthesised speech)", "num"),
            Metric("cost", "$ / audio hour", f"USD per hour of audio transcribed, {_COST}", "usd"),
            Metric("wall", "Wall", "compilation included", "secs", table=False),
        ),
        Speed("latency_p50_s", "lat", "Seconds per clip", "secs"),
        measure="word error rate",
    ),
}


def _with_source(task: str, view: TaskView) -> TaskView:
    source = task_source(task)
    own = None if source.library == "transformers" else (source.library, f"{library_key(source.library)}_version")
    return replace(view, cosine=f"agreement_{source.cosine_field}", compared=f"the {source.answer}", library=own)


TASK_VIEWS: dict[str, TaskView] = {task: _with_source(task, view) for task, view in _VIEWS.items()}


def task_view(task: str) -> TaskView:
    """The view of ``task`` (its name as the label, no metric of its own, when the page does not know it)."""
    return TASK_VIEWS.get(task) or TaskView(task, (), None, None, "")


def table_metrics(task: str) -> list[Metric]:
    """The metric columns of ``task``'s table, in order."""
    return [m for m in task_view(task).metrics if m.table]


def page_tasks(tasks: list[str]) -> dict[str, Any]:
    """The per-task part of the page's inline JSON: label, columns, speed key and answer check of each task."""
    out: dict[str, Any] = {}
    for task in tasks:
        view = task_view(task)
        out[task] = {
            "label": view.label,
            "cols": [asdict(m) for m in view.metrics],
            "speed": asdict(view.speed) if view.speed else None,
            "compared": view.compared,
            "lib": view.library[0] if view.library else None,
            "cm": view.measure,
        }
    return out


def batch_p50(latencies: Any, batch_size: int) -> float | None:
    """The p50 of ``batch_size`` in a ``latency_by_batch_s`` list (None when it was not measured)."""
    for item in latencies or ():
        if isinstance(item, Mapping) and item.get("batch_size") == batch_size:
            value = item.get("p50")
            return None if value is None else float(value)
    return None
