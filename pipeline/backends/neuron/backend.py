"""Neuron backend: TorchNeuron (torch-neuronx 2.14), the native PyTorch device ``"neuron"`` on Trainium2.

The model runs transformers' own code on device ``neuron``; ``generate()`` compiles its decode step with
``torch.compile(backend="neuron")`` over a static KV cache (``dynamic=False``), and a compile error fails
the run (no eager fallback). More than one core: the child runs under torchrun, one process per logical
NeuronCore, and loads with ``tp_plan="auto"``; cores are reserved with ``NEURON_RT_VISIBLE_CORES``.

Parent-side methods never import torch or torch_neuronx: they read package metadata, sysfs and
``neuron-ls --json-output`` (run with a timeout). Instance figures come from :mod:`pipeline.hardware`.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from pipeline import constants, hardware
from pipeline.backends.base import (
    Backend,
    enable_generate_compile,
    package_version,
    sum_across_ranks,
    world_of,
)
from pipeline.backends.neuron import launch as neuron_launch
from pipeline.backends.neuron import tools as neuron_tools
from pipeline.errors import BackendUnavailableError, BenchError, ConfigError

logger = logging.getLogger(__name__)

#: Trainium2 defaults (DESIGN.md) when neither neuron-ls nor the environment tell the instance type.
DEFAULT_FAMILY_INSTANCE = "trn2.3xlarge"
NEURON_LS_TIMEOUT_S = 30.0
#: AWS's pip repository of the Neuron packages (torch-neuronx, neuronx-cc) (docs/neuron-facts.md).
NEURON_INDEX_URL = "https://pip.repos.neuron.amazonaws.com"
#: PyTorch's CPU wheel index, which the TorchNeuron install adds for torch itself (docs/neuron-facts.md).
TORCH_CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


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
    """stdout of ``neuron-ls --json-output``, or None when the tool is missing, fails or hangs."""
    try:
        done = subprocess.run(
            ["neuron-ls", "--json-output"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("neuron-ls failed: %s", exc)
        return None
    if done.returncode != 0:
        logger.warning("neuron-ls exited with %d: %s", done.returncode, done.stderr.strip()[:200])
        return None
    return done.stdout


def dpkg_version(package: str, timeout_s: float = 10.0) -> str | None:
    """Version of a Debian package (the Neuron runtime ships as ``aws-neuronx-runtime-lib``), or None."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def choose_peak(*, allocator: int | None, sysfs: int | None, sysfs_exact: bool) -> int | None:
    """The peak device memory to record: the larger of the allocator's and a trustworthy sysfs figure.

    The allocator counts tensors only; sysfs counts everything the driver gave the cores (tensors, NEFF
    code, scratchpad, collective buffers), so it is the footprint a user must fit. A sysfs peak that could
    not be cleared and was not exceeded remembers an earlier process, so it is then only logged.

    Args:
        allocator: ``torch_neuronx.max_memory_allocated`` summed over ranks.
        sysfs: :func:`pipeline.backends.neuron.tools.peak_delta` over the cores used.
        sysfs_exact: Whether the peak counters were cleared before the run or all exceeded their old value.

    Returns:
        Bytes, or None when neither source gave a figure.
    """
    candidates = [v for v in (allocator, sysfs if sysfs_exact else None) if v is not None]
    return max(candidates) if candidates else None


def count_ops(ops: Any) -> dict[str, int]:
    """``{op name: count}`` from what ``torch_neuronx.get_fallback_ops()`` returns: a mapping of counts, or a
    collection of names (a name listed k times counts k; a set counts each op once)."""
    if isinstance(ops, Mapping):
        return {str(op): int(n) for op, n in ops.items()}
    counts: dict[str, int] = {}
    for op in ops or ():
        counts[str(op)] = counts.get(str(op), 0) + 1
    return counts


class NeuronBackend(Backend):
    """TorchNeuron on Trainium2. Constructor arguments exist for tests (fake sysfs, recorded neuron-ls)."""

    name: ClassVar[str] = "neuron"
    compile_backend: ClassVar[str | None] = "neuron"
    compile_by_default: ClassVar[bool] = True
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
        dev_root: Path = Path("/dev"),
        sysfs_root: Path = Path("/sys"),
        neuron_ls: Callable[[], str | None] = run_neuron_ls,
        find_spec: Callable[[str], Any] = importlib.util.find_spec,
        packages: Callable[[str], str | None] = package_version,
    ) -> None:
        self.dev_root = dev_root
        self.sysfs_root = sysfs_root
        self._neuron_ls = neuron_ls
        self._find_spec = find_spec
        self._packages = packages
        self._before: dict[int, neuron_tools.CoreMemory] = {}
        self._cleared = False

    @classmethod
    def requirement_lines(cls, versions: Mapping[str, Any]) -> list[str]:
        # The documented install: the Neuron packages from AWS's pip repository, torch (and torchvision) from
        # PyTorch's CPU wheel index (PyPI's torch is the CUDA build), the versions the runner really had.
        return [
            f"--extra-index-url {NEURON_INDEX_URL}",
            f"--extra-index-url {TORCH_CPU_INDEX_URL}",
            f"torch-neuronx=={versions['torch_neuronx']}",
            f"neuronx-cc=={versions['neuronx_cc']}",
        ]

    @classmethod
    def install_commands(cls, versions: Mapping[str, Any]) -> list[tuple[str, str]]:
        commands = super().install_commands(versions)
        venv = dlami_venv(versions.get("torch_neuronx"))
        if venv:
            dlami = f"on the Neuron DLAMI (the stack is in {venv})"
            commands.insert(0, (dlami, f"source {venv}/bin/activate && pip install -r requirements.txt"))
        return commands

    # -- parent side --------------------------------------------------------------------------------
    def package_version(self, dist: str) -> str | None:
        """Installed version of a distribution (``torch-neuronx``), from package metadata."""
        return self._packages(dist)

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
        if self._packages("neuronx-cc") is None:
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
        configured = constants.NEURON_LOGICAL_NC_CONFIG
        if configured:
            try:
                return int(configured)
            except ValueError:
                raise ConfigError(f"NEURON_LOGICAL_NC_CONFIG must be 1 or 2, got {configured!r}") from None
        inventory = self.inventory
        if inventory is not None and inventory.logical_nc_config:
            return inventory.logical_nc_config
        return 2

    @property
    def instance(self) -> hardware.Instance:
        """The instance's table entry (neuron-ls, else TRNCAT_INSTANCE_TYPE, else a trn2.3xlarge)."""
        inventory = self.inventory
        name = constants.TRNCAT_INSTANCE_TYPE or (inventory.instance_type if inventory else None)
        try:
            return hardware.get_instance(name or DEFAULT_FAMILY_INSTANCE, lnc=self.lnc)
        except ConfigError:
            logger.warning("instance %r is not in pipeline.hardware; using trn2 figures", name)
            return hardware.get_instance(DEFAULT_FAMILY_INSTANCE, lnc=self.lnc)

    def preflight(self) -> str | None:
        # Without neuron-ls the instance, its cores and its memory are unknown: guessing them would publish a
        # row under the wrong hardware, so the run is an infrastructure error instead.
        if self.inventory is None and not constants.TRNCAT_INSTANCE_TYPE:
            return "neuron-ls is missing or gave no usable output: the instance, its cores and memory are unknown"
        return None

    def environment(self, *, cores: int, compile_cache: Path | None = None) -> dict[str, str]:
        inventory = self.inventory
        chosen = neuron_launch.choose_cores(
            cores=cores,
            inherited=constants.NEURON_RT_VISIBLE_CORES,
            total_cores=inventory.total_cores if inventory else None,
        )
        return neuron_launch.neuron_env(cores=chosen, lnc=self.lnc, cache_dir=compile_cache)

    def versions(self) -> dict[str, str | None]:
        versions = super().versions()
        inventory = self.inventory
        versions.update(
            torch_neuronx=self._packages("torch-neuronx"),
            neuronx_cc=self._packages("neuronx-cc"),
            runtime=(inventory.runtime_version if inventory else None)
            or self._packages("aws-neuronx-runtime-lib")
            or dpkg_version("aws-neuronx-runtime-lib"),
            driver=neuron_tools.driver_version(self.sysfs_root),
            # No package carries the SDK release number; the image digest pins it instead.
            sdk=None,
            container_image=constants.TRNCAT_IMAGE_DIGEST,
        )
        return versions

    def hardware(self, *, cores: int) -> dict[str, Any]:
        inventory, instance = self.inventory, self.instance
        instance_type = constants.TRNCAT_INSTANCE_TYPE or (inventory.instance_type if inventory else None)
        return {
            "name": instance_type or instance.family,
            "instance_type": instance_type,
            "accelerator": instance.accelerator,
            "core_config": f"lnc={self.lnc}",
            "memory_per_core_bytes": inventory.memory_per_core_bytes if inventory else instance.memory_per_core_bytes,
            "cores_available": inventory.total_cores if inventory else None,
        }

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        instance = self.instance
        # A chip's HBM bandwidth is shared by its cores; cores beyond one instance's count cannot occur.
        return hardware.bandwidth_for_cores(instance, min(cores, instance.cores))

    def compile_cache_files(self, cache_dir: Path) -> set[str]:
        return neuron_launch.snapshot_cache(cache_dir)

    def compile_cache_hit(self, cache_dir: Path, before: set[str]) -> bool | None:
        return neuron_launch.compile_cache_hit(cache_dir, before)

    # -- child side ---------------------------------------------------------------------------------
    def device(self) -> Any:
        import torch
        import torch_neuronx  # noqa: F401  (registers the "neuron" device)

        return torch.device("neuron", world_of()[1])

    def synchronize(self) -> None:
        import torch
        import torch_neuronx

        sync = getattr(getattr(torch, "neuron", None), "synchronize", None) or torch_neuronx.synchronize
        sync()

    def observations(self) -> list[str]:
        # The docs do not say how torchrun ranks share NEURON_RT_VISIBLE_CORES (docs/neuron-facts.md, open
        # questions): record what rank 0 sees until a run on hardware settles it.
        import torch

        neuron = getattr(torch, "neuron", None)
        count = neuron.device_count() if neuron is not None and hasattr(neuron, "device_count") else None
        rank, local, world = world_of()
        return [
            f"rank {rank} of {world} (local rank {local}): torch.neuron.device_count()={count}, "
            f"NEURON_RT_VISIBLE_CORES={constants.NEURON_RT_VISIBLE_CORES}, LNC={self.lnc}"
        ]

    def fallback_counts(self) -> dict[str, int] | None:
        # torch_neuronx tracks the ops its eager mode ran on the CPU (get_fallback_ops / clear_op_tracking); the
        # docs do not document these calls (docs/neuron-facts.md: seen in torch-neuronx's source and tests), so
        # a release without them records "not observable" instead of "none".
        import torch_neuronx

        get = getattr(torch_neuronx, "get_fallback_ops", None)
        if get is None:
            return None
        self.synchronize()  # execution is asynchronous: the ops of queued work must have run
        return count_ops(get())

    def _used_sysfs_cores(self) -> list[int]:
        # The child's NEURON_RT_VISIBLE_CORES is the run's own set (environment()); every rank shares it.
        logical = neuron_launch.parse_visible_cores(constants.NEURON_RT_VISIBLE_CORES or "0")
        return neuron_launch.sysfs_core_indices(
            logical,
            lnc=self.lnc,
            device_cores=neuron_tools.device_core_counts(self.sysfs_root),
            visible_devices=neuron_tools.visible_devices(self.dev_root),
        )

    def reset_peak_memory(self) -> None:
        import torch_neuronx

        torch_neuronx.reset_peak_memory_stats()
        if world_of()[0] == 0:
            cores = self._used_sysfs_cores()
            self._cleared = neuron_tools.reset_peaks(self.sysfs_root, cores=cores)
            self._before = neuron_tools.read_device_memory(self.sysfs_root, cores=cores)

    def peak_memory_bytes(self) -> int | None:
        import torch_neuronx

        self.synchronize()
        allocator = int(torch_neuronx.max_memory_allocated())
        if world_of()[2] > 1:
            allocator = sum_across_ranks(allocator)
        if world_of()[0] != 0:
            return allocator
        after = neuron_tools.read_device_memory(self.sysfs_root, cores=self._used_sysfs_cores())
        exceeded = bool(after) and all(a.peak > self._before[i].peak for i, a in after.items() if i in self._before)
        sysfs = neuron_tools.peak_delta(self._before, after) if after else None
        chosen = choose_peak(allocator=allocator, sysfs=sysfs, sysfs_exact=self._cleared or exceeded)
        logger.info("peak device memory: allocator %s B, sysfs %s B, recorded %s B", allocator, sysfs, chosen)
        return chosen

    def prepare(self, model: Any, *, compile: bool = True, fullgraph: bool = True) -> Any:
        if world_of()[2] == 1:
            model = model.to(self.device())
        if compile:
            # TorchNeuron supports only the default torch.compile mode (others warn and are ignored).
            enable_generate_compile(model, backend="neuron", fullgraph=fullgraph, mode="default")
        return model
