"""What one benchmark run is asked to do, passed from the parent to the benchmark child as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.errors import ConfigError
from pipeline.taskspec import check_task
from pipeline.types import DEVICES, DTYPES
from pipeline.workload import Workload

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pipeline.hub import Hub

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
        for name, allowed in (("device", DEVICES), ("dtype", DTYPES), ("phase", PHASES)):
            if (value := getattr(self, name)) not in allowed:
                raise ConfigError(f"unknown {name} {value!r}; choose from {', '.join(allowed)}")
        if self.fault is not None and self.fault not in FAULTS:
            raise ConfigError(f"unknown fault {self.fault!r}")
        if self.cores < 1 or self.warmup < 0 or self.iterations < 1:
            raise ConfigError("cores and iterations must be >= 1 and warmup >= 0")

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


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """How :func:`bench_model` runs a model; every field has a default.

    Args:
        cores: The cores to run on (default: the plan's, on a backend that follows it).
        dtype: The weights' dtype (default: the backend's).
        model_id / revision: A local folder's Hub id and commit (default: derived); a Hub model's revision.
        workload: The task's workload (default: the fixed one); ``workload_changes`` (``trncat bench --workload
            KEY=VALUE``) changes its fields, for a smaller smoke run.
        timeout_s / memory_limit_bytes: Limits of each child.
        iterations / warmup: Timed and untimed calls.
        source: The record's ``run.source``.
        escalate: Double the cores after each device or compiler out-of-memory.
        plan: The planner's advice (default: planned here).
        fault: A fault the child injects (tests).
        hub: The Hub client a model id is downloaded with.
        host_memory_bytes: The compile's predicted host memory, capped at the runner's share of the host: a host
            that lacks it after waiting ``host_memory_wait_s`` refuses the run (an ``error`` record, code
            ``host_memory_short``, that a later queue retries, never a ``fail``).
        memory_check: Replaces :func:`pipeline.bench.harness.host_memory_short` (tests).
    """

    cores: int | None = None
    dtype: str | None = None
    model_id: str | None = None
    revision: str | None = None
    workload: Workload | None = None
    workload_changes: Mapping[str, str] | None = None
    timeout_s: float = 1800.0
    memory_limit_bytes: int | None = None
    iterations: int = 10
    warmup: int = 1
    source: str = "local"
    escalate: bool = False
    plan: dict[str, Any] | None = None
    fault: str | None = None
    hub: Hub | None = None
    host_memory_bytes: int | None = None
    host_memory_wait_s: float = 0.0
    memory_check: Callable[..., int | None] | None = None
