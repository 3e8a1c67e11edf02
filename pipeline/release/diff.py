"""The release diff: what a toolchain change did, model by model (``trncat diff --toolchain OLD NEW``).

Each side is the newest row per (model, task) measured at that side's pins (a row is at a toolchain when each of its
versions is the pin, as the queue compares them: :func:`pipeline.queue.as_pinned`; a task ignores the other tasks'
libraries; a CI row before a row of any other source). A model on both sides is one of: newly passing, newly failing
(with the new failure's code), still failing with a changed code, still failing, still passing; a model on one side
only is not yet re-measured (old only) or new (new only). Two rows of different sources (a CI row and a community
one), hardware, devices or workloads compare nothing: the entry is ``not_comparable`` and says what differs; each
side keeps its source, and the page and feed count an entry of community rows apart
(:func:`pipeline.page.releases.counted_apart`). Each compared entry carries the change in compile time (neuronx-cc's
seconds, ``neuronx_cc_s``), first-call time (``compile_s``, the first call's overhead), speed (the task's speed
figure, in percent, higher is faster) and peak device memory, with both rows' dates; the summary gives the count of
each kind and the median of each delta.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.dataset import iter_results
from pipeline.errors import ConfigError
from pipeline.queue import as_pinned, load_toolchain, version_column
from pipeline.records import FLOOR, FLOORS, VERDICTS, verdict, verdict_counts
from pipeline.release.watch import current_release
from pipeline.taskspec import REGISTRY, key_mask

#: The kinds, in the order a diff lists them (regressions first), with their headings.
DIFF_KINDS: tuple[tuple[str, str], ...] = (
    ("newly_failing", "Newly failing"),
    ("code_changed", "Still failing, with another code"),
    ("newly_passing", "Newly passing"),
    ("still_passing", "Still passing"),
    ("still_failing", "Still failing, same code"),
    ("not_comparable", "Not comparable (another instance or workload)"),
    ("old_only", "Not re-measured yet"),
    ("new_only", "New on this toolchain"),
)
#: delta name -> the row column it is taken from (speed is per task: :data:`SPEED`).
DELTAS: Mapping[str, str] = {
    "compile_s": "neuronx_cc_s",
    "first_call_s": "compile_s",
    "speed_pct": "",
    "peak_memory_bytes": "peak_device_memory_bytes",
}
#: Each task's speed figure and whether more is faster (its spec's speed: a rate is faster when higher).
SPEED: Mapping[str, tuple[str, bool]] = {
    name: (spec.speed.column, spec.speed.fmt == "rate") for name, spec in REGISTRY.items() if spec.speed
}
#: What two rows must share to be compared. ``source`` first (issue 47.2): a community row never judges a CI one.
_WHERE = ("source", "device", "instance_type", "dtype", "batch_size", "input_tokens", "output_tokens", "image_size")
#: An entry's field of each side (``old_<field>``, ``new_<field>``) -> the row column it is (the speed's interval:
#: pipeline/records/spread.py).
_SIDE = {"status": "status", "failure_stage": "failure_stage", "failure_code": "failure_code",
         "finished_at": "finished_at", "device": "device", "instance": "instance_type", "source": "source",
         "speed_low": "speed_low", "speed_high": "speed_high"}  # fmt: skip
#: The columns a diff reads of each results row.
READ_COLUMNS = (
    "model_id", "task", "status", "failure_stage", "failure_code", "finished_at", "revision",
    *_WHERE, "neuronx_cc_s", "compile_s", "peak_device_memory_bytes",
    *sorted({column for column, _ in SPEED.values()}),
)  # fmt: skip


def rows_at(rows: Iterable[Mapping[str, Any]], pins: Mapping[str, str]) -> list[dict[str, Any]]:
    """The rows measured at ``pins`` (version key -> version): each version the row's task depends on is its pin."""
    picked = []
    for row in rows:
        ignored = key_mask(row["task"])
        if all(k in ignored or as_pinned(row.get(version_column(k)), v) == v for k, v in pins.items()):
            picked.append(dict(row))
    return picked


def _newest(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest pass or fail per (model id without case, task); a CI row before any other (errors say nothing)."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    judged = [row for row in rows if row["status"] in ("pass", "fail")]
    for row in sorted(judged, key=lambda r: (r.get("source") == "ci", r["finished_at"]), reverse=True):
        best.setdefault((str(row["model_id"]).casefold(), row["task"]), dict(row))  # a tie keeps the first
    return best


def speed_of(row: Mapping[str, Any]) -> float | None:
    column, _ = SPEED.get(row["task"], ("", True))
    value = row.get(column) if column else None
    return None if value is None else float(value)


def _delta(old: Mapping[str, Any], new: Mapping[str, Any], name: str) -> float | None:
    if name == "speed_pct":
        a, b = speed_of(old), speed_of(new)
        if a is None or b is None or a <= 0 or b <= 0:
            return None
        faster = SPEED[old["task"]][1]
        return round(((b / a) if faster else (a / b)) * 100 - 100, 2)
    a, b = old.get(DELTAS[name]), new.get(DELTAS[name])
    return None if a is None or b is None else round(float(b) - float(a), 6)


def _kind(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    if old is None:
        return "new_only"
    if new is None:
        return "old_only"
    if any(old.get(c) != new.get(c) for c in _WHERE):
        return "not_comparable"
    if old["status"] == "pass":
        return "still_passing" if new["status"] == "pass" else "newly_failing"
    if new["status"] == "pass":
        return "newly_passing"
    return "still_failing" if old.get("failure_code") == new.get("failure_code") else "code_changed"


@dataclass
class ReleaseDiff:
    """A release diff: its two toolchains' names, one entry per model and task, the summary."""

    old: str
    new: str
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {kind: sum(e["kind"] == kind for e in self.entries) for kind, _ in DIFF_KINDS}

    @property
    def medians(self) -> dict[str, float | None]:
        """The median of each delta over the entries whose delta is a change (None when none is)."""
        out: dict[str, float | None] = {}
        for name in DELTAS:
            values = [e[name] for e in self.entries if e[f"{name}_verdict"] == "changed"]
            out[name] = round(statistics.median(values), 6) if values else None
        return out

    @property
    def compared(self) -> int:
        """Entries measured on both toolchains on the same hardware and workload."""
        return sum(e["kind"] not in ("not_comparable", "old_only", "new_only") for e in self.entries)

    def summary(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "counts": self.counts, "medians": self.medians,
                "compared": self.compared}  # fmt: skip


def _entry(key: tuple[str, str], old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    kind = _kind(old, new)
    either = new or old
    assert either is not None
    entry: dict[str, Any] = {"model_id": either["model_id"], "task": key[1], "kind": kind}
    for side, row in (("old", old or {}), ("new", new or {})):
        entry.update({f"{side}_{name}": row.get(column) for name, column in _SIDE.items()})
        for name, column in DELTAS.items():
            value = (speed_of(row) if name == "speed_pct" else row.get(column)) if row else None
            entry[f"{side}_{name.removesuffix('_pct')}"] = None if value is None else float(value)
    comparable = kind not in ("not_comparable", "old_only", "new_only")
    for name in DELTAS:
        entry[name] = _delta(old, new, name) if comparable and old and new else None
        entry[f"{name}_verdict"] = _verdict(entry, name) if entry[name] is not None else None
    differs = [c for c in _WHERE if old and new and old.get(c) != new.get(c)]
    entry["note"] = "compares nothing: measured with another " + ", ".join(differs) if differs else None
    return entry


def _verdict(entry: Mapping[str, Any], name: str) -> str | None:
    """The entry's ``<delta>_verdict`` (:func:`pipeline.records.verdict`, issue 50): ``changed`` only when the two rows'
    95 % intervals do not overlap and the change exceeds the device's floor (5 %; 2.5x on a CPU host), else
    ``within_noise``; ``no_interval`` where a row has none (compile time, first call and memory are measured once per
    run) and the values differ. Status stays exact."""
    side = name.removesuffix("_pct")
    if side != "speed":  # measured once per run: no interval
        return verdict(entry[f"old_{side}"], entry[f"new_{side}"], None, None)
    old, new = ((entry[f"{s}_speed_low"], entry[f"{s}_speed_high"]) for s in ("old", "new"))
    floor = FLOORS.get(entry["new_device"], FLOOR)  # a compared entry's rows share their device
    return verdict(entry["old_speed"], entry["new_speed"], old, new, floor=floor)


_ORDER = {kind: i for i, (kind, _) in enumerate(DIFF_KINDS)}


def release_diff(
    old_rows: Sequence[Mapping[str, Any]],
    new_rows: Sequence[Mapping[str, Any]],
    *,
    old: str,
    new: str,
) -> ReleaseDiff:
    """The diff of the rows measured on toolchain ``old`` against those measured on ``new``.

    Args:
        old_rows: results rows (flat, :data:`READ_COLUMNS` at least) measured on the old toolchain
            (:func:`rows_at` picks them from a dataset's results).
        new_rows: the same, on the new toolchain.
        old: the old toolchain's name (``2.33.0``); new: the new one's.

    Returns:
        The diff, its entries ordered regressions first, then by model id and task.
    """
    before, after = _newest(old_rows), _newest(new_rows)
    diff = ReleaseDiff(old=old, new=new)
    for key in sorted(set(before) | set(after)):
        diff.entries.append(_entry(key, before.get(key), after.get(key)))
    diff.entries.sort(key=lambda e: (_ORDER[e["kind"]], e["model_id"].casefold(), e["task"]))
    return diff


def load_side(path: Path) -> tuple[str, dict[str, str]]:
    """A toolchain file's name (the Neuron release its header names, else the file's stem) and its pins.

    Raises:
        ConfigError: unreadable toolchain file (:func:`pipeline.queue.load_toolchain`).
    """
    pins = load_toolchain(path)
    try:
        name = current_release(path.read_text(encoding="utf-8"))
    except ConfigError:
        name = path.stem
    return name, pins


def diff_dataset(
    root: Path, *, old: str, new: str, old_pins: Mapping[str, str], new_pins: Mapping[str, str]
) -> ReleaseDiff:
    """The release diff of the dataset folder ``root``'s results between two toolchains' pins.

    Raises:
        ConfigError: the two toolchains pin the same versions (nothing to compare).
        DatasetError: an unreadable results file.
    """
    if dict(old_pins) == dict(new_pins):
        raise ConfigError(f"{old} and {new} pin the same versions: a release diff compares two toolchains")
    versions = sorted({version_column(k) for k in (*old_pins, *new_pins)})
    rows = list(iter_results(root, [*READ_COLUMNS, "speed_low", "speed_high", *versions]))
    return release_diff(rows_at(rows, old_pins), rows_at(rows, new_pins), old=old, new=new)


def diff_text(diff: ReleaseDiff) -> str:
    """The diff as lines: the counts, the medians, then each entry (regressions first) with both rows' dates."""
    counts, medians = diff.counts, diff.medians
    lines = [f"{diff.old} -> {diff.new}: {len(diff.entries)} model(s) and task(s), {diff.compared} compared"]
    lines += [f"  {label}: {counts[kind]}" for kind, label in DIFF_KINDS if counts[kind]]
    shown = ", ".join(f"{name} {_fmt(medians[name], name)}" for name in DELTAS)
    lines.append(f"  medians of the changes: {shown}")
    lines += [f"  {name}: {said}" for name in DELTAS if (said := verdict_counts(diff.entries, name)) != "—"]
    for e in diff.entries:
        codes = ""
        if e["kind"] in ("newly_failing", "code_changed", "still_failing"):
            codes = f" {e['old_failure_code'] or '-'} -> {e['new_failure_code'] or '-'}"
        dates = f"{_day(e['old_finished_at'])} -> {_day(e['new_finished_at'])}"
        deltas = ", ".join(_said(e, name) for name in DELTAS if e[name] is not None)
        note = f" ({e['note']})" if e["note"] else ""
        if "community" in (e["old_source"], e["new_source"]):
            note += f" [{e['old_source'] or '-'} -> {e['new_source'] or '-'} rows]"
        lines.append(f"{e['kind']:<15} {e['model_id']} ({e['task']}){codes} [{dates}] {deltas}{note}".rstrip())
    return "\n".join(lines)


def _said(entry: Mapping[str, Any], name: str) -> str:
    """A delta with its verdict: ``speed_pct +31.0% (changed)``, ``speed_pct unchanged (within noise)``."""
    said = entry.get(f"{name}_verdict")
    if said == "within_noise":
        return f"{name} {VERDICTS[said]}"
    return f"{name} {_fmt(entry[name], name)}" + (f" ({VERDICTS[said]})" if said else "")


def _fmt(value: float | None, name: str) -> str:
    if value is None:
        return "-"
    if name == "speed_pct":
        return f"{value:+.1f}%"
    if name == "peak_memory_bytes":
        return f"{value / 2**20:+.1f} MiB"
    return f"{value:+.2f} s"


def _day(value: dt.datetime | None) -> str:
    return "-" if value is None else value.date().isoformat()
