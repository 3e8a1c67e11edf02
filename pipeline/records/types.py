"""The records as types: one class per record kind, serialised to the JSON its schema describes.

- :class:`ResultRecord`: one benchmark or serving run (``schemas/result.schema.json``), made by
  ``pipeline.bench.harness.bench_once`` and ``pipeline.serve.sweep.serve_model``;
- :class:`Serving`: its ``serving`` section (a serving run's sweep);
- :class:`RunInfo`: its ``run`` section (when, and who ran it);
- :class:`WarmCheck`: one second-machine warm check (``schemas/warm_check.schema.json``).

The rule between a class and its schema: a field without a default is one the schema requires (it is written even
when None, as JSON null); a field with a default is optional, and left out of the JSON while it is None.
``tests/records/test_record_types.py`` compares each class with its schema field by field, so neither can drift.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

#: The metrics a record carries only when the run measured them (the Neuron run's own figures); every other metric
#: of the record's task is always there, null when not measured.
OptionalMetric = Literal[
    "neuronx_cc_s",
    "compiled_graphs",
    "cached_graphs",
    "warm_start_cached_graphs",
    "peak_device_memory_reserved_bytes",
    "prefill_mode",
    "spread",
]
OPTIONAL_METRICS: frozenset[str] = frozenset(get_args(OptionalMetric))


def to_json(value: Any) -> Any:
    """``value`` as JSON data: a record class as an object without its unset optional fields, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None or not has_default(f)
        }
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


def has_default(f: dataclasses.Field[Any]) -> bool:
    """Whether a record class's field is optional (it has a default)."""
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


class _Json:
    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object its schema describes (unset optional fields left out)."""
        return dict(to_json(self))


@dataclass
class RunInfo:
    """The record's ``run``: when it ran, and the CI run that made it (all three None unless ``source`` is ci)."""

    started_at: str
    finished_at: str
    runner: str | None
    github_run_id: str | None
    github_sha: str | None
    source: str
    #: The machine that ran it (the EC2 instance id, else ``host:<name>``; CI only): what a second-machine warm
    #: check compares, since runner names are per job (issue 47.4). None: not recorded.
    machine: str | None = None


@dataclass
class Serving:
    """A serving run's ``serving`` section: the load generator, the engine, the workload and every point."""

    tool: dict[str, Any]
    engine: dict[str, Any]
    workload: dict[str, Any]
    chips: int
    weight_dtype: str
    kv_dtype: str
    versions: dict[str, str | None]
    points: list[dict[str, Any]]
    stopped: str | None
    slo: dict[str, Any]
    headline: dict[str, Any]
    price: dict[str, Any]
    active_params: int | None = None
    eval: dict[str, Any] | None = None
    features: list[dict[str, Any]] | None = None


@dataclass(kw_only=True)
class ResultRecord(_Json):
    """One benchmark or serving run of one model on one device (``schemas/result.schema.json``)."""

    schema_version: str
    model_id: str
    revision: str
    task: str
    status: str
    failure: dict[str, str] | None
    device: str
    hardware: dict[str, Any]
    cores: int
    threads: int | None = None
    dtype: str
    workload: dict[str, Any]
    metrics: dict[str, Any]
    versions: dict[str, str | None]
    run: RunInfo
    attempts: list[dict[str, Any]] | None = None
    plan: dict[str, Any] | None = None
    agreement: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    architecture: str | None = None
    model_type: str | None = None
    base_model: list[str] | None = None
    compiled_cache: dict[str, Any] | None = None
    compiled_cache_key: dict[str, Any] | None = None
    compiled_cache_skipped: str | None = None
    serving: Serving | None = None


#: What a warm check can say (``schemas/warm_check.schema.json``'s status).
WarmStatus = Literal["verified", "missed", "refused", "error"]


@dataclass(frozen=True)
class WarmCheck(_Json):
    """What ``trncat warm-check`` saw when a row's run.py started warm, with empty caches, on a runner that did not
    make its bundle (``schemas/warm_check.schema.json``). ``hits``, ``misses`` and ``first_call_s`` are None when
    run.py did not get to count them."""

    model_id: str
    revision: str
    sha256: str
    status: WarmStatus
    hits: int | None
    misses: int | None
    first_call_s: float | None
    message: str
    runner: str | None
    emulated: bool
    checked_at: str
    #: The machine the check ran on (as :attr:`RunInfo.machine`): publish compares it with the bundle's maker's.
    machine: str | None = None

    @property
    def verified(self) -> bool:
        return self.status == "verified"
