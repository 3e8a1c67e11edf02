"""What one benchmark run is asked to do, passed from the parent to the benchmark child as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.errors import ConfigError
from pipeline.taskspec import check_task
from pipeline.types import DEVICES, DTYPES
from pipeline.workload import Workload

#: Faults the tests inject into the child (never set by users): crash by signal, hang, allocate without bound,
#: raise, or perturb the captured answer (a model that runs but computes the wrong answer:
#: :mod:`pipeline.bench.tasks.perturb`).
FAULTS = (
    "segfault", "sigkill", "hang", "allocate", "raise", "perturb", "perturb-swap", "perturb-drift", "perturb-weight",
)  # fmt: skip
#: What a child does: the whole benchmark; only load + first call in a second process on a filled compile cache
#: (the warm start); only the CPU reference answer (float32, or the bfloat16 noise run fed the reference's tokens);
#: or only the device's answer again, fed the reference's tokens (``capture``).
PHASES = ("full", "warm_start", "reference", "capture")


def blank_report() -> dict[str, Any]:
    """The child's report before it has done anything (and the parent's, when the child wrote none)."""
    return {"stage": "load", "metrics": {}, "error": None, "done": False, "extra": {}, "notes": []}


@dataclass(frozen=True)
class BenchSpec:
    """One benchmark run.

    Args:
        path: local folder holding the model (already downloaded when it came from the Hub).
        task: a registered task.
        device: a registered backend.
        dtype: weights dtype.
        cores: cores the model is sharded over.
        workload: the fixed workload.
        warmup: untimed calls after the first (compiling) call.
        iterations: timed calls for the latency percentiles.
        fault: test-only fault injected into the child.
        compile: whether ``generate()`` compiles its decode step; None = the backend's default
            (neuron compiles, cpu and cuda run eagerly).
        fullgraph: ``torch.compile(fullgraph=...)`` when compiling: a graph break is then an error.
        phase: One of :data:`PHASES`.
        capture: File the child saves its answer to (the answer check), or None.
        teacher: A reference capture whose greedy tokens a generation capture is fed at every step (teacher
            forcing), or None (free-running).
    """

    path: str
    task: str
    device: str
    dtype: str
    cores: int = 1
    workload: Workload = field(default_factory=Workload)
    warmup: int = 1
    iterations: int = 10
    fault: str | None = None
    compile: bool | None = None
    fullgraph: bool = True
    phase: str = "full"
    capture: str | None = None
    teacher: str | None = None

    def __post_init__(self) -> None:
        check_task(self.task)
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; choose from {', '.join(DEVICES)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; choose from {', '.join(DTYPES)}")
        if self.cores < 1 or self.warmup < 0 or self.iterations < 1:
            raise ConfigError("cores and iterations must be >= 1 and warmup >= 0")
        if self.fault is not None and self.fault not in FAULTS:
            raise ConfigError(f"unknown fault {self.fault!r}")
        if self.phase not in PHASES:
            raise ConfigError(f"unknown phase {self.phase!r}; choose from {', '.join(PHASES)}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> BenchSpec:
        data: dict[str, Any] = json.loads(text)
        workload = dict(data["workload"])
        if workload.get("batch_sizes") is not None:
            workload["batch_sizes"] = tuple(workload["batch_sizes"])
        data["workload"] = Workload(**workload)
        return cls(**data)
