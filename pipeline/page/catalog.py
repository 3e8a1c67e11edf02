"""The catalog page's data: one entry per model and task, the ordered lists of each task and view, the history
lines and the default view (:func:`catalog`). :mod:`pipeline.page.html` renders it as HTML.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Container, Mapping, Sequence
from typing import Any

from pipeline.hardware import row_device
from pipeline.ids import model_id_problem
from pipeline.page.rows import Gathered, History, RowBatches, row_batches
from pipeline.page.task_columns import batch_p50, task_view
from pipeline.page.warm import warm_state
from pipeline.prices import DEMO_INSTANCE, TASK_COSTS
from pipeline.records import representative
from pipeline.taskspec import REGISTRY
from pipeline.types import TASKS

logger = logging.getLogger(__name__)

RANKED_VIEWS = ("selected", "trending", "downloads")
PAGE_VIEWS = (*RANKED_VIEWS, "all")
VIEW_LABELS = {"selected": "Selected", "trending": "Trending", "downloads": "Downloads", "all": "All"}
PAGE_SIZE = 100
#: Columns of one entry, the fields :mod:`pipeline.page.cells` makes its row and details of (kept as a tuple; the data
#: files name a field in full: :data:`FIELD_NAMES`). Each task's metric fields follow, from its spec (below).
ENTRY_COLUMNS: tuple[str, ...] = (
    "id", "task", "st", "stage", "code", "msg", "cores", "need", "pc", "tp", "fits", "advice", "compile", "wall",
    "mem", "params", "date", "cc", "tnx", "tf", "device", "hw", "ek", "er", "reg", "link", "sc", "hist", "warm",
    "fb", "cos", "rc", "src", "thr", "lib", "l1", "l32", "steps", "usd", "popt", "preg", "psrc", "pdate", "cost",
    "pf", "ccb", "ccs", "gr", "gst", "gm", "gd", "sig", "bc", "tk", "demo", "slo", "slou", "slop", "wv", "dbf",
)  # fmt: skip
#: Device filter values: Trainium2 (the catalog's subject) is the default wherever it has a row; a Trainium3 row is
#: its own device (``trainium3``, :func:`pipeline.hardware.row_device`), badged, never in the Trainium2 filter.
DEVICE_FILTERS = ("neuron", "trainium3", "cpu", "cuda", "all")
HISTORY_READ = [
    "model_id", "task", "status", "failure_stage", "failure_code", "device", "hardware", "cores", "compile_s",
    "decode_tokens_per_s", "sentences_per_s", "seconds_per_image", "latency_p50_s", "neuronx_cc_version",
    "torch_neuronx_version", "transformers_version", "finished_at",
]  # fmt: skip
#: Entry key -> latest-row column, as is and rounded (shorter JSON; no one reads a tenth of a millisecond).
_ROW_FIELDS = {
    "stage": "failure_stage", "code": "failure_code", "msg": "failure_message", "cores": "cores", "pc": "plan_cores",
    "tp": "plan_tp_degree", "fits": "plan_fits", "advice": "plan_advice", "mem": "peak_device_memory_bytes",
    "params": "params", "cc": "neuronx_cc_version", "tnx": "torch_neuronx_version", "tf": "transformers_version",
    "device": "device", "hw": "hardware", "rc": "recompiles_during_timed", "src": "source",
    "thr": "agreement_threshold", "steps": "steps",
    "usd": "price_usd_per_hour", "popt": "price_option", "preg": "price_region", "psrc": "price_source",
    "pdate": "price_as_of",
    "pf": "prefill_mode",
    # issue 25: the compiled-cache bundle a user's run.py starts warm from (its size), or why the run has none
    "ccb": "compiled_cache_bytes", "ccs": "compiled_cache_skipped",
    # issue 31: the answer check's grade (null: an older row, grade unknown) and its figures
    "gr": "agreement_grade", "gst": "agreement_failed_step", "gd": "agreement_first_divergence_step",
}  # fmt: skip
_ROUNDED_FIELDS = {"compile": ("compile_s", 4), "wall": ("wall_s", 4), "warm": ("warm_start_s", 4)}
# Each task's page metrics read from a row column (pipeline.taskspec): a sixth task's among them.
for _metric in (m for spec in REGISTRY.values() for m in (*spec.metrics, *spec.page_extra) if m.column):
    _value: Any = _metric.column if _metric.digits is None else (_metric.column, _metric.digits)
    _known = _ROW_FIELDS.get(_metric.key, _ROUNDED_FIELDS.get(_metric.key, _value))
    if _known != _value:  # two tasks (or a task and the fixed fields) read one key from different columns
        raise ValueError(f"page metric {_metric.key!r} is declared twice, as {_known} and {_value}")
    (_ROW_FIELDS if _metric.digits is None else _ROUNDED_FIELDS)[_metric.key] = _value
ENTRY_COLUMNS += tuple(k for k in (*_ROW_FIELDS, *_ROUNDED_FIELDS) if k not in ENTRY_COLUMNS)
#: Each entry field under a full name (the row column it comes from, where one does): the names of the data files'
#: columns (:mod:`pipeline.page.chunks`) and of the page's sort fields.
FIELD_NAMES = {
    **_ROW_FIELDS, **{key: column for key, (column, _) in _ROUNDED_FIELDS.items()},
    "id": "model_id", "st": "status", "reg": "regression", "ek": "excluded", "need": "cores_needed", "date": "date",
    "l1": "latency_batch_1_p50_s", "l32": "latency_batch_32_p50_s", "cost": "cost_usd", "cos": "agreement_cosine",
    "slo": "served_tokens_per_s_per_chip_at_slo", "slou": "usd_per_million_tokens_at_slo", "lib": "library_version",
}  # fmt: skip
_BLANK_ENTRY = dict.fromkeys(ENTRY_COLUMNS)
#: An entry is a tuple of :data:`ENTRY_COLUMNS`' values (the JSON writes it as an array; 100,000 dicts of 71 keys
#: were 240 MB); ``AT`` gives a column's place in it.
AT = {name: i for i, name in enumerate(ENTRY_COLUMNS)}
_array = operator.itemgetter(*ENTRY_COLUMNS)
_ROW_KEYS, _ROW_COLUMNS = tuple(_ROW_FIELDS), tuple(_ROW_FIELDS.values())
_ROUNDED_KEYS, _ROUNDED_COLUMNS, _ROUNDED_DIGITS = zip(*((k, *v) for k, v in _ROUNDED_FIELDS.items()), strict=True)


def _num(value: Any, digits: int = 4) -> float | int | None:
    if value is None or isinstance(value, bool):
        return None
    if type(value) is float:  # the common case, without the generic checks (a page reads 100,000s of them)
        return round(value, digits) if math.isfinite(value) else None
    if isinstance(value, int):
        return value
    number = float(value)
    return round(number, digits) if math.isfinite(number) else None


def _date(value: Any) -> str | None:
    if value is None:
        return None
    text = value.date().isoformat() if hasattr(value, "date") else str(value)[:10]
    return _DATES.setdefault(text, text)  # one object per day: 233,000 of them were 13 MB at 100,000 rows


_DATES: dict[str, str] = {}


def _device(row: Mapping[str, Any]) -> str | None:
    """The device a row shows under: ``trainium3`` for a Trainium3 row, else its device."""
    return row_device(row.get("device"), hardware=row.get("hardware"), accelerator=row.get("accelerator"))


def _toolchain(row: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return (row.get("neuronx_cc_version"), row.get("torch_neuronx_version"), row.get("transformers_version"))


def _history_lines(
    task: str, primary: dict[str, Any] | None, device: str | None, rows: Sequence[dict[str, Any]]
) -> tuple[list[list[Any]], bool]:
    """History lines (newest first) and whether the model regressed: passed with an older toolchain, fails now."""
    # The history of the row shown: its own ``device``'s runs only (a Trainium2 row's never lists a GPU or CPU row).
    speed = task_view(task).speed
    speed_column, speed_digits = (speed.column, 2 if speed.fmt == "rate" else 4) if speed else (None, 4)
    if len(rows) == 1:  # the common case: one run, nothing to pick or sort
        only = rows[0]
        newest = [only] if device is None or _device(only) == device else []
    elif not rows:
        return [], False
    else:
        by_run: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            if device is not None and _device(row) != device:
                continue
            key = (row.get("hardware"), *_toolchain(row))
            if key not in by_run or row["finished_at"] > by_run[key]["finished_at"]:
                by_run[key] = row
        newest = sorted(by_run.values(), key=lambda r: r["finished_at"], reverse=True)
    lines, regressed = [], False
    for row in newest:
        get = row.get
        was_pass = (
            primary is not None
            and primary["status"] == "fail"
            and row["status"] == "pass"
            and get("hardware") == primary.get("hardware")
            and row["finished_at"] < primary["finished_at"]
            and _toolchain(row) != _toolchain(primary)
        )
        regressed = regressed or was_pass
        compile_s = get("compile_s")
        # In HISTORY_COLUMNS order.
        lines.append(
            [
                _date(row["finished_at"]), get("hardware"), device or _device(row), get("cores"), get("status"),
                get("failure_stage"), get("failure_code"), get("neuronx_cc_version"), get("torch_neuronx_version"),
                get("transformers_version"), None if compile_s is None else _num(compile_s, 4),
                _num(get(speed_column), speed_digits) if speed_column else None, was_pass,
            ]
        )  # fmt: skip
    return lines, regressed


def exclusion_text(kind: str, reason: str) -> str:
    """The reason a model is kept out, said once: the kind is named only when the reason does not start with it."""
    return reason if reason.lower().startswith(kind.lower()) or not kind else f"{kind}: {reason}"


def _entry(
    model_id: str,
    task: str,
    row: dict[str, Any] | None,
    exclusion: dict[str, Any] | None,
    hist: list[dict[str, Any]],
    slo: Mapping[tuple[str, str, str], Mapping[str, Any]],
    warm: Mapping[Any, Any],
    script: bool,
    fails: str | None,
) -> tuple[Any, ...]:
    r = row or {}
    get = r.get
    device = _device(r) if r else None
    lines, regressed = _history_lines(task, row, device, hist)
    view = task_view(task)
    status = get("status", "unmeasured")
    need = get("cores") if status == "pass" else (get("plan_cores") or get("cores"))
    # issue 28: the serving sweep of this model on this row's hardware, at the service level (null: none ran), of
    # its own source only
    slo_key = (model_id.casefold(), str(get("hardware") or ""), str(get("source")))
    cells = slo.get(slo_key) if task == "text-generation" else None
    out = _BLANK_ENTRY.copy()  # every key in place at once: no resizing as 71 keys go in, 100,000 times a page
    out.update({"id": model_id, "task": task, "st": status, "need": need})
    # map(get, ...) reads the columns in one C loop, not one Python call each (a page builds 100,000 entries).
    out.update(zip(_ROW_KEYS, map(get, _ROW_COLUMNS), strict=True))
    out["device"] = device
    for key, value, digits in zip(_ROUNDED_KEYS, map(get, _ROUNDED_COLUMNS), _ROUNDED_DIGITS, strict=True):
        out[key] = None if value is None else _num(value, digits)
    out.update({
        # The task's own answer check (its cosine field) and library version; its batch latencies at 1 and 32.
        "cos": _num(r.get(view.cosine)) if view.cosine else None,
        "lib": r.get(view.library[1]) if view.library else None,
        "l1": _num(batch_p50(latencies, 1)) if (latencies := get("latency_by_batch_s")) else None,
        "l32": _num(batch_p50(latencies, 32)) if latencies else None,
        # The task's cost at the price the row was built with (pipeline.prices); null where none.
        "cost": _num(r.get(TASK_COSTS[task][0]), 6) if task in TASK_COSTS else None,
        "date": _date(r.get("finished_at")),
        "ek": exclusion and str(exclusion.get("kind") or "excluded"),
        "er": exclusion and exclusion_text(str(exclusion.get("kind") or ""), str(exclusion.get("reason") or "")),
        "reg": regressed,
        "link": (link := model_id_problem(model_id) is None),
        "sc": link and script,
        "hist": lines,
        # Ops the device ran on the CPU: shown beside the verdict, never hidden ([[op, count], ...]; None: unknown).
        "fb": _fallback(r.get("cpu_fallback_ops")),
        # A row of the offline demo (its invented price): badged "demo" wherever it shows.
        "demo": r.get("instance_type") == DEMO_INSTANCE,
        "gm": _num(r.get("agreement_greedy_match_rate"), 4),
        "sig": _num(r.get("agreement_sigma_ratio"), 4),
        "bc": _num(r.get("agreement_bc"), 4),
        "tk": _topk(r.get("agreement_topk")),
        "slo": _num(cells.get("slo"), 4) if cells else None,
        "slou": _num(cells.get("slou"), 6) if cells else None,
        "slop": cells.get("slop") if cells else None,
        # issue 32: its bundle's second-machine warm check (pipeline/page/warm.py: "verified" only on a real machine)
        "wv": warm_state(r, warm) if r else None,
        "dbf": fails,  # issue 49: documented as supported, failed (the title of its badge: pipeline/page/matrix.py)
    })  # fmt: skip
    return _array(out)  # type: ignore[no-any-return]


def _topk(groups: Any) -> list[list[Any]] | None:
    """Per top-k group of the answer check: ``[k, largest relative error, its tolerance]`` (None: not graded)."""
    if not groups:
        return None
    rows = [g for g in groups if isinstance(g, Mapping)]
    return [[str(g.get("k")), _num(g.get("max_rel_error")), g.get("rtol")] for g in rows] or None


def _fallback(ops: Any) -> list[list[Any]] | None:
    if ops is None:
        return None
    return [[str(o.get("op")), int(o.get("count") or 0)] for o in ops if isinstance(o, Mapping)]


def catalog(
    *,
    latest: Sequence[dict[str, Any]] | RowBatches,
    history: Sequence[dict[str, Any]] | History,
    rankings: Sequence[dict[str, Any]],
    exclusions: Sequence[dict[str, Any]],
    slo: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None,
    warm: Mapping[Any, Any] | None = None,
    scripts: Container[str] = (),
    gathered: Gathered | None = None,
    fails: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """The page's data: entries (one per model and task) and, per ``task/view``, the entries it lists in order.

    Args:
        latest: latest rows (flat, :data:`pipeline.records.COLUMNS`), or batches of them
            (:class:`pipeline.page.rows.RowBatches`, read once); an emulated row is left out (no Trainium2 result).
        history: result rows across toolchains (at least :data:`HISTORY_READ`), or them packed
            (:class:`pipeline.page.rows.History`).
        rankings: rows ``date, task, view, rank, model_id`` of every snapshot (the latest per task and view counts).
        exclusions: rows ``model_id, task (None: every task), reason, kind``.
        slo: the at-SLO cells of serving sweeps by (model id casefolded, hardware, source)
            (:func:`pipeline.page.serving.slo_cells`); None: no serving record.
        warm: the second-machine warm checks by bundle (:func:`pipeline.page.warm.warm_index`); None: none.
        scripts: the model ids that have scripts (an entry links them: ``sc``).
        gathered: given each latest row (but emulated ones) as it is read, for the rest of the page.
        fails: (model id, task) -> what its docs promise and what failed, for a "documented but fails" badge.

    Returns:
        ``{"tasks", "entries", "lists", "default", "emulated"}``: entries are tuples (:data:`AT`); a list is
        ``{"date", "items": [[entry, rank], ...]}``, or None for a view without a snapshot; ``emulated`` counts the
        rows left out.
    """
    batches = row_batches(latest)
    runs = history if isinstance(history, History) else History(history)
    excluded: dict[tuple[str, str | None], dict[str, Any]] = {}
    for row in exclusions:
        excluded.setdefault((str(row["model_id"]), row.get("task")), row)

    entries: list[tuple[Any, ...]] = []
    index: dict[tuple[str, str], int] = {}

    def add(key: tuple[str, str], row: dict[str, Any] | None) -> int:
        model_id, task = key
        index[key] = len(entries)
        exclusion = excluded.get(key) or excluded.get((model_id, None))
        args = (runs.of(key), slo or {}, warm or {}, model_id in scripts, (fails or {}).get(key))
        entries.append(_entry(model_id, task, row, exclusion, *args))
        return index[key]

    # One pass over the rows: a key of one row gets its entry at once; a key of several (one per hardware) when its
    # last row has come, from the row that stands for it.
    repeated, emulated = batches.repeated_keys(), 0
    held: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for batch in batches:
        for row in batch:
            if row.get("emulated"):
                emulated += 1
                continue
            key = (row["model_id"], row["task"])
            if gathered is not None:
                gathered.add(row, repeated=key in repeated)
            if key not in repeated:
                add(key, row)
            else:
                held.setdefault(key, []).append(row)
    for key, group in held.items():
        add(key, representative(group))
    tasks = [*TASKS, *sorted({task for _, task in index} - set(TASKS))]

    def entry(model_id: str, task: str) -> int:
        key = (model_id, task)
        return index[key] if key in index else add(key, None)

    measured_by_task: dict[str, list[str]] = {}
    for model_id, task in index:
        measured_by_task.setdefault(task, []).append(model_id)
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
        everyone = set(measured_by_task.get(task, ()))
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
    device = "neuron" if any(e[AT["device"]] == "neuron" for e in entries) else "all"
    return {
        "tasks": tasks,
        "entries": entries,
        "lists": lists,
        "default": {"task": default[0], "view": default[1], "device": device},
        "emulated": emulated,
    }


def entry_fields(entry: Sequence[Any]) -> dict[str, Any]:
    """An entry (a tuple) as a dict of :data:`ENTRY_COLUMNS` (a template's row, a reader's)."""
    return dict(zip(ENTRY_COLUMNS, entry, strict=True))


def device_shown(entry: Mapping[str, Any], device: str) -> bool:
    """Whether the device filter shows an entry (one not measured on any device shows under every filter)."""
    return device == "all" or entry.get("device") in (None, device)
