"""The catalog page's table by architecture, and the family evidence its search box shows for a model with no row:
per architecture, model_type and task, how the family fared on Trainium2 on the toolchain it last ran with.

The counts are :func:`pipeline.records.family_stats` of each latest row's family row, the rule ``trncat check``
answers by, so the page and the command say the same. Rows without a known architecture belong to no family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline.records import FamilyStat, family_order, family_stats


def grouped_family_table(groups: Iterable[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per family, most measured on Trainium2 first, of family rows grouped by family (one group's rows at
    a time: a page build keeps 100,000 family rows as tuples, :meth:`pipeline.page.rows.Gathered.family_groups`)."""
    # Each family's stat becomes its table entry at once: a stat holds its counted rows, which are let go with it.
    table = [(family_order(stat), family_entry(stat)) for group in groups for stat in family_stats(group)]
    return [entry for _, entry in sorted(table, key=lambda item: item[0])]


def family_entry(s: FamilyStat) -> dict[str, Any]:
    """A family's entry of the table (short keys: the page's script reads them)."""
    return {
        "arch": s.architecture,
        "mt": s.model_type,
        "task": s.task,
        "tc": s.toolchain,
        "n": s.models,
        "pass": s.passed,
        "fail": s.failed,
        "cmin": s.cores_min,
        "cmax": s.cores_max,
        "codes": [[code, count] for code, count in s.failure_codes],
        "else": s.elsewhere,
    }


def cores_text(entry: Mapping[str, Any]) -> str:
    """``1`` or ``1–8``."""
    low, high = entry.get("cmin"), entry.get("cmax")
    return "—" if low is None else str(low) if low == high else f"{low}–{high}"


def codes_text(entry: Mapping[str, Any]) -> str:
    """``ncc_eoom001 ×2, compile_error ×1``."""
    return ", ".join(f"{code} \u00d7{count}" for code, count in entry.get("codes") or ()) or "—"


def family_line(entry: Mapping[str, Any], task_label: str) -> str:
    """What the search box says of a family whose name a model without a row contains."""
    name = f"{entry['arch']}" + (f" ({entry['mt']})" if entry.get("mt") else "") + f" \u00b7 {task_label}: "
    if not entry["n"]:
        others = entry["else"]
        return f"{name}measured elsewhere only: CPU, cuda or Trainium3 ({others} model{'' if others == 1 else 's'}): " \
            "no Trainium2 evidence"  # fmt: skip
    fails = f" (fails: {codes_text(entry)})" if entry["fail"] else ""
    cores = "" if entry.get("cmin") is None else f"; cores {cores_text(entry)}"
    return f"{name}{entry['pass']} of {entry['n']} run on Trainium2{fails}{cores} \u00b7 {entry['tc']}"
