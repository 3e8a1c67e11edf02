"""The planner for diffusers pipelines (text-to-image): every component counted, activations sized for the
resolution, NeuronCores needed, and which component to shard.

``plan_pipeline`` is pure: model_index.json and the components' config.json dicts in, a :class:`Plan` out.
:func:`pipeline.plan.plan_model` adds reading them from a local folder or the Hub
(:func:`pipeline.plan.components.read_pipeline`, through :mod:`pipeline.hub`; no weights are downloaded: a
component the installed libraries cannot build is counted from safetensors headers).

Every component is resident on every core (``pipe.to(device)``), except that the denoiser's parameters under
diffusers' tensor-parallel plan (``_tp_plan``; FLUX.1, FLUX.2 and QwenImage in diffusers 0.42) split over the
cores of a layout: ``from_pretrained(..., parallel_config=TensorParallelConfig(tp_degree=N))`` under torchrun.
The method and its estimates are in ``docs/planner.md``, "Diffusers pipelines".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pipeline.errors import PlanError, RemoteCodeRefused
from pipeline.hardware import DEFAULT_INSTANCE, Instance, get_instance
from pipeline.models import check_model_index
from pipeline.plan.advice import cores_text, fit_advice, size_text, with_fit_options
from pipeline.plan.components import (
    ComponentShape,
    describe_component,
    holds_weights,
    index_entries,
    role_of,
)
from pipeline.plan.diffusion_shapes import StageActivations, default_resolution, estimate_activations
from pipeline.plan.memory import COMPUTE_BYTES, DTYPE_BYTES, HEADROOM_FRACTION, MAX_DEGREE, RUNTIME_RESERVE_BYTES, Need
from pipeline.plan.quantization import describe_quantization, download_bytes
from pipeline.plan.result import ParamSource, Plan, count_text, normalize_dtype
from pipeline.taskspec import default_workload
from pipeline.workload import Workload


@dataclass(frozen=True)
class _Sizing:
    """What any layout's memory follows from: the weights, what the denoiser's tp plan splits, the activations."""

    params: int
    sharded: int
    heads: int | None
    acts: StageActivations

    def need(self, degree: int, dtype: str) -> Need:
        width = DTYPE_BYTES[dtype]
        split = self.sharded if degree > 1 else 0
        weights = -(-split * width // degree) + (self.params - split) * width
        per_core = int(weights * (1 + HEADROOM_FRACTION)) + self.acts.peak(degree) + RUNTIME_RESERVE_BYTES
        return Need(degree, per_core, per_core * degree, 1)

    def degrees(self, limit: int) -> list[int]:
        """1, then the powers of two up to ``limit`` that divide the denoiser's heads (diffusers' own check)."""
        found, d = [1], 2
        while self.sharded and d <= limit:
            if not self.heads or self.heads % d == 0:
                found.append(d)
            d *= 2
        return found

    def smallest_fit(self, inst: Instance, dtype: str, *, limit: int | None = None) -> Need | None:
        for degree in self.degrees(inst.cores if limit is None else limit):
            if (need := self.need(degree, dtype)).per_core <= inst.memory_per_core_bytes:
                return need
        return None

    def cores_by_memory(self, inst: Instance, dtype: str) -> int:
        """Smallest power of two of cores whose memory would hold the pipeline if every weight split."""
        ideal, d = replace(self, sharded=self.params, heads=None), 1
        while ideal.need(d, dtype).per_core > inst.memory_per_core_bytes and d < MAX_DEGREE:
            d *= 2
        return d


def plan_pipeline(
    index: Mapping[str, Any],
    configs: Mapping[str, Mapping[str, Any]],
    *,
    dtype: str = "bfloat16",
    instance: str = DEFAULT_INSTANCE,
    lnc: int | None = None,
    workload: Workload | None = None,
    safetensors_params: Mapping[str, int] | None = None,
) -> Plan:
    """Plan a diffusers pipeline from its model_index.json and its components' config.json. Pure: no I/O.

    Args:
        index: the parsed model_index.json (judged by :func:`pipeline.models.check_model_index` first).
        configs: component name -> its parsed config.json, for every weight-bearing component.
        dtype: benchmark dtype of the weights (every component is loaded in it).
        instance: instance type (see :data:`pipeline.hardware.INSTANCE_NAMES`).
        lnc: logical core config; None for the instance's default.
        workload: batch, prompt tokens and the fallback resolution; None for the text-to-image default. The
            pipeline's own default resolution (its configs' ``sample_size`` times the VAE scale) wins.
        safetensors_params: component name -> parameters read from its safetensors headers, used for a component
            the installed libraries cannot build.

    Returns:
        The :class:`Plan`, with ``components`` and ``activations`` set.

    Raises:
        ConfigError: unknown dtype or instance.
        PlanError: a component names code outside diffusers and transformers, a weight-bearing component has no
            config, or one cannot be counted at all.
    """
    dtype, inst = normalize_dtype(dtype), get_instance(instance, lnc=lnc)
    workload = workload or default_workload("text-to-image")
    try:  # before any class is looked up: never a module the index names outside diffusers and transformers
        check_model_index(dict(index))
    except RemoteCodeRefused as exc:
        raise PlanError(f"cannot plan this pipeline: {exc}") from None
    shapes = _components(index, configs, safetensors_params or {})
    denoisers = [s for s in shapes if s.role == "denoiser"]
    denoiser = max(denoisers, key=lambda s: s.params or 0) if denoisers else None
    den_config = configs.get(denoiser.name) if denoiser else None
    vae_config = next((configs[s.name] for s in shapes if s.role == "vae" and s.name in configs), None)
    resolution = default_resolution(den_config, vae_config) or workload.image_size or 512
    acts = estimate_activations(
        resolution=resolution,
        batch=workload.batch_size,
        text_tokens=workload.input_tokens,
        compute_bytes=COMPUTE_BYTES[dtype],
        denoiser=den_config,
        vae=vae_config,
        text_encoders=[configs[s.name] for s in shapes if s.role == "text_encoder" and s.name in configs],
    )
    params = sum(s.params or 0 for s in shapes)
    heads = den_config.get("num_attention_heads") if den_config else None
    sizing = _Sizing(
        params, denoiser.tp_sharded_params if denoiser else 0, heads if isinstance(heads, int) else None, acts
    )
    chosen = sizing.smallest_fit(inst, dtype)
    shown = chosen or sizing.smallest_fit(inst, dtype, limit=MAX_DEGREE)
    if shown is None:
        shown = replace(sizing, sharded=params, heads=None).need(sizing.cores_by_memory(inst, dtype), dtype)
    width, split = DTYPE_BYTES[dtype], sizing.sharded if shown.degree > 1 else 0
    weights = params * width
    advice = _advice(inst, sizing, chosen, shapes, denoiser, dtype)
    # On Trainium3 an MX component is held in its format; its sizing stays the dtype's (an upper bound).
    quantized = [configs.get(s.name, {}).get("quantization_config") for s in shapes]
    found = (describe_quantization(q, dtype=dtype, mx_formats=inst.mx_formats) for q in quantized)
    quantization = next((q for q in found if q is not None), None)
    if quantization is not None and quantization.support == "unsupported":
        advice = f"cannot load its {quantization.method} checkpoint on Neuron ({quantization.reason}); {advice}"
    source: ParamSource = "meta-device" if all(s.reason is None for s in shapes) else "safetensors"
    return Plan(
        architecture=str(index.get("_class_name")),
        source=source,
        dtype=dtype,
        instance=inst.name,
        lnc=inst.lnc,
        memory_per_core_bytes=inst.memory_per_core_bytes,
        params=params,
        active_params=params,
        active_params_without_embedding=params,
        download_bytes=sum(download_bytes(s.params or 0, 0, configs.get(s.name, {})) for s in shapes),
        quantization=quantization.to_dict() if quantization else None,
        weights_bytes=weights,
        replicated_weights_bytes=(params - split) * width if shown.degree > 1 else weights,
        overhead_bytes=shown.total - weights,
        total_bytes=shown.total,
        per_core_bytes=shown.per_core,
        cores=shown.degree,
        tp_degree=chosen.degree if chosen else None,
        num_attention_heads=sizing.heads,
        fits=chosen is not None,
        advice=advice,
        workload=replace(workload, image_size=resolution).to_dict(),
        components=[_component_dict(s, width, s is denoiser and split > 0) for s in shapes],
        activations=acts.to_dict(shown.degree if split else 1),
    )


def _components(
    index: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]], counted: Mapping[str, int]
) -> list[ComponentShape]:
    """Every weight-bearing component, largest first: built on the meta device, else from its safetensors count."""
    shapes = []
    for name, library, class_name in index_entries(index):
        if name in configs and holds_weights(library, class_name) is not False:
            shape = describe_component(name, library, class_name, configs[name])
        elif holds_weights(library, class_name):
            raise PlanError(f"component {name} ({class_name}) has no {name}/config.json")
        elif name in counted:  # a class the installed libraries lack, known by its weights only
            shape = ComponentShape(name, library, class_name, role_of(name), None, reason=f"no {class_name}")
        else:
            continue
        if shape.params is None:
            if not counted.get(name):
                raise PlanError(f"cannot count the parameters of {name} ({class_name}): {shape.reason}")
            shape = replace(shape, params=counted[name])
        shapes.append(shape)
    if not shapes:
        raise PlanError("model_index.json names no component with weights")
    return sorted(shapes, key=lambda s: (-(s.params or 0), s.name))


def _component_dict(shape: ComponentShape, width: int, sharded: bool) -> dict[str, Any]:
    named = {key: getattr(shape, key) for key in ("name", "library", "class_name", "role", "params")}
    source = "meta-device" if shape.reason is None else "safetensors"
    return {**named, "weights_bytes": (shape.params or 0) * width, "source": source, "sharded": sharded}


def _named(shape: ComponentShape, width: int) -> str:
    return f"the {shape.name} ({shape.class_name}, {size_text((shape.params or 0) * width)})"


def _advice(
    inst: Instance,
    sizing: _Sizing,
    chosen: Need | None,
    shapes: list[ComponentShape],
    denoiser: ComponentShape | None,
    dtype: str,
) -> str:
    width = DTYPE_BYTES[dtype]
    if chosen is not None and chosen.degree == 1:
        return fit_advice(inst, chosen)
    target = denoiser or shapes[0]
    rest = [f"{s.name} ({size_text((s.params or 0) * width)})" for s in shapes if s is not target]
    if sizing.sharded:  # the denoiser's own weights outside its plan (FLUX.1's modulation layers, its embedders)
        outside = ((target.params or 0) - sizing.sharded) * width
        rest.insert(0, f"{size_text(outside)} of the {target.name} outside the plan")
    whole = ", ".join(rest)
    if chosen is not None:
        assert denoiser is not None
        d = chosen.degree
        return (
            f"needs {cores_text(d)} on a {inst.name}: shard {_named(denoiser, width)} with diffusers' tensor-parallel"
            f" plan ({denoiser.class_name}.from_pretrained(..., parallel_config=TensorParallelConfig(tp_degree={d})),"
            f" torchrun --nproc-per-node {d}); {whole or 'nothing else'} stay whole on every core"
        )
    by_memory = sizing.cores_by_memory(inst, dtype)
    if by_memory <= inst.cores:
        top = max(sizing.degrees(inst.cores))
        if not sizing.sharded:
            why = f"diffusers has no tensor-parallel plan for {target.class_name}"
        elif top < by_memory:
            why = f"its {sizing.heads} attention heads allow tensor parallelism over at most {top}"
        else:
            outside = (sizing.params - sizing.sharded) * width
            why = f"{size_text(outside)} of its weights are outside that plan, whole on every core ({whole})"
        head = f"needs {cores_text(by_memory)} of a {inst.name} by memory to shard {_named(target, width)}, but {why}"
    else:
        full = replace(sizing, sharded=sizing.params, heads=None).need(inst.cores, dtype)
        short = full.total - inst.memory_bytes
        head = (
            f"does not fit one {inst.name}: needs {size_text(full.total)} on its {cores_text(inst.cores)} even with "
            f"every weight split, {size_text(short)} ({short / inst.memory_bytes:.0%}) more than its "
            f"{size_text(inst.memory_bytes)}; {_named(target, width)} is the component to shard"
        )
    return with_fit_options(head, inst, sizing, dtype)


def format_pipeline_plan(plan: Plan) -> str:
    """The few lines ``trncat plan`` prints for a pipeline.

    Args:
        plan: a plan with ``components``.

    Returns:
        Text without a trailing newline.
    """
    assert plan.components is not None and plan.activations is not None
    name = f"{plan.model}: " if plan.model else ""
    parts = ", ".join(
        f"{c['name']} {c['class_name']} {count_text(c['params'])}" + (" (sharded)" if c["sharded"] else "")
        for c in plan.components
    )
    peak = max(plan.activations, key=lambda k: plan.activations[k])  # type: ignore[index]
    side, steps = plan.workload.get("image_size"), plan.workload.get("steps")
    return "\n".join(
        [
            f"{name}{plan.architecture}, {count_text(plan.params)} parameters (source: {plan.source})",
            f"components: {parts}",
            f"{plan.dtype} at {side} x {side}, {steps} steps, batch {plan.workload.get('batch_size')}: "
            f"weights {size_text(plan.weights_bytes)} + activations {size_text(plan.activations[peak])} "
            f"(estimated peak: {peak.replace('_', ' ')}) + overhead = {size_text(plan.total_bytes)}",
            plan.layout_line(),
            plan.advice,
        ]
    )
