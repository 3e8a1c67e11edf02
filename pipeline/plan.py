"""The memory planner: parameters, bytes, NeuronCores needed and model-parallelism advice, before running.

``plan_config`` is pure: a config.json dict in, a :class:`Plan` out. ``plan_model`` adds reading the config
from a local folder or the Hub (through :mod:`pipeline.hub`; weights are never downloaded). The method, its
constants and worked examples are in ``docs/planner.md``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipeline.errors import ConfigError, PlanError
from pipeline.hardware import DEFAULT_INSTANCE, GiB, Instance, get_instance
from pipeline.ids import validate_model_id
from pipeline.memory import COMPUTE_BYTES, DTYPE_BYTES, Need, Sizing
from pipeline.params import describe, safetensors_param_count
from pipeline.types import DTYPES
from pipeline.workload import Workload, default_workload

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)

ParamSource = Literal["meta-device", "safetensors"]

_DTYPE_ALIASES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
#: The largest instance of each family, suggested when a model does not fit a smaller one.
_LARGEST = {"trn2": "trn2.48xlarge", "trn1": "trn1.32xlarge"}


@dataclass(frozen=True)
class Plan:
    """How much memory a model needs and on how many NeuronCores it runs.

    Byte counts cover the whole model on the planned cores; ``per_core_bytes`` is what each core holds.
    ``overhead_bytes`` = ``total_bytes`` - weights - KV cache: headroom, runtime reserve, activations and
    the copies tensor parallelism makes (weights outside transformers' tp plan, replicated kv heads).
    When ``fits`` is False, ``cores`` is what the memory alone would need (possibly more than the
    instance has), ``tp_degree`` is None and the byte counts are at the largest usable degree.
    """

    model: str | None
    revision: str | None
    architecture: str | None
    model_type: str | None
    source: ParamSource
    dtype: str
    instance: str
    lnc: int
    memory_per_core_bytes: int
    params: int
    active_params: int
    weights_bytes: int
    replicated_weights_bytes: int
    kv_cache_bytes: int
    overhead_bytes: int
    total_bytes: int
    per_core_bytes: int
    cores: int
    tp_degree: int | None
    kv_replication: int
    num_attention_heads: int | None
    num_key_value_heads: int | None
    fits: bool
    advice: str
    workload: dict[str, int | None]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field (what ``trncat plan --json`` prints)."""
        return asdict(self)


def normalize_dtype(dtype: str) -> str:
    """Canonical dtype name (``bf16`` -> ``bfloat16``).

    Args:
        dtype: a name from :data:`pipeline.types.DTYPES` or a short form (bf16, fp16, fp32, fp8).

    Returns:
        The canonical name.

    Raises:
        ConfigError: not a known dtype.
    """
    name = _DTYPE_ALIASES.get(dtype, dtype)
    if name not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    return name


def plan_config(
    config: Mapping[str, Any],
    *,
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    lnc: int | None = None,
    workload: Workload | None = None,
    safetensors_params: int | None = None,
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

    Returns:
        The :class:`Plan`.

    Raises:
        ConfigError: unknown dtype or instance.
        PlanError: the parameters cannot be counted (unknown architecture and no safetensors count).
    """
    dtype = normalize_dtype(dtype)
    inst = get_instance(instance, lnc=lnc)
    info = describe(config)
    if workload is None:
        workload = default_workload("image-text-to-text" if info.vision is not None else "text-generation")
    source: ParamSource
    if info.instantiable and info.params is not None:
        source, params = "meta-device", info.params
        active = info.active_params or params
        # Without a tp plan transformers cannot shard the model: every core would hold all of it.
        sharded, can_shard = (info.tp_sharded_params or 0) if info.has_tp_plan else 0, info.has_tp_plan
    elif safetensors_params is not None and safetensors_params > 0:
        # No module tree to read a tp plan from: assume it all shards, the optimistic side.
        source, params, can_shard = "safetensors", safetensors_params, True
        active = sharded = params
    else:
        raise PlanError(f"cannot count the parameters of {info.architecture or info.model_type}: {info.reason}")
    tokens = workload.total_tokens
    if info.vision is not None and workload.image_size is not None:
        tokens += info.vision.image_tokens(workload.image_size)
    kv_values = info.attention.kv_values(tokens) * workload.batch_size if info.attention else 0
    sizing = Sizing(params, sharded, info.attention, workload, kv_values, can_shard)
    chosen = sizing.smallest_fit(inst, dtype)
    shown = chosen or sizing.need(sizing.degrees(inst)[-1], dtype)
    weights, kv = params * DTYPE_BYTES[dtype], kv_values * COMPUTE_BYTES[dtype]
    return Plan(
        model=None,
        revision=None,
        architecture=info.architecture,
        model_type=info.model_type,
        source=source,
        dtype=dtype,
        instance=inst.name,
        lnc=inst.lnc,
        memory_per_core_bytes=inst.memory_per_core_bytes,
        params=params,
        active_params=active,
        weights_bytes=weights,
        replicated_weights_bytes=(params - sharded) * DTYPE_BYTES[dtype],
        kv_cache_bytes=kv,
        overhead_bytes=shown.total - weights - kv,
        total_bytes=shown.total,
        per_core_bytes=shown.per_core,
        cores=chosen.degree if chosen else sizing.cores_by_memory(inst, dtype),
        tp_degree=chosen.degree if chosen else None,
        kv_replication=shown.kv_replication,
        num_attention_heads=info.attention.num_attention_heads if info.attention else None,
        num_key_value_heads=info.attention.num_key_value_heads if info.attention else None,
        fits=chosen is not None,
        advice=_fit_advice(inst, chosen) if chosen else _no_fit_advice(inst, sizing, dtype),
        workload=workload.to_dict(),
    )


def _cores(n: int) -> str:
    return f"{n} NeuronCore{'s' if n != 1 else ''}"


def _fit_advice(inst: Instance, chosen: Need) -> str:
    if chosen.degree == 1:
        return f"fits on one NeuronCore ({inst.family}, LNC={inst.lnc}, {_size(inst.memory_per_core_bytes)})"
    advice = (
        f"needs {_cores(chosen.degree)} on a {inst.name}: shard with tensor parallelism "
        f"(tp_plan='auto', torchrun --nproc-per-node {chosen.degree})"
    )
    if chosen.kv_replication > 1:
        advice += f"; each key/value head is replicated on {chosen.kv_replication} cores"
    return advice


def _no_fit_advice(inst: Instance, sizing: Sizing, dtype: str) -> str:
    by_memory = sizing.cores_by_memory(inst, dtype)
    if by_memory <= inst.cores:
        heads, kv = (sizing.att.num_attention_heads, sizing.att.num_key_value_heads) if sizing.att else (0, 0)
        top = sizing.degrees(inst)[-1]
        if not sizing.can_shard:
            why = "transformers has no tensor-parallel plan for this architecture"
        elif top < by_memory:
            why = f"its {heads} attention and {kv} key/value heads allow tensor parallelism over at most {top}"
        else:
            whole = _size((sizing.params - sizing.sharded) * DTYPE_BYTES[dtype])
            why = f"{whole} of its weights are outside transformers' tensor-parallel plan, whole on every core"
        head = f"needs {_cores(by_memory)} of a {inst.name} by memory, but {why}"
    else:
        full = (sizing if sizing.can_shard else replace(sizing, sharded=sizing.params)).need(inst.cores, dtype)
        short = full.total - inst.memory_bytes
        head = (
            f"does not fit one {inst.name}: needs {_size(full.total)} on its {_cores(inst.cores)}, "
            f"{_size(short)} ({short / inst.memory_bytes:.0%}) more than its {_size(inst.memory_bytes)}"
        )
    options = []
    largest = get_instance(_LARGEST[inst.family], lnc=inst.lnc)
    if largest.cores > inst.cores and (fit := sizing.smallest_fit(largest, dtype)) is not None:
        options.append(f"a {largest.name} ({_cores(fit.degree)})")
    for lower in (d for d in DTYPE_BYTES if DTYPE_BYTES[d] < DTYPE_BYTES[dtype]):
        if (fit := sizing.smallest_fit(inst, lower)) is not None:
            options.append(f"{lower} weights ({_cores(fit.degree)})")
            break
    if by_memory <= inst.cores:
        options.append(f"pipeline parallelism over {_cores(by_memory)} (layers split across cores)")
    elif sizing.smallest_fit(largest, dtype) is None:
        # Pipeline stages split the layers, so every weight divides: the ideal sizing applies.
        staged = replace(sizing, sharded=sizing.params).need(largest.cores, dtype)
        instances = max(2, -(-staged.total // largest.memory_bytes))
        options.append(f"pipeline parallelism across {instances} {largest.name} instances")
    return f"{head}; would fit with " + ", or ".join(options)


def plan_model(
    model: str | Path,
    *,
    revision: str | None = None,
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    lnc: int | None = None,
    workload: Workload | None = None,
    hub: Hub | None = None,
) -> Plan:
    """Plan a local folder holding config.json, or a Hub model (its config only; weights never download).

    Args:
        model: a folder path, or a Hub id ``org/name``. An existing folder wins over a Hub id.
        revision: Hub revision (ignored for a folder).
        dtype: benchmark dtype of the weights.
        instance: instance type.
        lnc: logical core config; None for the instance's default.
        workload: sizes the KV cache; None for the default workload of the model's task.
        hub: Where a Hub id's config.json (and, when transformers cannot build the architecture, its
            safetensors parameter count) comes from; needed for a Hub id only.

    Returns:
        The :class:`Plan`, with ``model`` and ``revision`` filled in.

    Raises:
        ConfigError: unknown dtype or instance, or a Hub id without a Hub client.
        HubError: (or a child) the Hub could not answer.
        PlanError: no readable config.json, or no way to count the parameters.
    """
    path = Path(model).expanduser()
    local = path.is_dir()
    if not local and (str(model).startswith((".", "/", "~")) or str(model).count("/") > 1):
        raise PlanError(f"cannot plan {model}: no such folder, and not a Hub id")
    if local:
        config = _read_local_config(path)
    else:
        if hub is None:
            raise ConfigError(f"cannot plan {model}: a Hub id needs a Hub client")
        config = hub.fetch_config(validate_model_id(str(model)), revision=revision)
        if not isinstance(config, Mapping):
            raise PlanError(f"cannot plan {model}: its config.json is not a JSON object")
    st_params = None
    info = describe(config)
    if not info.instantiable:
        logger.info("%s: %s; counting parameters from safetensors metadata", model, info.reason)
        if local:
            st_params = safetensors_param_count(path)
        else:
            assert hub is not None
            st_params = hub.fetch_safetensors_params(str(model), revision=revision)
        if not st_params:
            raise PlanError(f"cannot plan {model}: {info.reason}, and it has no safetensors metadata")
    plan = plan_config(config, dtype=dtype, instance=instance, lnc=lnc, workload=workload, safetensors_params=st_params)
    return replace(plan, model=str(model), revision=None if local else revision)


def _read_local_config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanError(f"cannot plan {folder}: no config.json in it") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"cannot plan {folder}: unreadable config.json ({exc})") from None
    if not isinstance(config, dict):
        raise PlanError(f"cannot plan {folder}: config.json is not a JSON object")
    return config


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
    active = f" ({_count(plan.active_params)} active per token)" if plan.active_params != plan.params else ""
    name = f"{plan.model}: " if plan.model else ""
    where = f"{plan.instance}, LNC={plan.lnc}, {_size(plan.memory_per_core_bytes)} per NeuronCore"
    cores = f"{_cores(plan.cores)}, {_size(plan.per_core_bytes)} each" if plan.fits else "does not fit"
    return "\n".join(
        [
            f"{name}{plan.architecture}, {_count(plan.params)} parameters{active} (source: {plan.source})",
            f"{plan.dtype}: weights {_size(plan.weights_bytes)} + KV cache {_size(plan.kv_cache_bytes)}"
            f" + overhead {_size(plan.overhead_bytes)} = {_size(plan.total_bytes)}",
            f"{where}: {cores}",
            plan.advice,
        ]
    )


def _count(n: int) -> str:
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def _size(n: int) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", GiB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} B"
