"""``trncat doctor``: is this machine ready to benchmark on Neuron? One check a line, each with its fix.

The checks read what the Neuron backend reads (package metadata, ``/dev/neuron*``, sysfs, ``neuron-ls``), never
import torch_neuronx, and never print a token. ``smoke`` then runs a tiny model built here (no download)
through the real harness on one core and on two (tensor parallel), and reports both records. The report's
``facts`` (and the smoke's notes and compile figures) carry what only a run on a trn2 can settle: the core ids
as this runtime numbers them, the container's capabilities, where sysfs keeps the memory counters, the exact
package version strings, each rank's devices and cores, and TorchNeuron's compile figures cold and warm.
Every Neuron fact a check relies on is in docs/neuron-facts.md.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from pipeline import constants
from pipeline.backends.neuron import (
    DEFAULT_NEFF_CACHE_DIR,
    NEURON_INDEX_URL,
    TORCH_CPU_INDEX_URL,
    NeuronBackend,
    dpkg_version,
    driver_version,
    format_visible_cores,
    inventory_json,
    sysfs_memory_layout,
    visible_devices,
)
from pipeline.errors import ConfigError, PipelineError

CheckStatus = Literal["ok", "warn", "fail"]
#: Python versions the TorchNeuron 2.33 wheels are built for (docs/neuron-facts.md).
TORCHNEURON_PYTHONS = ((3, 12), (3, 13), (3, 14))
#: Ubuntu releases TorchNeuron 2.33 supports (26.04 wheels; 24.04 through the DLAMI) (docs/neuron-facts.md).
UBUNTU_RELEASES = ("24.04", "26.04")
#: Free space below which a check warns: the NEFF cache, and the disk that holds downloads and run caches.
MIN_CACHE_FREE_BYTES = 10 * 1024**3
MIN_DISK_FREE_BYTES = 50 * 1024**3
MIN_HOST_MEMORY_BYTES = 32 * 1024**3
#: The toolchain packages doctor compares with runners/toolchain.yaml: distribution -> toolchain key.
TOOLCHAIN_PACKAGES = {"torch": "torch", "torch-neuronx": "torch_neuronx", "neuronx-cc": "neuronx_cc", "nki": "nki",
                      "transformers": "transformers", "sentence-transformers": "sentence_transformers",
                      "diffusers": "diffusers"}  # fmt: skip
#: The capabilities AWS's Trainium container examples add (``--cap-add SYS_ADMIN --cap-add IPC_LOCK``), by their
#: bit in /proc/self/status CapEff (linux/capability.h).
CAPABILITIES = {"IPC_LOCK": 14, "SYS_ADMIN": 21}


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status name detail (fix)``."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None

    def line(self) -> str:
        fix = f"  ({self.fix})" if self.fix and self.status != "ok" else ""
        return f"{self.status:<5} {self.name:<13} {self.detail}{fix}"


#: The checks a smoke run needs: without a device, neuron-ls, the cores or the Neuron packages it cannot run.
SMOKE_NEEDS = ("driver", "devices", "neuron-ls", "cores", "torch-neuronx", "neuronx-cc")


@dataclass
class Report:
    """Every check, the machine's facts a first run on hardware records, and the smoke runs' summaries."""

    checks: list[Check] = field(default_factory=list)
    smoke: list[dict[str, Any]] | None = None
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        smoke_ok = self.smoke is None or all(run["status"] == "pass" for run in self.smoke)
        return all(c.status == "ok" for c in self.checks) and smoke_ok

    @property
    def smoke_ready(self) -> bool:
        """Whether the checks a smoke run needs passed."""
        return all(c.status != "fail" for c in self.checks if c.name in SMOKE_NEEDS)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], "smoke": self.smoke, "facts": self.facts}


def _fields(path: Path, separator: str) -> dict[str, str]:
    """The ``KEY<separator>VALUE`` lines of a text file (/etc/os-release, /proc/self/status, /proc/meminfo), values
    stripped, the last of a key kept; {} when it cannot be read."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(separator) for line in lines)}


def python_allowed(requires: str, python: tuple[int, int]) -> bool:
    """Whether ``python`` meets a ``Requires-Python`` (``>=3.12``, ``>=3.12,<3.15``, ...) of package metadata."""
    try:
        return SpecifierSet(requires).contains(f"{python[0]}.{python[1]}")
    except InvalidSpecifier:  # metadata no pip could read: it decides nothing
        return True


def _os_python(os_release: Path, python: tuple[int, int], requires: str | None = None) -> list[Check]:
    py = f"Python {python[0]}.{python[1]}"
    if requires:  # the installed torch-neuronx says which Pythons it supports: that decides, not a table
        python_check = (
            Check("python", "ok", f"{py} (the installed torch-neuronx requires {requires})")
            if python_allowed(requires, python)
            else Check("python", "fail", f"{py}: the installed torch-neuronx requires Python {requires}",
                       "use the Neuron DLAMI's environment or a virtual environment of a supported Python")
        )  # fmt: skip
    else:
        python_check = (
            Check("python", "ok", py)
            if python in TORCHNEURON_PYTHONS
            else Check("python", "fail", f"{py}: TorchNeuron 2.33 is built for Python 3.12-3.14",
                       "use the Neuron DLAMI's environment or a Python 3.12+ virtual environment")
        )  # fmt: skip
    fields = {key: value.strip('"') for key, value in _fields(os_release, "=").items()}
    name = f"{fields.get('NAME', platform.system())} {fields.get('VERSION_ID', '')}".strip()
    supported = fields.get("ID") == "ubuntu" and fields.get("VERSION_ID") in UBUNTU_RELEASES
    osc = (
        Check("os", "ok", name)
        if supported
        else Check("os", "warn", f"{name}: TorchNeuron 2.33 supports Ubuntu 24.04 (DLAMI) and 26.04",
                   "run on the Neuron DLAMI or Ubuntu 26.04")
    )  # fmt: skip
    return [osc, python_check]


def _driver(backend: NeuronBackend) -> list[Check]:
    version = driver_version(backend.sysfs_root)
    devices = visible_devices(backend.dev_root)
    fix = "install the Neuron driver (aws-neuronx-dkms; the Neuron DLAMI has it) on a trn2 instance"
    return [
        Check("driver", "ok", f"Neuron driver {version}")
        if version
        else Check("driver", "fail", f"no Neuron driver ({backend.sysfs_root}/module/neuron/version)", fix),
        Check("devices", "ok", f"{len(devices)} Neuron device(s): " + ", ".join(f"neuron{d}" for d in devices))
        if devices
        else Check("devices", "fail", f"no {backend.dev_root}/neuron* device", fix),
    ]


def _neuron_ls(backend: NeuronBackend, cores: int | None) -> list[Check]:
    inventory = backend.inventory
    if inventory is None:
        fix = "install aws-neuronx-tools (neuron-ls); without it the instance and its cores are unknown"
        return [Check("neuron-ls", "fail", "neuron-ls is missing or its output could not be read", fix)]
    named = inventory.instance_type or constants.TRNCAT_INSTANCE_TYPE
    instance = named or (f"{backend.instance_type} (from its {inventory.device_count} devices)"
                         if backend.instance_type else "instance type not reported")  # fmt: skip
    accelerator = backend.instance.accelerator
    if accelerator != "trainium2":  # a Trainium3 (or Trainium1) host says so: its rows are never Trainium2 rows
        instance += f" ({accelerator.capitalize()})"
    detail = (
        f"{instance}, {inventory.device_count} device(s), {inventory.total_cores} logical cores "
        f"(ids {format_visible_cores(inventory.core_ids)}), LNC={inventory.logical_nc_config or '?'}"
    )
    if inventory.emulated:
        detail += "; EMULATED (trncat's Neuron emulator): its records are refused by trncat validate"
    out = [Check("neuron-ls", "ok", detail)]
    inherited = constants.NEURON_RT_VISIBLE_CORES
    wanted = cores or 1
    try:
        chosen = backend.run_cores(wanted)
    except ConfigError as exc:
        fix = "set NEURON_RT_VISIBLE_CORES to a range of this instance's cores that holds the run"
        out.append(Check("cores", "fail", str(exc), fix))
        return out
    owned = f"NEURON_RT_VISIBLE_CORES={inherited}" if inherited else "all cores (no NEURON_RT_VISIBLE_CORES)"
    busy = set(inventory.busy_core_ids) & set(chosen)
    if busy:
        out.append(Check("cores", "warn", f"{owned}; cores {sorted(busy)} are held by another process",
                         "wait for it, or stop it (neuron-ls lists it)"))  # fmt: skip
    else:
        out.append(Check("cores", "ok", f"{owned}; a {wanted}-core run uses {format_visible_cores(chosen)}"))
    return out


def _packages(backend: NeuronBackend, toolchain: Mapping[str, str]) -> list[Check]:
    out = []
    for dist, key in TOOLCHAIN_PACKAGES.items():
        have = backend.package_version(dist)
        want = toolchain.get(key)
        index = f" --extra-index-url {NEURON_INDEX_URL} --extra-index-url {TORCH_CPU_INDEX_URL}"
        if have is None:
            out.append(Check(dist, "fail", "not installed", f"pip install {dist}=={want}{index}" if want else None))
        elif want and not version_matches(have, want):
            fix = "install runners/toolchain.yaml's version, or the queue re-runs what was measured with it"
            out.append(Check(dist, "fail", f"{have}, but runners/toolchain.yaml pins {want}", fix))
        else:
            out.append(Check(dist, "ok", have))
    return out


def _apt(apt: Mapping[str, str], dpkg: Callable[[str], str | None]) -> list[Check]:
    """One check per Debian package pinned in the toolchain file's ``apt:`` (docs/neuron-facts.md, "runtime
    package"): installed at its pin, another version, or missing."""
    out = []
    for package, pin in apt.items():
        have = dpkg(package)
        fix = f"apt-get install {package}={pin} (runners/setup-runner.sh --neuron-apt installs every pin)"
        if have is None:
            out.append(Check(package, "fail", f"not installed; runners/toolchain.yaml pins {pin}", fix))
        elif not (have.startswith(pin[:-1]) if pin.endswith("*") else have == pin):  # apt's NAME=PIN: * a prefix
            out.append(Check(package, "fail", f"{have}, but runners/toolchain.yaml pins {pin}", fix))
        else:
            out.append(Check(package, "ok", have))
    return out


def _pin_summary(checks: list[Check], pinned: Iterable[str]) -> Check:
    """The ``toolchain`` line: ok, or every pinned package whose installed version differs from its pin (its rows
    would not be the pinned toolchain's), by name."""
    names = set(pinned)
    differ = [c for c in checks if c.name in names and c.status == "fail"]
    if not differ:
        return Check("toolchain", "ok", "every pinned package is installed at runners/toolchain.yaml's version")
    listed = "; ".join(f"{c.name} {c.detail.split(', but', 1)[0].split(';', 1)[0]}" for c in differ)
    return Check(
        "toolchain",
        "fail",
        f"the installed toolchain differs from the pin in {len(differ)} package(s): {listed}",
        "install the pinned versions (runners/setup-runner.sh), or its rows are not the pinned toolchain's",
    )


def version_matches(installed: str, pin: str) -> bool:
    """Whether an installed version is the pinned one: equal once a local ``+build`` label is dropped, or the pin
    followed by more components (a torch-neuronx wheel of the ``2.14.3.0.*`` family; the pin is a prefix)."""
    public = installed.split("+", 1)[0]
    return public == pin or public.startswith(pin + ".")


def _container(status: Path = Path("/proc/self/status")) -> tuple[Check, dict[str, Any]]:
    """The process's capabilities and memlock limit, as AWS's Trainium container examples grant them (SYS_ADMIN,
    IPC_LOCK, unlimited memlock): the docs do not say why the runtime needs them, so this informs, never fails."""
    caps: dict[str, bool | None] = dict.fromkeys(CAPABILITIES)
    with contextlib.suppress(KeyError, ValueError):
        bits = int(_fields(status, ":")["CapEff"], 16)
        caps = {name: bool(bits >> bit & 1) for name, bit in CAPABILITIES.items()}
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    memlock = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft} bytes"
    in_container = Path("/.dockerenv").exists() or bool(os.environ.get("container"))
    shown = ", ".join(f"{name} {'yes' if v else 'no' if v is not None else '?'}" for name, v in caps.items())
    detail = f"{'in a container; ' if in_container else ''}capabilities {shown}; memlock {memlock}"
    facts = {"in_container": in_container, "capabilities": caps, "memlock": memlock}
    return Check("container", "ok", detail), facts


def _sysfs(backend: NeuronBackend) -> tuple[Check, dict[str, Any]]:
    layout = sysfs_memory_layout(backend.sysfs_root)
    if layout["layout"] == "pre-2.31":
        detail = "device memory counters at the pre-2.31 paths (stats/memory_usage/device_mem)"
    elif layout["layout"] == "moved":
        detail = (f"no pre-2.31 device memory counters (driver 2.31 moved them): peaks come from the allocator; "
                  f"first core's stats: {', '.join(layout['first_core_stats']) or 'none'}")  # fmt: skip
    else:
        detail = "no Neuron device in sysfs"
    return Check("sysfs", "ok", detail), layout


def _gib(size: int) -> str:
    """Bytes in GiB, rounded down to a tenth, so a figure under a threshold never prints as the threshold."""
    return f"{size * 10 // 1024**3 / 10:.1f} GiB"


def _space(name: str, path: Path, minimum: int, *, disk_free: Callable[[Path], int]) -> Check:
    """Whether ``path`` is writable (made when missing) with at least ``minimum`` bytes free."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as exc:
        return Check(name, "fail", f"{path} is not writable: {exc.strerror or exc}", "point it at a writable directory")
    free = disk_free(path)  # made above: on the file system its parent is on
    detail = f"{path}: {_gib(free)} free"
    if free < minimum:
        return Check(name, "warn", detail, f"free at least {minimum >> 30} GiB")
    return Check(name, "ok", detail)


def host_memory(meminfo: Path) -> int:
    """The host's memory in bytes: ``MemTotal`` of /proc/meminfo (under ``TRNCAT_SYSTEM_ROOT``), else psutil's."""
    import psutil

    with contextlib.suppress(KeyError, ValueError, IndexError):
        return int(_fields(meminfo, ":")["MemTotal"].split()[0]) * 1024  # kB
    return int(psutil.virtual_memory().total)


def _host(total_memory: int, disk_free: Callable[[Path], int]) -> list[Check]:
    # TorchNeuron's default cache is in the machine's /tmp (under TRNCAT_SYSTEM_ROOT).
    neff = Path(constants.TORCH_NEURONX_NEFF_CACHE_DIR or constants.TRNCAT_SYSTEM_ROOT / DEFAULT_NEFF_CACHE_DIR[1:])
    memory = (
        Check("memory", "ok", f"{_gib(total_memory)} host memory")
        if total_memory >= MIN_HOST_MEMORY_BYTES
        else Check("memory", "warn", f"{_gib(total_memory)} host memory: large compiles need more",
                   "use a larger instance")
    )  # fmt: skip
    return [
        _space("neff-cache", neff, MIN_CACHE_FREE_BYTES, disk_free=disk_free),
        _space("disk", Path(tempfile.gettempdir()), MIN_DISK_FREE_BYTES, disk_free=disk_free),
        memory,
    ]


def _hub(hub: Any) -> Check:
    # The token itself is never printed; only whose it is.
    try:
        user = hub.whoami() if hub.token else None
        if user is None:
            hub.list_models(task="text-generation", sort="downloads", limit=1)
    except PipelineError as exc:
        return Check("hub", "warn", f"{hub.endpoint}: {exc}", "check the network, or HF_ENDPOINT / HF_TOKEN")
    return Check("hub", "ok", f"{hub.endpoint} reachable, token of {user}" if user else f"{hub.endpoint} reachable")


def run_checks(
    backend: NeuronBackend,
    *,
    toolchain: Mapping[str, str],
    cores: int | None = None,
    hub: Any = None,
    os_release: Path | None = None,
    total_memory: Callable[[], int] | None = None,
    python: tuple[int, int] | None = None,
    disk_free: Callable[[Path], int] | None = None,
    apt: Mapping[str, str] | None = None,
    dpkg: Callable[[str], str | None] = dpkg_version,
) -> Report:
    """Every check of ``trncat doctor`` (no smoke run).

    Args:
        backend: The neuron backend (its device, sysfs and neuron-ls sources; tests give recorded ones).
        toolchain: runners/toolchain.yaml's pins.
        cores: The cores a run will need (checked against the runner's core set); 1 when None.
        hub: A Hub client to check reachability with, or None to skip that check.
        os_release: The os-release file (``/etc/os-release`` under ``TRNCAT_SYSTEM_ROOT`` by default).
        total_memory: Host memory in bytes (psutil by default).
        python: The (major, minor) Python version to judge (this interpreter's by default).
        disk_free: Free bytes on the filesystem holding a path (``shutil.disk_usage`` by default).
        apt: runners/toolchain.yaml's ``apt:`` pins (Debian package -> version), checked with ``dpkg``.
        dpkg: Debian package -> its installed upstream version, or None (``dpkg-query`` by default).
    """

    memory = total_memory() if total_memory else host_memory(constants.TRNCAT_SYSTEM_ROOT / "proc" / "meminfo")
    version = python or (sys.version_info[0], sys.version_info[1])
    container, capabilities = _container()
    sysfs, layout = _sysfs(backend)
    pinned = [*_packages(backend, toolchain), *_apt(apt or {}, dpkg)]
    checks = [
        *_os_python(os_release or constants.TRNCAT_SYSTEM_ROOT / "etc" / "os-release", version,
                    backend.requires_python("torch-neuronx")),
        *_driver(backend),
        *_neuron_ls(backend, cores),
        *pinned,
        _pin_summary(pinned, [*TOOLCHAIN_PACKAGES, *(apt or {})]),
        container,
        sysfs,
    ]  # fmt: skip
    checks.extend(_host(memory, disk_free or (lambda path: shutil.disk_usage(path).free)))
    if hub is not None:
        checks.append(_hub(hub))
    facts = {
        "neuron_ls": inventory_json(backend.inventory),
        "packages": {dist: backend.package_version(dist) for dist in ("torch-neuronx", "neuronx-cc", "nki", "torch")},
        "container": capabilities,
        "sysfs": layout,
    }
    return Report(checks=checks, facts=facts)
