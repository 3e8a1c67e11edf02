"""The memory planner: parameters, bytes, NeuronCores needed and model-parallelism advice, before running.

``plan_config`` is pure: a config.json dict in, a :class:`Plan` out. ``plan_model`` adds reading the config
from a local folder or the Hub (through :mod:`pipeline.hub`; weights are never downloaded). The method, its
constants and worked examples are in ``docs/planner.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import PlanError
from pipeline.hardware import DEFAULT_INSTANCE, get_instance
from pipeline.models import safetensors_bytes
from pipeline.plan.advice import fit_advice, no_fit_advice, size_text
from pipeline.plan.components import model_files, read_pipeline
from pipeline.plan.diffusion import format_pipeline_plan, plan_pipeline
from pipeline.plan.memory import COMPUTE_BYTES, DTYPE_BYTES, MAX_DEGREE, Sizing
from pipeline.plan.params import describe
from pipeline.plan.quantization import bits_per_weight, describe_quantization, download_bytes
from pipeline.plan.result import ParamSource, Plan, count_text, normalize_dtype
from pipeline.taskspec import default_workload, task_source
from pipeline.workload import Workload

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)


def plan_config(
    config: Mapping[str, Any],
    *,
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    lnc: int | None = None,
    workload: Workload | None = None,
    safetensors_params: int | None = None,
    checkpoint_bytes: int | None = None,
    task: str | None = None,
    isolated: bool = False,
) -> Plan:
    """Plan a model from its config.json. Pure: no I/O.

    Args:
        config: the parsed config.json.
        dtype: benchmark dtype of the weights.
        instance: instance type (see :data:`pipeline.hardware.INSTANCE_NAMES`).
        lnc: logical core config; None for the instance's default.
        workload: sizes the KV cache; None for the catalog's default workload of the model's task.
        safetensors_params: parameter count from the checkpoint's safetensors metadata, used only when
            transformers cannot build the architecture.
        checkpoint_bytes: the checkpoint's size read from its safetensors headers, when known; else
            ``download_bytes`` is estimated from the config (parameters at their stored or quantized bits).
        task: the catalog task the model runs under, when known: it picks the model class counted (a
            sentence-transformers model is the bare ``AutoModel``) and the default workload; None guesses
            image-text-to-text or text-generation from the config.
        isolated: build the architecture with transformers (and torch) imported only in the build's child, never
            in this process (:func:`pipeline.plan.describe`): for a process that plans once, as ``trncat check``.

    Returns:
        The :class:`Plan`.

    Raises:
        ConfigError: unknown dtype or instance.
        PlanError: the parameters cannot be counted (unknown architecture and no safetensors count).
    """
    dtype = normalize_dtype(dtype)
    inst = get_instance(instance, lnc=lnc)
    info = describe(config, base_model=_base_model(task), isolated=isolated)
    if workload is None:
        guessed = "image-text-to-text" if info.vision is not None else "text-generation"
        workload = default_workload(task or guessed)
    source: ParamSource
    if info.instantiable and info.params is not None:
        source, params = "meta-device", info.params
        active = info.active_params or params
        without_embedding = info.active_without_embedding or active
        # Without a tp plan transformers cannot shard the model: every core would hold all of it.
        sharded, can_shard = (info.tp_sharded_params or 0) if info.has_tp_plan else 0, info.has_tp_plan
        quantized = info.quantized_params
    elif safetensors_params is not None and safetensors_params > 0:
        # No module tree to read a tp plan from: assume it all shards, the optimistic side.
        source, params, can_shard = "safetensors", safetensors_params, True
        active = without_embedding = sharded = params
        quantized = 0
    else:
        raise PlanError(f"cannot count the parameters of {info.architecture or info.model_type}: {info.reason}")
    tokens = workload.total_tokens
    if info.vision is not None and workload.image_size is not None:
        tokens += info.vision.image_tokens(workload.image_size)
    kv_values = info.attention.kv_values(tokens) * workload.batch_size if info.attention else 0
    quantization = describe_quantization(config.get("quantization_config"), dtype=dtype, mx_formats=inst.mx_formats)
    # Weights held in an MX format (Trainium3) take their on-disk bits: counted as fewer dtype-sized parameters,
    # taken from the parts the parallel plans split (the quantized matrices are the ones they shard).
    saved = _mx_saved_params(quantization, config, quantized, dtype)
    experts = info.ep_params
    sizing = Sizing(
        params - saved,
        max(0, sharded - saved),
        info.attention,
        workload,
        kv_values,
        can_shard,
        experts=max(0, experts - saved),
        ep_sharded=max(0, info.ep_tp_sharded_params - max(0, saved - experts)),
        num_experts=info.num_experts,
        attention_sharded=info.attention_sharded or source == "safetensors",
    )
    chosen = sizing.smallest_fit(inst, dtype)
    # Not fitting: the smallest layout that would hold it on more such cores, else layers split evenly.
    shown = chosen or sizing.smallest_fit(inst, dtype, limit=MAX_DEGREE)
    if shown is None:
        ideal = replace(sizing, sharded=params, attention_sharded=True)
        shown = ideal.need(sizing.cores_by_memory(inst, dtype), dtype)
    weights, kv = (params - saved) * DTYPE_BYTES[dtype], kv_values * COMPUTE_BYTES[dtype]
    split = sizing.ep_sharded + sizing.experts if shown.expert_parallel else sizing.sharded
    advice = fit_advice(inst, chosen) if chosen else no_fit_advice(inst, sizing, dtype)
    if quantization is not None and quantization.support == "unsupported":
        where = f"a {inst.name}" if quantization.mx_format else "Neuron"
        advice = f"cannot load its {quantization.method} checkpoint on {where} ({quantization.reason}); {advice}"
    return Plan(
        architecture=info.architecture,
        model_type=info.model_type,
        source=source,
        dtype=dtype,
        instance=inst.name,
        lnc=inst.lnc,
        memory_per_core_bytes=inst.memory_per_core_bytes,
        params=params,
        active_params=active,
        active_params_without_embedding=without_embedding,
        download_bytes=checkpoint_bytes or download_bytes(params, quantized, config),
        quantization=quantization.to_dict() if quantization else None,
        weights_bytes=weights,
        replicated_weights_bytes=(sizing.params - split) * DTYPE_BYTES[dtype] if shown.degree > 1 else weights,
        kv_cache_bytes=kv,
        overhead_bytes=shown.total - weights - kv,
        total_bytes=shown.total,
        per_core_bytes=shown.per_core,
        cores=shown.degree,
        tp_degree=chosen.degree if chosen else None,
        ep_degree=chosen.degree if chosen and chosen.expert_parallel else None,
        kv_replication=shown.kv_replication,
        num_attention_heads=info.attention.num_attention_heads if info.attention else None,
        num_key_value_heads=info.attention.num_key_value_heads if info.attention else None,
        fits=chosen is not None,
        advice=advice,
        workload=workload.to_dict(),
    )


def _mx_saved_params(quantization: Any, config: Mapping[str, Any], quantized: int, dtype: str) -> int:
    """Parameters' worth of ``dtype`` bytes that ``quantized`` weights held in an MX format save, else 0."""
    if quantization is None or quantization.mx_format is None or quantization.held_as != quantization.mx_format:
        return 0
    _, on_disk = bits_per_weight(config["quantization_config"])
    return max(0, int(quantized * (1 - on_disk / (8 * DTYPE_BYTES[dtype]))))


def _base_model(task: str | None) -> bool:
    """Whether ``task``'s library loads the bare model; refuses a task whose models are diffusers pipelines.

    Raises:
        PlanError: ``task``'s models are diffusers pipelines, planned from several configs (:func:`plan_model`).
    """
    if task is None:
        return False
    source = task_source(task)
    if source.library == "diffusers":
        raise PlanError(
            f"a {task} model is a diffusers pipeline, planned from model_index.json and its components' configs "
            "(plan_model on its folder or Hub id, or pipeline.plan.plan_pipeline), not from one config.json"
        )
    return source.base_model


def _is_pipeline(task: str | None, path: Path) -> bool:
    """A diffusers pipeline: its task's library is diffusers, or, without a task, a folder with model_index.json
    and no config.json."""
    if task is not None:
        return task_source(task).library == "diffusers"
    return path.is_dir() and (path / "model_index.json").is_file() and not (path / "config.json").is_file()


def plan_model(
    model: str | Path,
    *,
    revision: str | None = None,
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    lnc: int | None = None,
    workload: Workload | None = None,
    hub: Hub | None = None,
    task: str | None = None,
) -> Plan:
    """Plan a local folder holding config.json, or a Hub model (its config only; weights never download).

    A diffusers pipeline (the ``text-to-image`` task, or a folder holding model_index.json and no config.json) is
    planned by :func:`pipeline.plan.diffusion.plan_pipeline` from its components' configs (no weights download: a
    component the installed libraries cannot build is counted from its safetensors headers).

    Args:
        model: a folder path, or a Hub id ``org/name``. An existing folder wins over a Hub id.
        revision: Hub revision (ignored for a folder).
        dtype: benchmark dtype of the weights.
        instance: instance type.
        lnc: logical core config; None for the instance's default.
        workload: sizes the KV cache; None for the default workload of the model's task.
        hub: Where a Hub id's config.json (and, when transformers cannot build the architecture, its
            safetensors parameter count) comes from; needed for a Hub id only.
        task: the catalog task, as :func:`plan_config` takes it.

    Returns:
        The :class:`Plan`, with ``model`` and ``revision`` filled in.

    Raises:
        ConfigError: unknown dtype or instance, or a Hub id without a Hub client.
        HubError: (or a child) the Hub could not answer.
        PlanError: no readable config.json, or no way to count the parameters.
    """
    path = Path(model).expanduser()
    local = path.is_dir()
    if _is_pipeline(task, path):
        index, configs, counted = read_pipeline(model_files(model, revision, hub), str(model))
        plan = plan_pipeline(
            index, configs, dtype=dtype, instance=instance, lnc=lnc, workload=workload, safetensors_params=counted
        )
        return replace(plan, model=str(model), revision=None if local else revision)
    if not local and (str(model).startswith((".", "/", "~")) or str(model).count("/") > 1):
        raise PlanError(f"cannot plan {model}: no such folder, and not a Hub id")
    files = model_files(model, revision, hub)
    config = files.json("config.json")  # read as a pipeline's component configs are
    info, st_params = describe(config, base_model=_base_model(task)), None
    if not info.instantiable:
        logger.info("%s: %s; counting parameters from safetensors metadata", model, info.reason)
        if not (st_params := files.params()):
            raise PlanError(f"cannot plan {model}: {info.reason}, and it has no safetensors metadata")
    plan = plan_config(
        config,
        dtype=dtype,
        instance=instance,
        lnc=lnc,
        workload=workload,
        safetensors_params=st_params,
        checkpoint_bytes=safetensors_bytes(path) if local else None,
        task=task,
    )
    return replace(plan, model=str(model), revision=None if local else revision)


def runner_label(plan: Plan) -> str:
    """The self-hosted runner label the benchmark matrix requests for ``plan``.

    ``<family>-<N>c`` with N the planned cores rounded up to a power of two (``trn2-1c``, ``trn2-8c``);
    a non-default logical core config adds it (``trn2-lnc1-16c``).

    Args:
        plan: a plan that fits.

    Returns:
        The label.

    Raises:
        PlanError: the plan does not fit its instance, so no runner can take it.
    """
    if not plan.fits:
        raise PlanError(f"{plan.model or plan.architecture} does not fit a {plan.instance}: no runner label")
    inst = get_instance(plan.instance, lnc=plan.lnc)
    cores = 1 << (plan.cores - 1).bit_length()
    lnc = "" if inst.lnc == get_instance(plan.instance).lnc else f"lnc{inst.lnc}-"
    return f"{inst.family}-{lnc}{cores}c"


def format_plan(plan: Plan) -> str:
    """The few lines ``trncat plan`` prints for a person.

    Args:
        plan: the plan.

    Returns:
        Text without a trailing newline.
    """
    if plan.components is not None:
        return format_pipeline_plan(plan)
    active = ""
    if plan.active_params != plan.params:
        active = (
            f" ({count_text(plan.active_params)} active per token,"
            f" {count_text(plan.active_params_without_embedding)} without the embedding table)"
        )
    name = f"{plan.model}: " if plan.model else ""
    lines = [f"{name}{plan.architecture}, {count_text(plan.params)} parameters{active} (source: {plan.source})"]
    q = plan.quantization
    if q is not None:
        held = f"held as {q['held_as']} on the device" if q["held_as"] else "not loadable on the device"
        lines.append(
            f"{q['method']} checkpoint: download {size_text(plan.download_bytes)}, {held}"
            f" (Neuron support: {q['support']}: {q['reason']})"
        )
    mx = q["held_as"] if q is not None and q.get("mx_format") and q["held_as"] == q["mx_format"] else None
    lines += [
        f"{f'{mx} weights, {plan.dtype} compute' if mx else plan.dtype}: weights {size_text(plan.weights_bytes)}"
        f" + KV cache {size_text(plan.kv_cache_bytes)}"
        f" + overhead {size_text(plan.overhead_bytes)} = {size_text(plan.total_bytes)}",
        plan.layout_line(),
        plan.advice,
    ]
    return "\n".join(lines)
