"""A timed figure's spread, and whether two of them differ (issue 50; the method: docs/methodology.md).

A benchmark times ``n`` repeats of one call. Their median is the figure; its 95 % interval is distribution-free,
from order statistics: with ``B ~ Binomial(n, 1/2)`` (how many repeats fall below the true median), the interval
``[x(k), x(n+1-k)]`` of the sorted repeats covers the median with probability ``1 - 2 P(B <= k-1)``; ``k`` is the
largest that keeps it at least 95 %. It needs no model of the noise (call times are skewed: a repeat is slowed, never
sped up, by a neighbour) and no random draw, and it exists from :data:`MIN_REPEATS` repeats on (6: 1 - 2/2^6 =
96.9 %; five give at most 93.75 %).

Two figures differ only when their intervals do not overlap and the larger is more than ``1 + floor`` times the
smaller: the repeats of one run share its machine's state, so their interval can be narrower than the run-to-run
noise, which the floor stands for. On an accelerator instance (one tenant) it is :data:`FLOOR`, 5 %, the tolerance
within which AccelMark counts a second run as a reproduction; on a CPU host it is :data:`FLOORS` ``["cpu"]``, 150 %
(2.5x), measured: two runs of the same tiny model a minute apart on the shared 2-core development host differed by
1.25x to 2.32x in speed, the tiny Llama's 95 % intervals apart (docs/methodology.md). A figure without an interval
on either side is no verdict (``no interval: cannot tell``) unless the two values are equal.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.records.rows import toolchain_label
from pipeline.taskspec import task_spec

#: The interval's coverage, its fewest repeats, and the smallest relative change called a change.
LEVEL = 0.95
MIN_REPEATS = 6
FLOOR = 0.05
#: The floor of a device other than an accelerator's (the rows' ``device``).
FLOORS = {"cpu": 1.5}
#: The verdicts of :func:`verdict`, and how a diff says them.
VERDICTS = {
    "changed": "changed",
    "within_noise": "unchanged (within noise)",
    "no_interval": "no interval: cannot tell",
}


def median_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The distribution-free ``level`` interval of the median of ``values``; None below :data:`MIN_REPEATS`
    values or when no order statistics reach ``level``."""
    n = len(values)
    if n < MIN_REPEATS:
        return None
    ordered = sorted(float(v) for v in values)
    tail, k = 0.0, 0  # tail = P(B <= k - 1) for the next k
    while k < n // 2:
        nxt = tail + math.comb(n, k) / 2**n
        if 2 * nxt > 1 - level:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]


def scaled(figure: float, median: float, interval: tuple[float, float], *, rate: bool) -> tuple[float, float]:
    """The interval of a figure made from a median call time (``figure`` proportional to it, or to its inverse when
    ``rate``): the call time's interval carried through, relative to ``median``."""
    low, high = interval[0] / median, interval[1] / median
    return (figure / high, figure / low) if rate else (figure * low, figure * high)


def verdict(
    old: float | None,
    new: float | None,
    old_interval: tuple[float | None, float | None] | None,
    new_interval: tuple[float | None, float | None] | None,
    *,
    floor: float = FLOOR,
) -> str | None:
    """``changed``, ``within_noise`` or ``no_interval`` for a figure measured on two rows; None when a side has no
    figure. Changed: the two intervals do not overlap and the larger figure exceeds the smaller by more than
    ``floor`` (relative)."""
    if old is None or new is None:
        return None
    sides = [i for i in (old_interval, new_interval) if i and i[0] is not None and i[1] is not None]
    if len(sides) < 2:
        return "within_noise" if old == new else "no_interval"
    (a_low, a_high), (b_low, b_high) = sides
    overlap = not (a_high < b_low or b_high < a_low)  # type: ignore[operator]
    if overlap or min(old, new) <= 0 or max(old, new) / min(old, new) - 1 <= floor:
        return "within_noise"
    return "changed"


def verdict_of(entry: Mapping[str, Any], name: str) -> str | None:
    """An entry's verdict on a delta; a delta of a diff written before verdicts has none to tell by."""
    if entry.get(name) is None:
        return None
    return entry.get(f"{name}_verdict") or "no_interval"


def verdict_counts(entries: Sequence[Mapping[str, Any]], name: str) -> str:
    """How a diff's deltas of ``name`` were judged: ``1 changed, 2 unchanged (within noise)``; ``—`` for none."""
    verdicts = [v for e in entries if (v := verdict_of(e, name))]
    return ", ".join(f"{verdicts.count(v)} {text}" for v, text in VERDICTS.items() if v in verdicts) or "—"


def record_spread(
    task: str, batch_size: int, metrics: dict[str, Any], reported: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any] | None:
    """A record's ``spread`` from its child's raw call times (``reported``: the child's metrics, ``extra``: its raw
    figures; ``metrics``: the record's): the timed calls' count and the 95 % intervals of the median call time and
    of the task's speed figure (the interval of the call time it is made from, carried through; a text generation's
    decode time is each call's latency less its first token). None below the fewest repeats."""
    by_batch = extra.get("latencies_by_batch_s") or {}
    times: list[float] = reported.get("latencies_s") or by_batch.get(str(batch_size)) or []
    latency = metrics.get("latency_s") or {}
    interval = median_interval(times)
    if interval is None or not latency.get("p50"):
        return None
    out: dict[str, Any] = {"repeats": len(times), "latency_low_s": interval[0], "latency_high_s": interval[1]}
    column, fmt = (s.column, s.fmt) if (s := task_spec(task).speed) else ("", "")
    figure = latency["p50"] if column == "latency_p50_s" else metrics.get(column)
    base, calls = latency["p50"], times
    ttfts = extra.get("ttfts_s")
    if column == "decode_tokens_per_s" and ttfts and len(ttfts) == len(times) and metrics.get("ttft_s") is not None:
        base, calls = latency["p50"] - metrics["ttft_s"], [t - f for t, f in zip(times, ttfts, strict=True)]
    decode = median_interval(calls)
    if figure and base > 0 and decode is not None and decode[0] > 0:
        out["speed_low"], out["speed_high"] = scaled(float(figure), base, decode, rate=fmt == "rate")
    return out


def point_spread(point: Mapping[str, Any], samples: Mapping[str, Sequence[float]]) -> dict[str, Any] | None:
    """A serving point's ``spread`` from its measured, successful requests, one value each (``samples``:
    ``ttft_s``, ``tpot_ms``, ``e2e_s``, in the point's units): their count, the 95 % interval of each median, and the
    output throughput's, the end-to-end latency's carried through (at a fixed concurrency and output length each
    stream completes one request per latency: the rate is inverse to it). None below :data:`MIN_REPEATS` requests."""
    e2e = samples.get("e2e_s") or []
    out: dict[str, Any] = {"requests": len(e2e)}
    for name in ("ttft_s", "tpot_ms", "e2e_s"):
        if (interval := median_interval(samples.get(name) or [])) is not None:
            out[name] = list(interval)
    if "e2e_s" in out and point.get("output_tok_s") and out["e2e_s"][0] > 0:
        out["output_tok_s"] = list(scaled(point["output_tok_s"], statistics.median(e2e), out["e2e_s"], rate=True))
    return out if len(out) > 1 else None


def merge_rounds(rounds: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The points of several rounds of one sweep (each a list of points, in the same order): at each concurrency,
    the round of the median output throughput (a measured point, never an average), its ``spread`` counting the
    rounds, and from :data:`MIN_REPEATS` rounds on its throughput's interval that of the rounds' throughputs."""
    merged = []
    for same in zip(*rounds, strict=False):
        speeds = [p.get("output_tok_s") or 0.0 for p in same]
        point = dict(sorted(same, key=lambda p: p.get("output_tok_s") or 0.0)[(len(same) - 1) // 2])
        point["spread"] = {**(point.get("spread") or {}), "rounds": len(same)}
        if (interval := median_interval(speeds)) is not None:
            point["spread"]["output_tok_s"] = list(interval)
        merged.append(point)
    return merged


def ratio_interval(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[float, float] | None:
    """The interval of the ratio of two rows' speed figures (``old`` ÷ ``new``, flat rows): the far ends of their
    intervals divided (it holds the true ratio whenever both intervals hold theirs: at least 0.95² = 90.25 % when
    the runs are independent); None when a row has none."""
    a, b = (row.get("speed_low") for row in (old, new)), (row.get("speed_high") for row in (old, new))
    (a_low, b_low), (a_high, b_high) = a, b
    if None in (a_low, b_low, a_high, b_high) or not b_low or not b_high:
        return None
    return a_low / b_high, a_high / b_low


#: What a re-measurement shares with the row it repeats, beside its toolchain (compared by its label).
SAME_STACK = (
    "revision",
    "device",
    "instance_type",
    "dtype",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "image_size",
)


def remeasured(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str | None:
    """Repeat-to-verify: ``reproduced`` when ``after`` (a flat row) passes on the same stack as the pass ``before`` and
    its speed is within noise of it (:func:`verdict`), ``disagrees`` when it changed (flagged for a maintainer; both
    rows stay in the history); None for another stack, a status change, or no interval to tell by."""
    if before is None or before["status"] != "pass" or after["status"] != "pass" or not (speed := _speed(after)):
        return None
    if any(before.get(c) != after.get(c) for c in SAME_STACK) or toolchain_label(before) != toolchain_label(after):
        return None
    intervals = [(row.get("speed_low"), row.get("speed_high")) for row in (before, after)]
    said = verdict(before.get(speed), after.get(speed), *intervals, floor=FLOORS.get(after["device"], FLOOR))
    return {"within_noise": "reproduced", "changed": "disagrees"}.get(said or "")


def _speed(row: Mapping[str, Any]) -> str | None:
    spec = task_spec(row["task"]).speed
    return spec.column if spec else None
