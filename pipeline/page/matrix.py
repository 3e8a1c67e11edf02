"""The stage matrix on the page (issue 49): per task and device class, one row per model, one cell per stage and
feature, each with its state, the record that decided it and what the docs promise beside it.

The rows are the dataset's ``matrix`` config (its row contract: ``MATRIX_SCHEMA`` of pipeline/dataset/matrix.py, one
per model x task x device class x item). Each model's row is HTML made here, every text escaped (a model id or a detail
from the Hub is untrusted), as :mod:`pipeline.page.cells` makes the catalog's; the page's script only filters and pages
them. Beside the rows, each model has a short state string (one letter per item, then ``!`` for "documented but fails"
and ``?`` for "not yet measured": no stage but the plan ran on any device) that the state filter scans. A small catalog
keeps both inline; a large one writes per task and device class an index file (the state strings and the chunk paths)
and the rows in chunks, fetched when the matrix is scrolled near or asked for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipeline.page.cells import DASH, escaped
from pipeline.page.chunks import data_name, json_text
from pipeline.types import MATRIX_FEATURES as FEATURES
from pipeline.types import MATRIX_STAGES as STAGES
from pipeline.types import TASKS

_LABELS = ("Plan", "Compile", "Answer check", "Serve", "Warm start", "LoRA", "EAGLE3", "Prefix caching", "FP8", "MXFP4",
           "MXFP8")  # fmt: skip
ITEM_LABELS = dict(zip((*STAGES, *FEATURES), _LABELS, strict=True))
#: State -> (its label, its letter in a model's state string).
STATES = {"passing": ("Passing", "P"), "failing": ("Failing", "F"), "untested": ("Untested", "U"),
          "cpu": ("CPU", "C"), "emulated": ("Emulated", "E"), "predicted": ("Predicted", "R")}  # fmt: skip
DEVICE_CLASSES = {"trn2": "Trainium2", "trn3": "Trainium3", "gpu": "GPU"}
#: The states a model counts as measured by (the plan's are predictions, from config files).
_MEASURED = ("passing", "failing", "cpu", "emulated")
_STATE_TITLES = {
    "untested": "Untested: nothing ran",
    "predicted": "Predicted from the model's config files: not a result",
    "cpu": "Ran on a CPU only: not a Trainium or GPU result",
    "emulated": "Ran on the Neuron emulator only: not a hardware result",
}


def _date(value: Any) -> str | None:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).date().isoformat()
    return None if value is None else str(value)[:10]


def _prediction(row: Mapping[str, Any]) -> str | None:
    parts = [f"{row['neuron_cores']} NeuronCores" if row.get("neuron_cores") is not None else None,
             row.get("parallelism"), row.get("instance")]  # fmt: skip
    return " \u00b7 ".join(str(p) for p in parts if p) or row.get("detail")


def documented_text(row: Mapping[str, Any]) -> str | None:
    """'documented as supported on Trainium2 (URL, as of 2.26)', or None where the docs say nothing."""
    if not row.get("documented"):
        return None
    where = ", ".join(str(p) for p in (row.get("documented_source"), row.get("documented_as_of") and
                                       f"as of {row['documented_as_of']}") if p)  # fmt: skip
    device = DEVICE_CLASSES.get(row["device_class"], row["device_class"])
    said = str(row["documented"]).replace("_", " ")
    return f"documented as {said} on {device}" + (f" ({where})" if where else "")


def cell_html(row: Mapping[str, Any] | None) -> str:
    """One item's cell: its state, the deciding record's date and source in its title, the docs' word beside it (the
    docs' pages, in the model cell's title)."""
    if row is None:
        return f'<td class="mx">{DASH}</td>'
    state = row["state"]
    label = STATES.get(state, (state, ""))[0]
    title = _STATE_TITLES.get(state) or str(label)
    if row.get("record_id"):  # a CPU or emulated row's record too: what ran, where and when
        when = _date(row.get("decided_at")) or "undated"
        title += f"; decided by record {row['record_id']} ({row.get('source') or '?'}), {when}"
    detail = _prediction(row) if row["item"] == "plan" else row.get("detail")
    title += f"; {detail}" if detail else ""
    out = f'<td class="mx mx-{escaped(state)}" title="{escaped(title)}">{escaped(label)}'
    if detail and (row["item"] == "plan" or state == "failing"):
        out += f'<span class="reason">{escaped(detail)}</span>'
    if row.get("documented_but_fails"):
        out += '<span class="badge b-dbf">documented but fails</span>'
    elif row.get("documented"):
        out += f'<span class="doc">documented: {escaped(str(row["documented"]).replace("_", " "))}</span>'
    return out + "</td>"


MATRIX_HEAD = (
    '<tr><th scope="col">Model</th>'
    + "".join(f'<th scope="col" class="mx-stage">{ITEM_LABELS[i]}</th>' for i in STAGES)
    + "".join(f'<th scope="col" class="mx-feature">{ITEM_LABELS[i]}</th>' for i in FEATURES)
    + "</tr>"
)


def documented_fails(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each model, task and device class whose docs say supported and whose run failed (the page's badge, the feed's
    entries): ``{"model_id", "task", "device_class", "rows"}`` (its failing rows), by model id."""
    found: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("documented_but_fails"):
            found.setdefault((row["model_id"], row["task"], row["device_class"]), []).append(row)
    return [{"model_id": m, "task": t, "device_class": d, "rows": r} for (m, t, d), r in sorted(found.items())]


def fails_title(fails: Sequence[Mapping[str, Any]]) -> str:
    """The catalog badge's title: each device class's failing items (with their code) and where the docs say so."""
    return "; ".join(
        f"{documented_text(f['rows'][0])}; failing: "
        + ", ".join(f"{ITEM_LABELS.get(r['item'], r['item'])} ({r.get('detail') or '?'})" for r in f["rows"])
        for f in fails
    )


def matrix_store(
    rows: Sequence[Mapping[str, Any]], *, inline: bool, chunk: int, add: Callable[[str, str], None]
) -> dict[str, Any]:
    """The matrix as the page's script reads it: per ``task/device_class``, inline ``{"st", "rows"}`` or the path of
    its index file (``{"st", "chunks"}``, given to ``add`` as are the chunks of rows, named as the catalog's files).

    Args:
        rows: the matrix rows (the contract's keys); none: no matrix.
        inline: keep every row inline.
        chunk: rows per data file.
        add: given each data file (path, JSON text).
    """
    groups: dict[tuple[str, str], dict[str, dict[str, Mapping[str, Any]]]] = {}
    measured: set[tuple[str, str]] = set()
    for row in rows:
        groups.setdefault((row["task"], row["device_class"]), {}).setdefault(row["model_id"], {})[row["item"]] = row
        if row["state"] in _MEASURED and row["item"] != "plan":
            measured.add((row["model_id"], row["task"]))
    out: dict[str, Any] = {}
    order = {name: k for k, name in enumerate((*TASKS, *DEVICE_CLASSES))}  # the page's task order, then trn2 trn3 gpu
    keys = sorted(groups, key=lambda key: (order.get(key[0], 99), key[0], order.get(key[1], 99), key[1]))
    for number, (task, device) in enumerate(keys):
        models = groups[(task, device)]
        states, html = [], []
        for model_id in sorted(models):
            cells = models[model_id]
            dbf = any(r.get("documented_but_fails") for r in cells.values())
            unmeasured = (model_id, task) not in measured
            states.append(
                "".join(STATES[cells[i]["state"]][1] if i in cells and cells[i]["state"] in STATES else "-"
                        for i in ITEM_LABELS) + ("!" if dbf else "") + ("?" if unmeasured else "")
            )  # fmt: skip
            badges = '<span class="badge b-dbf">documented but fails</span>' if dbf else ""
            badges += '<span class="badge b-unmeasured">not yet measured</span>' if unmeasured else ""
            docs = "; ".join(dict.fromkeys(f"documented: {r['documented_source']}, as of {r.get('documented_as_of')}"
                                           for r in cells.values() if r.get("documented_source")))  # fmt: skip
            title = f' title="{escaped(docs)}"' if docs else ""
            html.append(
                f'<tr><td class="model"{title}><span class="hub">{escaped(model_id)}</span>{badges}</td>'
                + "".join(cell_html(cells.get(i)) for i in ITEM_LABELS) + "</tr>"
            )  # fmt: skip
        key = f"{task}/{device}"
        if inline:
            out[key] = {"st": states, "rows": html}
            continue
        paths = []
        for start in range(0, len(html), chunk):
            text = json_text(html[start : start + chunk])
            paths.append(data_name(number, f"m{start // chunk}", text))
            add(paths[-1], text)
        index = json_text({"st": states, "chunks": paths})
        out[key] = data_name(number, "mindex", index)
        add(out[key], index)
    return {"groups": out, "chunk": chunk, "devices": DEVICE_CLASSES} if out else {}
