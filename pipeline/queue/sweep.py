"""A discrete-event simulation of a benchmark sweep on a fleet of instances split into runners.

Each instance is a list of runners (NeuronCores each, laid out chip-aligned by :mod:`pipeline.queue.fleet`). A runner
takes one job at a time from the queue of its size, longest first (the matrix order). With ``repartition``
a runner that finds no job of its size waiting registers, at its next just-in-time cycle (``jit_delay_s``
later), as several smaller runners over the same cores for the largest smaller size that has jobs waiting;
an instance whose runners are all idle re-partitions whole for a larger size. An instance is paid from the
start of the sweep until it has nothing left to do (all its runners idle and no job it could take waiting),
so the tail of the sweep is counted.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    """One benchmark job: the cores its runner label asks for and how long it keeps them (seconds)."""

    cores: int
    seconds: float
    name: str = ""


@dataclass
class SweepResult:
    """What a sweep costs: its makespan, the instance-hours paid and the busy share of the paid core-hours."""

    makespan_s: float
    instance_hours: float
    busy_fraction: float
    instances: int
    jobs: int
    unrun: int = 0


@dataclass(eq=False)
class _Runner:
    size: int
    busy_until: float = 0.0
    busy: bool = False


class _Sim:
    def __init__(self, jobs: Iterable[Job], layouts: Sequence[Sequence[int]], repartition: bool, jit_delay_s: float):
        self.waiting: dict[int, list[Job]] = {}
        for job in sorted(jobs, key=lambda j: (-j.cores, -j.seconds, j.name)):
            self.waiting.setdefault(job.cores, []).append(job)
        for queue in self.waiting.values():
            queue.reverse()  # pop() takes the longest
        self.instances = [[_Runner(size) for size in layout] for layout in layouts]
        self.repartition = repartition
        self.delay = jit_delay_s
        self.events: list[tuple[float, int, int, _Runner]] = []  # (time, serial, instance, runner)
        self.serial = 0
        self.busy_core_s = 0.0
        self.last_busy = [0.0] * len(layouts)
        self.released: list[float | None] = [None] * len(layouts)

    def _start(self, i: int, runner: _Runner, at: float) -> bool:
        queue = self.waiting.get(runner.size)
        if not queue:
            return False
        job = queue.pop()
        runner.busy, runner.busy_until = True, at + job.seconds
        self.busy_core_s += job.cores * job.seconds
        self.last_busy[i] = max(self.last_busy[i], runner.busy_until)
        self.serial += 1
        heapq.heappush(self.events, (runner.busy_until, self.serial, i, runner))
        return True

    def _waiting_sizes(self) -> list[int]:
        return sorted((size for size, queue in self.waiting.items() if queue), reverse=True)

    def _place(self, i: int, runner: _Runner, at: float) -> None:
        """Give an idle runner work: its own size, else split it for a smaller size waiting."""
        if self._start(i, runner, at) or not self.repartition:
            return
        smaller = [s for s in self._waiting_sizes() if s < runner.size]
        if smaller:
            size = smaller[0]
            runners = self.instances[i]
            index = next(k for k, r in enumerate(runners) if r is runner)
            parts = [_Runner(size) for _ in range(runner.size // size)]
            runners[index : index + 1] = parts
            for part in parts:
                self._start(i, part, at + self.delay)

    def _regroup(self, i: int, at: float) -> None:
        """An instance with every runner idle re-partitions whole for the largest size still waiting."""
        runners, sizes = self.instances[i], self._waiting_sizes()
        if not sizes or any(r.busy for r in runners):
            return
        total = sum(r.size for r in runners)
        size = min(sizes[0], total)
        if size <= max(r.size for r in runners):
            return
        runners[:] = [_Runner(size) for _ in range(total // size)]
        for runner in list(runners):
            self._place(i, runner, at + self.delay)

    def run(self) -> None:
        for i, runners in enumerate(self.instances):
            for runner in list(runners):
                self._place(i, runner, 0.0)
        while self.events:
            at, _, i, runner = heapq.heappop(self.events)
            runner.busy = False
            if any(r is runner for r in self.instances[i]):
                self._place(i, runner, at)
            if self.repartition:
                self._regroup(i, at)
            sizes = self._waiting_sizes()
            for k, rs in enumerate(self.instances):
                could_take = bool(sizes) and (self.repartition or any(r.size in sizes for r in rs))
                if self.released[k] is None and not any(r.busy for r in rs) and not could_take:
                    self.released[k] = self.last_busy[k]


def simulate(
    jobs: Iterable[Job],
    layouts: Sequence[Sequence[int]],
    *,
    instance_cores: int = 64,
    repartition: bool = True,
    jit_delay_s: float = 30.0,
) -> SweepResult:
    """Run the sweep of ``jobs`` on instances laid out as ``layouts`` (runner sizes per instance).

    Args:
        jobs: The queued jobs.
        layouts: One list of runner core counts per instance (each summing to at most ``instance_cores``).
        instance_cores: NeuronCores an instance is paid for (the busy fraction's denominator).
        repartition: Whether idle runners re-register for another size (see the module docstring).
        jit_delay_s: Seconds a re-registration takes.

    Returns:
        The :class:`SweepResult`; ``unrun`` counts jobs no runner could take (their size had none).
    """
    jobs = list(jobs)
    sim = _Sim(jobs, layouts, repartition, jit_delay_s)
    sim.run()
    released = [t if t is not None else sim.last_busy[k] for k, t in enumerate(sim.released)]
    paid_s = sum(released)
    unrun = sum(len(q) for q in sim.waiting.values())
    return SweepResult(
        makespan_s=max(sim.last_busy, default=0.0),
        instance_hours=paid_s / 3600,
        busy_fraction=sim.busy_core_s / (instance_cores * paid_s) if paid_s else 0.0,
        instances=len(layouts),
        jobs=len(jobs) - unrun,
        unrun=unrun,
    )
