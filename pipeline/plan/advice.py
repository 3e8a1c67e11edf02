"""The planner's one line of advice: how to run a model that fits, or why it does not and what would help.

Only layouts transformers can run unmodified are recommended: tensor parallelism from the model's tp plan
(``tp_plan='auto'``), and tensor plus expert parallelism from its ep plan
(``DistributedConfig(tp_size=N, ep_size=N)``), each launched with ``torchrun`` (``docs/planner.md``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from pipeline.hardware import GiB, Instance, get_instance
from pipeline.plan.memory import DTYPE_BYTES, Need, Sizing

#: The weight dtypes a lower precision may be suggested in: float8_e4m3fn is not among them, since neuronx-cc
#: rejects it on Trainium1/2 (NCC_EVRF051, docs/planner.md).
NEURON_DTYPES = ("float32", "bfloat16", "float16")
#: The largest instance of each family, suggested when a model does not fit a smaller one.
LARGEST = {"trn2": "trn2.48xlarge", "trn1": "trn1.32xlarge", "trn3": "trn3.48xlarge"}


def cores_text(n: int) -> str:
    return f"{n} NeuronCore{'s' if n != 1 else ''}"


def size_text(n: int) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", GiB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} B"


def fit_advice(inst: Instance, chosen: Need) -> str:
    if chosen.degree == 1:
        return f"fits on one NeuronCore ({inst.family}, LNC={inst.lnc}, {size_text(inst.memory_per_core_bytes)})"
    d = chosen.degree  # what to do, then its from_pretrained arguments and launch line
    if chosen.expert_parallel:
        how = "split the experts over them with expert parallelism and shard the rest with its tensor-parallel plan"
        launch = f"distributed_config=DistributedConfig(tp_size={d}, ep_size={d}), torchrun --nproc-per-node {d}"
    else:
        how = "shard with tensor parallelism"
        launch = f"tp_plan='auto', torchrun --nproc-per-node {d}"
    advice = f"needs {cores_text(d)} on a {inst.name}: {how} ({launch})"
    if chosen.kv_replication > 1:
        advice += f"; each key/value head is replicated on {chosen.kv_replication} cores"
    return advice


class Fitting(Protocol):
    """What :func:`with_fit_options` asks of a model's sizing (a model's, or a pipeline's)."""

    def smallest_fit(self, inst: Instance, dtype: str) -> Need | None: ...


def with_fit_options(head: str, inst: Instance, sizing: Fitting, dtype: str) -> str:
    """``head``, then what would hold the model instead: the family's largest instance, or the first smaller
    weight dtype a NeuronCore computes in (``; would fit with ...``)."""
    options = []
    largest = get_instance(LARGEST[inst.family], lnc=inst.lnc)
    if largest.cores > inst.cores and (fit := sizing.smallest_fit(largest, dtype)) is not None:
        options.append(f"a {largest.name} ({cores_text(fit.degree)})")
    for lower in (d for d in NEURON_DTYPES if DTYPE_BYTES[d] < DTYPE_BYTES[dtype]):
        if (fit := sizing.smallest_fit(inst, lower)) is not None:
            options.append(f"{lower} weights ({cores_text(fit.degree)})")
            break
    return f"{head}; would fit with " + ", or ".join(options) if options else head


def no_fit_advice(inst: Instance, sizing: Sizing, dtype: str) -> str:
    by_memory = sizing.cores_by_memory(inst, dtype)
    if by_memory <= inst.cores:
        heads, kv = (sizing.att.num_attention_heads, sizing.att.num_key_value_heads) if sizing.att else (0, 0)
        top = max(d for d, _ in sizing.layouts(inst.cores))
        if not sizing.can_shard and top == 1:
            why = "transformers has no tensor-parallel plan for this architecture"
        elif top < by_memory:
            why = f"its {heads} attention and {kv} key/value heads allow tensor parallelism over at most {top}"
        else:
            widest = sizing.widest(inst, dtype)
            split = sizing.ep_sharded + sizing.experts if widest.expert_parallel else sizing.sharded
            whole = size_text((sizing.params - split) * DTYPE_BYTES[dtype])
            plans = "tensor- and expert-parallel plans" if widest.expert_parallel else "tensor-parallel plan"
            why = f"{whole} of its weights are outside transformers' {plans}, whole on every core"
        head = f"needs {cores_text(by_memory)} of a {inst.name} by memory, but {why}"
    else:
        ideal = sizing if sizing.can_shard else replace(sizing, sharded=sizing.params)
        full = min(
            (ideal.need(inst.cores, dtype, expert_parallel=ep) for ep in (False, True) if not ep or sizing.experts),
            key=lambda n: n.total,
        )
        short = full.total - inst.memory_bytes
        head = (
            f"does not fit one {inst.name}: needs {size_text(full.total)} on its {cores_text(inst.cores)}, "
            f"{size_text(short)} ({short / inst.memory_bytes:.0%}) more than its {size_text(inst.memory_bytes)}"
        )
    advice = with_fit_options(head, inst, sizing, dtype)
    options = advice != head
    largest = get_instance(LARGEST[inst.family], lnc=inst.lnc)
    # Splitting the layers over cores (pipeline parallelism) would hold more, but transformers does not run it
    # for inference unmodified: said as a fact, never as the advice.
    if by_memory <= inst.cores and not options:
        staged = f"splitting its layers over {cores_text(by_memory)} (pipeline parallelism)"
    elif not options:
        stages = replace(sizing, sharded=sizing.params).need(largest.cores, dtype)
        instances = max(2, -(-stages.total // largest.memory_bytes))
        staged = f"splitting its layers across {instances} {largest.name} instances (pipeline parallelism)"
    else:
        return advice
    unrun = "but transformers does not run that for inference"
    return f"{advice}; no layout transformers runs unmodified holds it ({staged} would, {unrun})"
