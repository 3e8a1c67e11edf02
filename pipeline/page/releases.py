"""The page's release sections: one per release diff (``data/releases/``), "Neuron OLD → NEW".

Each shows the count of every kind, the entries with the regressions first (newly failing, then still failing with
another code), each with both rows' dates, the medians of the deltas, and a delta plot: each compared model's speed
change in percent (a bar left of the axis is slower). A delta shows its verdict (:mod:`pipeline.records.spread`):
"unchanged (within noise)" where the two rows' intervals overlap or the change is under the device's floor, "no
interval: cannot tell" beside a value whose rows have no interval; the medians are of the changes only. Names and
codes come from the dataset: escaped like every other text of the page. Rows measured on a CPU are badged so: the
demo's diffs are of CPU rows, never Trainium2.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from pipeline.page.plots import fmt_bytes, fmt_seconds
from pipeline.records import VERDICTS, verdict_counts, verdict_of

#: The kinds a section lists, regressions first, with their headings (the diff's own order).
KIND_LABELS: tuple[tuple[str, str], ...] = (
    ("newly_failing", "newly failing"),
    ("code_changed", "another failure code"),
    ("newly_passing", "newly passing"),
    ("still_passing", "still passing"),
    ("still_failing", "still failing"),
    ("not_comparable", "not comparable"),
    ("old_only", "not re-measured yet"),
    ("new_only", "new"),
)
REGRESSIONS = ("newly_failing", "code_changed")
#: Entries listed per section (the whole diff is its Parquet file); bars in its plot.
MAX_ROWS, MAX_BARS = 200, 40
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)*$")
_DELTAS = ("compile_s", "first_call_s", "speed_pct", "peak_memory_bytes")


def delta_text(name: str, value: float | None) -> str:
    """One delta as the page shows it: ``+12 s``, ``−3.5%``, ``+96 MB``; ``—`` when there is none."""
    if value is None:
        return "—"
    if name == "speed_pct":
        return f"{value:+.1f}%".replace("-", "−")
    return ("+" if value >= 0 else "−") + (fmt_bytes if name == "peak_memory_bytes" else fmt_seconds)(abs(value))


def said(entry: Mapping[str, Any], name: str) -> str:
    """A delta as a section's row says it: ``−31.0%``, ``unchanged (within noise)``, ``+12 s (no interval: cannot
    tell)``."""
    verdict = verdict_of(entry, name)
    if verdict == "within_noise":
        return VERDICTS[verdict]
    text = delta_text(name, entry.get(name))
    return f"{text} ({VERDICTS[verdict]})" if verdict == "no_interval" else text


def _day(value: Any) -> str:
    return "—" if value is None else value.date().isoformat() if hasattr(value, "date") else str(value)[:10]


def release_title(old: str, new: str) -> str:
    """'Neuron 2.25 → 2.26' (or, where either is no version number, 'OLD → NEW')."""
    both = _VERSION.fullmatch(old) and _VERSION.fullmatch(new)
    return f"Neuron {old} → {new}" if both else f"{old} → {new}"


def delta_plot(entries: Sequence[Mapping[str, Any]], *, title: str) -> Markup:
    """Horizontal bars around a zero axis: each compared model's speed change in percent (clamped at ±100%)."""
    bars = [e for e in entries if e.get("speed_pct") is not None][:MAX_BARS]
    width, band, top, label_w = 480, 18, 34, 190
    height = max(80, top + band * len(bars) + 12)
    axis = label_w + (width - label_w - 12) / 2
    half = (width - label_w - 12) / 2
    parts = [
        f'<svg class="release-plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" class="plot-title">{escape(title)}</text>',
    ]
    if not bars:
        parts.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" class="plot-empty">'
                     "no model passed on both toolchains</text>")  # fmt: skip
        return Markup("".join(parts) + "</svg>")
    parts.append(f'<line x1="{axis:.1f}" y1="{top - 4}" x2="{axis:.1f}" y2="{height - 8}" class="plot-axis"/>')
    for index, e in enumerate(bars):
        y = top + index * band
        value = max(-100.0, min(100.0, float(e["speed_pct"])))
        length = abs(value) / 100 * half
        x = axis if value >= 0 else axis - length
        name = str(e["model_id"])
        short = name if len(name) <= 28 else name[:27] + "…"
        klass = "plot-bar" if value >= 0 else "plot-bar slower"
        klass += "" if verdict_of(e, "speed_pct") == "changed" else " noise"
        tip = f"{name} ({e['task']}): speed {said(e, 'speed_pct')}"
        parts.append(f'<text x="8" y="{y + 11}" class="plot-tick">{escape(short)}<title>{escape(tip)}</title></text>')
        parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{max(length, 1):.1f}" height="11" class="{klass}">'
                     f"<title>{escape(tip)}</title></rect>")  # fmt: skip
    return Markup("".join(parts) + "</svg>")


def counted_apart(entry: Mapping[str, Any]) -> bool:
    """Whether an entry stands on a community row, either side (issue 47.2): listed with its source, never counted
    with the project's own in a section's or the feed's counts."""
    return "community" in (entry.get("old_source"), entry.get("new_source"))


def release_sections(diffs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The template's data of each diff (``{"old", "new", "entries"}``, newest first)."""
    sections = []
    for diff in diffs:
        entries = list(diff["entries"])
        counts = {kind: sum(e["kind"] == kind and not counted_apart(e) for e in entries) for kind, _ in KIND_LABELS}
        order = {kind: i for i, (kind, _) in enumerate(KIND_LABELS)}
        entries.sort(key=lambda e: (order.get(e["kind"], len(order)), str(e["model_id"]).casefold(), e["task"]))
        devices = {e.get("new_device") or e.get("old_device") for e in entries}
        rows = []
        for e in entries[:MAX_ROWS]:
            code = None
            if e["kind"] in ("newly_failing", "code_changed", "still_failing"):
                code = f"{e.get('old_failure_code') or '—'} → {e.get('new_failure_code') or '—'}"
            rows.append({
                "id": e["model_id"], "task": e["task"], "kind": e["kind"], "label": dict(KIND_LABELS).get(e["kind"]),
                "regression": e["kind"] in REGRESSIONS, "code": code, "note": e.get("note"),
                "dates": f"{_day(e.get('old_finished_at'))} → {_day(e.get('new_finished_at'))}",
                "deltas": {name: said(e, name) for name in _DELTAS},
                "cpu": (e.get("new_device") or e.get("old_device")) == "cpu",
                "src": f"{e.get('old_source') or '—'} → {e.get('new_source') or '—'}" if counted_apart(e) else None,
            })  # fmt: skip
        medians = {}
        for name in _DELTAS:
            values = [float(e[name]) for e in entries if verdict_of(e, name) == "changed"]
            median = statistics.median(values) if values else None
            medians[name] = f"{delta_text(name, median)} ({verdict_counts(entries, name)})"
        title = release_title(str(diff["old"]), str(diff["new"]))
        sections.append({
            "title": title, "old": diff["old"], "new": diff["new"], "rows": rows, "total": len(entries),
            "counts": [(kind, label, counts[kind]) for kind, label in KIND_LABELS if counts[kind]],
            "regressions": sum(counts[k] for k in REGRESSIONS),
            "apart": sum(map(counted_apart, entries)), "medians": medians, "cpu": "cpu" in devices,
            "plot": delta_plot([e for e in entries if e["kind"] == "still_passing"], title=f"Speed change, {title}"),
        })  # fmt: skip
    return sections
