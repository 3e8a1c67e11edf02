"""What one serving run is given: how to serve (:class:`ServeOptions`, ``trncat serve``'s options as one object),
and with it what was found of the model and the machine (:class:`ServingRun`, what :mod:`pipeline.serve.sweep`
measures with)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.prices import Pricing
from pipeline.serve.evals import EvalTask
from pipeline.serve.workload import DEFAULT_SLO, ServiceLevel, ServingWorkload


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """How :func:`serve_folder` serves a model, and where it writes.

    Args:
        device: ``cpu``, ``cuda`` or ``neuron``: the engine is the device's.
        workload: The serving workload swept.
        out: The record's file. The engine's logs, guidellm's scenarios and reports and serve.sh go to ``work``
            (default: serve.sh beside ``out``, the rest in ``<out>.serving/``; CI gives a ``work`` apart, so the
            record's folder holds the record alone).
        chips / dtype / lnc: The engine's chips, weights' dtype (default: float32 on the CPU, else bfloat16) and
            logical cores per chip.
        slo: The service level the headline is judged at.
        pricing / instance_type / instance_chips: The price table, the instance and its chips: the share of the
            instance a cost is charged is ``chips`` of ``instance_chips`` (default: the instance's own, from
            :mod:`pipeline.hardware` for a Trainium instance, the price table's accelerators for a GPU one).
        group: Points per guidellm run (default 1: each point's report is kept as it is measured, so an engine
            that dies mid-sweep loses only the point in flight; more: less start-up, a crash loses the group).
        rounds: Rounds of each point on the same engine (:func:`pipeline.records.merge_rounds`).
        warm_restart: Time a second start of the engine after a pass.
        ready_timeout_s: Seconds the engine has to answer ``/health`` (each start); then the run is an ``error``.
        source: The record's ``run.source``.
        eval_task: The task score taken on the same engine after the sweep (:mod:`pipeline.serve.evals`).
        warm_from / require_warm: On Trainium2 the engine compiles into a run-private ``VLLM_CACHE_ROOT`` under
            ``work``, packed after a pass into the serving bundle beside ``out`` (:mod:`pipeline.serve.cache`;
            else ``compiled_cache_skipped`` says why); ``warm_from`` (a bundle and its sha256) starts the engine
            from that bundle's cache instead, and ``require_warm`` makes a cache miss fatal (vLLM Neuron's
            ``VLLM_NEURON_DISABLE_WARMUP_COMPILE``).
        load_generator: ``guidellm`` or ``vllm-bench`` (``vllm bench serve`` on InferenceX's flags,
            :mod:`pipeline.serve.vllmbench`: a vLLM engine and a text workload only).
        features: Matrix features the engine runs with (their flags) and the run probes after the sweep
            (:mod:`pipeline.serve.features`).
    """

    device: str
    workload: ServingWorkload
    out: Path
    chips: int = 1
    dtype: str | None = None
    lnc: int | None = None
    slo: ServiceLevel = DEFAULT_SLO
    pricing: Pricing | None = None
    instance_chips: int | None = None
    instance_type: str | None = None
    group: int | None = None
    rounds: int = 1
    warm_restart: bool = True
    ready_timeout_s: float = 900.0
    source: str = "local"
    work: Path | None = None
    eval_task: EvalTask | None = None
    warm_from: tuple[Path, str] | None = None
    require_warm: bool = False
    load_generator: str = "guidellm"
    features: tuple[str, ...] = ()

    @property
    def weight_dtype(self) -> str:
        """The weights' dtype: ``dtype``, by default float32 on the CPU, else bfloat16."""
        return self.dtype or ("float32" if self.device == "cpu" else "bfloat16")


@dataclass
class ServingRun:
    """What a serving run needs besides the engine: how it serves (``options``, :func:`serve_folder`'s, its
    ``instance_chips`` resolved), and what was found of the model and the machine.

    Args:
        model_id / revision: The Hub model the folder holds (a record names it).
        tokenizer: The folder guidellm's random prompts are tokenized with (the model's own, never downloaded).
        hardware / versions: As the device's backend says them.
    """

    options: ServeOptions
    model_id: str
    revision: str
    tokenizer: Path
    hardware: dict[str, Any]
    versions: dict[str, str | None]
    params: int | None = None
    #: The parameters one token reads (a mixture of experts' top-k): they bound the points (issue 47.1).
    active_params: int | None = None
    point_timeout_s: float = 1800.0
    engine_versions: dict[str, str | None] = field(default_factory=dict)
    #: A CI run's runner name, run id and commit (``source == "ci"``: publish accepts only its own run's records).
    ci_run: tuple[str | None, str | None, str | None] | None = None
    eval_timeout_s: float = 3600.0
