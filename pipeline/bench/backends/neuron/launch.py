"""Launch helpers for the neuron backend: the core reservation environment and the compile cache.

Pure functions: they build values and never touch ``os.environ``, run anything or import torch. The
backend merges :func:`neuron_env` into the child's environment.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from pipeline.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = [
    "LNC_VALUES",
    "compile_cache_hit",
    "neuron_env",
    "partition_start",
    "snapshot_cache",
    "visible_cores",
]

#: Logical NeuronCore settings the runtime accepts (trn2 defaults to 2; trn1/inf2 have no LNC).
LNC_VALUES = (1, 2)


def visible_cores(*, cores: int, first_core: int = 0) -> str:
    """The ``NEURON_RT_VISIBLE_CORES`` value for ``cores`` consecutive cores: ``"a"`` or ``"a-b"``.

    Args:
        cores: Number of cores, at least 1.
        first_core: First core index, at least 0.

    Returns:
        The range string.

    Raises:
        ConfigError: If a value is out of range.
    """
    if cores < 1:
        raise ConfigError(f"cores must be at least 1, got {cores}")
    if first_core < 0:
        raise ConfigError(f"first_core must be at least 0, got {first_core}")
    last = first_core + cores - 1
    return str(first_core) if cores == 1 else f"{first_core}-{last}"


def parse_visible_cores(value: str) -> tuple[int, int]:
    """``"a"`` or ``"a-b"`` -> (first core, number of cores).

    Raises:
        ConfigError: not such a range.
    """
    first, _, last = value.strip().partition("-")
    try:
        start, end = int(first), int(last or first)
    except ValueError:
        raise ConfigError(f"NEURON_RT_VISIBLE_CORES={value!r} is not 'a' or 'a-b'") from None
    if start < 0 or end < start:
        raise ConfigError(f"NEURON_RT_VISIBLE_CORES={value!r} is not an increasing range")
    return start, end - start + 1


def partition_start(*, cores: int, inherited: str | None) -> int:
    """The first core a run of ``cores`` cores may use: 0, or the start of the runner's own range.

    A runner that shares an instance owns a ``NEURON_RT_VISIBLE_CORES`` range (runners/README.md); a run must
    stay inside it rather than start at core 0 and collide with its neighbours.

    Raises:
        ConfigError: the run needs more cores than the runner's range holds.
    """
    if not inherited:
        return 0
    start, size = parse_visible_cores(inherited)
    if cores > size:
        raise ConfigError(
            f"{cores} cores asked, but this runner owns only {size} (NEURON_RT_VISIBLE_CORES={inherited})"
        )
    return start


def neuron_env(
    *,
    cores: int,
    first_core: int = 0,
    lnc: int | None,
    cache_dir: Path | None,
    total_cores: int | None = None,
) -> dict[str, str]:
    """Environment variables that reserve cores for one benchmark child.

    Args:
        cores: NeuronCores to reserve (the torchrun world size).
        first_core: First core of the contiguous range (the runtime needs contiguous cores).
        lnc: Logical NeuronCore config to set, or None to leave the runtime's default (2 on trn2).
        cache_dir: Persistent compile cache directory, or None for the default (/var/tmp/neuron-compile-cache).
        total_cores: Cores on the instance, to check the range fits (skipped when None).

    Returns:
        ``NEURON_RT_VISIBLE_CORES`` and, when given, ``NEURON_LOGICAL_NC_CONFIG`` and
        ``NEURON_COMPILE_CACHE_URL``.

    Raises:
        ConfigError: If the core range, ``lnc`` or ``total_cores`` is invalid.
    """
    env = {"NEURON_RT_VISIBLE_CORES": visible_cores(cores=cores, first_core=first_core)}
    if total_cores is not None:
        if total_cores < 1:
            raise ConfigError(f"total_cores must be at least 1, got {total_cores}")
        if first_core + cores > total_cores:
            raise ConfigError(f"cores {env['NEURON_RT_VISIBLE_CORES']} do not fit the instance's {total_cores} cores")
    if lnc is not None:
        if lnc not in LNC_VALUES:
            raise ConfigError(f"NEURON_LOGICAL_NC_CONFIG must be one of {LNC_VALUES}, got {lnc}")
        env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    if cache_dir is not None:
        env["NEURON_COMPILE_CACHE_URL"] = str(cache_dir)
    return env


# --- compile cache --------------------------------------------------------------------------------
# Layout: <cache>/neuronxcc-<version>/MODULE_<hash>+<flags>/model.neff (older releases:
# USER_neuroncc-<version>/MODULE_<hash>/...). A compile that misses the cache adds a MODULE_ entry.

_CACHE_VERSION_DIR = re.compile(r"^(?:neuronxcc-|USER_neuroncc-)")


def snapshot_cache(cache_dir: Path) -> set[str]:
    """The compiled modules in a Neuron persistent cache, as ``<compiler dir>/MODULE_<hash>`` paths.

    Args:
        cache_dir: Local cache directory (``NEURON_COMPILE_CACHE_URL``; S3 caches are not inspected).

    Returns:
        Relative POSIX paths; empty when the directory does not exist.
    """
    if not cache_dir.is_dir():
        return set()
    return {
        f"{version.name}/{module.name}"
        for version in cache_dir.iterdir()
        if version.is_dir() and _CACHE_VERSION_DIR.match(version.name)
        for module in version.glob("MODULE_*")
        if module.is_dir()
    }


def compile_cache_hit(cache_dir: Path, before: set[str]) -> bool:
    """Whether a compile was served from the cache: it created no new module and the cache is not empty.

    Args:
        cache_dir: The cache directory used by the compile.
        before: :func:`snapshot_cache` taken before the compile.

    Returns:
        False when new ``MODULE_*`` entries appeared (a miss, the compile time is real) or when the
        cache holds nothing at all (the compile did not use this cache).
    """
    after = snapshot_cache(cache_dir)
    if after - before:
        return False
    if not after:
        logger.warning("compile cache %s is empty after the compile; was it used?", cache_dir)
        return False
    return True
