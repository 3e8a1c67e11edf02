"""What a Neuron run reports beside its timings, read from what TorchNeuron and the runtime leave behind.

Pure functions (no torch): the compile figures from ``torch_neuronx.get_dynamo_metrics()``, the peak the record
keeps from the allocator and sysfs, the fallback counts, and the tail of the memory table the runtime writes
on an out-of-memory. The backend calls them with what it read.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: The per-graph metric that is neuronx-cc's own time, in microseconds: 0 when the persistent cache served
#: the graph (docs/neuron-facts.md, "compile time from TorchNeuron").
COMPILE_US = "torch_neuronx_compile_us"
#: Where the runtime writes its memory table when an allocation fails (the device-memory docs; the real runtime
#: writes /tmp/neuron_mem_table_device_<d>_hbm_<h>.log, some versions ..._nc_<c>.log).
MEMORY_TABLE_GLOB = "neuron_mem_table_device_*.log"


def _graphs(metrics: Any) -> list[Mapping[str, Any]] | None:
    """The per-graph entries of a dynamo-metrics answer: ``{graph: {metric: value}}`` or a list of them."""
    if isinstance(metrics, Mapping):
        values: Iterable[Any] = metrics.values()
    elif isinstance(metrics, list | tuple):
        values = metrics
    else:
        return None
    entries = [v for v in values if isinstance(v, Mapping) and COMPILE_US in v]
    return entries if entries or not metrics else None


def compile_figures(metrics: Any) -> dict[str, Any]:
    """The record's compile figures from ``get_dynamo_metrics()``: neuronx-cc's seconds summed over the graphs,
    how many graphs, and how many of them the persistent cache served (compile time 0).

    Returns:
        ``{"neuronx_cc_s", "compiled_graphs", "cached_graphs"}``, or {} for an answer of an unknown shape (a
        TorchNeuron that changed it: the figures are then unknown, never guessed).
    """
    graphs = _graphs(metrics)
    if graphs is None:
        logger.warning("get_dynamo_metrics() returned an unknown shape: %.200r", metrics)
        return {}
    times = []
    for graph in graphs:
        try:
            times.append(max(0.0, float(graph[COMPILE_US])))
        except (TypeError, ValueError):
            return {}
    return {
        "neuronx_cc_s": sum(times) / 1e6,
        "compiled_graphs": len(times),
        "cached_graphs": sum(1 for t in times if t == 0),
    }


def choose_peak(*, allocator: int | None, sysfs: int | None, sysfs_exact: bool) -> int | None:
    """The peak device memory to record: the larger of the allocator's and a trustworthy sysfs figure.

    The allocator counts tensors only; sysfs counts everything the driver gave the cores (tensors, NEFF
    code, scratchpad, collective buffers), so it is the footprint a user must fit. A sysfs peak that could
    not be cleared and was not exceeded remembers an earlier process, so it is then only logged.

    Args:
        allocator: ``torch_neuronx.max_memory_allocated`` summed over ranks.
        sysfs: :func:`pipeline.backends.neuron.tools.peak_delta` over the cores used.
        sysfs_exact: Whether the peak counters were cleared before the run or all exceeded their old value.

    Returns:
        Bytes, or None when neither source gave a figure.
    """
    candidates = [v for v in (allocator, sysfs if sysfs_exact else None) if v is not None]
    return max(candidates) if candidates else None


def count_ops(ops: Any) -> dict[str, int]:
    """``{op name: count}`` from what ``torch_neuronx.get_fallback_ops()`` returns: a mapping of counts, or a
    collection of names (a name listed k times counts k; a set counts each op once)."""
    if isinstance(ops, Mapping):
        return {str(op): int(n) for op, n in ops.items()}
    return dict(Counter(str(op) for op in ops or ()))


def memory_table_tail(tmp: Path, *, since: float, limit: int = 1200) -> tuple[str, str] | None:
    """The newest memory table the runtime wrote into ``tmp`` since ``since`` (a Unix time): (file name, tail).

    Args:
        tmp: The runtime's /tmp (under ``TRNCAT_SYSTEM_ROOT``).
        since: When the run started; older tables belong to other runs.
        limit: Characters of the tail to keep (the record's notes are short).
    """
    try:
        tables = [p for p in tmp.glob(MEMORY_TABLE_GLOB) if p.is_file() and p.stat().st_mtime >= since - 1]
        newest = max(tables, key=lambda p: p.stat().st_mtime, default=None)
        text = newest.read_text(encoding="utf-8", errors="replace") if newest else ""
    except OSError:
        return None
    if newest is None:
        return None
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return newest.name, " | ".join(lines)[-limit:]
