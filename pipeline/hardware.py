"""The Trainium instances trncat plans for and benchmarks on: cores, memory per core, memory bandwidth.

One small exact table. The planner reads memory per core from it; the benchmark harness reads the memory
bandwidth for its roofline (decode throughput against the bandwidth bound). Numbers are AWS's published
ones: a Trainium2 chip has 8 physical NeuronCores and 96 GiB of HBM at 2.9 TB/s; with the default logical
core config ``LNC=2`` two physical cores act as one logical core (4 per chip, 24 GiB each); with ``LNC=1``
each physical core is its own (8 per chip, 12 GiB each). A Trainium1 chip has 2 cores, 32 GiB of HBM at
820 GB/s, and no logical core config (``lnc`` is 1). A Trainium3 chip has 8 physical NeuronCore-v4 and
144 GiB of HBM at 4.9 TB/s in four HBM stacks, each shared by two neighbouring cores; LNC 1 and 2 apply to it as
to Trainium2 (36 GiB per logical core at LNC=2, 18 at LNC=1), and only it runs the MX formats (MXFP8, MXFP4).
The docs state no default LNC for Trn3: trncat plans at LNC=2 there, as on Trn2, and names it in every record.
Each figure's source is in docs/neuron-facts.md ("Trainium3").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pipeline.errors import ConfigError

GiB = 1024**3

#: Per-chip figures of each accelerator family, keyed by (family, lnc): (cores per chip, bytes per core).
_CHIP: dict[tuple[str, int], tuple[int, int]] = {
    ("trn2", 2): (4, 24 * GiB),
    ("trn2", 1): (8, 12 * GiB),
    ("trn1", 1): (2, 16 * GiB),
    ("trn3", 2): (4, 36 * GiB),
    ("trn3", 1): (8, 18 * GiB),
}
#: HBM bandwidth of one chip in bytes/s (decimal TB/s and GB/s, as AWS publishes them).
_CHIP_BANDWIDTH: dict[str, float] = {"trn2": 2.9e12, "trn1": 820e9, "trn3": 4.9e12}
#: The logical core config a family runs with when none is asked for.
_DEFAULT_LNC: dict[str, int] = {"trn2": 2, "trn1": 1, "trn3": 2}
#: The accelerator's name in a result record (``hardware.accelerator``): what keeps a Trainium3 row apart from a
#: Trainium2 one wherever rows are compared (the page's Device filter, ``trncat check``).
_ACCELERATOR: dict[str, str] = {"trn2": "trainium2", "trn1": "trainium1", "trn3": "trainium3"}
#: The OCP microscaling (MX) weight formats each family runs natively: Trainium3 only ("MX quantization is only
#: supported on trn3 and above", aws-neuron-sdk#1366).
_MX_FORMATS: dict[str, tuple[str, ...]] = {"trn3": ("mxfp8", "mxfp4")}
#: Instance type -> (family, chips).
_INSTANCES: dict[str, tuple[str, int]] = {
    "trn2.3xlarge": ("trn2", 1),
    "trn2.48xlarge": ("trn2", 16),
    # the UltraServer node (AWS's Trn2 architecture page): the chips and cores of a trn2.48xlarge
    "trn2u.48xlarge": ("trn2", 16),
    "trn1.2xlarge": ("trn1", 1),
    "trn1.32xlarge": ("trn1", 16),
    # one server of a Trn3 Gen1 UltraServer ("four servers with 16 Trainium3 devices per server"); the name is
    # the one SGLang-Neuron's docs run its LLMs on (docs/neuron-facts.md, "Trainium3")
    "trn3.48xlarge": ("trn3", 16),
}
#: The family of each accelerator name (a record's ``hardware.accelerator``).
FAMILY_OF_ACCELERATOR: dict[str, str] = {name: family for family, name in _ACCELERATOR.items()}

INSTANCE_NAMES: tuple[str, ...] = tuple(_INSTANCES)
DEFAULT_INSTANCE = "trn2.48xlarge"


@dataclass(frozen=True)
class Instance:
    """One instance type at one logical core config.

    Args:
        name: EC2 instance type, e.g. ``trn2.48xlarge``.
        family: accelerator family, ``trn3``, ``trn2`` or ``trn1``.
        chips: Trainium chips in the instance.
        cores: NeuronCores the runtime exposes (logical cores on trn2) in the whole instance.
        memory_per_core_bytes: HBM each of those cores owns.
        bandwidth_bytes_per_s: HBM bandwidth of ONE CHIP, shared by its cores (see :func:`bandwidth_for_cores`).
        lnc: logical core config (2 or 1 on trn2 and trn3; always 1 on trn1).
    """

    name: str
    family: str
    chips: int
    cores: int
    memory_per_core_bytes: int
    bandwidth_bytes_per_s: float
    lnc: int

    @property
    def cores_per_chip(self) -> int:
        """NeuronCores on one chip at this logical core config."""
        return self.cores // self.chips

    @property
    def memory_bytes(self) -> int:
        """HBM of the whole instance."""
        return self.cores * self.memory_per_core_bytes

    @property
    def accelerator(self) -> str:
        """The accelerator's marketing name, as result records carry it."""
        return _ACCELERATOR[self.family]

    @property
    def mx_formats(self) -> tuple[str, ...]:
        """The MX weight formats (``mxfp8``, ``mxfp4``) this family runs natively: Trainium3's, none before it."""
        return _MX_FORMATS.get(self.family, ())

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields plus ``cores_per_chip``, ``accelerator`` and ``mx_formats``, for JSON output."""
        data = asdict(self)
        data["cores_per_chip"] = self.cores_per_chip
        data["accelerator"] = self.accelerator
        data["mx_formats"] = list(self.mx_formats)
        return data


def get_instance(name: str, *, lnc: int | None = None) -> Instance:
    """Look up an instance type.

    Args:
        name: one of :data:`INSTANCE_NAMES`.
        lnc: logical core config; None means the family's default (2 on trn2 and trn3, 1 on trn1).

    Returns:
        The :class:`Instance`.

    Raises:
        ConfigError: unknown instance type, or an ``lnc`` the family does not have.
    """
    try:
        family, chips = _INSTANCES[name]
    except KeyError:
        raise ConfigError(f"unknown instance {name!r}; choose from {', '.join(INSTANCE_NAMES)}") from None
    lnc = _DEFAULT_LNC[family] if lnc is None else lnc
    try:
        cores_per_chip, memory_per_core = _CHIP[(family, lnc)]
    except KeyError:
        allowed = sorted(k[1] for k in _CHIP if k[0] == family)
        raise ConfigError(
            f"{name} has no logical core config LNC={lnc!r}; choose from {', '.join(map(str, allowed))}"
        ) from None
    return Instance(
        name=name,
        family=family,
        chips=chips,
        cores=chips * cores_per_chip,
        memory_per_core_bytes=memory_per_core,
        bandwidth_bytes_per_s=_CHIP_BANDWIDTH[family],
        lnc=lnc,
    )


def instance_for_devices(family: str, devices: int) -> str | None:
    """The instance type that has ``devices`` chips of ``family``, or None when no type has that many.

    A process inside a container sees only the chips it was given, so a count that names no instance (or a
    smaller one) is never proof of the instance: callers use it only when nothing else names it.
    """
    # What a device count stands for when nothing names the instance (neuron-ls 2.33's JSON does not): the plain
    # type of that size, the first listed (a trn2u.48xlarge has a trn2.48xlarge's 16 chips, and the same figures).
    return next((name for name, known in _INSTANCES.items() if known == (family, devices)), None)


def family_for_device_memory(memory_bytes: int) -> str | None:
    """The family whose chip has ``memory_bytes`` of HBM (within 5 %: a tool may report a little less), or None.

    What tells a Trainium3 host from a Trainium2 one when neither neuron-ls nor the environment names the
    instance: both have 8 physical cores per chip, only their HBM differs (144 GiB against 96 GiB).
    """
    for family, lnc in _DEFAULT_LNC.items():
        cores, per_core = _CHIP[(family, lnc)]  # a chip's HBM: 96 GiB on trn2, 144 GiB on trn3, 32 GiB on trn1
        if abs(memory_bytes - cores * per_core) <= 0.05 * cores * per_core:
            return family
    return None


def chip_bandwidth(family: str | None) -> float | None:
    """HBM bandwidth of one chip of ``family`` in bytes/s (AWS's published figure), None for another."""
    return _CHIP_BANDWIDTH.get(family or "")


def family_of(instance_type: str | None) -> str | None:
    """The family of an instance type trncat knows (``trn3.48xlarge`` -> ``trn3``), else None."""
    known = _INSTANCES.get(instance_type or "")
    return known[0] if known else None


#: The device name a Trainium3 row is counted under wherever rows are compared (pages, checks, queue keys).
TRAINIUM3 = "trainium3"


def row_device(device: str | None, *, hardware: str | None = None, accelerator: str | None = None) -> str | None:
    """The device a row is counted under: ``trainium3`` for a ``neuron`` row measured on Trainium3 (its accelerator
    says so, or its hardware name is a trn3 instance or family), else its ``device`` as recorded.

    A Trainium3 row is never a Trainium2 row: every reader that picks Trainium2 evidence (``device == "neuron"``)
    reads rows through this, so the two stay apart and can be set side by side.
    """
    if device == "neuron" and (accelerator == _ACCELERATOR["trn3"] or (hardware or "").startswith("trn3")):
        return TRAINIUM3
    return device


def bandwidth_for_cores(instance: Instance, cores: int) -> float:
    """HBM bandwidth, in bytes/s, available to ``cores`` NeuronCores of ``instance``.

    A chip's bandwidth is shared equally by its cores, so ``cores`` cores get ``cores / cores_per_chip``
    of a chip's bandwidth (several chips when ``cores`` spans them).

    Args:
        instance: the instance the cores belong to.
        cores: how many cores the model runs on, 1 to ``instance.cores``.

    Returns:
        Bytes per second.

    Raises:
        ConfigError: ``cores`` is not between 1 and the instance's core count.
    """
    if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= instance.cores:
        raise ConfigError(f"cores must be an integer from 1 to {instance.cores} on {instance.name}, got {cores!r}")
    return instance.bandwidth_bytes_per_s * cores / instance.cores_per_chip
