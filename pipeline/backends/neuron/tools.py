"""Pure parsers for what the Neuron tools and driver report: ``neuron-ls`` and sysfs.

Nothing here imports torch or torch_neuronx, runs a tool or needs a device: the neuron backend runs the
tools and hands their output to these functions, and the tests feed them recorded outputs
(``tests/fixtures/neuron/``). Launch helpers (the core reservation environment, the compile cache) are in
:mod:`pipeline.backends.neuron.launch`.

Formats, as documented by AWS (aws-neuron-sdk ``tools/neuron-sys-tools/``) and seen in recorded output:

- ``neuron-ls --json-output`` (Neuron 2.33): a JSON array, one object per Neuron device, with ``nc_count``
  (cores the runtime addresses, i.e. *logical* cores on trn2), ``logical_neuroncore_config``, ``memory_size``
  (bytes per device), ``neuroncore_ids`` and ``neuron_processes``; the docs' example has no instance type,
  captures of recent tools have ``instance_type`` per device. Neuron 2.34 removes the flag for
  ``--output-format json``, announced to add "top-level fields for information that applies to more than one
  device, such as instance and UltraServer details": its shape is not published, so an object is searched for
  a list of device objects (each with ``neuron_device``) and for an instance type, under no assumed key, and
  the shape found is recorded (``NeuronInventory.output_shape``, in ``trncat doctor --json``) for the first run
  on a 2.34 machine to show.
- sysfs: ``/sys/devices/virtual/neuron_device/neuron{N}/neuron_core{M}/stats/memory_usage/device_mem/``
  holds ``total`` (current usage), ``present`` (size of the last allocation or free), ``peak`` (maximum
  since the driver loaded or the counter was cleared), and one directory per category with the same
  three files. Counters are cleared by writing to them (root only).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import BenchError

logger = logging.getLogger(__name__)

NEURON_SYSFS = Path("devices/virtual/neuron_device")


# --- neuron-ls ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NeuronDevice:
    """One Neuron device (chip) as ``neuron-ls`` reports it."""

    index: int
    core_ids: tuple[int, ...]
    memory_bytes: int
    logical_nc_config: int | None
    pids: tuple[int, ...] = ()
    runtime_versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class NeuronInventory:
    """The instance's Neuron hardware, from ``neuron-ls --json-output``.

    Attributes:
        instance_type: EC2 instance type when the tool reports it (recent aws-neuronx-tools), else None.
        device_count: Number of Neuron devices visible.
        cores_per_device: NeuronCores the runtime addresses per device (logical cores at LNC=2).
        logical_nc_config: LNC setting (1 or 2) when reported; None on trn1/inf2, which have no LNC.
        memory_per_device_bytes: Device memory (HBM) of one device.
        devices: Every device, in index order.
        emulated: The tool is trncat's Neuron emulator (tests/support/neuron/), not a Trainium machine.
        output_shape: What the JSON looked like (``list`` for 2.33's array; for an object its keys, the device
            list's path among them), so that a first 2.34 machine records its real shape.
    """

    instance_type: str | None
    device_count: int
    cores_per_device: int
    logical_nc_config: int | None
    memory_per_device_bytes: int
    devices: tuple[NeuronDevice, ...] = field(default=(), compare=False)
    emulated: bool = False
    output_shape: str = field(default="list", compare=False)

    @property
    def core_ids(self) -> tuple[int, ...]:
        """Every NeuronCore id neuron-ls lists, numbered as this process's runtime numbers them."""
        return tuple(sorted(c for d in self.devices for c in d.core_ids))

    @property
    def total_cores(self) -> int:
        """All NeuronCores the runtime can address on this instance."""
        return sum(len(d.core_ids) for d in self.devices) or self.device_count * self.cores_per_device

    @property
    def memory_per_core_bytes(self) -> int:
        """Device memory per addressable core (24 GiB on trn2 at LNC=2)."""
        return self.memory_per_device_bytes // max(self.cores_per_device, 1)

    @property
    def busy_core_ids(self) -> tuple[int, ...]:
        """Cores of devices that some process holds (``neuron-ls`` shows holders per device)."""
        return tuple(c for d in self.devices if d.pids for c in d.core_ids)

    @property
    def runtime_version(self) -> str | None:
        """Neuron runtime version of the processes on the devices, if any was running."""
        return max((v for d in self.devices for v in d.runtime_versions if v and v != "NA"), default=None)


def _int(value: Any, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise BenchError(f"neuron-ls: {what} is not an integer: {value!r}") from exc


def _device(entry: Mapping[str, Any]) -> NeuronDevice:
    if not isinstance(entry, Mapping) or "neuron_device" not in entry:
        raise BenchError(f"neuron-ls: device entry without 'neuron_device': {entry!r:.200}")
    index = _int(entry["neuron_device"], "neuron_device")
    count = _int(entry.get("nc_count", 0), "nc_count")
    ids = entry.get("neuroncore_ids")
    # Older tools omit neuroncore_ids; the runtime numbers cores device by device.
    core_ids = (
        tuple(_int(c, "neuroncore_ids") for c in ids) if ids else tuple(range(index * count, index * count + count))
    )
    lnc = entry.get("logical_neuroncore_config")
    procs = [p for p in entry.get("neuron_processes") or [] if isinstance(p, Mapping)]
    return NeuronDevice(
        index=index,
        core_ids=core_ids,
        memory_bytes=_int(entry.get("memory_size", 0), "memory_size"),
        logical_nc_config=_int(lnc, "logical_neuroncore_config") if lnc is not None else None,
        pids=tuple(_int(p["pid"], "pid") for p in procs if "pid" in p),
        runtime_versions=tuple(str(p["neuron_runtime_version"]) for p in procs if p.get("neuron_runtime_version")),
    )


def _instance_of(data: Mapping[str, Any]) -> str | None:
    """The instance type of a neuron-ls object: ``instance_type`` at the top, or inside ``instance``."""
    instance = data.get("instance")
    inner = instance if isinstance(instance, Mapping) else {}
    found = [data.get("instance_type"), inner.get("instance_type"), inner.get("type"), instance]
    return next((v for v in found if isinstance(v, str) and v), None)


def _device_list(data: Any, path: str = "", depth: int = 0) -> tuple[Any, str | None]:
    """The device objects (each with ``neuron_device``) in what neuron-ls printed, and where: the list itself, or
    the first such list an object holds under any key (breadth first, three levels down at most)."""
    if not isinstance(data, Mapping):
        return data, path or None
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(e, Mapping) and "neuron_device" in e for e in value):
            return value, f"{path}{key}"
    for key, value in data.items() if depth < 2 else ():
        found = _device_list(value, f"{path}{key}.", depth + 1) if isinstance(value, Mapping) else (None, None)
        if found[0] is not None:
            return found
    return None, None


def parse_neuron_ls(json_text: str) -> NeuronInventory:
    """Parse ``neuron-ls --json-output`` (2.33) or ``neuron-ls --output-format json`` (2.34).

    Accepts the array 2.33 prints and an object around the device list (2.34's top-level fields, whose
    shape the announcement does not give: the device list is found by its objects, under any key, and
    ``instance_type`` or ``instance`` is looked for). An ``emulator`` field (trncat's Neuron emulator) marks the
    inventory as emulated.

    Args:
        json_text: The tool's stdout.

    Returns:
        The :class:`NeuronInventory`.

    Raises:
        BenchError: If the text is not JSON of that shape or lists no device.
    """
    try:
        data = json.loads(json_text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"neuron-ls output is not JSON: {exc}") from exc
    instance_type = _instance_of(data) if isinstance(data, Mapping) else None
    emulated = isinstance(data, Mapping) and bool(data.get("emulator"))
    keys = sorted(str(k) for k in data)[:16] if isinstance(data, Mapping) else None
    data, where = _device_list(data)
    shape = "list" if keys is None else f"object {{{', '.join(keys)}}}, devices at {where or 'none'}"
    if not isinstance(data, list) or not data:
        raise BenchError(f"neuron-ls output lists no Neuron device (its JSON: {shape})")
    devices = tuple(sorted((_device(e) for e in data), key=lambda d: d.index))
    types = {str(e["instance_type"]) for e in data if isinstance(e, Mapping) and e.get("instance_type")}
    instance_type = instance_type or (sorted(types)[0] if types else None)
    emulated = emulated or any(isinstance(e, Mapping) and e.get("emulator") for e in data)
    first = devices[0]
    return NeuronInventory(
        instance_type=str(instance_type) if instance_type else None,
        device_count=len(devices),
        cores_per_device=len(first.core_ids),
        logical_nc_config=first.logical_nc_config,
        memory_per_device_bytes=first.memory_bytes,
        devices=devices,
        emulated=emulated,
        output_shape=shape,
    )


# --- sysfs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreMemory:
    """Device memory of one NeuronCore from sysfs, in bytes.

    Attributes:
        device: Neuron device index (``neuron{N}``).
        core: Core index within the device (``neuron_core{M}``).
        current: ``device_mem/total`` -- memory in use now.
        peak: ``device_mem/peak`` -- maximum since the driver loaded or the counter was cleared.
        categories: Current use per category (``tensors``, ``model_code``, ...).
    """

    device: int
    core: int
    current: int
    peak: int
    categories: Mapping[str, int] = field(default_factory=dict, compare=False, hash=False)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _numbered(parent: Path, prefix: str, *, folders: bool = True) -> list[tuple[int, Path]]:
    """(N, path) of ``parent``'s ``<prefix>N`` entries (folders only, unless ``folders`` is False), by N."""
    found = []
    for child in parent.glob(f"{prefix}*"):
        suffix = child.name[len(prefix) :]
        if suffix.isdigit() and (child.is_dir() or not folders):
            found.append((int(suffix), child))
    return sorted(found)


def _core_dirs(sysfs_root: Path) -> Iterable[tuple[int, int, int, Path]]:
    """(global index, device, core, path) of every NeuronCore directory, numbered device by device."""
    offset = 0
    for device, device_dir in _numbered(sysfs_root / NEURON_SYSFS, "neuron"):
        cores = _numbered(device_dir, "neuron_core")
        for core, core_dir in cores:
            yield offset + core, device, core, core_dir
        offset += len(cores)


def _memory_dirs(sysfs_root: Path, cores: Sequence[int] | None) -> Iterable[tuple[int, int, int, Path]]:
    """(global index, device, core, its pre-2.31 ``device_mem`` folder) of the cores asked for (all when None)."""
    for index, device, core, core_dir in _core_dirs(sysfs_root):
        if cores is None or index in cores:
            yield index, device, core, core_dir / "stats" / "memory_usage" / "device_mem"


def device_core_counts(sysfs_root: Path) -> dict[int, int]:
    """sysfs device number -> physical NeuronCores it lists (empty without a Neuron driver)."""
    return {
        device: len(_numbered(device_dir, "neuron_core"))
        for device, device_dir in _numbered(sysfs_root / NEURON_SYSFS, "neuron")
    }


def sysfs_memory_layout(sysfs_root: Path) -> dict[str, Any]:
    """What the driver's tree holds, for ``trncat doctor``: how many devices and core folders, whether the
    pre-2.31 memory counters are there, and the folders under the first core's ``stats`` (driver 2.31 moved the
    counters to paths the docs this project read do not give: a run on hardware records where they went).

    Returns:
        ``{"devices", "core_folders_per_device", "layout", "first_core_stats"}``; ``layout`` is ``pre-2.31``,
        ``moved`` (core folders without the pre-2.31 counters) or ``absent`` (no Neuron device in sysfs).
    """
    counts = device_core_counts(sysfs_root)
    cores = list(_core_dirs(sysfs_root))
    old = any((core_dir / "stats" / "memory_usage" / "device_mem").is_dir() for *_, core_dir in cores)
    stats: list[str] = []
    if cores:
        first = cores[0][3] / "stats"
        stats = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_dir())[:24]
    return {
        "devices": len(counts),
        "core_folders_per_device": sorted(set(counts.values())),
        "layout": "pre-2.31" if old else ("moved" if cores else "absent"),
        "first_core_stats": stats,
    }


def visible_devices(dev_root: Path) -> list[int]:
    """Device numbers of the ``/dev/neuron<N>`` nodes this process can see (all of them on a host; the mapped
    ones in a container)."""
    return [device for device, _ in _numbered(dev_root, "neuron", folders=False)]


def read_device_memory(sysfs_root: Path, *, cores: Sequence[int] | None = None) -> dict[int, CoreMemory]:
    """Current and peak device memory per NeuronCore, from the Neuron driver's sysfs tree.

    Cores are keyed by a global index, numbered device by device in sysfs order (device 0's cores first).
    sysfs lists the cores the driver sees; with LNC=2 on trn2, logical core ``k`` spans two of them.

    Args:
        sysfs_root: Root of sysfs (``/sys`` on a real host; a directory tree in tests).
        cores: Global indices to read; all cores when None.

    Returns:
        ``{global core index: CoreMemory}`` for the cores that have memory counters (empty without a
        Neuron driver).
    """
    out: dict[int, CoreMemory] = {}
    for index, device, core, mem in _memory_dirs(sysfs_root, cores):
        if not mem.is_dir():
            continue
        categories = {
            child.name: value
            for child in sorted(mem.iterdir())
            if child.is_dir() and (value := _read_int(child / "total")) is not None
        }
        current = _read_int(mem / "total")
        peak = _read_int(mem / "peak")
        # Some driver versions expose only the categories; their sum is the core's use.
        current = current if current is not None else sum(categories.values())
        out[index] = CoreMemory(device, core, current, peak if peak is not None else current, categories)
    return out


def peak_delta(before: Mapping[int, CoreMemory], after: Mapping[int, CoreMemory]) -> int:
    """Peak device memory the run added, summed over cores: ``after.peak - before.current`` per core.

    Exact when the peak counters were cleared before the run (:func:`reset_peaks`) or the run exceeded
    the old peak; otherwise an upper bound, because ``peak`` remembers earlier processes.

    Args:
        before: Reading taken before the model was loaded.
        after: Reading taken after the run and a synchronize.

    Returns:
        Bytes, never negative.
    """
    return sum(max(end.peak - (before[i].current if i in before else 0), 0) for i, end in after.items())


def reset_peaks(sysfs_root: Path, *, cores: Sequence[int] | None = None) -> bool:
    """Clear the ``device_mem`` peak counters (sysfs counters are write-to-clear; needs root).

    Args:
        sysfs_root: Root of sysfs.
        cores: Global core indices (as in :func:`read_device_memory`); all when None.

    Returns:
        True when every counter was cleared, False when one could not be written.
    """
    ok = True
    for *_, mem in _memory_dirs(sysfs_root, cores):
        for peak in [mem / "peak", *sorted(mem.glob("*/peak"))]:
            try:
                peak.write_text("0\n")
            except OSError as exc:
                logger.debug("cannot clear %s: %s", peak, exc)
                ok = False
    return ok


def driver_version(sysfs_root: Path) -> str | None:
    """Version of the loaded Neuron kernel driver (``/sys/module/neuron/version``).

    Args:
        sysfs_root: Root of sysfs.

    Returns:
        The version string, or None when the driver is not loaded.
    """
    try:
        text = (sysfs_root / "module" / "neuron" / "version").read_text().strip()
    except OSError:
        return None
    return text or None
