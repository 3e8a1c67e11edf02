"""Neuron backend: TorchNeuron (torch-neuronx 2.14), the native PyTorch device ``"neuron"`` on Trainium2 (and
Trainium3, whose records name it in ``hardware.accelerator``).

The model runs transformers' own code on device ``neuron``; ``generate()`` compiles its forward with
``torch.compile(backend="neuron")`` over a static KV cache (``dynamic=False``), the prompt through chunked
prefill where the task allows it, and a compile error fails the run (no eager fallback). More than one core:
the child runs under torchrun, one process per logical NeuronCore: each rank reserves only its own core of the
run's set, starts the ``neuron`` process group, then loads with ``tp_plan="auto"``.

Parent-side methods never import torch or torch_neuronx: they read package metadata, sysfs and neuron-ls (run
with a timeout). Instance figures come from :mod:`pipeline.hardware`; the machine's fixed paths are read under
``TRNCAT_SYSTEM_ROOT``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import logging
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pipeline import constants, hardware
from pipeline.backends.base import Backend, CompiledRun, package_version
from pipeline.backends.neuron import bundle as neuron_bundle
from pipeline.backends.neuron import cachekey as neuron_cachekey
from pipeline.backends.neuron import launch as neuron_launch
from pipeline.backends.neuron import measure
from pipeline.backends.neuron import tools as neuron_tools
from pipeline.backends.neuron.child_side import NeuronChildSide
from pipeline.errors import BackendUnavailableError, BenchError, BundleError, ConfigError

logger = logging.getLogger(__name__)

#: Trainium2 defaults (DESIGN.md) when neither neuron-ls nor the environment tell the instance type.
DEFAULT_FAMILY_INSTANCE = "trn2.3xlarge"
#: The instance whose per-chip figures stand for a family's host when neither neuron-ls nor the environment name it.
FAMILY_INSTANCE = {"trn2": DEFAULT_FAMILY_INSTANCE, "trn3": "trn3.48xlarge", "trn1": "trn1.2xlarge"}
NEURON_LS_TIMEOUT_S = 30.0
#: neuron-ls's JSON flags, newest first: Neuron 2.34 replaces --json-output with --output-format json.
NEURON_LS_JSON_FLAGS: tuple[tuple[str, ...], ...] = (("--output-format", "json"), ("--json-output",))
#: AWS's pip repository of the Neuron packages (torch-neuronx, neuronx-cc) (docs/neuron-facts.md).
NEURON_INDEX_URL = "https://pip.repos.neuron.amazonaws.com"
#: PyTorch's CPU wheel index, which the TorchNeuron install adds for torch itself (docs/neuron-facts.md).
TORCH_CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"
#: The OS the 2.33 standalone wheels support, and the one they do not (docs/neuron-facts.md, "Python and OS").
FRESH_VENV_WHERE = "on Ubuntu 26.04 (the 2.33 wheels), in a fresh virtual environment (on 24.04 use the DLAMI)"


def dlami_venv(torch_neuronx: str | None) -> str | None:
    """The Neuron DLAMI's virtual environment for a torch-neuronx release, or None for an unknown version.

    The 2.33 DLAMI ("Deep Learning AMI Neuron torch-neuronx 2.14.0") keeps the stack in
    ``/opt/aws_neuronx_venv_torch_neuronx_2_14_0`` (docs/neuron-facts.md); other releases are assumed to follow
    the same pattern of major and minor version, which the docs do not state.
    """
    parts = (torch_neuronx or "").split("+")[0].split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return f"/opt/aws_neuronx_venv_torch_neuronx_{parts[0]}_{parts[1]}_0"


def run_neuron_ls(timeout_s: float = NEURON_LS_TIMEOUT_S) -> str | None:
    """neuron-ls's JSON: ``--output-format json`` (2.34 and later) first, ``--json-output`` (2.33) as the fallback;
    None when the tool is missing, hangs, or neither flag gives JSON."""
    for flags in NEURON_LS_JSON_FLAGS:
        try:
            done = subprocess.run(["neuron-ls", *flags], capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.warning("neuron-ls failed: %s", exc)
            return None
        text = done.stdout.strip()
        if done.returncode == 0 and text[:1] in ("[", "{"):
            return text
        logger.debug("neuron-ls %s gave no JSON (exit %d): %s", " ".join(flags), done.returncode, done.stderr[:200])
    logger.warning("neuron-ls gave no JSON output with %s", " or ".join(" ".join(f) for f in NEURON_LS_JSON_FLAGS))
    return None


def dpkg_version(package: str, timeout_s: float = 10.0) -> str | None:
    """Upstream version of a Debian package (the Neuron runtime ships as ``aws-neuronx-runtime-lib``), or None."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = done.stdout.strip() if done.returncode == 0 else ""
    # "2.35.30.0-abc123": the Debian revision is the packager's, not the runtime's version.
    return version.split(":", 1)[-1].rsplit("-", 1)[0] or None


class NeuronBackend(NeuronChildSide, Backend):
    """TorchNeuron on Trainium2. Constructor arguments exist for tests (fake sysfs, recorded neuron-ls)."""

    name: ClassVar[str] = "neuron"
    compile_backend: ClassVar[str | None] = "neuron"
    compile_by_default: ClassVar[bool] = True
    compiles_prefill: ClassVar[bool] = True
    # TorchNeuron supports only the default torch.compile mode (others warn and are ignored).
    compile_mode: ClassVar[str | None] = "default"
    shards_over_cores: ClassVar[bool] = True
    has_compile_cache: ClassVar[bool] = True
    cpu_fallback: ClassVar[bool] = True
    toolchain_packages: ClassVar[tuple[tuple[str, str], ...]] = (
        ("neuronx-cc", "neuronx_cc"),
        ("torch-neuronx", "torch_neuronx"),
        ("transformers", "transformers"),
    )

    def __init__(
        self,
        *,
        dev_root: Path | None = None,
        sysfs_root: Path | None = None,
        neuron_ls: Callable[[], str | None] = run_neuron_ls,
        find_spec: Callable[[str], Any] = importlib.util.find_spec,
        packages: Callable[[str], str | None] = package_version,
    ) -> None:
        self.dev_root = dev_root or constants.TRNCAT_SYSTEM_ROOT / "dev"
        self.sysfs_root = sysfs_root or constants.TRNCAT_SYSTEM_ROOT / "sys"
        self._neuron_ls = neuron_ls
        self._find_spec = find_spec
        #: Installed version of a distribution (``torch-neuronx``), from package metadata (a test's recorded ones).
        self.package_version = packages
        self._before: dict[int, neuron_tools.CoreMemory] = {}
        self._cleared = False
        self._notes: list[str] = []

    @classmethod
    def requirement_lines(cls, versions: Mapping[str, Any]) -> list[str]:
        # The documented install: the Neuron packages from AWS's pip repository (nki with them), torch (and
        # torchvision) from PyTorch's CPU wheel index (PyPI's torch is the CUDA build), the versions the runner had.
        nki = versions.get("nki")
        return [
            f"--extra-index-url {NEURON_INDEX_URL}",
            f"--extra-index-url {TORCH_CPU_INDEX_URL}",
            f"torch-neuronx=={versions['torch_neuronx']}",
            f"neuronx-cc=={versions['neuronx_cc']}",
            f"nki=={nki}" if nki else "nki",
        ]

    @classmethod
    def install_commands(cls, versions: Mapping[str, Any]) -> list[tuple[str, str]]:
        commands = [(FRESH_VENV_WHERE, command) for _, command in super().install_commands(versions)]
        venv = dlami_venv(versions.get("torch_neuronx"))
        if venv:
            dlami = f"on the Neuron DLAMI (the stack is in {venv})"
            commands.insert(0, (dlami, f"source {venv}/bin/activate && pip install -r requirements.txt"))
        return commands

    # -- parent side --------------------------------------------------------------------------------
    def requires_python(self, dist: str) -> str | None:
        """The ``Requires-Python`` an installed distribution declares, or None (not installed, or none declared)."""
        if self.package_version is not package_version:
            return None  # a test's recorded packages carry no metadata
        try:
            return importlib.metadata.metadata(dist)["Requires-Python"] or None
        except importlib.metadata.PackageNotFoundError:
            return None

    def cores_for(self, *, requested: int | None, planned: int | None) -> int:
        # A Neuron run shards over the planned cores unless told otherwise.
        return requested or planned or 1

    def check_available(self) -> None:
        # find_spec, not import: importing torch_neuronx in the parent would start the Neuron runtime.
        if self._find_spec("torch_neuronx") is None:
            raise BackendUnavailableError(
                "the neuron backend needs torch-neuronx (TorchNeuron), which is not installed here; "
                "install it from the Neuron pip repository on a Trainium instance"
            )
        if self.package_version("neuronx-cc") is None:
            raise BackendUnavailableError("the neuron backend needs the Neuron compiler (neuronx-cc), not installed")
        if not any(self.dev_root.glob("neuron[0-9]*")):
            raise BackendUnavailableError(f"no Neuron device ({self.dev_root}/neuron*) on this machine")

    @functools.cached_property
    def inventory(self) -> neuron_tools.NeuronInventory | None:
        """What ``neuron-ls`` reports, or None when it cannot be run or parsed."""
        text = self._neuron_ls()
        if not text:
            return None
        try:
            return neuron_tools.parse_neuron_ls(text)
        except BenchError as exc:
            logger.warning("%s", exc)
            return None

    @property
    def lnc(self) -> int:
        """Logical core config: NEURON_LOGICAL_NC_CONFIG, else what neuron-ls reports, else 2 (trn2's default)."""
        if configured := constants.NEURON_LOGICAL_NC_CONFIG:
            try:
                return int(configured)
            except ValueError:
                raise ConfigError(f"NEURON_LOGICAL_NC_CONFIG must be 1 or 2, got {configured!r}") from None
        return (self.inventory.logical_nc_config if self.inventory else None) or 2

    @property
    def instance_type(self) -> str | None:
        """The instance type: TRNCAT_INSTANCE_TYPE, else neuron-ls's, else the one a full 16-chip host is (the
        2.33 JSON names none); None when unknown (one chip: a trn2.3xlarge or a container given one chip)."""
        inventory = self.inventory
        named = constants.TRNCAT_INSTANCE_TYPE or (inventory.instance_type if inventory else None)
        if named or inventory is None or inventory.device_count != 16:
            return named
        return hardware.instance_for_devices(self.family, inventory.device_count)

    @property
    def family(self) -> str:
        """The accelerator family: the named instance's, else the one whose chip has the HBM neuron-ls reports (144
        GiB: Trainium3; 96 GiB: Trainium2), else trn2 (DESIGN.md's default)."""
        inventory = self.inventory
        named = hardware.family_of(constants.TRNCAT_INSTANCE_TYPE or (inventory.instance_type if inventory else None))
        by_memory = hardware.family_for_device_memory(inventory.memory_per_device_bytes) if inventory else None
        return named or by_memory or "trn2"

    @property
    def instance(self) -> hardware.Instance:
        """The instance's table entry (:attr:`instance_type`, else its family's smallest: a trn2.3xlarge, a
        trn3.48xlarge), whose per-chip figures a container given part of a host shares."""
        name, fallback = self.instance_type, FAMILY_INSTANCE.get(self.family, DEFAULT_FAMILY_INSTANCE)
        try:
            return hardware.get_instance(name or fallback, lnc=self.lnc)
        except ConfigError:
            logger.warning("instance %r is not in pipeline.hardware; using %s figures", name, fallback)
            return hardware.get_instance(fallback, lnc=self.lnc)

    def preflight(self) -> str | None:
        # Without neuron-ls the instance, its cores and its memory are unknown: guessing them would publish a
        # row under the wrong hardware, so the run is an infrastructure error instead.
        if self.inventory is None and not constants.TRNCAT_INSTANCE_TYPE:
            return "neuron-ls is missing or gave no usable output: the instance, its cores and memory are unknown"
        return None

    def run_cores(self, cores: int) -> list[int]:
        """The cores a run of ``cores`` cores reserves (inside the runner's set, from neuron-ls's core ids)."""
        inventory = self.inventory
        return neuron_launch.choose_cores(
            cores=cores,
            inherited=constants.NEURON_RT_VISIBLE_CORES,
            total_cores=inventory.total_cores if inventory else None,
            core_ids=inventory.core_ids if inventory else None,
        )

    def environment(self, *, cores: int, compile_cache: Path | None = None) -> dict[str, str]:
        return neuron_launch.neuron_env(cores=self.run_cores(cores), lnc=self.lnc, cache_dir=compile_cache)

    def versions(self) -> dict[str, str | None]:
        versions = super().versions()
        inventory = self.inventory
        versions.update(
            torch_neuronx=self.package_version("torch-neuronx"),
            neuronx_cc=self.package_version("neuronx-cc"),
            nki=self.package_version("nki"),
            # The library this process loads; neuron-ls's process list may show another runner's process.
            runtime=self.package_version("aws-neuronx-runtime-lib")
            or dpkg_version("aws-neuronx-runtime-lib")
            or (inventory.runtime_version if inventory else None),
            driver=neuron_tools.driver_version(self.sysfs_root),
            # No package carries the SDK release number; the image digest pins it instead.
            sdk=None,
            container_image=constants.TRNCAT_IMAGE_DIGEST,
        )
        return versions

    def hardware(self, *, cores: int) -> dict[str, Any]:
        inventory, instance, instance_type = self.inventory, self.instance, self.instance_type
        out: dict[str, Any] = {
            "name": instance_type or instance.family,
            "instance_type": instance_type,
            "accelerator": instance.accelerator,
            "core_config": f"lnc={self.lnc}",
            "memory_per_core_bytes": inventory.memory_per_core_bytes if inventory else instance.memory_per_core_bytes,
            "cores_available": inventory.total_cores if inventory else None,
        }
        if inventory is not None and inventory.emulated:
            out["emulated"] = True  # trncat's Neuron emulator: never a Trainium2 result (trncat validate refuses it)
        return out

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        instance = self.instance
        # A chip's HBM bandwidth is shared by its cores; cores beyond one instance's count cannot occur.
        return hardware.bandwidth_for_cores(instance, min(cores, instance.cores))

    compile_cache_files = staticmethod(neuron_launch.snapshot_cache)
    compile_cache_hit = staticmethod(neuron_launch.compile_cache_hit)

    def bundle_compile_cache(
        self, cache_dir: Path, out: Path, run: CompiledRun
    ) -> tuple[str | None, dict[str, Any] | None]:
        versions = {d.replace("-", "_"): self.package_version(d) for d in ("torch-neuronx", "neuronx-cc", "nki")}
        key = neuron_cachekey.build_key(
            run,
            cache_dir=cache_dir,
            versions=versions,
            compiler_args=constants.NEURON_CC_FLAGS,
            target=self.instance.family,
            lnc=self.lnc,
        )
        try:
            if cache_dir.is_dir() and any(cache_dir.rglob("*.neff")):
                # The manifest travels inside the bundle (data, like the cache's own JSON): run.py reads it there.
                (cache_dir / neuron_cachekey.KEY_FILE).write_text(json.dumps(key, sort_keys=True), encoding="utf-8")
            info = neuron_bundle.pack_cache(cache_dir, out)
        except BundleError as exc:
            logger.warning("%s", exc)
            return str(exc)[:500], None
        except OSError as exc:  # a full disk: the record stands, without a bundle
            logger.warning("could not write the bundle %s: %s", out, exc)
            return f"the bundle could not be written: {exc.strerror or exc}"[:500], None
        logger.info("compiled cache: %s, %d file(s), %d bytes, sha256 %s", out, info.files, info.bytes, info.sha256)
        return None, key

    def failure_notes(self, *, code: str, since: float) -> list[str]:
        if code != "device_oom":
            return []
        # The runtime writes its memory table to /tmp on an allocation failure (docs/neuron-facts.md).
        found = measure.memory_table_tail(constants.TRNCAT_SYSTEM_ROOT / "tmp", since=since)
        return [f"device memory table (/tmp/{found[0]}): {found[1]}"] if found else []


def inventory_json(inventory: neuron_tools.NeuronInventory | None) -> dict[str, Any] | None:
    """What doctor's JSON says of neuron-ls: devices, core ids (as numbered here), LNC, emulated."""
    if inventory is None:
        return None
    return {
        "instance_type": inventory.instance_type,
        "devices": inventory.device_count,
        "neuroncore_ids": list(inventory.core_ids),
        "logical_neuroncore_config": inventory.logical_nc_config,
        "emulated": inventory.emulated,
        # The JSON's shape: Neuron 2.34's is unpublished, a first run on a 2.34 machine records it here.
        "output_shape": inventory.output_shape,
    }
