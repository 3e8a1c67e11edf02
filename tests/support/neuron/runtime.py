"""The emulated Neuron runtime: which cores a process reserves, and the HBM of each.

It starts lazily, on the first device use, and then reads the process's environment once, as the runtime does
(``NEURON_RT_VISIBLE_CORES``, ``NEURON_LOGICAL_NC_CONFIG``): this module stands in for libnrt, so it reads
``os.environ`` itself instead of trncat's ``pipeline.constants``. Cores are reserved exclusively across processes
with one ``flock`` per core under the machine's ``run/`` folder (released when the process ends, however it
ends). Each core's HBM is counted in 2 MiB segments beside the runtime's 96 MB per physical core; past its HBM
bank (one per logical core at LNC=2, shared by two cores at LNC=1) an allocation fails with the documented text
and the memory table is written where the runtime writes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.support.neuron.machine import DEBIANS, Machine
from tests.support.neuron.rules import cite

MiB = 1024**2
#: The allocator's segment (the emulator's choice: the docs say only that it reserves large segments).
SEGMENT = 2 * MiB
#: HBM the runtime itself takes per *physical* core it reserves: the device-memory page's "micro-code overhead of
#: 96MB per physical Neuron Core" (in the ``model code`` category), read as MiB; sysfs counts it, the allocator
#: does not. A logical core at LNC=2 holds two physical cores, so 192 MiB.
RUNTIME_OVERHEAD = 96 * MiB
RUNTIME_VERSION = DEBIANS["aws-neuronx-runtime-lib"].split("-")[0]


class NeuronRuntimeError(RuntimeError):
    """What the emulated runtime raises; the message carries the runtime's own log line."""


#: The documented forms of ``NEURON_RT_VISIBLE_CORES`` (docs/neuron-facts.md): "a single NeuronCore index or an
#: inclusive range", and a comma list of them (the container guide's ``51,52``). Written from that rule, not from
#: trncat's parser, so that a test can hold the two against each other: anything else (a space, a sign, an open
#: range such as ``3-``) is refused here (docs silent: the emulator's reading).
_VISIBLE_FORM = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


def parse_visible(value: str, *, total: int) -> list[int]:
    """``NEURON_RT_VISIBLE_CORES`` -> the sorted cores it names, each once, all below ``total``.

    Raises:
        NeuronRuntimeError: not a documented form, a decreasing range, a core named twice, or one past the machine.
    """
    if not _VISIBLE_FORM.fullmatch(value):
        raise NeuronRuntimeError(f"invalid NEURON_RT_VISIBLE_CORES={value!r} {cite('visible_cores')}")
    cores: list[int] = []
    for item in value.split(","):
        low, _, high = item.partition("-")
        if high and int(high) < int(low):
            raise NeuronRuntimeError(f"invalid NEURON_RT_VISIBLE_CORES={value!r} {cite('visible_cores')}")
        cores += range(int(low), int(high or low) + 1)
    if len(set(cores)) != len(cores) or max(cores) >= total:
        raise NeuronRuntimeError(
            f"NEURON_RT_VISIBLE_CORES={value!r} names a core twice or cores outside 0-{total - 1} "
            f"{cite('visible_cores')}"
        )
    return sorted(cores)


@dataclass
class CoreMemory:
    """The allocator's figures of one logical core, in bytes."""

    allocated: int = 0
    peak_allocated: int = 0
    reserved: int = 0
    peak_reserved: int = 0
    allocations: int = 0


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", MiB), ("KB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3f}{unit}"
    return f"{nbytes:.3f}B"


class Runtime:
    """The runtime of this process (one per process: :func:`get`)."""

    def __init__(self, root: Path, machine: Machine) -> None:
        self.root = root
        self.machine = machine
        self.started = False
        self.lnc = 2
        self.cores: list[int] = []
        self.start_index = 0
        self.current: int | None = None  # the device index set_device bound (None: the first core)
        self.memory: dict[int, CoreMemory] = {}
        self._locks: list[IO[str]] = []
        self._mutex = threading.Lock()

    # -- start ------------------------------------------------------------------------------------
    @property
    def cores_per_device(self) -> int:
        return self.machine.physical_cores // self.lnc

    @property
    def total_cores(self) -> int:
        return len(self.machine.visible_devices) * self.cores_per_device

    def read_lnc(self) -> int:
        value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2").strip() or "2"
        if value not in ("1", "2"):
            raise NeuronRuntimeError(f"NEURON_LOGICAL_NC_CONFIG must be 1 or 2, got {value!r} {cite('lnc')}")
        return int(value)

    def _visible(self, lnc: int) -> list[int]:
        """The cores NEURON_RT_VISIBLE_CORES names at ``lnc``; by default the runtime reserves every core."""
        total = len(self.machine.visible_devices) * self.machine.physical_cores // lnc
        value = os.environ.get("NEURON_RT_VISIBLE_CORES")
        return parse_visible(value, total=total) if value else list(range(total))

    def visible_count(self) -> int:
        """Cores this process would reserve, without starting the runtime (``device_count``)."""
        return len(self.cores if self.started else self._visible(self.read_lnc()))

    def start(self) -> None:
        """Reserve the visible cores (every core when none is named), exclusively, or fail as the runtime does."""
        with self._mutex:
            if self.started:
                return
            self.lnc = self.read_lnc()
            cores = self._visible(self.lnc)
            held: list[IO[str]] = []
            for core in cores:
                lock = self._lock_file(core).open("a+")
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    lock.close()
                    for other in held:
                        other.close()
                    line = (
                        f"ERROR   NRT:nrt_allocate_neuron_cores               NeuronCore(s) not available - "
                        f"Requested:nc{cores[0]}-nc{cores[-1]} Available:0"
                    )
                    print(line, file=sys.stderr)
                    raise NeuronRuntimeError(f"{line} {cite('exclusive_cores')}") from None
                lock.seek(0)
                lock.truncate()
                lock.write(json.dumps({"pid": os.getpid(), "runtime_version": RUNTIME_VERSION}))
                lock.flush()
                held.append(lock)
            self._locks = held
            self.cores = cores
            self.memory = {position: CoreMemory() for position in range(len(cores))}
            self.started = True
        for position in range(len(cores)):
            self._write_sysfs(position)

    def _lock_file(self, core: int) -> Path:
        # Named by the host's device number: two containers given different devices never collide.
        device, local = divmod(core, self.cores_per_device)
        host = self.machine.visible_devices[device]
        return self.root / "run" / f"nd{host}-nc{local * self.lnc}.lock"

    # -- devices ----------------------------------------------------------------------------------
    def position(self, index: int | None) -> int:
        """The reserved core behind ``torch.device("neuron", index)`` (None: the current device, the first core).

        Under torch.distributed a rank's one core is index ``LOCAL_RANK``: an index naming no core of this process
        fails (rule ``device``). Index 0 on a later rank is read as the current device: PyTorch fills a missing
        index from the device guard, and a Python backend's guard always answers 0 (TorchNeuron's answers its
        start index), so an explicit 0 cannot be told from a missing one here.
        """
        self.start()
        if index is None or (index == 0 and self.start_index > 0):
            index = self.current if self.current is not None else self.start_index
        position = index - self.start_index
        if not 0 <= position < len(self.cores):
            raise NeuronRuntimeError(
                f"neuron:{index} is not one of this process's {len(self.cores)} NeuronCore(s) "
                f"(indices {self.start_index}-{self.start_index + len(self.cores) - 1}) {cite('visible_cores')}"
            )
        return position

    def where(self, position: int) -> tuple[int, int, int]:
        """(device number as this process sees it, physical core within it, HBM bank) of a reserved core."""
        device, local = divmod(self.cores[position], self.cores_per_device)
        physical = local * self.lnc
        return device, physical, physical // 2

    # -- memory -----------------------------------------------------------------------------------
    @property
    def bank_limit(self) -> int:
        # Trainium2: four 24 GB HBM banks per device, one per logical core at LNC=2, shared by two at LNC=1.
        return self.machine.core_hbm_limit or self.machine.hbm_per_device // 4

    def _bank_reserved(self, position: int) -> int:
        """Bytes held on the HBM bank of a core: every reserved core of this process on that bank (two at LNC=1
        share one), its allocator segments and the runtime's overhead of its physical cores."""
        device, _, bank = self.where(position)
        return sum(
            m.reserved + self.overhead
            for p, m in self.memory.items()
            if self.where(p)[2] == bank and self.where(p)[0] == device
        )

    @property
    def overhead(self) -> int:
        """The runtime's HBM on one logical core: 96 MiB per physical core behind it."""
        return RUNTIME_OVERHEAD * self.lnc

    def allocate(self, position: int, nbytes: int) -> None:
        """Count ``nbytes`` more on a core, reserving segments as needed; out of HBM, fail as the runtime does."""
        with self._mutex:
            stats = self.memory[position]
            grown = False
            if stats.allocated + nbytes > stats.reserved:
                need = -(-(stats.allocated + nbytes) // SEGMENT) * SEGMENT
                extra = need - stats.reserved
                if self._bank_reserved(position) + extra > self.bank_limit:
                    raise self._out_of_memory(position, nbytes)
                stats.reserved = need
                stats.peak_reserved = max(stats.peak_reserved, need)
                grown = True
            stats.allocated += nbytes
            stats.allocations += 1
            stats.peak_allocated = max(stats.peak_allocated, stats.allocated)
        if grown:
            self._write_sysfs(position)

    def free(self, position: int, nbytes: int) -> None:
        with self._mutex:
            self.memory[position].allocated = max(0, self.memory[position].allocated - nbytes)

    def empty_cache(self) -> None:
        with self._mutex:
            for stats in self.memory.values():
                stats.reserved = -(-stats.allocated // SEGMENT) * SEGMENT
        for position in self.memory:
            self._write_sysfs(position)

    def _out_of_memory(self, position: int, nbytes: int) -> NeuronRuntimeError:
        device, physical, bank = self.where(position)
        table = self.root / "tmp" / f"neuron_mem_table_device_{device}_hbm_{bank}.log"
        rows = ["              |  TOTAL   | Tensors  |Model code|"]
        for p, stats in sorted(self.memory.items()):
            d, c, b = self.where(p)
            if d == device and b == bank:
                rows.append(f"   \\_NC {c:<7}| {_size(stats.reserved + self.overhead):>8} | "
                            f"{_size(stats.reserved):>8} | {_size(self.overhead):>8} |")  # fmt: skip
        header = f"ND {device} HBM {bank}: limit {_size(self.bank_limit)}"
        table.write_text("Displaying Current Memory Utilization:\n" + header + "\n" + "\n".join(rows) + "\n")
        line = (
            f"ERROR  TDRV:log_dev_mem                             Failed to allocate {_size(nbytes)} (alignment: "
            f"none, usage: tensors) on ND {device}:NC {physical}"
        )
        print(line, file=sys.stderr)
        print(table.read_text(), file=sys.stderr)
        return NeuronRuntimeError(f"{line} {cite('oom_text')}")

    def _write_sysfs(self, position: int) -> None:
        """The driver's counters of the physical cores behind a logical core (half each at LNC=2)."""
        device, physical, _ = self.where(position)
        host = self.machine.visible_devices[device]
        stats = self.memory[position]
        base = self.root / "sys" / "devices" / "virtual" / "neuron_device" / f"neuron{host}"
        if self.machine.sysfs == "pre-2.31":
            folders = [base / f"neuron_core{physical + j}" / "stats/memory_usage/device_mem" for j in range(self.lnc)]
        else:
            folders = [base / f"neuron_core{physical // 2}" / "stats/memory/device_mem"]
        share = len(folders)
        for folder in folders:
            values = {"tensors": stats.reserved // share, "model_code": self.overhead // share}
            values[""] = sum(values.values())
            for category, value in values.items():
                counter = folder / category if category else folder
                if not counter.is_dir():
                    continue
                (counter / "total").write_text(f"{value}\n")
                peak = _read(counter / "peak")
                (counter / "peak").write_text(f"{max(peak, value)}\n")


def _read(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def holders(root: Path) -> dict[str, dict[str, Any]]:
    """Cores some live process holds: lock file name -> what it wrote (``pid``, ``runtime_version``)."""
    held: dict[str, dict[str, Any]] = {}
    for lock in sorted((root / "run").glob("nd*-nc*.lock")):
        with lock.open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # someone holds it
                try:
                    held[lock.stem] = json.loads(lock.read_text() or "{}")
                except ValueError:
                    held[lock.stem] = {}
            else:
                fcntl.flock(handle, fcntl.LOCK_UN)
    return held


_RUNTIME: Runtime | None = None


def install(root: Path) -> Runtime:
    """Create this process's runtime for the machine in ``root`` (it starts on first use)."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = Runtime(root, Machine.load(root))
    return _RUNTIME


def get() -> Runtime:
    """This process's runtime (:func:`install` ran when torch_neuronx was imported)."""
    if _RUNTIME is None:
        raise NeuronRuntimeError("the emulated torch_neuronx was not booted")
    return _RUNTIME
