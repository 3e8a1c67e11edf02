"""What the emulated ``torch_neuronx`` exposes: the memory API, op tracking, dynamo metrics and synchronize.

Execution on a Neuron device is asynchronous, and the docs say to synchronize before reading any memory
statistic: here every figure is published at :func:`synchronize`, so a reader that skips it gets the figures of
the last synchronize. ``boot`` runs when the emulated ``torch_neuronx`` is imported (by ``import torch``'s
autoload, or directly): it registers the ``neuron`` device, its dynamo backend and its process-group backend.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from tests.support.neuron import compiler, device, distributed, runtime

__all__ = [
    "clear_op_tracking",
    "empty_cache",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "synchronize",
]

_PUBLISHED: dict[str, Any] = {"memory": {}, "fallback": [], "executed": [], "metrics": {}}
_BOOTED: list[Path] = []


def synchronize(device_index: Any = None) -> None:
    """Wait for queued work; the memory figures, op lists and dynamo metrics are current after it."""
    rt = runtime.get()
    _PUBLISHED["memory"] = copy.deepcopy(rt.memory)
    _PUBLISHED["fallback"] = list(device.FALLBACK)
    _PUBLISHED["executed"] = list(device.EXECUTED)
    _PUBLISHED["metrics"] = copy.deepcopy(compiler.METRICS)


def _position(index: Any) -> int:
    """The reserved core of a device argument (the current device when None)."""
    index = torch.neuron.current_device() if index is None else index  # type: ignore[attr-defined]
    return runtime.get().position(index.index if isinstance(index, torch.device) else int(index))


def _stats(index: Any) -> runtime.CoreMemory:
    return _PUBLISHED["memory"].get(_position(index)) or runtime.CoreMemory()


def memory_stats(device: Any = None) -> dict[str, int]:
    """The allocator's counters of one device (the current one when None), as of the last synchronize."""
    s = _stats(device)
    return {
        "allocated_bytes.all.current": s.allocated,
        "allocated_bytes.all.peak": s.peak_allocated,
        "reserved_bytes.all.current": s.reserved,
        "reserved_bytes.all.peak": s.peak_reserved,
        "num_alloc_retries": 0,
        "allocation.all.allocated": s.allocations,
    }


def _figure(field: str) -> Any:
    def figure(device: Any = None) -> int:
        return int(getattr(_stats(device), field))

    return figure


memory_allocated = _figure("allocated")
max_memory_allocated = _figure("peak_allocated")
memory_reserved = _figure("reserved")
max_memory_reserved = _figure("peak_reserved")


def reset_peak_memory_stats(device: Any = None) -> None:
    """Start a new peak window on one device (the current one when None)."""
    position = _position(device)
    for stats in (runtime.get().memory[position], _PUBLISHED["memory"].get(position)):
        if stats is not None:
            stats.peak_allocated, stats.peak_reserved = stats.allocated, stats.reserved


def empty_cache() -> None:
    runtime.get().empty_cache()


def get_fallback_ops() -> list[str]:
    """The op names that ran on the CPU instead of the device, one entry per time (as of the last synchronize)."""
    return list(_PUBLISHED["fallback"])


def get_executed_ops() -> list[str]:
    """The ops (and compiled graphs) that ran on the device (as of the last synchronize)."""
    return list(_PUBLISHED["executed"])


def clear_op_tracking() -> None:
    device.FALLBACK.clear()
    device.EXECUTED.clear()
    _PUBLISHED["fallback"], _PUBLISHED["executed"] = [], []


def get_dynamo_metrics() -> dict[str, dict[str, int]]:
    """Per compiled graph: torch_neuronx_fx_passes_us, torch_neuronx_lower_us, torch_neuronx_compile_us."""
    return copy.deepcopy(_PUBLISHED["metrics"])


def boot(root: str) -> None:
    """Register the emulated TorchNeuron for the machine in ``root`` (once per process)."""
    if _BOOTED:
        return
    _BOOTED.append(Path(root))
    runtime.install(Path(root))
    extras = {name: globals()[name] for name in __all__ if name != "synchronize"}
    device.register(synchronize, extras)
    compiler.register()
    distributed.register()
