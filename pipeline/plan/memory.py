"""The memory maths of the planner: bytes per core of a layout, and which layouts transformers can run.

A layout is a degree ``d`` (the cores, torchrun's processes) and whether expert parallelism runs beside
tensor parallelism. transformers' ``DistributedConfig`` needs ``ep_size`` to be a multiple of ``tp_size``
and to divide ``fsdp_size * tp_size``; without FSDP that leaves ``ep_size == tp_size == d``, and the
experts must split evenly (``num_experts % d == 0``).

The method, its constants and worked examples are in ``docs/planner.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline.hardware import GiB, Instance
from pipeline.plan.shapes import AttentionShape
from pipeline.workload import Workload

#: Bytes per weight at each benchmark dtype.
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}
#: fp8 is weight-only: activations and the KV cache stay in bfloat16.
COMPUTE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 2}
#: Fraction added to each core's weights and KV cache for compiler scratch buffers, I/O tensors and
#: allocator fragmentation (docs/planner.md, "Headroom"; checked against runs by plan_calibration).
HEADROOM_FRACTION = 0.10
#: Fixed bytes per core that the Neuron runtime, collectives buffers and the compiled program take.
RUNTIME_RESERVE_BYTES = 1 * GiB


#: Largest degree searched for the smallest layout that would hold a model that fits no instance.
MAX_DEGREE = 1 << 14


def powers_of_two(limit: int) -> list[int]:
    """The powers of two from 2 up to ``limit``: the degrees above 1 a layout may take."""
    return [1 << k for k in range(1, limit.bit_length())]


@dataclass(frozen=True)
class Need:
    """Memory of one layout: ``degree`` cores, with expert parallelism over them when ``expert_parallel``."""

    degree: int
    per_core: int
    total: int
    kv_replication: int
    expert_parallel: bool = False


@dataclass(frozen=True)
class Sizing:
    """The degree-independent facts the memory of any layout and dtype follows from.

    ``sharded``: parameters the tp plan splits; ``experts``: parameters the ep plan splits by expert, and
    ``ep_sharded`` the tp-split ones outside it (expert rules take precedence when both run);
    ``attention_sharded``: whether the tp plan splits attention (else the KV cache is whole on every core).
    """

    params: int
    sharded: int
    att: AttentionShape | None
    workload: Workload
    kv_values: int
    can_shard: bool
    experts: int = 0
    ep_sharded: int = 0
    num_experts: int | None = None
    attention_sharded: bool = True

    def need(self, degree: int, dtype: str, *, expert_parallel: bool = False) -> Need:
        weight, compute = DTYPE_BYTES[dtype], COMPUTE_BYTES[dtype]
        kv_heads = self.att.num_key_value_heads if self.att else None
        if degree == 1 or not self.attention_sharded:
            kv_split = 1
        else:
            # Past the kv head count each core keeps whole kv heads: they are replicated, not split further.
            kv_split = min(degree, kv_heads) if kv_heads else degree
        split = self.ep_sharded + self.experts if expert_parallel else self.sharded
        weights = -(-split * weight // degree) + (self.params - split) * weight
        kv = -(-self.kv_values * compute // kv_split)
        per_core = int((weights + kv) * (1 + HEADROOM_FRACTION)) + self._activations(degree, compute)
        per_core += RUNTIME_RESERVE_BYTES
        # kv_split is 1 for a single kv head (multi-query attention), and that head is still replicated on every core.
        sharded_attention = degree > 1 and self.attention_sharded
        replication = degree // kv_heads if sharded_attention and kv_heads and degree > kv_heads else 1
        return Need(degree, per_core, per_core * degree, replication, expert_parallel)

    def _activations(self, degree: int, act_bytes: int) -> int:
        """Peak prefill activations of one layer plus one step of fp32 logits, on one core.

        An upper bound: the compiler reuses buffers across layers, so one layer's working set is what
        lives. Attention scores count as materialised (eager attention); the MLP and heads split by degree.
        """
        if self.att is None:
            return 0
        seq, batch, att = self.workload.input_tokens, self.workload.batch_size, self.att
        hidden = batch * seq * (2 * att.hidden_size + 2 * att.intermediate_size // degree) * act_bytes
        scores = batch * max(1, (att.num_attention_heads or 1) // degree) * seq * seq * act_bytes
        return hidden + scores + batch * att.vocab_size * 4

    def _splits_heads(self, d: int) -> bool:
        if not self.attention_sharded or self.att is None:
            return True
        heads, kv = self.att.num_attention_heads, self.att.num_key_value_heads
        return (not heads or heads % d == 0) and (not kv or kv % d == 0 or d % kv == 0)

    def degrees(self, inst: Instance | None, *, up_to: int | None = None) -> list[int]:
        """Tensor-parallel degrees: powers of two up to the instance's cores that split the attention heads.

        A degree must divide the query heads, and divide the kv heads or be a multiple of them (then each
        kv head is replicated); a tp plan that leaves attention whole puts no condition on heads. Degree 1
        is always valid; a model without a tp plan has only that.
        """
        limit = up_to if up_to is not None else inst.cores if inst else 1
        return [1, *filter(self._splits_heads, powers_of_two(limit))] if self.can_shard else [1]

    def ep_degrees(self, limit: int) -> list[int]:
        """Degrees (>= 2) of tensor + expert parallelism: they split the experts and, like tp, the heads."""
        if not self.experts or not self.num_experts:
            return []
        experts = self.num_experts
        return [d for d in powers_of_two(min(limit, experts)) if experts % d == 0 and self._splits_heads(d)]

    def layouts(self, limit: int) -> list[tuple[int, bool]]:
        """Every (degree, expert parallel) up to ``limit`` cores, by degree; at one degree tp alone first."""
        plain = [(d, False) for d in self.degrees(None, up_to=limit)]
        return sorted(plain + [(d, True) for d in self.ep_degrees(limit)])

    def smallest_fit(self, inst: Instance, dtype: str, *, limit: int | None = None) -> Need | None:
        """The fitting layout with the fewest cores (up to ``limit``, default the instance's), else None."""
        for degree, ep in self.layouts(inst.cores if limit is None else limit):
            need = self.need(degree, dtype, expert_parallel=ep)
            if need.per_core <= inst.memory_per_core_bytes:
                return need
        return None

    def widest(self, inst: Instance, dtype: str) -> Need:
        """The layout using the most of the instance's cores with the least memory per core."""
        return min(
            (self.need(d, dtype, expert_parallel=ep) for d, ep in self.layouts(inst.cores)),
            key=lambda n: (n.per_core, -n.degree),
        )

    def cores_by_memory(self, inst: Instance, dtype: str) -> int:
        """Smallest power of two of cores whose memory would hold the model if every weight sharded.

        Head counts, tp plans and the instance's size aside: what the memory alone asks for.
        """
        ideal, d = replace(self, sharded=self.params, attention_sharded=True), 1
        while ideal.need(d, dtype).per_core > inst.memory_per_core_bytes and d < 1 << 20:
            d *= 2
        return d
