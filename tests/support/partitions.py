"""The runner partition rules of :mod:`pipeline.queue.fleet`, read a second way: the oracle the tests hold
``runners/setup-runner.sh --partition`` and the estimate's recommended partitions to."""

from __future__ import annotations

import re

from pipeline.errors import ConfigError
from pipeline.hardware import get_instance

_ENTRY = re.compile(r"^(?:(\d+)x(\d+)|(\d+)@(\d+))$")


def parse_partition(spec: str, *, instance: str = "trn2.48xlarge") -> list[tuple[int, int]]:
    """The runners of a partition spec as ``(first core, cores)``, validated.

    Args:
        spec: Comma-separated ``COUNTxSIZE`` (placed after the previous runner) or ``SIZE@FIRST``.
        instance: Instance type whose cores and chips bound the layout.

    Returns:
        The runners in the order given.

    Raises:
        ConfigError: malformed entry, a size that is not a power of two, ranges that overlap, a runner that
            straddles a chip boundary, or more cores than the instance has.
    """
    inst = get_instance(instance)
    chip = inst.cores_per_chip
    runners: list[tuple[int, int]] = []
    cursor = 0
    for entry in (part.strip() for part in spec.split(",")):
        match = _ENTRY.fullmatch(entry)
        if match is None:
            raise ConfigError(f"partition entry {entry!r}: want COUNTxSIZE (e.g. 4x4) or SIZE@FIRST (e.g. 8@56)")
        if match[1] is not None:
            count, size = int(match[1]), int(match[2])
            if count < 1:
                raise ConfigError(f"partition entry {entry!r}: the count must be at least 1")
            placed = [(cursor + k * size, size) for k in range(count)]
        else:
            size, first = int(match[3]), int(match[4])
            placed = [(first, size)]
        if size < 1 or size & (size - 1):
            raise ConfigError(f"partition entry {entry!r}: runner sizes are powers of two (1, 2, 4, 8, ...)")
        runners.extend(placed)
        cursor = placed[-1][0] + size
    total = sum(size for _, size in runners)
    if total > inst.cores:
        raise ConfigError(f"partition {spec!r} asks for {total} cores; a {instance} has {inst.cores}")
    owner: dict[int, int] = {}
    for index, (first, size) in enumerate(runners):
        if first + size > inst.cores:
            raise ConfigError(f"runner {index} ({size}@{first}) ends past core {inst.cores - 1} of a {instance}")
        # Within a chip a runner is aligned to its size; past a chip it starts on a chip boundary.
        if first % min(size, chip):
            raise ConfigError(
                f"runner {index} ({size}@{first}) straddles a chip boundary: a {size}-core runner starts at a "
                f"multiple of {min(size, chip)} ({chip} cores per chip)"
            )
        for core in range(first, first + size):
            if core in owner:
                raise ConfigError(f"runners {owner[core]} and {index} overlap on core {core}")
            owner[core] = index
    return runners
