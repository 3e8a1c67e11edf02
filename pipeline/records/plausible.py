"""Whether a submitted record's figures could be true at all: the submission check's extra rules.

A community record is a claim a maintainer reviews. A valid record may still say what no benchmark of one
model can measure: a compile that held more memory than the largest host trncat benchmarks on, a run longer than
a day. Such figures would be shown on the catalog and (before issue 22.3) steered the queue's host-memory guard;
the submission check flags them (``submission.yml``).
"""

from __future__ import annotations

from typing import Any

from pipeline.taskspec import REGISTRY

GiB = 1024**3
#: The host memory of a trn2.48xlarge, the largest instance trncat benchmarks on: 2,048 GiB (Neuron docs, "Amazon
#: EC2 Trn2 Architecture", Trn2 instance specifications; docs/neuron-facts.md). No run on it can peak above it.
MAX_HOST_MEMORY_BYTES = 2048 * GiB
#: The longest plausible benchmark of one model: a day. A CI run stops at 5,400 s (``benchmark.yml``'s
#: ``BENCH_TIMEOUT_S``) and ``trncat bench`` at 1,800 s by default; a community run may be given longer, not days.
MAX_WALL_S = 86_400.0
#: Speeds, as outputs per second: no run measures one output in longer than it ran, so below one per day
#: (1 / MAX_WALL_S) a figure is no measurement (a 5e-324 once stopped every page build). Seconds per output are
#: bounded the other way, by a day. Each task's speed is its cost's (:class:`pipeline.taskspec.Cost`).
SPEEDS_PER_S = tuple(dict.fromkeys(s.cost.speed for s in REGISTRY.values() if not s.cost.seconds_each))
SECONDS_EACH = tuple(dict.fromkeys(s.cost.speed for s in REGISTRY.values() if s.cost.seconds_each))
MIN_PER_S = 1.0 / MAX_WALL_S


def plausibility_problems(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, why) for each figure of a valid ``record`` that no real run can have (none: plausible).

    ``wall_s`` bounds every other time (the semantic rules keep load, compile and first-token times under it).
    """
    metrics = record.get("metrics") or {}
    out: list[tuple[str, str]] = []
    host = metrics.get("peak_host_memory_bytes")
    if isinstance(host, int) and host > MAX_HOST_MEMORY_BYTES:
        out.append(("metrics.peak_host_memory_bytes", f"{host} bytes: more than a trn2.48xlarge host has (2,048 GiB)"))
    for name in SPEEDS_PER_S:
        speed = metrics.get(name)
        if isinstance(speed, int | float) and not isinstance(speed, bool) and speed < MIN_PER_S:
            out.append((f"metrics.{name}", f"{speed:g} per second: less than one per day, no run measures that"))
    for name in SECONDS_EACH:
        seconds = metrics.get(name)
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > MAX_WALL_S:
            out.append((f"metrics.{name}", f"{seconds:g} s each: longer than a day, no run measures that"))
    wall = metrics.get("wall_s")
    if isinstance(wall, int | float) and wall > MAX_WALL_S:
        out.append(("metrics.wall_s", f"{wall:g} s: longer than a day, no benchmark of one model runs that long"))
    return out
