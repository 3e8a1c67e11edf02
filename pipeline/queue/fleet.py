"""What a sweep costs and the fleet to run it on: instance prices, runner partitions, the estimate.

A *partition* says how one instance's NeuronCores are split into runners, e.g. ``1x8,4x4,40x1``: one runner
of 8 cores, four of 4, forty of 1, laid out from core 0 in that order (``SIZE@FIRST`` places a runner at a
given core). Each runner owns a contiguous range (``NEURON_RT_VISIBLE_CORES``); a runner of up to a chip's
cores stays inside one chip and a larger one starts on a chip boundary, so tensor parallelism over 4 cores
keeps to one chip (AWS Neuron docs, "Keep TP4 within a chip":
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/training/best-practices.html).
``runners/setup-runner.sh --partition`` applies the same rules; ``tests/test_runner_setup.py`` checks they agree.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import ConfigError
from pipeline.hardware import get_instance
from pipeline.prices import DEFAULT_OPTION, Price, Pricing
from pipeline.queue.sweep import Job, SweepResult, simulate
from pipeline.types import PRICE_KINDS

_ENTRY = re.compile(r"^(?:(\d+)x(\d+)|(\d+)@(\d+))$")


# -- partitions -----------------------------------------------------------------------------------------


def parse_partition(spec: str, *, instance: str = "trn2.48xlarge") -> list[tuple[int, int]]:
    """The runners of a partition spec as ``(first core, cores)``, validated.

    Args:
        spec: Comma-separated ``COUNTxSIZE`` (placed after the previous runner) or ``SIZE@FIRST``.
        instance: Instance type whose cores and chips bound the layout.

    Returns:
        The runners in the order given.

    Raises:
        ConfigError: malformed entry, a size that is not a power of two, ranges that overlap, a runner that
            straddles a chip boundary, or more cores than the instance has.
    """
    inst = get_instance(instance)
    chip = inst.cores_per_chip
    runners: list[tuple[int, int]] = []
    cursor = 0
    for entry in (part.strip() for part in spec.split(",")):
        match = _ENTRY.fullmatch(entry)
        if match is None:
            raise ConfigError(f"partition entry {entry!r}: want COUNTxSIZE (e.g. 4x4) or SIZE@FIRST (e.g. 8@56)")
        if match[1] is not None:
            count, size = int(match[1]), int(match[2])
            if count < 1:
                raise ConfigError(f"partition entry {entry!r}: the count must be at least 1")
            placed = [(cursor + k * size, size) for k in range(count)]
        else:
            size, first = int(match[3]), int(match[4])
            placed = [(first, size)]
        if size < 1 or size & (size - 1):
            raise ConfigError(f"partition entry {entry!r}: runner sizes are powers of two (1, 2, 4, 8, ...)")
        runners.extend(placed)
        cursor = placed[-1][0] + size
    total = sum(size for _, size in runners)
    if total > inst.cores:
        raise ConfigError(f"partition {spec!r} asks for {total} cores; a {instance} has {inst.cores}")
    owner: dict[int, int] = {}
    for index, (first, size) in enumerate(runners):
        if first + size > inst.cores:
            raise ConfigError(f"runner {index} ({size}@{first}) ends past core {inst.cores - 1} of a {instance}")
        # Within a chip a runner is aligned to its size; past a chip it starts on a chip boundary.
        if first % min(size, chip):
            raise ConfigError(
                f"runner {index} ({size}@{first}) straddles a chip boundary: a {size}-core runner starts at a "
                f"multiple of {min(size, chip)} ({chip} cores per chip)"
            )
        for core in range(first, first + size):
            if core in owner:
                raise ConfigError(f"runners {owner[core]} and {index} overlap on core {core}")
            owner[core] = index
    return runners


def format_partition(sizes: Iterable[int]) -> str:
    """``COUNTxSIZE`` entries for runner sizes, largest first (which keeps every runner chip-aligned)."""
    counts = Counter(sizes)
    return ",".join(f"{counts[size]}x{size}" for size in sorted(counts, reverse=True))


def layout_fleet(work: Mapping[int, float], instances: int, *, cores: int = 64) -> list[list[int]]:
    """Runner sizes per instance, with each size's share of the cores proportional to its core-seconds.

    Every size with work gets at least one runner; sizes are placed largest first, first fit, so every
    runner lands chip-aligned. Cores left over become 1-core runners.
    """
    total_cores = cores * instances
    whole = sum(work.values()) or 1.0
    counts: dict[int, int] = {}
    for size in sorted((s for s in work if work[s] > 0), reverse=True):
        counts[size] = max(1, round(work[size] / whole * total_cores / size))
    while sum(size * n for size, n in counts.items()) > total_cores:
        # Too many after rounding: take a runner from the size most over its share.
        over = max((s for s in counts if counts[s] > 1), key=lambda s: s * counts[s] - work[s] / whole * total_cores)
        counts[over] -= 1
    free = [cores] * instances
    layouts: list[list[int]] = [[] for _ in range(instances)]
    for size in sorted(counts, reverse=True):
        for _ in range(counts[size]):
            k = next((k for k in range(instances) if free[k] >= size), None)
            if k is None:
                break
            layouts[k].append(size)
            free[k] -= size
    for k in range(instances):
        layouts[k].extend([1] * free[k])
    return layouts


# -- the estimate ---------------------------------------------------------------------------------------


@dataclass
class Estimate:
    """A sweep's predicted cost and the recommended fleet (``to_dict`` is what ``--estimate`` writes)."""

    instance: str
    jobs: int
    by_size: dict[int, dict[str, float]]
    core_hours: float
    target_hours: float
    fleet: list[str]
    simulated: SweepResult
    prices: dict[str, float | None]
    sources: dict[str, int] = field(default_factory=dict)
    #: The purchase option the estimate is priced at, its price (None: unknown) and the file it came from.
    option: str = DEFAULT_OPTION
    price: Price | None = None
    prices_file: str | None = None
    #: The serving jobs among them (``mode: serving``): how many, and their NeuronCore-hours.
    serving_jobs: int = 0
    serving_core_hours: float = 0.0

    @property
    def instance_hours(self) -> float:
        return self.simulated.instance_hours

    def serving_cost(self) -> float | None:
        """USD of the serving jobs' share: their core-hours at the instance's price per core-hour (None: no price)."""
        if self.price is None or not self.serving_jobs:
            return None if self.price is None else 0.0
        return round(self.price.usd * self.serving_core_hours / get_instance(self.instance).cores, 2)

    def cost(self) -> dict[str, float | None]:
        """USD per price kind (None where the price table has no price for the instance)."""
        return {kind: None if p is None else round(p * self.instance_hours, 2) for kind, p in self.prices.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "jobs": self.jobs,
            "by_size": {str(size): figures for size, figures in sorted(self.by_size.items())},
            "core_hours": round(self.core_hours, 2),
            "target_hours": self.target_hours,
            "instance_hours": round(self.instance_hours, 2),
            "makespan_hours": round(self.simulated.makespan_s / 3600, 2),
            "busy_fraction": round(self.simulated.busy_fraction, 3),
            "fleet": [{"instance": self.instance, "partition": p} for p in self.fleet],
            "cost_usd": self.cost(),
            "price_option": self.option,
            "price": None
            if self.price is None
            else {
                "usd_per_hour": self.price.usd,
                "source": self.price.citation(),
                "as_of": self.price.as_of,
                "region": self.price.region,
                "note": self.price.note,
            },
            "duration_sources": self.sources,
            "serving": {
                "jobs": self.serving_jobs,
                "core_hours": round(self.serving_core_hours, 2),
                "cost_usd": self.serving_cost(),
            },
        }


def recommend_fleet(
    jobs: Sequence[Job], *, instance: str = "trn2.48xlarge", target_hours: float = 24.0, max_instances: int = 64
) -> tuple[list[list[int]], SweepResult]:
    """The fleet (instances partitioned by :func:`layout_fleet`) that finishes ``jobs`` within ``target_hours``
    in :func:`pipeline.queue.sweep.simulate` with re-partitioning for the fewest instance-hours; among fleets within
    2 % of those hours, the one that finishes first. When none meets the target, the fastest up to
    ``max_instances``.

    Raises:
        ConfigError: a job larger than the instance, or a bad target.
    """
    inst = get_instance(instance)
    if not target_hours > 0:
        raise ConfigError(f"the target must be a positive number of hours, got {target_hours!r}")
    if any(job.cores > inst.cores for job in jobs):
        raise ConfigError(f"a job needs more than the {inst.cores} cores of a {instance}")
    if not jobs:
        return [], simulate([], [], instance_cores=inst.cores)
    work: dict[int, float] = {}
    for job in jobs:
        work[job.cores] = work.get(job.cores, 0.0) + job.cores * job.seconds
    floor = max(1, math.ceil(sum(work.values()) / (inst.cores * target_hours * 3600)))
    tried: list[tuple[list[list[int]], SweepResult]] = []
    # Instances are released when idle, so more of them cost little more: look past the first that fits.
    for count in range(floor, min(max_instances, 4 * floor) + 1):
        layouts = layout_fleet(work, count, cores=inst.cores)
        tried.append((layouts, simulate(jobs, layouts, instance_cores=inst.cores)))
    within = [t for t in tried if t[1].makespan_s <= target_hours * 3600]
    if not within:
        return min(tried, key=lambda t: t[1].makespan_s)
    cheapest = min(t[1].instance_hours for t in within)
    return min((t for t in within if t[1].instance_hours <= 1.02 * cheapest), key=lambda t: t[1].makespan_s)


def estimate_sweep(
    entries: Sequence[Mapping[str, Any]],
    *,
    instance: str = "trn2.48xlarge",
    pricing: Pricing | None = None,
    target_hours: float = 24.0,
    sources: Mapping[str, int] | None = None,
) -> Estimate:
    """The cost of running the queue's ``entries`` (each with ``runner`` and ``predicted_s``) and the fleet.

    Args:
        entries: Matrix entries from :func:`pipeline.queue.matrix.build_queue`.
        instance: Instance type of the fleet.
        pricing: The price table, the purchase option the estimate is priced at (the others are listed too) and
            the file named when a price is missing (:func:`pipeline.prices.load_pricing`); None, or an instance
            missing from it: money unknown.
        target_hours: The sweep should finish within this many hours.
        sources: How many predictions came from history, older toolchains and the prior (for the report).

    Raises:
        ConfigError: an entry without a runner label or prediction, or a bad target.
    """
    pricing = pricing or Pricing()
    jobs: list[Job] = []
    by_size: dict[int, dict[str, float]] = {}
    serving_jobs, serving_core_hours = 0, 0.0
    for entry in entries:
        try:
            size = int(str(entry["runner"]).rsplit("-", 1)[1].removesuffix("c"))
            seconds = float(entry["predicted_s"])
        except (KeyError, ValueError, IndexError):
            raise ConfigError(f"matrix entry {entry.get('model_id')!r} has no runner label or prediction") from None
        jobs.append(Job(cores=size, seconds=seconds, name=f"{entry.get('model_id')}:{entry.get('task')}"))
        figures = by_size.setdefault(size, {"jobs": 0, "core_hours": 0.0})
        figures["jobs"] += 1
        figures["core_hours"] = round(figures["core_hours"] + size * seconds / 3600, 3)
        if entry.get("mode") == "serving":
            serving_jobs, serving_core_hours = serving_jobs + 1, serving_core_hours + size * seconds / 3600
    layouts, result = recommend_fleet(jobs, instance=instance, target_hours=target_hours)
    known = pricing.table.get(instance)
    return Estimate(
        instance=instance,
        jobs=len(jobs),
        by_size=by_size,
        core_hours=sum(job.cores * job.seconds for job in jobs) / 3600,
        target_hours=target_hours,
        fleet=[format_partition(layout) for layout in layouts],
        simulated=result,
        prices=dict(known.price_per_hour) if known else dict.fromkeys(PRICE_KINDS),
        sources=dict(sources or {}),
        option=pricing.option,
        price=pricing.price(instance),
        prices_file=str(pricing.path) if pricing.path is not None else None,
        serving_jobs=serving_jobs,
        serving_core_hours=serving_core_hours,
    )


def format_estimate(estimate: Estimate) -> str:
    """The estimate as Markdown (what the discover workflow's job summary shows)."""
    data = estimate.to_dict()
    lines = [
        f"### Sweep estimate ({estimate.jobs} job(s) on {estimate.instance})",
        "",
        f"{data['core_hours']} NeuronCore-hours of predicted work; recommended fleet: {len(estimate.fleet)} "
        f"instance(s), {data['instance_hours']} instance-hours, {data['makespan_hours']} h to finish "
        f"(target {estimate.target_hours:g} h), {data['busy_fraction']:.0%} of paid core-hours busy.",
        "",
        "| runner | jobs | core-hours |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| trn2-{size}c | {f['jobs']:.0f} | {f['core_hours']:.1f} |" for size, f in sorted(estimate.by_size.items())
    ]
    lines += ["", "| instance | partition (`setup-runner.sh --partition`) |", "| --- | --- |"]
    lines += [f"| {k} | `{p}` |" for k, p in enumerate(estimate.fleet)]
    lines += ["", _cost_line(estimate)]
    if estimate.serving_jobs:
        cost = estimate.serving_cost()
        lines.append(
            f"Serving: {estimate.serving_jobs} job(s), {estimate.serving_core_hours:.1f} NeuronCore-hours (prior: "
            f"the engine's start and each point's requests), "
            + ("cost unknown" if cost is None else f"${cost:,.2f} of it at the same price")
            + "."
        )
    if estimate.sources:
        lines.append("Durations from: " + ", ".join(f"{k} {v}" for k, v in sorted(estimate.sources.items())))
    return "\n".join(lines)


def _cost_line(estimate: Estimate) -> str:
    """The sweep's cost at the chosen option with its price's provenance, or "unknown"; then the other options."""
    costs = estimate.cost()
    usd, price = costs.get(estimate.option), estimate.price
    where = estimate.prices_file or "the price table"
    if usd is None or price is None:
        line = f"Cost ({estimate.option}): unknown (no {estimate.option} price for {estimate.instance} in {where})"
    else:
        hours = round(estimate.instance_hours, 2)
        line = f"Cost ({estimate.option}): ${usd:,.2f} = {hours} instance-hours x {price.summary()}"
        if price.note:
            line += f"; {price.note}"
    others = [f"{kind} ${value:,.2f}" for kind, value in costs.items() if kind != estimate.option and value is not None]
    return line + (f". At the other options: {', '.join(others)}." if others else ".")
