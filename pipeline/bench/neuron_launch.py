"""Launch helpers for the neuron backend: core reservation env, torchrun, compile cache, core escalation.

Pure functions: they build values and never touch ``os.environ``, run anything or import torch. The
backend merges :func:`neuron_env` into the child's environment and runs :func:`torchrun_command` with
``subprocess`` (an argument list, never a shell string).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.bench.failures import Classification
from pipeline.errors import ConfigError

logger = logging.getLogger(__name__)

__all__ = [
    "ESCALATING_CODES",
    "LNC_VALUES",
    "compile_cache_hit",
    "escalation_plan",
    "next_cores",
    "neuron_env",
    "snapshot_cache",
    "torchrun_command",
    "visible_cores",
]

#: Logical NeuronCore settings the runtime accepts (trn2 defaults to 2; trn1/inf2 have no LNC).
LNC_VALUES = (1, 2)
#: Failure codes that more cores can fix: device memory split over more cores. A host OOM is not one:
#: more ranks need more host memory, not less.
ESCALATING_CODES = frozenset({"compiler_oom", "device_oom"})


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


def torchrun_command(
    *,
    nproc: int,
    module_args: Sequence[str],
    python: str = sys.executable,
    master_port: int | None = None,
) -> list[str]:
    """Argument list that runs a Python module under ``torch.distributed.run`` on one node.

    Args:
        nproc: Processes (one per NeuronCore).
        module_args: The module to run (``-m``) followed by its arguments, e.g.
            ``["pipeline.bench.child", "--spec", "spec.json"]``.
        python: Interpreter to run torchrun with.
        master_port: Rendezvous port on 127.0.0.1; None lets ``--standalone`` pick a free one.

    Returns:
        The command as a list, for ``subprocess.run(cmd)``.

    Raises:
        ConfigError: If ``nproc`` or ``master_port`` is out of range or ``module_args`` is empty.
    """
    if nproc < 1:
        raise ConfigError(f"nproc must be at least 1, got {nproc}")
    if not module_args or not module_args[0] or module_args[0].startswith("-"):
        raise ConfigError("module_args must start with the module name to run")
    cmd = [python, "-m", "torch.distributed.run"]
    if master_port is None:
        cmd.append("--standalone")
    else:
        if not 1 <= master_port <= 65535:
            raise ConfigError(f"master_port must be in 1..65535, got {master_port}")
        # --standalone would override the endpoint with localhost:0, so spell the rendezvous out.
        cmd += ["--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{master_port}"]
    cmd += ["--nproc-per-node", str(nproc), "-m", *module_args]
    return cmd


def escalation_plan(*, start: int, max_cores: int) -> list[int]:
    """Core counts to try in order: ``start``, then doubling while it fits the instance.

    Args:
        start: The planner's core count, or 1 without a plan.
        max_cores: Cores on the instance.

    Returns:
        E.g. ``[1, 2, 4]`` for start 1 on a trn2.3xlarge (4 cores).

    Raises:
        ConfigError: If ``start`` is below 1 or above ``max_cores``.
    """
    if start < 1:
        raise ConfigError(f"start must be at least 1, got {start}")
    if start > max_cores:
        raise ConfigError(f"the plan needs {start} cores but the instance has {max_cores}")
    plan = [start]
    while plan[-1] * 2 <= max_cores:
        plan.append(plan[-1] * 2)
    return plan


def next_cores(previous: int, classification: Classification, max_cores: int) -> int | None:
    """The core count for the next attempt after a failure, or None to stop.

    Only failures more cores can fix escalate (:data:`ESCALATING_CODES`); infrastructure errors are
    retried by the harness at the same count, not here.

    Args:
        previous: Cores of the failed attempt.
        classification: How the attempt failed.
        max_cores: Cores on the instance.

    Returns:
        ``2 * previous`` when that fits and the failure was a device or compiler OOM, else None.
    """
    if classification.status != "fail" or classification.code not in ESCALATING_CODES:
        return None
    doubled = previous * 2
    return doubled if doubled <= max_cores else None


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
