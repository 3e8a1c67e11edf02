"""The GPU runner class: how many GPUs of a GPU instance a model's benchmark needs, and the runner label.

The same model and workload as on Trainium2, benchmarked by the cuda backend on self-hosted GPU runners
(``.github/workflows/benchmark-gpu.yml``, labels ``gpu-<N>g``) for the models ``dataset/selected.yaml`` marks
``gpu: true``. The GPUs come from the price table's ``accelerators`` of the instance (``runners/instances.yaml``).
"""

from __future__ import annotations

import math

from pipeline.plan import Plan
from pipeline.prices import Accelerators

#: The weights and KV cache over one GPU's memory, times this: the CUDA context, activations and the caching
#: allocator's slack take the rest (a model that needs more shards over more GPUs, tp_plan="auto").
GPU_HEADROOM = 1.25


def gpu_label(gpus: int) -> str:
    """The runner label of a job on ``gpus`` GPUs: ``gpu-1g``, ``gpu-2g``, ... (what benchmark-gpu.yml requests)."""
    return f"gpu-{gpus}g"


def gpus_needed(plan: Plan, accelerators: Accelerators, *, instance: str) -> int | str:
    """The GPUs (a power of two) whose memory holds ``plan``'s weights and KV cache with :data:`GPU_HEADROOM`,
    or why no runner of ``instance`` can take it.

    Args:
        plan: The model's plan (its bytes do not depend on the device it was planned for).
        accelerators: The GPUs of the instance.
        instance: The instance's name, for the reason.
    """
    need = (plan.weights_bytes + plan.kv_cache_bytes) * GPU_HEADROOM
    gpus = 1 << max(0, math.ceil(math.log2(max(1.0, need / accelerators.memory_bytes))))
    if gpus > accelerators.count:
        gib = accelerators.memory_bytes / 1024**3
        return (
            f"does not fit: its weights and KV cache need {need / 1024**3:.0f} GiB with headroom, more than the "
            f"{accelerators.count} x {gib:.0f} GiB GPUs of a {instance}"
        )
    return gpus
