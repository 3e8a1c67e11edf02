"""What the catalog page shows of each task: its tab label, its metric columns, its speed plot and its answer check.

Derived from each task's spec (:mod:`pipeline.taskspec`), the one definition of a task's columns:
:mod:`pipeline.page.catalog` fills the entries from it, :mod:`pipeline.page.html` renders the first page's header
and cells from it and hands it to the page's script (``tasks`` of the inline JSON), which builds the header and rows
of every other tab from the same list; :mod:`pipeline.page.plots` plots the task's speed metric from it. A task
never shows, nor plots, a metric it does not measure.

Columns common to every task (rank, model, status, device, cores, compile, peak device memory, params, date,
toolchain) stay in the template and the script; a task's own columns sit between compile and peak memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.taskspec import REGISTRY, Metric, Speed, TaskSpec
from pipeline.workload import library_key

#: How a cell is written (:func:`pipeline.page.cells.metric_text`): seconds, a rate, an integer,
#: the text-to-image workload ("1024² · 4 steps", from the entry's ``isz`` and ``steps``), dollars (the cost,
#: whose cell's title gives the price it came from: :func:`pipeline.page.catalog.price_text`), or a plain number
#: as rounded (a ratio: the real-time factor, a word error rate).
FORMATS = ("secs", "rate", "int", "res", "usd", "num")


@dataclass(frozen=True)
class TaskView:
    """How the page shows one task, from its :class:`pipeline.taskspec.TaskSpec` (:data:`TASK_VIEWS`)."""

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


def _view(spec: TaskSpec) -> TaskView:
    source = spec.source
    own = None if source.library == "transformers" else (source.library, f"{library_key(source.library)}_version")
    return TaskView(spec.label, spec.page_metrics, spec.speed, f"agreement_{source.cosine_field}",
                    f"the {source.answer}", own, spec.measure)  # fmt: skip


TASK_VIEWS: dict[str, TaskView] = {task: _view(spec) for task, spec in REGISTRY.items()}


def task_view(task: str) -> TaskView:
    """The view of ``task`` (its name as the label, no metric of its own, when the page does not know it)."""
    return TASK_VIEWS.get(task) or TaskView(task, (), None, None, "")


def table_metrics(task: str) -> list[Metric]:
    """The metric columns of ``task``'s table, in order."""
    return [m for m in task_view(task).metrics if m.table]


def batch_p50(latencies: Any, batch_size: int) -> float | None:
    """The p50 of ``batch_size`` in a ``latency_by_batch_s`` list (None when it was not measured)."""
    for item in latencies or ():
        if isinstance(item, Mapping) and item.get("batch_size") == batch_size:
            value = item.get("p50")
            return None if value is None else float(value)
    return None
