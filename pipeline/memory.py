"""The memory maths of the planner: bytes per core at a tensor-parallel degree, and which degrees can run.

The method, its constants and worked examples are in ``docs/planner.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pipeline.hardware import GiB, Instance
from pipeline.shapes import AttentionShape
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


@dataclass(frozen=True)
class Need:
    """Memory at one tensor-parallel degree."""

    degree: int
    per_core: int
    total: int
    kv_replication: int


@dataclass(frozen=True)
class Sizing:
    """The degree-independent facts the memory at any degree and dtype follows from."""

    params: int
    sharded: int
    att: AttentionShape | None
    workload: Workload
    kv_values: int
    can_shard: bool

    def need(self, degree: int, dtype: str) -> Need:
        weight, compute = DTYPE_BYTES[dtype], COMPUTE_BYTES[dtype]
        kv_heads = self.att.num_key_value_heads if self.att else None
        # Past the kv head count each core keeps whole kv heads: they are replicated, not split further.
        kv_split = min(degree, kv_heads) if kv_heads else degree
        weights = -(-self.sharded * weight // degree) + (self.params - self.sharded) * weight
        kv = -(-self.kv_values * compute // kv_split)
        per_core = int((weights + kv) * (1 + HEADROOM_FRACTION)) + self._activations(degree, compute)
        per_core += RUNTIME_RESERVE_BYTES
        replication = degree // kv_heads if kv_heads and degree > kv_heads else 1
        return Need(degree=degree, per_core=per_core, total=per_core * degree, kv_replication=replication)

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

    def degrees(self, inst: Instance) -> list[int]:
        """Powers of two up to the instance's cores that split the attention heads evenly.

        A degree must divide the query heads, and divide the kv heads or be a multiple of them (then each
        kv head is replicated). Degree 1 is always valid; a model without a tp plan has only that.
        """
        heads = self.att.num_attention_heads if self.att else None
        kv = self.att.num_key_value_heads if self.att else None
        found, d = [1], 2
        while self.can_shard and d <= inst.cores:
            if (not heads or heads % d == 0) and (not kv or kv % d == 0 or d % kv == 0):
                found.append(d)
            d *= 2
        return found

    def smallest_fit(self, inst: Instance, dtype: str) -> Need | None:
        for degree in self.degrees(inst):
            need = self.need(degree, dtype)
            if need.per_core <= inst.memory_per_core_bytes:
                return need
        return None

    def cores_by_memory(self, inst: Instance, dtype: str) -> int:
        """Smallest power of two of cores whose memory would hold the model if every weight sharded.

        Head counts, tp plans and the instance's size aside: what the memory alone asks for.
        """
        ideal, d = replace(self, sharded=self.params), 1
        while ideal.need(d, dtype).per_core > inst.memory_per_core_bytes and d < 1 << 20:
            d *= 2
        return d
