"""Launch helpers for the neuron backend: the core reservation environment and the compile cache.

Pure functions: they build values and never touch ``os.environ``, run anything or import torch. The
backend merges :func:`neuron_env` into the child's environment.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pipeline.errors import ConfigError

logger = logging.getLogger(__name__)

#: Logical NeuronCore settings the runtime accepts (trn2 defaults to 2; trn1/inf2 have no LNC).
LNC_VALUES = (1, 2)
#: Where TorchNeuron caches compiled NEFFs, and its default (docs/neuron-facts.md).
NEFF_CACHE_VARIABLE = "TORCH_NEURONX_NEFF_CACHE_DIR"
DEFAULT_NEFF_CACHE_DIR = "/tmp/neff_cache"
#: Where TorchNeuron keeps its compile lock files (default /tmp/local_cache, shared by every process of a host).
NEFF_LOCK_VARIABLE = "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"
#: The run's whole core set, kept apart from the one core each torchrun rank reserves (pipeline.constants).
RUN_CORES_VARIABLE = "TRNCAT_NEURON_CORES"


def parse_visible_cores(value: str) -> list[int]:
    """``NEURON_RT_VISIBLE_CORES`` -> the sorted core indices it names.

    The runtime takes a single core (``"3"``), a range (``"8-15"``) or a comma-separated list of either
    (``"0,2,4"``, ``"0-3,8-11"``) (docs/neuron-facts.md); trncat also allows spaces around each item.

    Raises:
        ConfigError: not such a value, a decreasing range, or a core named twice.
    """
    cores: list[int] = []
    for part in value.split(","):
        item = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", part.strip())
        if item is None:
            raise ConfigError(f"NEURON_RT_VISIBLE_CORES={value!r} is not 'a', 'a-b' or a comma list of them")
        start, end = int(item[1]), int(item[2] or item[1])
        if end < start:
            raise ConfigError(f"NEURON_RT_VISIBLE_CORES={value!r} holds a decreasing range")
        cores.extend(range(start, end + 1))
    if len(set(cores)) != len(cores):
        raise ConfigError(f"NEURON_RT_VISIBLE_CORES={value!r} names a core twice")
    return sorted(cores)


def format_visible_cores(cores: Sequence[int]) -> str:
    """Core indices -> a ``NEURON_RT_VISIBLE_CORES`` value: ``"a"``, ``"a-b"``, or ranges joined by commas.

    Raises:
        ConfigError: no core, or a negative one.
    """
    ordered = sorted(set(cores))
    if not ordered or ordered[0] < 0:
        raise ConfigError(f"a core range needs at least one core, all non-negative; got {list(cores)}")
    # Consecutive cores keep the same difference to their position in the list: one run each.
    runs = [[core for _, core in run] for _, run in itertools.groupby(enumerate(ordered), lambda p: p[1] - p[0])]
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def choose_cores(
    *, cores: int, inherited: str | None, total_cores: int | None = None, core_ids: Sequence[int] | None = None
) -> list[int]:
    """The cores a run of ``cores`` cores uses: the first contiguous block of that size that it may use.

    A runner that shares an instance owns a ``NEURON_RT_VISIBLE_CORES`` set (runners/README.md): a run stays
    inside it rather than start at core 0 and collide with its neighbours. Without one, the run may use every
    core neuron-ls lists (``neuroncore_ids``: inside a container, the ids of the devices it was given, numbered
    as this runtime numbers them; the docs do not settle that numbering, so it is read, never assumed), else
    every core of the instance. A multi-core run takes consecutive cores (tensor parallelism over neighbours).

    Args:
        cores: How many cores the run takes.
        inherited: The runner's ``NEURON_RT_VISIBLE_CORES``, if any.
        total_cores: The cores neuron-ls counts, if known.
        core_ids: The ``neuroncore_ids`` neuron-ls lists, if known.

    Raises:
        ConfigError: fewer cores than asked, a core neuron-ls does not list, or no consecutive block that large.
    """
    if cores < 1:
        raise ConfigError(f"cores must be at least 1, got {cores}")
    known = sorted(set(core_ids)) if core_ids else None
    allowed = parse_visible_cores(inherited) if inherited else known or list(range(total_cores or cores))
    if total_cores is not None and allowed and allowed[-1] >= total_cores:
        raise ConfigError(f"NEURON_RT_VISIBLE_CORES={inherited} names cores past the instance's {total_cores}")
    if known and inherited and not set(allowed) <= set(known):
        raise ConfigError(
            f"NEURON_RT_VISIBLE_CORES={inherited} names cores neuron-ls does not list here "
            f"(its neuroncore_ids: {format_visible_cores(known)})"
        )
    if cores > len(allowed):
        raise ConfigError(f"{cores} cores asked, but this runner owns only {len(allowed)} ({inherited or 'all'})")
    for i in range(len(allowed) - cores + 1):
        block = allowed[i : i + cores]
        if block[-1] - block[0] == cores - 1:
            return block
    raise ConfigError(f"{cores} cores asked, but NEURON_RT_VISIBLE_CORES={inherited} has no {cores} consecutive cores")


def sysfs_core_indices(
    logical: Sequence[int], *, lnc: int, device_cores: Mapping[int, int], visible_devices: Sequence[int] | None
) -> list[int]:
    """Global sysfs core indices (as :func:`~pipeline.backends.neuron.tools.read_device_memory` numbers
    them) behind the runtime's logical cores.

    The runtime numbers logical cores over the devices it can open; at LNC=2 logical core ``k`` spans physical
    cores ``2k`` and ``2k+1``. sysfs lists every device of the host, also inside a container, whose runtime
    sees only the devices mapped into it and numbers its cores from 0 over them (docs/neuron-facts.md: the docs
    are silent on containers; the mapping by ``/dev/neuron<N>`` names is what trncat observes and records).

    Args:
        logical: The run's logical cores (its ``NEURON_RT_VISIBLE_CORES``).
        lnc: Logical core config.
        device_cores: sysfs device number -> physical cores it lists (:func:`tools.device_core_counts`).
        visible_devices: Device numbers this process's runtime addresses, in order (``/dev/neuron<N>`` here);
            None for every device sysfs lists (a host).

    Returns:
        The indices; empty when sysfs lists no device.

    Raises:
        ConfigError: a logical core past the devices this process sees.
    """
    if not device_cores:
        return []
    devices = sorted(device_cores) if visible_devices is None else list(visible_devices)
    numbered = sorted(device_cores)
    offsets = dict(zip(numbered, itertools.accumulate((device_cores[d] for d in numbered), initial=0), strict=False))
    per_device = device_cores[devices[0]] if devices and devices[0] in device_cores else 0
    out: list[int] = []
    for k in logical:
        for j in range(lnc):
            physical = k * lnc + j
            position, core = divmod(physical, per_device) if per_device else (len(devices), 0)
            if position >= len(devices) or devices[position] not in offsets:
                raise ConfigError(f"logical core {k} is past the {len(devices)} Neuron device(s) this process sees")
            out.append(offsets[devices[position]] + core)
    return out


def rank_core(run_cores: str, local_rank: int) -> str:
    """The one core a torchrun rank reserves: the ``local_rank``-th of the run's cores.

    TorchNeuron's process group wants one visible core per process, and the runtime reserves cores
    exclusively: every rank given the whole range would collide (docs/neuron-facts.md). The child sets the
    returned value as its ``NEURON_RT_VISIBLE_CORES`` before torch starts.

    Raises:
        ConfigError: the run has fewer cores than ranks.
    """
    cores = parse_visible_cores(run_cores)
    if not 0 <= local_rank < len(cores):
        raise ConfigError(f"local rank {local_rank} has no core in the run's {run_cores}")
    return str(cores[local_rank])


def neuron_env(*, cores: Sequence[int], lnc: int | None, cache_dir: Path | None) -> dict[str, str]:
    """Environment variables that reserve cores for one benchmark child.

    Args:
        cores: The NeuronCores to reserve (:func:`choose_cores`; their count is the torchrun world size).
        lnc: Logical NeuronCore config to set, or None to leave the runtime's default (2 on trn2).
        cache_dir: The run's NEFF cache directory, or None for TorchNeuron's default; its compile locks
            (``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR``) go next to it (never TorchNeuron's /tmp/local_cache, which every
            runner shares).

    Returns:
        ``NEURON_RT_VISIBLE_CORES`` and ``TRNCAT_NEURON_CORES`` (the run's cores; a torchrun rank narrows the
        first to its own core), ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1`` (a graph that fails to compile
        fails the run; the default, set so that a new default cannot hide a compile failure), and when given the
        LNC, the NEFF cache and its lock directory.

    Raises:
        ConfigError: If the core set or ``lnc`` is invalid.
    """
    visible = format_visible_cores(cores)
    env = {"NEURON_RT_VISIBLE_CORES": visible, RUN_CORES_VARIABLE: visible}
    env["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] = "1"
    if lnc is not None:
        if lnc not in LNC_VALUES:
            raise ConfigError(f"NEURON_LOGICAL_NC_CONFIG must be one of {LNC_VALUES}, got {lnc}")
        env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    if cache_dir is not None:
        env[NEFF_CACHE_VARIABLE] = str(cache_dir)
        env[NEFF_LOCK_VARIABLE] = str(cache_dir.with_name(cache_dir.name + "-locks"))
    return env


# --- compile cache --------------------------------------------------------------------------------
# The docs name TorchNeuron's NEFF cache directory but not the layout inside it (docs/neuron-facts.md), so a
# snapshot is every file under it: a compile that misses the cache writes new files, a hit writes none.


def snapshot_cache(cache_dir: Path) -> set[str]:
    """Every file in a NEFF cache directory, as relative POSIX paths (empty when the directory is missing)."""
    if not cache_dir.is_dir():
        return set()
    return {p.relative_to(cache_dir).as_posix() for p in cache_dir.rglob("*") if p.is_file()}


def compile_cache_hit(cache_dir: Path, before: set[str]) -> bool:
    """Whether a compile was served from the cache: it wrote no new file and the cache is not empty.

    Args:
        cache_dir: The cache directory the compile used.
        before: :func:`snapshot_cache` taken before the compile.

    Returns:
        False when new files appeared (a miss: the compile time is real) or when the cache holds nothing at
        all (the compile did not use this cache).
    """
    after = snapshot_cache(cache_dir)
    if after - before:
        return False
    if not after:
        logger.warning("NEFF cache %s is empty after the compile; was it used?", cache_dir)
        return False
    return True
