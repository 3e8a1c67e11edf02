"""The page's serving section: per model its throughput-latency curve (tok/s per user against tok/s per chip,
one line per device, as InferenceX draws it), the serving table's "served tok/s per chip at SLO" and
"$ / 1M tokens at SLO" columns, and the Compare view's serving pair with its Trainium2 ÷ GPU ratios.

Its input is serving records (a ``serving`` section; validated before they reach the page). Each entry, cell, pair
side and hover text carries its record's source (``ci``, ``community``, ``local``): a CI row ranks first, a CI row's
cells are filled from CI sweeps only, and a ratio divides two rows of one source only (issue 47.1). Every
text is escaped (the SVG here with :func:`markupsafe.escape`, the table by the template's autoescape). A CPU or
emulated row keeps its label: it is never Trainium2 evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from pipeline.page.cells import DEVICE_LABELS, rate_text, usd_text
from pipeline.page.compare import ratio_text, speed_ratio
from pipeline.page.plots import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH, axis_labels, legend_key, svg_open, svg_text

#: One colour per device line (Trainium2 first, as the Compare view shows it).
DEVICE_COLORS = {"neuron": "#ea580c", "cuda": "#16a34a", "cpu": "#6b7280"}


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def source_of(record: Mapping[str, Any]) -> str:
    """Whose measurement a record is: its ``run.source`` (``ci``: the project's own)."""
    return str((record.get("run") or {}).get("source"))


def badge(record: Mapping[str, Any]) -> str:
    """The device label a serving row shows: an emulated neuron row says so (never "Trainium2" alone), and a row
    not measured by the project's CI names its source ("Trainium2, community")."""
    device = str(record.get("device"))
    label = DEVICE_LABELS.get(device, device)
    label = f"{label} (emulated)" if (record.get("hardware") or {}).get("emulated") else label
    source = source_of(record)
    return label if source == "ci" else f"{label}, {source}"


def serving_entries(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per serving record, in (model, device, hardware) order, every figure as recorded."""
    out = []
    for record in records:
        serving = record.get("serving")
        if not isinstance(serving, Mapping):
            continue
        best = serving.get("headline") or {}
        slo = serving.get("slo") or {}
        workload = serving.get("workload") or {}
        tool = serving.get("tool") or {}
        price = serving.get("price") or {}
        points = [
            (x, y, int(p.get("concurrency") or 0))
            for p in serving.get("points") or []
            if (x := _num(p.get("tok_s_per_user"))) and (y := _num(p.get("tok_s_per_chip")))
        ]
        at = [p for p in serving.get("points") or [] if p.get("concurrency") == best.get("concurrency")]
        low, high = ((at[0].get("spread") or {}).get("output_tok_s") if at else None) or (None, None)
        chips = serving.get("chips") or 1
        out.append(
            {
                "speed_low": low / chips if low is not None else None,  # the at-SLO figure's interval (issue 50)
                "speed_high": high / chips if high is not None else None,
                "id": str(record.get("model_id")),
                "device": str(record.get("device")),
                "source": source_of(record),
                "badge": badge(record),
                "emulated": bool((record.get("hardware") or {}).get("emulated")),
                "hw": str((record.get("hardware") or {}).get("name") or ""),
                "chips": serving.get("chips"),
                "st": str(record.get("status")),
                "engine": str((serving.get("engine") or {}).get("name") or ""),
                "tool": f"{tool.get('name', '')} {tool.get('version', '')}",
                "workload": f"{workload.get('name', '')} ({workload.get('input_tokens')} in / "
                f"{workload.get('output_tokens')} out)",
                "points": points,
                "at_slo": _num(best.get("tok_s_per_chip")),
                "usd_at_slo": _num(best.get("usd_per_million_tokens")),
                "at_slo_text": rate_text(_num(best.get("tok_s_per_chip")))
                + (f" ({rate_text(low / chips)}\u2013{rate_text(high / chips)})" if low is not None and high else ""),
                "usd_text": usd_text(_num(best.get("usd_per_million_tokens"))),
                "slo": f"TTFT {slo.get('percentile', 'p99')} \u2264 {slo.get('ttft_s')} s, "
                f"\u2265 {slo.get('tok_s_per_user')} tok/s per user",
                "price": (
                    f"${price.get('usd_per_hour')}/h {price.get('instance_type')} ({price.get('source')}; "
                    f"{price.get('as_of') or 'undated'})"
                    if price.get("usd_per_hour") is not None
                    else "no price for this hardware"
                ),
                "stopped": serving.get("stopped"),
            }
        )
    return sorted(out, key=lambda e: (e["id"].lower(), e["device"] != "neuron", e["source"] != "ci", e["hw"]))


def slo_cells(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The main table's at-SLO cells of each text-generation row, by (model id casefolded, hardware name, source):
    the serving record's headline (served tok/s per chip, $ / 1M tokens) and where it comes from (its cells' title).

    A row gets the cells of a serving record of its own model on its own hardware and of its own source only (a GPU
    sweep never fills a Trainium2 row, a community sweep never a CI row); of several, the 1k/1k workload's, then
    the newest.
    """
    chosen: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for record in records:
        serving = record.get("serving")
        hardware = record.get("hardware")
        if record.get("task") != "text-generation" or not isinstance(serving, Mapping):
            continue
        key = (str(record.get("model_id")).casefold(), str((hardware or {}).get("name") or ""), source_of(record))
        held = chosen.get(key)
        if held is None or _rank(record) > _rank(held):
            chosen[key] = record
    cells = {}
    for key, record in chosen.items():
        (entry,) = serving_entries([record])
        stopped = f"; stopped: {entry['stopped']}" if entry["stopped"] else ""
        cells[key] = {
            "slo": entry["at_slo"],
            "slou": entry["usd_at_slo"],
            "slop": ("" if entry["source"] == "ci" else f"a {entry['source']} sweep, not the project's CI: ")
            + f"{entry['workload']} served by {entry['engine']}, swept by {entry['tool']} on {entry['hw']} "
            f"({entry['chips']} chip(s)); at {entry['slo']}; {entry['price']}"
            + (f"; its 95 % interval: {entry['at_slo_text']}" if entry["speed_low"] is not None else "")
            + ("" if entry["st"] == "pass" else f"; the sweep's verdict: {entry['st']}")
            + stopped[:300],
        }
    return cells


def _rank(record: Mapping[str, Any]) -> tuple[bool, str]:
    serving = record.get("serving") or {}
    return (serving.get("workload") or {}).get("name") == "1k/1k", str((record.get("run") or {}).get("finished_at"))


def _scale(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high <= low:
        return (low * 0.5, high * 1.5 + 1e-9)
    pad = (high - low) * 0.08
    return (max(0.0, low - pad), high + pad)


def serving_curve(model_id: str, entries: Sequence[Mapping[str, Any]]) -> Markup:
    """One model's throughput-latency curve: x tok/s per user, y tok/s per chip, one line per serving row."""
    title = f"{model_id}: served throughput against interactivity"
    lines = [e for e in entries if e["id"] == model_id and e["points"]]
    parts = svg_open(title, cls="plot serving-curve")
    if not lines:
        parts.append(svg_text(WIDTH / 2, HEIGHT / 2, "no serving point", cls="plot-empty"))
        return Markup("".join(parts) + "</svg>")
    xs = [p[0] for e in lines for p in e["points"]]
    ys = [p[1] for e in lines for p in e["points"]]
    (x0, x1), (y0, y1) = _scale(xs), _scale(ys)
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(v: float) -> float:
        return LEFT + (v - x0) / (x1 - x0) * w

    def sy(v: float) -> float:
        return TOP + h - (v - y0) / (y1 - y0) * h

    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" class="plot-frame"/>')
    for i in range(5):
        xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        parts.append(svg_text(sx(xv), TOP + h + 16, rate_text(xv), cls="plot-tick"))
        parts.append(svg_text(LEFT - 6, sy(yv) + 4, rate_text(yv), anchor="end", cls="plot-tick"))
    parts.append(axis_labels("tok/s per user (1 / median TPOT)", "output tok/s per chip"))
    legend_x = LEFT
    for entry in lines:
        color = DEVICE_COLORS.get(entry["device"], "#2563eb")
        label = f"{entry['badge']} {entry['hw']}"
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in entry["points"])
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2" '
            f'class="serving-line" data-device="{escape(entry["device"])}"><title>{escape(label)}</title></polyline>'
        )
        for x, y, concurrency in entry["points"]:
            tip = f"{label}: concurrency {concurrency}, {rate_text(x)} tok/s per user, {rate_text(y)} tok/s per chip"
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}">'
                f"<title>{escape(tip)}</title></circle>"
            )
        parts.append(legend_key(legend_x, color, label))
        legend_x += 24 + 7 * len(label)
    return Markup("".join(parts) + "</svg>")


def serving_pairs(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Compare view's serving pairs: a model's Trainium2 serving row (a measured one before an emulated
    one, a CI one before another source's) beside each of its GPU serving rows (CI ones first); ratios
    Trainium2 ÷ GPU of tok/s per chip and $/1M at the SLO, only where both passed, neither is emulated and both
    are of one source (a community row is never divided by a CI one)."""
    pairs = []
    for model_id in dict.fromkeys(e["id"] for e in entries):
        rows = [e for e in entries if e["id"] == model_id]
        trainium = sorted(
            (e for e in rows if e["device"] == "neuron"),
            key=lambda e: (e["emulated"], e["source"] != "ci", e["st"] != "pass"),
        )
        for gpu in sorted((e for e in rows if e["device"] == "cuda"), key=lambda e: e["source"] != "ci"):
            if not trainium:
                break
            trn = trainium[0]
            both = trn["st"] == gpu["st"] == "pass" and not trn["emulated"] and trn["source"] == gpu["source"]
            pairs.append(
                {
                    "id": model_id,
                    "sides": [trn, gpu],
                    "ratios": {
                        "at_slo": speed_ratio(trn, gpu, ratio_text(trn["at_slo"], gpu["at_slo"]) if both else "\u2014"),
                        "usd": ratio_text(trn["usd_at_slo"], gpu["usd_at_slo"]) if both else "\u2014",
                    },
                }
            )
    return pairs


def serving_section(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the template's serving section shows, or None when there is no serving record."""
    entries = serving_entries(records)
    if not entries:
        return None
    models = list(dict.fromkeys(e["id"] for e in entries))
    return {
        "rows": entries,
        "curves": [serving_curve(m, entries) for m in models],
        "pairs": serving_pairs(entries),
    }
