"""How often the planner's core count was right: compare it with the smallest core count that passed.

Reads result records (JSON files holding one record or a list of them) and groups them per model, task,
instance and dtype. For each group the smallest passing count is the least ``cores`` of any passing record
or passing attempt (the neuron backend's escalation: planned cores first, doubled after an OOM). The
planned count is the ``plan.cores`` the records carry.

    .venv/bin/python benchmarks/plan_calibration.py results/*.json [--json]

Prints how many groups the plan got exactly right, how many it under-planned (a run at the planned count
failed and more cores passed) and how many it over-planned (fewer cores passed), and lists the misses.

``--durations`` instead refits the duration model's prior (``pipeline.queue.durations.Prior``) from the Neuron records
whose compile finished: compile seconds = base + per-billion x params / sqrt(cores), run seconds = base +
per-billion x params, host bytes = base + per-parameter x params, each by least squares; it prints the values
to put in ``pipeline/queue/durations.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Key = tuple[str, str, str, str]


@dataclass
class Group:
    """The runs of one (model, task, instance, dtype)."""

    key: Key
    planned: int | None = None
    passing: list[int] = field(default_factory=list)

    @property
    def smallest_passing(self) -> int | None:
        return min(self.passing) if self.passing else None

    @property
    def verdict(self) -> str:
        if self.planned is None:
            return "no plan"
        if self.smallest_passing is None:
            return "no pass"
        if self.planned == self.smallest_passing:
            return "right"
        return "under" if self.planned < self.smallest_passing else "over"


def load_records(paths: list[Path]) -> list[dict[str, Any]]:
    """Every record in ``paths``; a file that is not JSON is reported on stderr and skipped."""
    records: list[dict[str, Any]] = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"{path}: skipped ({exc})", file=sys.stderr)
            continue
        records.extend(r for r in (data if isinstance(data, list) else [data]) if isinstance(r, dict))
    return records


def calibrate(records: list[dict[str, Any]]) -> list[Group]:
    """Group records and collect planned and passing core counts.

    Args:
        records: result records (schema 1.0).

    Returns:
        One :class:`Group` per (model_id, task, instance, dtype), in first-seen order.
    """
    groups: dict[Key, Group] = {}
    for record in records:
        hardware = record.get("hardware") or {}
        instance = hardware.get("instance_type") or hardware.get("name") or "?"
        key = (str(record.get("model_id")), str(record.get("task")), str(instance), str(record.get("dtype")))
        group = groups.setdefault(key, Group(key))
        plan = record.get("plan") or {}
        if isinstance(plan.get("cores"), int):
            group.planned = plan["cores"]
        if record.get("status") == "pass" and isinstance(record.get("cores"), int):
            group.passing.append(record["cores"])
        for attempt in record.get("attempts") or []:
            if attempt.get("status") == "pass" and isinstance(attempt.get("cores"), int):
                group.passing.append(attempt["cores"])
    return list(groups.values())


def _line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys on xs (slope 0 when every x is the same)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return my - slope * mx, slope


def fit_durations(records: list[dict[str, Any]]) -> dict[str, float] | None:
    """The prior's coefficients fitted to ``records`` (None with fewer than two usable records)."""
    rows = []
    for r in records:
        m = r.get("metrics") or {}
        if r.get("device") != "neuron" or r.get("status") == "error" or m.get("compile_s") is None:
            continue
        if m.get("wall_s") is None or not m.get("params") or not isinstance(r.get("cores"), int):
            continue
        rows.append(
            (m["params"], r["cores"], m["compile_s"], m["wall_s"] - m["compile_s"], m.get("peak_host_memory_bytes"))
        )
    if len(rows) < 2:
        return None
    compile_base, compile_per_b = _line_fit([p / 1e9 / max(1, c) ** 0.5 for p, c, *_ in rows], [r[2] for r in rows])
    run_base, run_per_b = _line_fit([p / 1e9 for p, *_ in rows], [r[3] for r in rows])
    hosts = [(p, h) for p, _, _, _, h in rows if h]
    host_base, host_per_param = _line_fit([p for p, _ in hosts], [h for _, h in hosts]) if len(hosts) > 1 else (0, 0)
    return {
        "compile_base_s": round(compile_base, 1),
        "compile_per_b_s": round(compile_per_b, 1),
        "run_base_s": round(run_base, 1),
        "run_per_b_s": round(run_per_b, 1),
        "host_base_bytes": int(host_base),
        "host_per_param_bytes": round(host_per_param, 2),
        "records": len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path, help="result record JSON files")
    parser.add_argument("--json", action="store_true", help="print the groups as JSON")
    parser.add_argument("--durations", action="store_true", help="refit the duration model's prior instead")
    args = parser.parse_args(argv)
    if args.durations:
        fitted = fit_durations(load_records(args.records))
        if fitted is None:
            print("fewer than two Neuron records with a finished compile: nothing to fit", file=sys.stderr)
            return 1
        print(json.dumps(fitted, indent=2))
        return 0

    groups = calibrate(load_records(args.records))
    if not groups:
        print("no records read", file=sys.stderr)
        return 1
    if args.json:
        rows = [asdict(g) | {"smallest_passing": g.smallest_passing, "verdict": g.verdict} for g in groups]
        print(json.dumps(rows, indent=2))
        return 0
    counts: dict[str, int] = {}
    for group in groups:
        counts[group.verdict] = counts.get(group.verdict, 0) + 1
    judged = sum(counts.get(v, 0) for v in ("right", "under", "over"))
    right = counts.get("right", 0)
    print(f"{len(groups)} model/task/instance/dtype groups, {judged} with both a plan and a passing run")
    if judged:
        print(f"plan right: {right}/{judged} ({right / judged:.0%})")
    print(
        f"under-planned: {counts.get('under', 0)}, over-planned: {counts.get('over', 0)}, "
        f"no passing run: {counts.get('no pass', 0)}, no plan: {counts.get('no plan', 0)}"
    )
    for group in groups:
        if group.verdict in ("under", "over"):
            model, task, instance, dtype = group.key
            print(
                f"  {group.verdict}: {model} [{task}, {instance}, {dtype}] planned {group.planned}, "
                f"smallest passing {group.smallest_passing}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
