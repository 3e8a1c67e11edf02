"""An emulated trn2 (or trn3) machine on disk: what the Neuron driver, tools and packages would put on a real one.

:func:`build` writes one folder (the *root*) that child processes are pointed at with :func:`environment`:

- ``machine.json``: the machine's description (:class:`Machine`), read by the emulated runtime and tools;
- ``dev/neuron<N>``, ``sys/devices/virtual/neuron_device/...`` (the pre-2.31 or a moved layout),
  ``sys/module/neuron/version``, ``etc/os-release`` (Ubuntu 26.04), ``proc/meminfo`` (the instance's host
  memory): what production reads under ``TRNCAT_SYSTEM_ROOT``;
- ``bin/neuron-ls`` (2.33 or 2.34 flags) and ``bin/dpkg-query`` (the Neuron Debian packages), on ``PATH``;
- ``site/``: an emulated ``torch_neuronx`` package with dist-info (its version, and the ``torch.backends``
  entry point that makes ``import torch`` load it, as TorchNeuron does), and the metadata of ``neuronx-cc`` and
  ``nki``, on ``PYTHONPATH``, and a ``sitecustomize`` that makes ``shutil.disk_usage`` report the machine's disk
  (:attr:`Machine.disk_free`), so a check of free space judges the emulated machine, not the host the tests run on;
- ``run/``: the runtime's per-core reservation locks; ``tmp/``: the emulated ``/tmp`` (NEFF cache default,
  compile locks, out-of-memory tables);
- ``toolchain.yaml``: ``runners/toolchain.yaml`` with the Neuron 2.33 build for this machine's torch (2.13), which
  ``TRNCAT_TOOLCHAIN`` points doctor and the queue at.

Everything it writes says it is emulated (the neuron-ls JSON carries ``"emulator"``), so a record made under
it is marked ``hardware.emulated`` and refused by ``trncat validate`` (docs/methodology.md).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline.constants import REPO_ROOT

GiB = 1024**3

#: The emulator's name, in every file and output that could be mistaken for a real machine's.
EMULATOR = "trncat Neuron emulator (not a Trainium device)"
#: Devices (chips) of each instance type the emulator plays (AWS: trn2.3xlarge 1, trn2.48xlarge 16).
INSTANCES: dict[str, int] = {"trn2.3xlarge": 1, "trn2.48xlarge": 16, "trn2u.48xlarge": 16, "trn3.48xlarge": 16}
#: HBM per device of each family the emulator plays: Trainium2's 96 GiB, Trainium3's 144 GiB (both in four HBM
#: stacks, one per pair of physical cores: docs/neuron-facts.md, "trn2 cores" and "trn3 cores").
HBM_PER_DEVICE: dict[str, int] = {"trn2": 96 * GiB, "trn3": 144 * GiB}
#: Host memory of each, in GiB, for the machine's /proc/meminfo: trn2.48xlarge's 2,048 GiB is AWS's (the Trn2
#: architecture page); the trn2.3xlarge figure is the emulator's (the docs read here do not give one).
HOST_MEMORY_GIB: dict[str, int] = {"trn2.3xlarge": 128, "trn2.48xlarge": 2048, "trn2u.48xlarge": 2048,
                                   "trn3.48xlarge": 2048}  # fmt: skip
# (trn3.48xlarge: the emulator's, the Gen1 UltraServer's 8,192 GiB over its four servers; AWS prints no figure.)
#: The packages of Neuron 2.33 for torch 2.13, the torch this machine has (docs/neuron-facts.md, versions).
PACKAGES: dict[str, str] = {"torch-neuronx": "2.13.3.0", "neuronx-cc": "2.28.7631.0", "nki": "0.7.0"}
#: The Debian packages of Neuron 2.33 (the Debian revision is the emulator's: the docs print none).
DEBIANS: dict[str, str] = {
    "aws-neuronx-runtime-lib": "2.35.30.0-emulated",
    "aws-neuronx-collectives": "2.35.43.0-emulated",
    "aws-neuronx-tools": "2.33.38.0-emulated",
    "aws-neuronx-dkms": "2.31.7.0-emulated",
}


@dataclass(frozen=True)
class Machine:
    """What the emulated machine is. Tests build variants with :func:`dataclasses.replace`.

    Attributes:
        instance_type: The EC2 instance type it plays.
        devices: Neuron devices (chips) of the host.
        mapped: The host devices this process sees (a container's ``--device`` list, renumbered from 0); None
            for all of them.
        physical_cores: Physical NeuronCores per device (8 on trn2 and trn3).
        hbm_per_device: HBM bytes per device (96 GiB on trn2, 144 GiB on trn3).
        core_hbm_limit: A smaller per-core HBM limit (tests of the out-of-memory path); None for the real one.
        neuron_ls: Which neuron-ls it plays: ``2.33`` (``--json-output``) or ``2.34`` (``--output-format json``).
        sysfs: ``moved`` (driver 2.31 reorganised the tree, "not backwards compatible") or ``pre-2.31`` (the
            documented tree, of a driver older than 2.31).
        driver: The driver version in ``/sys/module/neuron/version``; it must agree with ``sysfs``.
        packages: Python distributions and their versions.
        fallback_ops: aten ops the emulated TorchNeuron does not implement (they run on the CPU, counted).
        failing_ops: aten ops that fail on the emulated device (then the fallback rule decides).
        compile_seconds: How long an emulated neuronx-cc compile of one graph takes.
        disk_free: Free bytes every file system of the machine reports (``shutil.disk_usage`` in its processes).
    """

    instance_type: str = "trn2.3xlarge"
    devices: int = 1
    mapped: tuple[int, ...] | None = None
    physical_cores: int = 8
    hbm_per_device: int = 96 * GiB
    core_hbm_limit: int | None = None
    neuron_ls: str = "2.33"
    sysfs: str = "moved"
    driver: str = "2.31.7.0"
    packages: dict[str, str] = field(default_factory=lambda: dict(PACKAGES))
    fallback_ops: tuple[str, ...] = ()
    failing_ops: tuple[str, ...] = ()
    compile_seconds: float = 0.05
    disk_free: int = 500 * GiB

    def __post_init__(self) -> None:
        moved = _version(self.driver) >= (2, 31)
        if (self.sysfs == "moved") != moved:
            raise ValueError(f"driver {self.driver} with the {self.sysfs} sysfs tree: driver 2.31 moved the tree")

    @classmethod
    def of(cls, instance_type: str, profile: str = "2.33", **changes: Any) -> Machine:
        """The machine of an instance type (its device count from :data:`INSTANCES`) as one of :data:`PROFILES`."""
        family = instance_type.split(".", 1)[0].rstrip("u")
        base = cls(instance_type=instance_type, devices=INSTANCES[instance_type], hbm_per_device=HBM_PER_DEVICE[family],
                   **PROFILES[profile])  # fmt: skip
        return replace(base, **changes)

    @classmethod
    def load(cls, root: Path) -> Machine:
        """The machine a root was built for."""
        data = json.loads((root / "machine.json").read_text(encoding="utf-8"))
        data.pop("emulator", None)
        for key in ("mapped", "fallback_ops", "failing_ops"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)

    @property
    def visible_devices(self) -> tuple[int, ...]:
        """Host device numbers this process sees, in the order the runtime numbers them."""
        return self.mapped if self.mapped is not None else tuple(range(self.devices))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:2] if p.isdigit())


#: The machines the emulator plays. ``2.33``: Neuron 2.33 as released (driver 2.31.7.0, so the moved sysfs tree).
#: ``2.34``: neuron-ls with Neuron 2.34's flags (``--output-format json``; its JSON's shape is the emulator's:
#: the docs publish no sample); the packages stay 2.33's. ``pre-2.31``: an older driver with the documented sysfs
#: tree: 2.26.5.0, the aws-neuronx-dkms of the recorded trn1 capture (tests/fixtures/neuron/SOURCES.md).
PROFILES: dict[str, dict[str, Any]] = {
    "2.33": {},
    "2.34": {"neuron_ls": "2.34"},
    "pre-2.31": {"sysfs": "pre-2.31", "driver": "2.26.5.0"},
}

_ENTRY_POINTS = "[torch.backends]\ntorch_neuronx = torch_neuronx:_autoload\n"
_SHIM = '''"""The emulated torch_neuronx of trncat's Neuron emulator (tests.support.neuron): NOT AWS's TorchNeuron.

It plays the documented TorchNeuron contract on the CPU for the machine in {root}.
"""

from tests.support.neuron import api as _api
from tests.support.neuron.api import *  # noqa: F403

__version__ = {version!r}
_api.boot({root!r})


def _autoload():
    """torch.backends entry point: PyTorch calls it at `import torch` (TorchNeuron autoloads the same way)."""
'''
_NKI = '"""The emulated nki package of trncat\'s Neuron emulator: metadata only, no kernels."""\n'
_TOOL = """#!{python}
# {what} of trncat's Neuron emulator (tests.support.neuron): NOT AWS's tool.
import sys

sys.path.insert(0, {repo!r})
from tests.support.neuron.tools import {main}

sys.exit({main}({root!r}, sys.argv[1:]))
"""


#: The Pythons the emulated packages run on: the emulator's own, this machine's (AWS builds TorchNeuron 2.33 for
#: 3.12-3.14; its wheels' metadata is what `trncat doctor` reads when a package declares it).
REQUIRES_PYTHON = ">=3.11"


def _dist_info(site: Path, name: str, version: str, *, top_level: str | None, entry_points: str | None) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    metadata = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {EMULATOR}\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
    )
    (folder / "METADATA").write_text(metadata, encoding="utf-8")
    (folder / "INSTALLER").write_text("trncat-neuron-emulator\n", encoding="utf-8")
    if top_level:
        (folder / "top_level.txt").write_text(top_level + "\n", encoding="utf-8")
    if entry_points:
        (folder / "entry_points.txt").write_text(entry_points, encoding="utf-8")


def _sysfs(root: Path, machine: Machine) -> None:
    """The driver's tree: one folder per physical core (pre-2.31) or per logical core with moved counters (where
    they moved is the emulator's: the docs read here do not give the new paths). sysfs is not a container's own:
    it lists every device of the host."""
    base = root / "sys" / "devices" / "virtual" / "neuron_device"
    for device in range(machine.devices):
        if machine.sysfs == "pre-2.31":
            cores, counters = machine.physical_cores, Path("stats/memory_usage/device_mem")
        else:
            cores, counters = machine.physical_cores // 2, Path("stats/memory/device_mem")
        for core in range(cores):
            mem = base / f"neuron{device}" / f"neuron_core{core}" / counters
            for category in ("", "tensors", "model_code", "model_shared_scratchpad", "runtime_memory"):
                folder = mem / category if category else mem
                folder.mkdir(parents=True, exist_ok=True)
                for name in ("total", "present", "peak"):
                    (folder / name).write_text("0\n", encoding="utf-8")
    (root / "sys" / "module" / "neuron").mkdir(parents=True)
    (root / "sys" / "module" / "neuron" / "version").write_text(machine.driver + "\n", encoding="utf-8")


def _toolchain(root: Path, machine: Machine) -> None:
    """The pins the emulated runner is checked against: runners/toolchain.yaml with the Neuron 2.33 build for the
    torch this machine has (torch-neuronx 2.13.3.0 for torch 2.13), as a runner on that build would pin them."""
    import importlib.metadata

    import yaml

    pins = yaml.safe_load((REPO_ROOT / "runners" / "toolchain.yaml").read_text(encoding="utf-8"))
    pins |= {dist.replace("-", "_"): machine.packages[dist] for dist in ("torch-neuronx", "neuronx-cc", "nki")}
    pins["torch"] = importlib.metadata.version("torch").split("+", 1)[0]
    (root / "toolchain.yaml").write_text(f"# {EMULATOR}\n" + yaml.safe_dump(pins, sort_keys=False), encoding="utf-8")


def build(root: Path, machine: Machine | None = None) -> Path:
    """Write an emulated machine into ``root`` (created; it must not exist yet) and return it."""
    machine = machine or Machine()
    root.mkdir(parents=True)
    root = root.resolve()
    (root / "machine.json").write_text(json.dumps({"emulator": EMULATOR, **asdict(machine)}, indent=1))
    for name in ("run", "tmp", "dev", "etc", "bin", "proc"):
        (root / name).mkdir()
    for number in machine.visible_devices:  # a container keeps the host's names of the devices it was given
        (root / "dev" / f"neuron{number}").touch()
    _sysfs(root, machine)
    memory_kb = HOST_MEMORY_GIB.get(machine.instance_type, 128) * 1024**2
    (root / "proc" / "meminfo").write_text(f"MemTotal:       {memory_kb} kB\n", encoding="utf-8")
    os_release = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="26.04"\nPRETTY_NAME="Ubuntu 26.04 (emulated)"\n'
    (root / "etc" / "os-release").write_text(os_release, encoding="utf-8")
    tools = (("neuron-ls", "neuron_ls_main", "neuron-ls"),
             ("dpkg-query", "dpkg_query_main", "dpkg-query for the Neuron packages"))  # fmt: skip
    for tool, main, what in tools:
        script = root / "bin" / tool
        script.write_text(
            _TOOL.format(python=sys.executable, what=what, repo=str(REPO_ROOT), main=main, root=str(root))
        )
        script.chmod(0o755)
    _toolchain(root, machine)
    site = root / "site"
    (site / "torch_neuronx").mkdir(parents=True)
    version = machine.packages["torch-neuronx"]
    (site / "torch_neuronx" / "__init__.py").write_text(_SHIM.format(root=str(root), version=version))
    _dist_info(site, "torch-neuronx", version, top_level="torch_neuronx", entry_points=_ENTRY_POINTS)
    _dist_info(site, "neuronx-cc", machine.packages["neuronx-cc"], top_level=None, entry_points=None)
    (site / "nki").mkdir()
    (site / "nki" / "__init__.py").write_text(_NKI)
    _dist_info(site, "nki", machine.packages["nki"], top_level="nki", entry_points=None)
    (site / "sitecustomize.py").write_text(_DISK.format(free=machine.disk_free))
    return root


#: The emulated machine's disks: every path reports the machine's free bytes (and a total of at least that much).
_DISK = """\
\"\"\"trncat Neuron emulator: the emulated machine's disks (not the host's).\"\"\"
import shutil

_host_disk_usage = shutil.disk_usage


def _disk_usage(path):
    host = _host_disk_usage(path)
    total = max(host.total, {free})
    return type(host)(total, total - {free}, {free})


shutil.disk_usage = _disk_usage
"""


def environment(root: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a process runs in on the emulated machine: its tools on PATH, its packages and this
    checkout on PYTHONPATH, and production's one setting for the system's fixed paths (``TRNCAT_SYSTEM_ROOT``)."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join([str(root / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")])
    paths = [str(root / "site"), str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TRNCAT_SYSTEM_ROOT"] = str(root)
    env["TRNCAT_TOOLCHAIN"] = str(root / "toolchain.yaml")
    for name in ("NEURON_RT_VISIBLE_CORES", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_NEFF_CACHE_DIR",
                 "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "TRNCAT_INSTANCE_TYPE", "TRNCAT_NEURON_CORES",
                 "NEURON_CC_FLAGS"):  # fmt: skip
        env.pop(name, None)  # the machine's own defaults, not the caller's
    return env
