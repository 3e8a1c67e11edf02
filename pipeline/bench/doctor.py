"""``trncat doctor``: is this machine ready to benchmark on Neuron? One check a line, each with its fix.

The checks read what the Neuron backend reads (package metadata, ``/dev/neuron*``, sysfs, ``neuron-ls``), never
import torch_neuronx, and never print a token. ``smoke`` then runs a tiny model built here (no download)
through the real harness on one core and on two (tensor parallel), and reports both records.
Every Neuron fact a check relies on is in docs/neuron-facts.md.
"""

from __future__ import annotations

import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipeline import constants
from pipeline.backends.neuron import (
    DEFAULT_NEFF_CACHE_DIR,
    NEURON_INDEX_URL,
    TORCH_CPU_INDEX_URL,
    NeuronBackend,
    choose_cores,
    driver_version,
    format_visible_cores,
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
TOOLCHAIN_PACKAGES = {"torch": "torch", "torch-neuronx": "torch_neuronx", "neuronx-cc": "neuronx_cc",
                      "transformers": "transformers", "sentence-transformers": "sentence_transformers",
                      "diffusers": "diffusers"}  # fmt: skip


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


@dataclass
class Report:
    """Every check, and the smoke runs' summaries when asked for."""

    checks: list[Check] = field(default_factory=list)
    smoke: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        smoke_ok = self.smoke is None or all(run["status"] == "pass" for run in self.smoke)
        return all(c.status == "ok" for c in self.checks) and smoke_ok

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], "smoke": self.smoke}


def _os_python(os_release: Path, python: tuple[int, int]) -> list[Check]:
    version = python
    py = f"Python {version[0]}.{version[1]}"
    python_check = (
        Check("python", "ok", py)
        if version in TORCHNEURON_PYTHONS
        else Check("python", "fail", f"{py}: TorchNeuron 2.33 is built for Python 3.12-3.14",
                   "use the Neuron DLAMI's environment or a Python 3.12+ virtual environment")
    )  # fmt: skip
    fields: dict[str, str] = {}
    try:
        for line in os_release.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            fields[key] = value.strip().strip('"')
    except OSError:
        pass
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
    out = [
        Check("driver", "ok", f"Neuron driver {version}")
        if version
        else Check("driver", "fail", f"no Neuron driver ({backend.sysfs_root}/module/neuron/version)", fix),
        Check("devices", "ok", f"{len(devices)} Neuron device(s): " + ", ".join(f"neuron{d}" for d in devices))
        if devices
        else Check("devices", "fail", f"no {backend.dev_root}/neuron* device", fix),
    ]
    return out


def _neuron_ls(backend: NeuronBackend, cores: int | None) -> list[Check]:
    inventory = backend.inventory
    if inventory is None:
        fix = "install aws-neuronx-tools (neuron-ls); without it the instance and its cores are unknown"
        return [Check("neuron-ls", "fail", "neuron-ls is missing or its output could not be read", fix)]
    detail = (
        f"{inventory.instance_type or 'instance type not reported'}, {inventory.device_count} device(s), "
        f"{inventory.total_cores} logical cores, LNC={inventory.logical_nc_config or '?'}"
    )
    out = [Check("neuron-ls", "ok", detail)]
    inherited = constants.NEURON_RT_VISIBLE_CORES
    wanted = cores or 1
    try:
        chosen = choose_cores(cores=wanted, inherited=inherited, total_cores=inventory.total_cores)
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
        elif want and have.split("+", 1)[0] != want:
            fix = "install runners/toolchain.yaml's version, or the queue re-runs what was measured with it"
            out.append(Check(dist, "fail", f"{have}, but runners/toolchain.yaml pins {want}", fix))
        else:
            out.append(Check(dist, "ok", have))
    return out


def _gib(size: int) -> str:
    """Bytes in GiB, rounded down to a tenth, so a figure under a threshold never prints as the threshold."""
    return f"{size * 10 // 1024**3 / 10:.1f} GiB"


def _space(name: str, path: Path, minimum: int, *, writable: bool, disk_free: Callable[[Path], int]) -> Check:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if writable:
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path):
                pass
        except OSError as exc:
            return Check(
                name, "fail", f"{path} is not writable: {exc.strerror or exc}", "point it at a writable directory"
            )
    free = disk_free(probe)
    detail = f"{path}: {_gib(free)} free"
    if free < minimum:
        return Check(name, "warn", detail, f"free at least {minimum >> 30} GiB")
    return Check(name, "ok", detail)


def _host(total_memory: int, disk_free: Callable[[Path], int]) -> list[Check]:
    neff = Path(constants.TORCH_NEURONX_NEFF_CACHE_DIR or DEFAULT_NEFF_CACHE_DIR)
    memory = (
        Check("memory", "ok", f"{_gib(total_memory)} host memory")
        if total_memory >= MIN_HOST_MEMORY_BYTES
        else Check("memory", "warn", f"{_gib(total_memory)} host memory: large compiles need more",
                   "use a larger instance")
    )  # fmt: skip
    return [
        _space("neff-cache", neff, MIN_CACHE_FREE_BYTES, writable=True, disk_free=disk_free),
        _space("disk", Path(tempfile.gettempdir()), MIN_DISK_FREE_BYTES, writable=True, disk_free=disk_free),
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
    os_release: Path = Path("/etc/os-release"),
    total_memory: Callable[[], int] | None = None,
    python: tuple[int, int] | None = None,
    disk_free: Callable[[Path], int] | None = None,
) -> Report:
    """Every check of ``trncat doctor`` (no smoke run).

    Args:
        backend: The neuron backend (its device, sysfs and neuron-ls sources; tests give recorded ones).
        toolchain: runners/toolchain.yaml's pins.
        cores: The cores a run will need (checked against the runner's core set); 1 when None.
        hub: A Hub client to check reachability with, or None to skip that check.
        os_release: The os-release file.
        total_memory: Host memory in bytes (psutil by default).
        python: The (major, minor) Python version to judge (this interpreter's by default).
        disk_free: Free bytes on the filesystem holding a path (``shutil.disk_usage`` by default).
    """
    import psutil

    memory = total_memory() if total_memory else int(psutil.virtual_memory().total)
    version = python or (sys.version_info[0], sys.version_info[1])
    checks = [
        *_os_python(os_release, version),
        *_driver(backend),
        *_neuron_ls(backend, cores),
        *_packages(backend, toolchain),
    ]
    checks.extend(_host(memory, disk_free or (lambda path: shutil.disk_usage(path).free)))
    if hub is not None:
        checks.append(_hub(hub))
    return Report(checks=checks)


def smoke(backend: Any, *, work: Path, child_runner: Any = None, timeout_s: float = 1800.0) -> list[dict[str, Any]]:
    """A tiny Llama built here (no download), benchmarked on 1 core and on 2 (tensor parallel).

    Returns:
        One summary per run: cores, status, failure, compile_s, warm_start_s, cpu_fallback_ops, agreement.
    """
    from pipeline.bench import harness
    from pipeline.bench.spec import BenchSpec
    from pipeline.models import resolve_local
    from pipeline.testing import build_tiny_llama
    from pipeline.workload import Workload

    folder = build_tiny_llama(work / "tiny-llama")
    model = resolve_local(folder)
    workload = Workload(batch_size=1, input_tokens=16, output_tokens=8)
    runs = []
    for cores in (1, 2):
        spec = BenchSpec(path=str(folder), task="text-generation", device=backend.name, dtype="bfloat16",
                         cores=cores, workload=workload, warmup=1, iterations=2)  # fmt: skip
        options: dict[str, Any] = {"timeout_s": timeout_s, "source": "local"}
        if child_runner is not None:
            options["child_runner"] = child_runner
        record = harness.bench_once(spec, model, backend=backend, **options)
        m = record["metrics"]
        runs.append(
            {
                "cores": cores,
                "status": record["status"],
                "failure": record["failure"],
                "compile_s": m.get("compile_s"),
                "warm_start_s": m.get("warm_start_s"),
                "cpu_fallback_ops": m.get("cpu_fallback_ops"),
                "agreement": (record.get("agreement") or {}).get("logits_cosine"),
                "notes": record.get("notes", []),
            }
        )
    return runs


def smoke_line(run: Mapping[str, Any]) -> str:
    """One line for a smoke run: verdict, compile and fallback figures."""
    failure = run["failure"]
    verdict = run["status"] if not failure else f"{run['status']} ({failure['stage']}/{failure['code']})"
    fallback = run["cpu_fallback_ops"]
    fell = "not observable" if fallback is None else (", ".join(f"{o['op']}x{o['count']}" for o in fallback) or "none")

    def seconds(value: Any) -> str:
        return "-" if value is None else f"{value:.1f} s"

    return (
        f"smoke {run['cores']} core(s): {verdict}; compile {seconds(run['compile_s'])}, warm start "
        f"{seconds(run['warm_start_s'])}; CPU fallback: {fell}; logits cosine {run['agreement']}"
    )
