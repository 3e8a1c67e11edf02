"""The duration model: how long each queued job will compile and run, and the host memory its compile takes.

Predictions come from the dataset's own history, as the median over past Neuron runs of the project's CI (never
a community or local record: a submission must not set how long, or with how much memory, our jobs wait) of the
same task, core count and parameter bucket (:data:`PARAM_BUCKETS`): first at the toolchain the runners run now
(the pinned ``neuronx_cc`` version), then at any older toolchain, and only then from :data:`PRIOR`. The compile's
host memory is a high percentile of the group (:data:`HOST_MEMORY_PERCENTILE`), not its largest value.

The prior is NOT a measurement: no Trainium row existed when it was written, so its coefficients are round
figures chosen to order jobs sensibly (bigger models compile and load longer; more cores compile a sharded
graph per core). ``benchmarks/plan_calibration.py --durations`` refits them by least squares from real
records once the dataset holds some, and prints the values to put here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.dataset import iter_results
from pipeline.queue.toolchain import public_version
from pipeline.types import DurationSource

GiB = 1024**3
#: Upper bounds (parameters) of the buckets history is grouped by; the last bucket is open.
PARAM_BUCKETS: tuple[int, ...] = (1_000_000_000, 3_000_000_000, 10_000_000_000, 30_000_000_000, 100_000_000_000)
_HISTORY_COLUMNS = [
    "task",
    "device",
    "cores",
    "params",
    "status",
    "compile_s",
    "wall_s",
    "peak_host_memory_bytes",
    "neuronx_cc_version",
    "source",
]
#: The percentile of a group's compile host memory the guard asks for: high, so that the guard rarely under-asks,
#: but not the maximum, so that one odd run of our own does not make the group's jobs wait for memory it never
#: needs (nearest rank: with ten runs, the ninth largest).
HOST_MEMORY_PERCENTILE = 90


def param_bucket(params: int | None) -> int:
    """Index of the :data:`PARAM_BUCKETS` bucket ``params`` falls in (unknown counts go in the first)."""
    if not params:
        return 0
    return next((i for i, bound in enumerate(PARAM_BUCKETS) if params < bound), len(PARAM_BUCKETS))


@dataclass(frozen=True)
class Prior:
    """Linear prior in billions of parameters (see the module docstring: round figures, not measured)."""

    compile_base_s: float = 600.0
    compile_per_b_s: float = 120.0
    run_base_s: float = 180.0
    run_per_b_s: float = 30.0
    host_base_bytes: int = 8 * GiB
    #: The compiler holds the graph and a copy of the weights per rank it compiles for.
    host_per_param_bytes: float = 4.0

    def duration(self, *, params: int | None, cores: int) -> Duration:
        b = (params or 0) / 1e9
        return Duration(
            compile_s=self.compile_base_s + self.compile_per_b_s * b / max(1, cores) ** 0.5,
            run_s=self.run_base_s + self.run_per_b_s * b,
            host_memory_bytes=int(self.host_base_bytes + self.host_per_param_bytes * (params or 0)),
            source="prior",
            samples=0,
        )


PRIOR = Prior()


@dataclass(frozen=True)
class Duration:
    """A predicted job: compile and run seconds, the compile's host memory, and where the figures came from."""

    compile_s: float
    run_s: float
    host_memory_bytes: int
    source: DurationSource
    samples: int

    @property
    def total_s(self) -> float:
        return self.compile_s + self.run_s


def _percentile(values: list[int], percent: int) -> int | None:
    """The nearest-rank percentile (a value of the list, never an interpolation), or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


class DurationModel:
    """Predicts each job from history rows (see the module docstring for the fallback order).

    Args:
        rows: Result rows with at least the columns of :data:`_HISTORY_COLUMNS` (other rows are ignored).
        toolchain: The pinned versions; ``neuronx_cc`` says which rows are "at the current toolchain".

    When no row matches, :data:`PRIOR` predicts.
    """

    def __init__(self, rows: Iterable[Mapping[str, Any]] = (), *, toolchain: Mapping[str, str] | None = None) -> None:
        current = public_version((toolchain or {}).get("neuronx_cc"))
        self._groups: dict[tuple[bool, str, int, int], list[Mapping[str, Any]]] = {}
        for row in rows:
            # Only a compile that finished says how long compiling takes (a pass, or a failure after it); only our CI's
            # rows count (a submission's figures are reviewed claims, not our measurements).
            finished = (
                row.get("compile_s") is not None and row.get("wall_s") is not None and row.get("status") != "error"
            )
            if row.get("device") != "neuron" or not finished or row.get("source") != "ci":
                continue
            key = (int(row["cores"] or 1), param_bucket(row.get("params")))
            at_current = current is not None and public_version(row.get("neuronx_cc_version")) == current
            self._groups.setdefault((at_current, str(row["task"]), *key), []).append(row)

    @classmethod
    def from_dataset(cls, root: Path | None, *, toolchain: Mapping[str, str]) -> DurationModel:
        """The model over every results file of the dataset folder ``root`` (prior only when None or missing).

        Raises:
            DatasetError: an unreadable results file.
        """
        if root is None or not Path(root).is_dir():
            return cls((), toolchain=toolchain)
        return cls(iter_results(Path(root), _HISTORY_COLUMNS), toolchain=toolchain)

    def predict(self, *, task: str, cores: int, params: int | None) -> Duration:
        """The predicted job of ``task`` on ``cores`` cores for a model of ``params`` parameters."""
        prior = PRIOR.duration(params=params, cores=cores)
        sources: tuple[tuple[bool, DurationSource], ...] = ((True, "history"), (False, "older-toolchain"))
        for at_current, source in sources:
            rows = self._groups.get((at_current, task, cores, param_bucket(params)))
            if not rows:
                continue
            memory = [int(r["peak_host_memory_bytes"]) for r in rows if r.get("peak_host_memory_bytes")]
            return Duration(
                compile_s=statistics.median(float(r["compile_s"]) for r in rows),
                run_s=statistics.median(max(0.0, float(r["wall_s"]) - float(r["compile_s"])) for r in rows),
                # The guard should not under-ask: a high percentile of the compiles seen, not the median.
                host_memory_bytes=_percentile(memory, HOST_MEMORY_PERCENTILE) or prior.host_memory_bytes,
                source=source,
                samples=len(rows),
            )
        return prior
