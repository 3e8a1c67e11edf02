"""Inline SVG plots for the catalog page, drawn at build time: no JavaScript, no external asset.

Every label can come from a record (model ids, toolchain versions), so every text and attribute value goes
through :func:`markupsafe.escape`; the functions return :class:`markupsafe.Markup` that a template inserts as is.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from pipeline.hardware import row_device
from pipeline.page.task_columns import task_view
from pipeline.taskspec import REGISTRY, TASK_SOURCES
from pipeline.workload import library_key

WIDTH, HEIGHT = 480, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 58, 46
TASK_COLORS = {name: spec.color for name, spec in REGISTRY.items()}
OTHER_COLOR = "#6b7280"
#: Beyond this many points a scatter keeps an evenly spaced sample: 10,000 circles weigh on the page for no insight.
MAX_POINTS = 1500
#: The pass-rate chart shows the newest toolchains only.
MAX_TOOLCHAINS = 12
#: Toolchain labels longer than this are cut (the full label stays in the tooltip).
MAX_LABEL = 72


@dataclass(frozen=True)
class Point:
    """One model on a scatter plot."""

    x: float
    y: float
    task: str
    label: str


def _scaled(value: float, units: Sequence[tuple[float, str]], *, whole_from: float, strip: bool, last: str) -> str:
    """``value`` in the largest of ``units`` it reaches: whole from ``whole_from`` up, else one decimal (a trailing
    ``.0`` dropped where ``strip``); ``last`` follows a value below them all."""
    for scale, suffix in units:
        if value >= scale:
            number = value / scale
            text = f"{number:.0f}" if number >= whole_from else f"{number:.1f}"
            return (text.removesuffix(".0") if strip else text) + suffix
    return f"{value:.0f}{last}"


def fmt_params(value: float) -> str:
    """1_235_814_400 -> '1.2B'."""
    return _scaled(value, ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")), whole_from=10, strip=True, last="")


def fmt_bytes(value: float) -> str:
    """Bytes in binary units: 3_100_000_000 -> '2.9 GiB'."""
    units = ((1 << 40, " TiB"), (1 << 30, " GiB"), (1 << 20, " MiB"), (1 << 10, " KiB"))
    return _scaled(value, units, whole_from=100, strip=False, last=" B")


def fmt_si_bytes(value: float) -> str:
    """Bytes in decimal units, for log axes whose ticks fall on powers of ten: 3_100_000_000 -> '3.1 GB'."""
    return _scaled(
        value, ((1e12, " TB"), (1e9, " GB"), (1e6, " MB"), (1e3, " kB")), whole_from=10, strip=True, last=" B"
    )


def fmt_seconds(value: float) -> str:
    """Seconds for people: 0.031 -> '31 ms', 61.5 -> '61.5 s', 4000 -> '67 min'."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 100:
        return f"{value:.1f} s"
    if value < 600:
        return f"{value:.0f} s"
    return f"{value / 60:.0f} min"


def svg_text(x: float, y: float, text: str, *, anchor: str = "middle", cls: str = "", extra: str = "") -> str:
    klass = f' class="{escape(cls)}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}{extra}>{escape(text)}</text>'


def svg_open(title: str, height: int = HEIGHT, cls: str = "plot") -> list[str]:
    """A plot's ``<svg>`` start tag, its title element and its title drawn above it."""
    return [
        f'<svg class="{cls}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        svg_text(WIDTH / 2, 20, title, cls="plot-title"),
    ]


def axis_labels(x_label: str, y_label: str) -> str:
    """The x axis' label under a plot's frame and the y axis' turned along its left side."""
    middle = TOP + (HEIGHT - TOP - BOTTOM) / 2
    return svg_text(LEFT + (WIDTH - LEFT - RIGHT) / 2, HEIGHT - 8, x_label, cls="plot-axis") + svg_text(
        14, middle, y_label, cls="plot-axis", extra=f' transform="rotate(-90 14 {middle:.1f})"'
    )


def legend_key(x: int, color: str, label: str) -> str:
    """A legend's key at ``x`` above a plot's frame: a dot of ``color`` and its label."""
    return f'<circle cx="{x + 4}" cy="{TOP - 8}" r="4" fill="{color}"/>' + svg_text(
        x + 12, TOP - 4, label, anchor="start", cls="plot-legend"
    )


def _ticks(low: int, high: int) -> list[float]:
    """Tick values for a log axis from 10**low to 10**high: decades, with 2 and 5 between when the span is short."""
    step = max(1, (high - low + 5) // 6)
    ticks = [10.0**d for d in range(low, high + 1, step)]
    if high - low <= 2:
        ticks += [m * 10.0**d for d in range(low, high) for m in (2, 5)]
    return sorted(ticks)


#: The decades a log axis may span: 10**-300 to 10**300 are normal floats, so every tick is positive and finite (a
#: valid record may hold 5e-324, whose decade's tick 10.0**-324 is 0.0); a figure beyond sits at the axis' end.
MIN_DECADE, MAX_DECADE = -300, 300


def _decades(values: Sequence[float]) -> tuple[int, int]:
    low = max(MIN_DECADE, min(MAX_DECADE - 1, math.floor(min(math.log10(v) for v in values))))
    high = min(MAX_DECADE, max(MIN_DECADE + 1, math.ceil(max(math.log10(v) for v in values))))
    return (low, high) if high > low else (low, low + 1)


_POINT_ORDER = operator.attrgetter("x", "y", "label")


def scatter(
    *,
    title: str,
    points: Sequence[Point],
    x_label: str,
    y_label: str,
    x_fmt: Callable[[float], str],
    y_fmt: Callable[[float], str],
    note: str = "",
    empty: str = "no measurements yet",
) -> Markup:
    """A log-log scatter plot, one colour per task, a tooltip per point.

    Args:
        title: the heading drawn above the plot.
        points: the data; points with a coordinate that is not finite and positive are left out (a log axis cannot
            show them); any finite positive figure is drawn (past 10**+-300, at the axis' end).
        x_label: x axis label.
        y_label: y axis label.
        x_fmt: formats an x tick value.
        y_fmt: formats a y tick value.
        note: a small line under the title (e.g. which device the points come from).
        empty: what the plot says when it has no point (why, when the rows have numbers but not these).

    Returns:
        The ``<svg>`` element.
    """
    # Finite and positive (NaN compares false), what a log axis can show: a scatter may be handed 100,000 points.
    kept = sorted((p for p in points if 0 < p.x < math.inf and 0 < p.y < math.inf), key=_POINT_ORDER)
    if len(kept) > MAX_POINTS:
        step = len(kept) / MAX_POINTS
        kept = [kept[int(i * step)] for i in range(MAX_POINTS)]
        note = f"{note} · sample of {MAX_POINTS}".strip(" ·")
    parts = svg_open(title)
    if note:
        parts.append(svg_text(WIDTH / 2, 34, note, cls="plot-note"))
    if not kept:
        parts.append(svg_text(WIDTH / 2, HEIGHT / 2, empty, cls="plot-empty"))
        return Markup("".join(parts) + "</svg>")
    x0, x1 = _decades([p.x for p in kept])
    y0, y1 = _decades([p.y for p in kept])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(value: float) -> float:
        return LEFT + (min(max(math.log10(value), x0), x1) - x0) / (x1 - x0) * plot_w

    def sy(value: float) -> float:
        return TOP + plot_h - (min(max(math.log10(value), y0), y1) - y0) / (y1 - y0) * plot_h

    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot-frame"/>')
    for tick in _ticks(x0, x1):
        x = sx(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" class="plot-grid"/>')
        parts.append(svg_text(x, TOP + plot_h + 16, x_fmt(tick), cls="plot-tick"))
    for tick in _ticks(y0, y1):
        y = sy(tick)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" class="plot-grid"/>')
        parts.append(svg_text(LEFT - 6, y + 4, y_fmt(tick), anchor="end", cls="plot-tick"))
    parts.append(axis_labels(x_label, y_label))
    for p in kept:
        color = TASK_COLORS.get(p.task, OTHER_COLOR)
        tip = f"{p.label}: {x_fmt(p.x)}, {y_fmt(p.y)}"
        parts.append(
            f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="3.5" fill="{color}" fill-opacity="0.7">'
            f"<title>{escape(tip)}</title></circle>"
        )
    legend_x = LEFT
    for task in sorted({p.task for p in kept}):
        color = TASK_COLORS.get(task, OTHER_COLOR)
        parts.append(legend_key(legend_x, color, task))
        legend_x += 24 + 7 * len(task)
    return Markup("".join(parts) + "</svg>")


def pass_rate(*, title: str, rates: Sequence[tuple[str, int, int]], empty: str = "no measurements yet") -> Markup:
    """Horizontal bars: the share of models that pass, per toolchain.

    Args:
        title: the heading drawn above the chart.
        rates: ``(toolchain label, passed, measured)`` per toolchain, in display order.

    Returns:
        The ``<svg>`` element.
    """
    rates = [r for r in rates if r[2] > 0][:MAX_TOOLCHAINS]
    band, top = 34, 36
    height = max(HEIGHT, top + band * len(rates) + 16)
    parts = svg_open(title, height)
    if not rates:
        parts.append(svg_text(WIDTH / 2, height / 2, empty, cls="plot-empty"))
        return Markup("".join(parts) + "</svg>")
    bar_w = WIDTH - 24 - 110
    for index, (label, passed, measured) in enumerate(rates):
        y = top + index * band
        share = passed / measured
        short = label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"
        parts.append(
            f'<text x="12" y="{y + 11}" class="plot-tick">{escape(short)}<title>{escape(label)}</title></text>'
        )
        parts.append(f'<rect x="12" y="{y + 15}" width="{bar_w}" height="12" class="plot-track"/>')
        parts.append(f'<rect x="12" y="{y + 15}" width="{bar_w * share:.1f}" height="12" class="plot-bar"/>')
        parts.append(
            svg_text(12 + bar_w + 8, y + 25, f"{share:.0%} ({passed}/{measured})", anchor="start", cls="plot-tick")
        )
    return Markup("".join(parts) + "</svg>")


#: The tasks' own libraries beside transformers (sentence-transformers, diffusers), from the task registry.
TASK_LIBRARIES = tuple(dict.fromkeys(s.library for s in TASK_SOURCES.values() if s.library != "transformers"))
#: Each of them with the row column of its version.
_LIBRARY_VERSIONS = tuple((library, f"{library_key(library)}_version") for library in TASK_LIBRARIES)


#: The columns a toolchain label reads.
_LABEL_COLUMNS = (
    "neuronx_cc_version", "torch_neuronx_version", "device", "transformers_version",
    *(column for _, column in _LIBRARY_VERSIONS),
)  # fmt: skip


def toolchain_label(row: dict[str, Any]) -> str:
    """'neuronx-cc 2.21.0 · torch-neuronx 2.14.0 · transformers 5.0.0' (or the device when not on Neuron), and the
    task's own library when it has one ('· diffusers 0.42.1', '· sentence-transformers 6.2.0')."""
    values = tuple(map(row.get, _LABEL_COLUMNS))
    # Labelled once per set of versions: a page labels ~100,000 history rows with a handful of toolchains.
    try:
        return _label(values)
    except TypeError:  # a value that is not hashable: labelled as is
        return _label.__wrapped__(values)


@functools.lru_cache(maxsize=4096)
def _label(values: tuple[Any, ...]) -> str:
    cc, torch_neuronx, device, transformers, *libraries = values
    parts = []
    if cc:
        parts.append(f"neuronx-cc {cc}")
    if torch_neuronx:
        parts.append(f"torch-neuronx {torch_neuronx}")
    if not parts:
        parts.append(str(device or "?"))
    parts.append(f"transformers {transformers or '?'}")
    for (library, _), version in zip(_LIBRARY_VERSIONS, libraries, strict=True):
        if version:
            parts.append(f"{library} {version}")
    return " · ".join(parts)


def _rate_tick(value: float) -> str:
    return f"{value:.0f}" if value >= 1 else f"{value:g}"


def catalog_plots(*, task: str, latest: Iterable[dict[str, Any]], history: Iterable[dict[str, Any]]) -> list[Markup]:
    """A task's plots: its speed metric vs params (when the task has one: decode tokens/s, sentences/s, seconds per
    image; :mod:`pipeline.page.task_columns`), peak device memory vs params, compile time vs params, pass rate per
    toolchain.

    Args:
        task: the task of the rows (its speed metric is plotted, never another task's).
        latest: latest rows of ``task`` (scatter plots: each model once, as measured now).
        history: every result row of ``task`` (pass rate per toolchain: the newest run of each model with that
            toolchain).

    Returns:
        Four ``<svg>`` elements (three for a task without a speed metric).
    """
    # The catalog is about Trainium: plot Neuron runs; fall back to whatever ran (the CPU demo) when there are none.
    # One pass, keeping only the rows a point is drawn from (a task of 50,000 rows is read as they come).
    seen: tuple[set[str], set[str]] = (set(), set())  # the devices of the Trainium2 rows, of the others
    passing: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for r in latest:
        other = row_device(r.get("device"), hardware=r.get("hardware")) != "neuron"  # not Trainium2
        seen[other].add(str(r.get("device")))
        if r.get("status") == "pass" and r.get("params"):
            passing[other].append(r)
    shown = seen[0] or seen[1]
    note = "device: " + ", ".join(sorted(shown)) if shown else ""
    passes = passing[0] if seen[0] else passing[1]
    del passing
    newest: dict[tuple[Any, ...], tuple[Any, bool]] = {}  # (finished_at, passed): what is counted, not the row
    for row in history:
        if row.get("status") not in ("pass", "fail"):
            continue  # an infrastructure error says nothing about the toolchain
        key = (row["model_id"], row["task"], row.get("hardware"), toolchain_label(row))
        if key not in newest or row["finished_at"] > newest[key][0]:
            newest[key] = (row["finished_at"], row["status"] == "pass")
    by_toolchain: dict[str, list[Any]] = {}
    for (_, _, _, label), (finished, passed) in newest.items():
        stats = by_toolchain.setdefault(label, [0, 0, finished])
        stats[0] += passed
        stats[1] += 1
        stats[2] = max(stats[2], finished)
    ordered = sorted(by_toolchain.items(), key=lambda item: (item[1][2], item[0]), reverse=True)
    devices = " or ".join(sorted({str(r.get("device")) for r in passes}))

    def empty(what: str) -> str:
        # Never "no measurements" beside a table with numbers: say what is missing from which rows.
        if not shown:
            return "no measurements for this task yet"
        if not passes:
            return "no passing row to plot yet"
        return f"{len(passes)} passing row(s), none with {what} (not measured on {devices})"

    speed = task_view(task).speed
    # (row column, y axis label, its format, what a row without it lacks): the speed metric first, where it has one
    plotted: list[tuple[str, str, Callable[[float], str], str | None]] = [
        ("peak_device_memory_bytes", "Peak device memory", fmt_si_bytes, None),
        ("compile_s", "Compile time", fmt_seconds, "a compile time"),
    ]
    if speed:
        plotted.insert(0, (speed.column, speed.label, fmt_seconds if speed.fmt == "secs" else _rate_tick, None))
    return [
        *(
            scatter(
                title=f"{label} vs parameters",
                points=[
                    Point(float(r["params"]), float(r[column]), r["task"], r["model_id"])
                    for r in passes
                    if r.get(column)
                ],
                x_label="parameters",
                y_label=label.lower(),
                x_fmt=fmt_params,
                y_fmt=y_fmt,
                note=note,
                empty=empty(missing or label.lower()),
            )
            for column, label, y_fmt, missing in plotted
        ),
        pass_rate(
            title="Pass rate per toolchain (newest first)",
            rates=[(label, stats[0], stats[1]) for label, stats in ordered],
            empty="no measurements for this task yet" if not shown else "only infrastructure errors so far",
        ),
    ]
