"""The catalog page ``index.html``: one static, self-contained file (inline CSS, JS, SVG; no CDN, no web font).

Views Selected / Trending / Downloads (ordered by the latest rankings snapshot) and All, per task. The default
view's first page is rendered on the server, so the page reads without JavaScript; the script adds tabs, search,
filters, paging and the model details from one inline JSON block.

Text from the Hub or from error messages is untrusted everywhere: jinja2 autoescapes the HTML, the inline JSON
escapes ``<``, ``>``, ``&``, U+2028 and U+2029 (so ``</script>`` in data cannot end the script), the script only
writes ``textContent``, and a Content-Security-Policy allows no script but the page's own (by hash).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from pipeline import plots
from pipeline.columns import representative
from pipeline.ids import model_id_problem
from pipeline.types import TASKS

logger = logging.getLogger(__name__)

RANKED_VIEWS = ("selected", "trending", "downloads")
PAGE_VIEWS = (*RANKED_VIEWS, "all")
VIEW_LABELS = {"selected": "Selected", "trending": "Trending", "downloads": "Downloads", "all": "All"}
PAGE_SIZE = 100
#: Scripts are inlined (for copy buttons that work offline) up to this many bytes; the rest are fetched or linked.
MAX_INLINE_SCRIPT_BYTES = 4 << 20
#: Columns of one entry in the inline JSON (arrays, not objects: 10,000 rows stay small).
ENTRY_COLUMNS = (
    "id", "task", "st", "stage", "code", "msg", "cores", "need", "pc", "tp", "fits", "advice", "compile", "ttft",
    "tps", "wall", "mem", "params", "date", "cc", "tnx", "tf", "device", "hw", "ek", "er", "reg", "link", "hist",
)  # fmt: skip
#: Columns of one history line: the newest run per (hardware, toolchain).
HISTORY_COLUMNS = ("date", "hw", "device", "cores", "st", "stage", "code", "cc", "tnx", "tf", "compile", "tps", "reg")
HISTORY_READ = [
    "model_id", "task", "status", "failure_stage", "failure_code", "device", "hardware", "cores", "compile_s",
    "decode_tokens_per_s", "neuronx_cc_version", "torch_neuronx_version", "transformers_version", "finished_at",
]  # fmt: skip
#: Entry key -> latest-row column, as is and rounded (shorter JSON; no one reads a tenth of a millisecond).
_ROW_FIELDS = {
    "stage": "failure_stage", "code": "failure_code", "msg": "failure_message", "cores": "cores", "pc": "plan_cores",
    "tp": "plan_tp_degree", "fits": "plan_fits", "advice": "plan_advice", "mem": "peak_device_memory_bytes",
    "params": "params", "cc": "neuronx_cc_version", "tnx": "torch_neuronx_version", "tf": "transformers_version",
    "device": "device", "hw": "hardware", "src": "source",
}  # fmt: skip
_ROUNDED_FIELDS = {
    "compile": ("compile_s", 4), "ttft": ("ttft_s", 4), "tps": ("decode_tokens_per_s", 2), "wall": ("wall_s", 4),
}  # fmt: skip
_HISTORY_FIELDS = {
    "hw": "hardware", "device": "device", "cores": "cores", "st": "status", "stage": "failure_stage",
    "code": "failure_code", "cc": "neuronx_cc_version", "tnx": "torch_neuronx_version", "tf": "transformers_version",
}  # fmt: skip
_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def script_json(value: Any) -> Markup:
    """JSON for a ``<script type="application/json">`` block: no character sequence in it can end the element.

    Args:
        value: plain JSON data (finite numbers only).

    Returns:
        The JSON text, marked safe for the template (it is not HTML-escaped: a script element's text is raw).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES:
        text = text.replace(raw, escaped)
    return Markup(text)


def _num(value: Any, digits: int = 4) -> float | int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = float(value)
    return round(number, digits) if math.isfinite(number) else None


def _rounded(row: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: _num(row.get(_ROUNDED_FIELDS[key][0]), _ROUNDED_FIELDS[key][1]) for key in keys}


def _date(value: Any) -> str | None:
    if value is None:
        return None
    return value.date().isoformat() if hasattr(value, "date") else str(value)[:10]


def _toolchain(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (row.get("neuronx_cc_version"), row.get("torch_neuronx_version"), row.get("transformers_version"))


def _history_lines(primary: dict[str, Any] | None, rows: Sequence[dict[str, Any]]) -> tuple[list[list[Any]], bool]:
    """History lines (newest first) and whether the model regressed: passed with an older toolchain, fails now."""
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        key = (row.get("hardware"), *_toolchain(row))
        if key not in newest or row["finished_at"] > newest[key]["finished_at"]:
            newest[key] = row
    lines, regressed = [], False
    for row in sorted(newest.values(), key=lambda r: r["finished_at"], reverse=True):
        was_pass = (
            primary is not None
            and primary["status"] == "fail"
            and row["status"] == "pass"
            and row.get("hardware") == primary.get("hardware")
            and row["finished_at"] < primary["finished_at"]
            and _toolchain(row) != _toolchain(primary)
        )
        regressed = regressed or was_pass
        line = {key: row.get(column) for key, column in _HISTORY_FIELDS.items()}
        line.update(date=_date(row["finished_at"]), reg=was_pass, **_rounded(row, "compile", "tps"))
        lines.append([line[c] for c in HISTORY_COLUMNS])
    return lines, regressed


def _entry(
    model_id: str, task: str, row: dict[str, Any] | None, exclusion: dict[str, Any] | None, hist: list[dict[str, Any]]
) -> dict[str, Any]:
    lines, regressed = _history_lines(row, hist)
    r = row or {}
    status = r.get("status", "unmeasured")
    need = r.get("cores") if status == "pass" else (r.get("plan_cores") or r.get("cores"))
    return {
        "id": model_id,
        "task": task,
        "st": status,
        "need": need,
        **{key: r.get(column) for key, column in _ROW_FIELDS.items()},
        **_rounded(r, *_ROUNDED_FIELDS),
        "date": _date(r.get("finished_at")),
        "ek": exclusion and str(exclusion.get("kind") or "excluded"),
        "er": exclusion and str(exclusion.get("reason") or ""),
        "reg": regressed,
        "link": model_id_problem(model_id) is None,
        "hist": lines,
    }


def catalog(
    *,
    latest: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]] | None,
    rankings: Sequence[dict[str, Any]],
    exclusions: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The page's data: entries (one per model and task) and, per ``task/view``, the entries it lists in order.

    Args:
        latest: latest rows (flat, :data:`pipeline.records.COLUMNS`).
        history: result rows across toolchains (at least :data:`HISTORY_READ`); None uses ``latest``.
        rankings: rows ``date, task, view, rank, model_id`` of every snapshot (the latest per task and view counts).
        exclusions: rows ``model_id, task (None: every task), reason, kind``.

    Returns:
        ``{"tasks", "entries", "lists", "default"}``; a list is ``{"date", "items": [[entry, rank], ...]}``,
        or None for a view without a snapshot.
    """
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in latest:
        by_key.setdefault((row["model_id"], row["task"]), []).append(row)
    hist_by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in latest if history is None else history:
        hist_by_key.setdefault((row["model_id"], row["task"]), []).append(row)
    excluded: dict[tuple[str, str | None], dict[str, Any]] = {}
    for row in exclusions:
        excluded.setdefault((str(row["model_id"]), row.get("task")), row)
    tasks = [*TASKS, *sorted({task for _, task in by_key} - set(TASKS))]

    entries: list[dict[str, Any]] = []
    index: dict[tuple[str, str], int] = {}

    def entry(model_id: str, task: str) -> int:
        key = (model_id, task)
        if key not in index:
            rows = by_key.get(key)
            exclusion = excluded.get(key) or excluded.get((model_id, None))
            index[key] = len(entries)
            entries.append(
                _entry(model_id, task, representative(rows) if rows else None, exclusion, hist_by_key.get(key, []))
            )
        return index[key]

    snapshots: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rankings:
        if (
            row.get("task") not in tasks
            or row.get("view") not in RANKED_VIEWS
            or None in (row.get("model_id"), row.get("rank"))
        ):
            logger.warning("ignoring a ranking row with task %r, view %r", row.get("task"), row.get("view"))
            continue
        snapshots.setdefault((row["task"], row["view"]), []).append(row)
    lists: dict[str, dict[str, Any] | None] = {}
    for task in tasks:
        for view in RANKED_VIEWS:
            rows = snapshots.get((task, view))
            if not rows:
                lists[f"{task}/{view}"] = None
                continue
            date = max(str(r["date"]) for r in rows)
            ranks: dict[str, int] = {}
            for r in rows:
                if str(r["date"]) == date:
                    model_id = str(r["model_id"])
                    ranks[model_id] = min(ranks.get(model_id, int(r["rank"])), int(r["rank"]))
            ordered = sorted(ranks.items(), key=lambda item: (item[1], item[0]))
            lists[f"{task}/{view}"] = {"date": date, "items": [[entry(m, task), rank] for m, rank in ordered]}
        everyone = {m for m, t in by_key if t == task}
        everyone |= {m for m, t in excluded if t == task or t is None}
        lists[f"{task}/all"] = {"date": None, "items": [[entry(m, task), None] for m in sorted(everyone)]}
    default = next(
        (
            (task, view)
            for task in tasks
            for view in PAGE_VIEWS
            if lists[f"{task}/{view}"] and lists[f"{task}/{view}"]["items"]  # type: ignore[index]
        ),
        (tasks[0], "all"),
    )
    return {"tasks": tasks, "entries": entries, "lists": lists, "default": {"task": default[0], "view": default[1]}}


def command(entry: Mapping[str, Any]) -> str:
    """The one command that runs a model from its downloaded ``run.py`` and ``requirements.txt``."""
    cores = entry.get("cores") or entry.get("pc") or 1
    run = f"torchrun --nproc-per-node {int(cores)} run.py" if cores > 1 else "python run.py"
    # run.py defaults to Trainium; a row measured elsewhere runs as it was measured (keep in step with the JS).
    device = entry.get("device")
    if device in ("cpu", "cuda"):
        run += f" --device {device}"
    return f"pip install -r requirements.txt && {run}"


def _inline_scripts(entries: Sequence[dict[str, Any]], scripts: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    # Texts are deduplicated (requirements repeat per toolchain); past the budget the page fetches or links them.
    texts: list[str] = []
    text_index: dict[str, int] = {}
    models: dict[str, list[int | None]] = {}
    budget = MAX_INLINE_SCRIPT_BYTES
    for model_id in dict.fromkeys(e["id"] for e in entries):
        files = scripts.get(model_id)
        if not files:
            continue
        slots: list[int | None] = []
        for name in ("run.py", "requirements.txt"):
            text = files.get(name)
            if text is not None and text not in text_index and len(text.encode()) <= budget:
                budget -= len(text.encode())
                text_index[text] = len(texts)
                texts.append(text)
            slots.append(text_index.get(text) if text is not None else None)
        models[model_id] = slots
    return {"texts": texts, "models": models}


def _ssr_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    default = data["default"]
    listing = data["lists"][f"{default['task']}/{default['view']}"]
    rows = []
    for position, rank in listing["items"][:PAGE_SIZE]:
        e = data["entries"][position]
        rows.append({**e, "i": position, "rank": rank})
    return rows


@functools.cache
def _environment() -> jinja2.Environment:
    # pipeline.render autoescapes names ending in .html only; the page template is .html.j2, so it gets its own.
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["seconds"] = lambda v: "—" if v is None else plots.fmt_seconds(v)
    env.filters["bytes"] = lambda v: "—" if v is None else plots.fmt_bytes(v)
    env.filters["params"] = lambda v: "—" if v is None else plots.fmt_params(v)
    env.filters["rate"] = lambda v: "—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")
    env.filters["csp_hash"] = lambda text: (
        "sha256-" + base64.b64encode(hashlib.sha256(str(text).encode()).digest()).decode()
    )
    return env


def _asset(env: jinja2.Environment, name: str) -> Markup:
    """A file of ``templates/`` inlined into the page as it is (the page's own script and style sheet)."""
    assert env.loader is not None
    text, _, _ = env.loader.get_source(env, name)
    return Markup(text)


def render_page(
    *,
    latest: list[dict[str, Any]],
    history: list[dict[str, Any]] | None = None,
    rankings: list[dict[str, Any]],
    exclusions: list[dict[str, Any]],
    scripts: dict[str, dict[str, str]],
) -> str:
    """The catalog page as one HTML document.

    Args:
        latest: latest rows of the dataset (flat, :data:`pipeline.records.COLUMNS`).
        history: result rows across toolchains for each model's history; None uses ``latest``.
        rankings: rankings rows (``date, task, view, rank, model_id``); empty when discovery has not run.
        exclusions: exclusion rows (``model_id, task, reason, kind``); untrusted text.
        scripts: model id -> ``{"run.py": text, "requirements.txt": text}``.

    Returns:
        The HTML text.
    """
    data = catalog(latest=latest, history=history, rankings=rankings, exclusions=exclusions)
    measured = [e for e in data["entries"] if e["st"] != "unmeasured"]
    summary = {
        "models": len(measured),
        "runs": sum(e["st"] == "pass" for e in measured),
        "fails": sum(e["st"] == "fail" for e in measured),
        "updated": max((e["date"] for e in measured if e["date"]), default=None),
    }
    payload = {
        "cols": ENTRY_COLUMNS,
        "hcols": HISTORY_COLUMNS,
        "tasks": data["tasks"],
        "views": PAGE_VIEWS,
        "labels": VIEW_LABELS,
        "lists": data["lists"],
        "default": data["default"],
        "pageSize": PAGE_SIZE,
        "entries": [[e[c] for c in ENTRY_COLUMNS] for e in data["entries"]],
    }
    listing = data["lists"][f"{data['default']['task']}/{data['default']['view']}"]
    env = _environment()
    template = env.get_template("index.html.j2")
    return template.render(
        app_js=_asset(env, "index.js"),
        app_css=_asset(env, "index.css"),
        data_json=script_json(payload),
        scripts_json=script_json(_inline_scripts(data["entries"], scripts)),
        tasks=data["tasks"],
        views=PAGE_VIEWS,
        view_labels=VIEW_LABELS,
        default=data["default"],
        default_list=listing,
        rows=_ssr_rows(data),
        total=len(listing["items"]),
        summary=summary,
        plots=plots.catalog_plots(latest=latest, history=latest if history is None else history),
    )
