"""Every ``vllm serve`` command trncat can build, from the builders themselves (``engine_for``, ``vllm_serve``), with
the sizes derived from the planner, the serving queue and the hardware table: what the flag test
(``test_vllm_flags.py``) hands to the pinned vLLM's own parser, and the environment test (``test_vllm_env_facts.py``)
checks against docs/neuron-facts.md.

Also where the vLLM environment is (:func:`vllm_python`): ``TRNCAT_VLLM_PYTHON``, else the repo's
``.venv-vllm/bin/python`` (the Makefile's vLLM environment), else none.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.hardware import DEFAULT_INSTANCE, INSTANCE_NAMES, get_instance
from pipeline.plan.memory import Sizing
from pipeline.prices import load_prices
from pipeline.queue.serving import serving_jobs
from pipeline.serve import WORKLOADS, EngineSpec, engine_for, vllm_serve, with_features
from pipeline.serve.cache import warm_environment
from pipeline.types import FLAG_FEATURES, LNCS
from pipeline.workload import Workload
from tests import ROOT

#: The model folder every command names (vLLM's parser never opens it).
MODEL = Path("/models/acme--tiny-llama")
#: A serving bundle's unpacked compile cache (a warm start's ``VLLM_CACHE_ROOT``).
CACHE_ROOT = Path("/work/vllm-cache")


def vllm_python() -> Path | None:
    """The vLLM environment's python: ``TRNCAT_VLLM_PYTHON``, else ``.venv-vllm/bin/python``; None when neither."""
    named = os.environ.get("TRNCAT_VLLM_PYTHON")
    if named:
        return Path(named)
    local = ROOT / ".venv-vllm" / "bin" / "python"
    return local if local.is_file() else None


def planner_degrees(instance: str, lnc: int) -> list[int]:
    """Every core count the planner can give a model on ``instance`` at ``lnc``: the degrees of a model whose
    every weight and head shards (:meth:`Sizing.degrees`, powers of two up to the instance's cores)."""
    sizing = Sizing(params=1, sharded=1, att=None, workload=Workload(1, 1, 1), kv_values=0, can_shard=True)
    return sizing.degrees(get_instance(instance, lnc=lnc))


def _job_chips(device: str, cores: int) -> int:
    """The chips (Trainium2 chips, GPUs) the serving queue gives a passing batch-1 row of ``cores``."""
    row = {"model_id": "acme/tiny", "revision": "0" * 40, "task": "text-generation", "status": "pass",
           "device": device, "hardware": "h", "cores": cores, "dtype": "bfloat16"}  # fmt: skip
    (job,) = serving_jobs([row], [], device=device, workload=WORKLOADS["1k/1k"], instance=DEFAULT_INSTANCE)
    return int(job["chips"])


def neuron_layouts() -> set[tuple[int, int]]:
    """(chips, lnc) of every Trainium2 serving job: each core count the planner can emit on a Trainium2 instance,
    at each logical core config, through the serving queue's rounding to whole chips."""
    found = set()
    for name in INSTANCE_NAMES:
        for lnc in LNCS:
            try:
                instance = get_instance(name, lnc=lnc)
            except ConfigError:
                continue
            if instance.family == "trn2":
                found |= {(_job_chips("neuron", cores), lnc) for cores in planner_degrees(name, lnc)}
    return found


def gpu_counts() -> set[int]:
    """The GPUs of every GPU serving job: the powers of two ``gpus_needed`` can answer, up to the GPUs of each
    instance in the price table, through the serving queue."""
    counts = {p.accelerators.count for p in load_prices().values() if p.accelerators}
    return {_job_chips("cuda", 1 << k) for top in counts for k in range(top.bit_length()) if 1 << k <= top}


def _max_model_len(name: str) -> int:
    workload = WORKLOADS[name]  # as serve_folder sizes it
    return workload.input_tokens + workload.output_tokens + workload.image_tokens_bound + 64


def every_vllm_command() -> dict[str, EngineSpec]:
    """Name -> spec of every vLLM command: the cuda twin at each GPU count, vLLM Neuron at each (chips, lnc), each
    with every serving workload (the image ones add ``--limit-mm-per-prompt``), data parallel, and the warm starts
    (the bundle's cache, strict or not)."""
    specs: dict[str, EngineSpec] = {}
    for name, workload in sorted(WORKLOADS.items()):
        common: dict[str, Any] = {"port": 8000, "dtype": "bfloat16", "max_model_len": _max_model_len(name),
                                  "max_streams": max(workload.concurrencies),
                                  "images_per_prompt": workload.images_per_request}  # fmt: skip
        for gpus in sorted(gpu_counts()):
            specs[f"cuda {gpus} GPU(s), {name}"] = engine_for("cuda", MODEL, chips=gpus, lnc=None, **common)
        for chips, lnc in sorted(neuron_layouts()):
            specs[f"neuron {chips} chip(s) LNC={lnc}, {name}"] = engine_for(
                "neuron", MODEL, chips=chips, lnc=lnc, **common
            )
        cpu = engine_for("cpu", MODEL, chips=1, lnc=None, **{**common, "dtype": "float32"})
        if cpu.engine.startswith("vllm"):  # the CPU engine, where it is vLLM
            specs[f"cpu, {name}"] = cpu
    for neuron in (False, True):
        device = "neuron" if neuron else "cuda"
        tp, lnc = (4, 2) if neuron else (1, None)
        specs[f"{device} data parallel 2"] = vllm_serve(
            MODEL, port=8000, neuron=neuron, tensor_parallel=tp, data_parallel=2, lnc=lnc
        )
    base = engine_for("neuron", MODEL, port=8000, chips=1, dtype="bfloat16", lnc=None, max_model_len=2112)
    for device in ("neuron", "cuda", "cpu"):  # the matrix's flag-only features (pipeline.serve.FEATURE_FLAGS)
        plain = engine_for(device, MODEL, port=8000, chips=1, dtype="bfloat16", lnc=None, max_model_len=2112)
        specs[f"{device} with every flag-only feature"] = with_features(plain, FLAG_FEATURES)
    for strict in (False, True):
        env = {**base.env, **warm_environment(CACHE_ROOT, strict=strict)}
        specs[f"neuron warm start{' (a miss is fatal)' if strict else ''}"] = dataclasses.replace(base, env=env)
    return specs


def serve_args(argv: tuple[str, ...]) -> list[str]:
    """The arguments of ``vllm serve`` in a command: after ``serve`` (the console script, or ``-m ... serve``), or
    after the module of ``python -m vllm.entrypoints.openai.api_server``."""
    if "serve" in argv:
        return list(argv[argv.index("serve") + 1 :])
    if "-m" in argv:
        return list(argv[argv.index("-m") + 2 :])
    raise AssertionError(f"not a vllm serve command: {argv}")
