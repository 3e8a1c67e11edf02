"""What each cell of the catalog says, and its markup, made here only: a row of the table (:func:`row_parts`) and a
task's header (:func:`head_html`); a model's details are :mod:`pipeline.page.details`.

The first view (the template, read without JavaScript too) and every other view (the page's script, which only
sorts, filters and pages, and places these texts as they are) show the same HTML. Every text is escaped here
(``markupsafe.escape``): a model id, an error message or an exclusion reason from the Hub is never markup.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import escape

from pipeline.page import plots
from pipeline.page.task_columns import Metric, table_metrics, task_view
from pipeline.page.warm import WARM_BADGES

DASH = "\u2014"
#: What a demo row's badge says on hover (a row of ``pipeline.prices.DEMO_INSTANCE``).
DEMO_TITLE = (
    "a row of trncat's offline demo: a tiny model measured on this machine's CPU, priced at an invented demo price; "
    "not a Trainium2 or a GPU result"
)
DEVICE_LABELS = {"neuron": "Trainium2", "trainium3": "Trainium3", "cpu": "CPU", "cuda": "cuda"}
STATUS_LABELS = {"pass": "runs", "fail": "fails", "error": "infra error", "unmeasured": "not yet measured"}
#: The compile cell of a CPU row: nothing is compiled there, so no time is shown (0 ms would read as a fast compile).
NOT_COMPILED = "\u2014, not compiled on CPU"


def escaped(value: Any) -> str:
    """``value`` as HTML text (most need no escaping: a 100,000-row page escapes some 4 million texts)."""
    text = value if type(value) is str else str(value)
    if "&" in text or "<" in text or ">" in text or '"' in text or "'" in text:
        return str(escape(text))
    return text


_e = escaped


def number_text(value: Any) -> str:
    """A figure as HTML text: 64 and 85.964, never 64.0 (anything but a number escaped)."""
    if type(value) is not float:
        return str(value) if type(value) is int else escaped(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def usd_text(value: float | None) -> str:
    """A cost as a cell shows it: ``$4.84``, ``$0.129``, ``< $0.01``."""
    if value is None:
        return DASH
    if value >= 100:
        return f"${value:.0f}"
    if value >= 1:
        return f"${value:.2f}"
    return f"${value:.3f}" if value >= 0.01 else "< $0.01"


def seconds_text(value: float | None) -> str:
    return DASH if value is None else plots.fmt_seconds(value)


def bytes_text(value: float | None) -> str:
    return DASH if value is None else plots.fmt_bytes(value)


def rate_text(value: float | None) -> str:
    return DASH if value is None else (f"{value:.0f}" if value >= 100 else f"{value:.1f}")


def price_text(entry: Mapping[str, Any]) -> str:
    """Where a row's cost comes from, for its cost cell's title and its details."""
    get = entry.get
    return _price_text(get("usd"), get("device") == "cpu", get("popt"), get("preg"), get("psrc"), get("pdate"),
                       get("st") == "pass")  # fmt: skip


@functools.lru_cache(maxsize=4096)  # a catalog has few prices: 100,000 rows ask for the same few texts
def _price_text(usd: Any, cpu: bool, option: Any, region: Any, source: Any, date: Any, passed: bool) -> str:
    if usd is None:
        if cpu:
            return "No cost: a CPU row names no instance, so it has no price"
        return "No cost: the price table has no price for this row's instance under the build's purchase option"
    text = (
        f"At ${number_text(usd)} per instance-hour ({option}, {region or 'region not stated'}; {source}; "
        f"{date or 'undated'}), for the run's share of the instance"
    )
    return text if passed else text + "; no cost: the run did not pass"


def compile_text(entry: Mapping[str, Any]) -> str:
    """A row's compile cell (a CPU row compiles nothing)."""
    return NOT_COMPILED if entry.get("device") == "cpu" else seconds_text(entry.get("compile"))


def fallback_text(fb: Sequence[Sequence[Any]]) -> str:
    """``aten::topk ×3, aten::nonzero ×1``."""
    return ", ".join(f"{op} \u00d7{count}" for op, count in fb)


def metric_text(entry: Mapping[str, Any], metric: Metric | Any) -> str:
    """A task metric's text, as HTML text (no figure needs escaping)."""
    value = entry.get(metric.key)
    if value is None:
        return DASH
    if metric.fmt == "secs":
        return plots.fmt_seconds(value)
    if metric.fmt == "rate":
        return rate_text(value)
    if metric.fmt == "res":
        steps = entry.get("steps")
        return f"{number_text(value)}\u00b2" + ("" if steps is None else f" \u00b7 {number_text(steps)} steps")
    if metric.fmt == "usd":
        return usd_text(value)
    return number_text(value)


def toolchain(entry: Mapping[str, Any], library: str | None = None) -> tuple[str, ...]:
    """A row's toolchain, a line per part (as HTML text)."""
    get = entry.get
    return _toolchain(get("cc"), get("tnx"), get("device"), get("tf"), library and get("lib"), library)


@functools.lru_cache(maxsize=4096)  # a catalog has few toolchains: 100,000 rows ask for the same few lines
def _toolchain(cc: Any, tnx: Any, device: Any, tf: Any, lib: Any, library: str | None) -> tuple[str, ...]:
    lines = [f"neuronx-cc {cc}"] if cc else []
    if tnx:
        lines.append(f"torch-neuronx {tnx}")
    if not lines and device:
        lines.append(str(device))
    if tf:
        lines.append(f"transformers {tf}")
    if lib:
        lines.append(f"{library} {lib}")
    return tuple(map(escaped, lines))


@functools.lru_cache(maxsize=4096)  # a catalog's badges are a few: 100,000 rows ask for the same texts
def _badge(cls: str, text: str, title: str | None = None) -> str:
    return f'<span class="badge {cls}"' + (f' title="{_e(title)}"' if title else "") + f">{_e(text)}</span>"


def _status_cell(e: Mapping[str, Any]) -> str:
    status = e["st"]
    shown = "excluded" if status == "unmeasured" and e.get("ek") else status
    out = [_badge(f"b-{shown}", "excluded" if shown == "excluded" else STATUS_LABELS.get(shown, shown))]
    device = e.get("device")
    if device in ("cpu", "cuda", "trainium3"):
        label = DEVICE_LABELS[device]
        out.append(_badge("b-dev", label, f"measured on {label}, not on Trainium2"))
    if status == "pass" and (e.get("gr") or e.get("cos") is not None):  # a diverging run is a fail, never "runs"
        title = (
            f"answer check against a CPU float32 reference: {e['gr']}"
            if e.get("gr")
            else "an older record: its answer was checked by cosine only, its grade is unknown"
        )
        out.append(_badge("b-grade", e.get("gr") or "grade unknown", title))
    if e.get("fb"):
        out.append(
            _badge("b-fallback", "CPU fallback", f"ops run on the CPU, not the device: {fallback_text(e['fb'])}")
        )
    if e.get("rc"):
        out.append(_badge("b-fallback", "recompiled", f"{e['rc']} graph(s) compiled during the timed calls: the "
                                                     "speed figures include compilation"))  # fmt: skip
    if e.get("demo"):
        out.append(_badge("b-demo", "demo", DEMO_TITLE))
    if e.get("wv") in WARM_BADGES:  # the bundle's second-machine warm check (pipeline/page/warm.py)
        out.append(_badge(*WARM_BADGES[e["wv"]]))
    if e.get("reg"):
        out.append(_badge("b-reg", "regression"))
    if e.get("dbf"):
        out.append(_badge("b-dbf", "documented but fails", e["dbf"]))
    if e.get("src"):  # who measured it: the project's CI, or a community / local submission
        ci = e["src"] == "ci"
        out.append(f'<span class="source src-{"ci" if ci else "other"}">{"CI" if ci else _e(e["src"])}</span>')
    if status in ("fail", "error"):
        diverges = f"diverges at step {e.get('gst')}" if e.get("gr") == "diverges" else None
        reason = " \u00b7 ".join(str(p) for p in (e.get("stage"), e.get("code"), diverges) if p)
        if reason:
            title = f' title="{_e(e["msg"])}"' if e.get("msg") else ""
            out.append(f'<span class="reason"{title}>{_e(reason)}</span>')
    if e.get("ek"):
        if shown != "excluded":
            out.append(_badge("b-excluded", "excluded"))
        out.append(f'<span class="reason excluded-reason">{_e(e.get("er"))}</span>')
    return '<td class="status">' + "".join(out) + "</td>"


def _compile_cell(e: Mapping[str, Any]) -> str:
    titles, spans = [], ""
    if e.get("warm") is not None:
        warm = plots.fmt_seconds(e["warm"])
        titles.append(f"first run compiles in {seconds_text(e.get('compile'))}; later runs start in {warm}")
        spans += f'<span class="warm">later runs start in {warm}</span>'
    if e.get("ccb") is not None:  # issue 25: run.py starts warm from the project's compiled cache
        size = plots.fmt_bytes(e["ccb"])
        titles.append(f"run.py starts warm from the project's compiled cache ({size})")
        spans += f'<span class="warm">compiled cache {size}</span>'
    title = f' title="{"; ".join(titles)}"' if titles else ""  # figures only: nothing to escape
    return f'<td class="num compile"{title}>{compile_text(e)}{spans}</td>'


def _metric_cell(e: Mapping[str, Any], m: Metric) -> str:
    if m.cell_title:
        title = e.get(m.cell_title)  # where the figure comes from
    else:
        title = price_text(e) if m.fmt == "usd" else None
    return f'<td class="num"{_title(title)}>{metric_text(e, m)}</td>'


@functools.lru_cache(maxsize=4096)  # a price's or a serving sweep's title, asked for by many rows
def _title(title: str | None) -> str:
    return f' title="{_e(title)}"' if title else ""


@functools.cache
def _table_metrics(task: str) -> tuple[Metric, ...]:
    return tuple(table_metrics(task))


@functools.lru_cache(maxsize=4096)
def _cell(cls: str, text: Any) -> str:
    """A cell of one value of few (a device, a core count, a date)."""
    return f'<td class="{cls}">{_e(text)}</td>'


@functools.lru_cache(maxsize=1024)
def _tools_cell(lines: tuple[str, ...]) -> str:
    return '<td class="toolchain">' + "".join(f"<span>{line}</span>" for line in lines) + "</td></tr>"


REGRESSED = ' class="regressed">'


def row_parts(e: Mapping[str, Any], no: int, rank: Any = None) -> list[str]:
    """An entry's row of the table, as its cells (the data files write each distinct cell once): ``no`` its number
    within its task, ``rank`` its rank in the view shown (the page's script writes it into the first cell of a row it
    places)."""
    model_id = _e(e["id"])  # a part of its own (three times in the row, written once)
    if e.get("link"):
        model = ['<a class="hub" href="https://huggingface.co/', model_id, '" rel="noopener">', model_id, "</a>"]
    else:
        model = ['<span class="hub">', model_id, "</span>"]
    if e.get("sc"):
        model += ('<a class="more" href="scripts/', model_id, '/run.py">details</a></td>')
    else:
        model.append('<a class="more js-only" href="#">details</a></td>')
    if e["st"] == "pass":
        cores = e.get("cores")
    else:
        cores = f"{e['pc']} (plan)" if e.get("pc") is not None else e.get("cores")
    view = task_view(e["task"])
    return [
        f'<tr data-i="{no}"{REGRESSED if e.get("reg") else ">"}<td class="rank">{"" if rank is None else rank}</td>'
        '<td class="model">',
        *model,
        _status_cell(e),
        _cell("device", DEVICE_LABELS.get(e.get("device"), DASH)),  # type: ignore[arg-type]
        _cell("num", DASH if cores is None else cores),
        _compile_cell(e),
        *(_metric_cell(e, m) for m in _table_metrics(e["task"])),
        f'<td class="num">{bytes_text(e.get("mem"))}</td>',
        f'<td class="num">{DASH if e.get("params") is None else plots.fmt_params(e["params"])}</td>',
        _cell("date", e.get("date") or DASH),
        _tools_cell(toolchain(e, view.library[0] if view.library else None)),
    ]


#: The columns every task's table has, around its own (header label, sort field or None, class, title).
_HEAD_BEFORE = (
    ("#", "rank", "num", None), ("Model", "model_id", None, None), ("Status", None, None, None),
    ("Device", "device", None, None),
    ("Cores", "cores_needed", "num",
     "NeuronCores the model ran on on Trainium2 (or the planner's estimate); CPU threads on CPU"),
    ("Compile", "compile_s", "num", None),
)  # fmt: skip
_HEAD_AFTER = (
    ("Peak device mem", "peak_device_memory_bytes", "num", None), ("Params", "params", "num", None),
    ("Date", "date", None, None), ("Toolchain", None, None, None),
)  # fmt: skip


def head_html(task: str, field_name: Any) -> str:
    """A task's header row; ``field_name`` names a metric's sort field (as the data files name its column)."""
    own = tuple((m.label, field_name(m.key), "num", m.title) for m in table_metrics(task))
    cells = []
    for label, sort, cls, title in (*_HEAD_BEFORE, *own, *_HEAD_AFTER):
        attrs = ' scope="col"' + (f' data-sort="{_e(sort)}"' if sort else "") + (f' class="{cls}"' if cls else "")
        attrs += f' title="{_e(title)}"' if title else ""
        cells.append(f"<th{attrs}>{_e(label)}</th>")
    return "<tr>" + "".join(cells) + "</tr>"


def head_count(task: str) -> int:
    """How many columns a task's table has."""
    return len(_HEAD_BEFORE) + len(table_metrics(task)) + len(_HEAD_AFTER)
