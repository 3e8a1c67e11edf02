"""The Neuron backend's child side: what the benchmark process does on the device, torch imported.

:class:`NeuronChildSide` is the half of :class:`~pipeline.backends.neuron.backend.NeuronBackend` that runs in
the benchmark child (and in each torchrun rank): the rank's own core before torch starts, the ``neuron``
process group before the model is sharded, the device, synchronize, device memory (TorchNeuron's allocator,
cross-checked with sysfs), the CPU fallback, and TorchNeuron's compile figures.
The parent side (neuron-ls, versions, hardware, the launch environment) is in ``backend.py``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import constants
from pipeline.backends.base import gather_across_ranks, sum_across_ranks, world_of
from pipeline.backends.neuron import launch as neuron_launch
from pipeline.backends.neuron import measure
from pipeline.backends.neuron import tools as neuron_tools
from pipeline.errors import BenchError, ConfigError

logger = logging.getLogger(__name__)


class NeuronChildSide:
    """Child-side methods of the neuron backend (mixed into it; ``backend.py`` sets the attributes)."""

    dev_root: Path
    sysfs_root: Path
    _before: dict[int, neuron_tools.CoreMemory]
    _cleared: bool
    _notes: list[str]

    if TYPE_CHECKING:

        @property
        def lnc(self) -> int: ...

    def setup_process(self) -> None:
        # Before torch (and so the runtime, which reads it once) starts: a torchrun rank reserves its own core
        # only. The runtime reserves cores exclusively and TorchNeuron's process group wants one visible core per
        # process, so ranks that all kept the run's range would collide (docs/neuron-facts.md).
        _, local, world = world_of()
        run_cores = constants.TRNCAT_NEURON_CORES or constants.NEURON_RT_VISIBLE_CORES
        if world > 1 and run_cores:
            os.environ["NEURON_RT_VISIBLE_CORES"] = neuron_launch.rank_core(run_cores, local)

    def start_distributed(self) -> None:
        # The "neuron" process group first, as AWS's examples do, and only then load and shard: transformers
        # would otherwise bind the device before the group exists (docs/neuron-facts.md).
        rank, _, world = world_of()
        if world > 1:
            visible = os.environ.get("NEURON_RT_VISIBLE_CORES") or ""
            if visible and len(neuron_launch.parse_visible_cores(visible)) != 1:
                # A rank left with several cores is trncat's launcher's fault, never the model's: the runtime's
                # text makes it an infrastructure error (failure rule nrt_init), retried, not a "fail".
                raise BenchError(
                    f"the Neuron runtime cannot be initialized for rank {rank}: NEURON_RT_VISIBLE_CORES={visible} "
                    "names more than one core, and TorchNeuron's process group takes one per process (the "
                    "launcher did not narrow it to the rank's own core)"
                )
            import torch.distributed as dist

            if not dist.is_initialized():
                dist.init_process_group(backend="neuron")

    def device(self) -> Any:
        import torch
        import torch_neuronx  # noqa: F401  (TorchNeuron autoloads with torch; the import is harmless)

        # Under torchrun the rank's one core is device index LOCAL_RANK (TorchNeuron's start index).
        return torch.device("neuron", world_of()[1])

    def synchronize(self) -> None:
        import torch
        import torch_neuronx

        sync = getattr(getattr(torch, "neuron", None), "synchronize", None) or torch_neuronx.synchronize
        sync()

    def observations(self) -> list[str]:
        # The docs do not say what a rank sees (docs/neuron-facts.md, open questions): every rank's device count,
        # current device and visible cores go to rank 0's record until a run on hardware settles it.
        import torch

        neuron = getattr(torch, "neuron", None)
        count = getattr(neuron, "device_count", lambda: None)()
        current = getattr(neuron, "current_device", lambda: None)()
        rank, local, world = world_of()
        mine = (
            f"rank {rank} of {world} (local rank {local}): device {self.device()}, "
            f"torch.neuron.device_count()={count}, "
            f"current_device()={current}, NEURON_RT_VISIBLE_CORES={os.environ.get('NEURON_RT_VISIBLE_CORES')}, "
            f"run cores {constants.TRNCAT_NEURON_CORES}, LNC={self.lnc}"
        )
        lines = [str(line) for line in gather_across_ranks(mine)]
        only = constants.TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS
        lines.append(
            f"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS={only if only is not None else 'unset'}: "
            + ("only unimplemented ops may run on the CPU" if only == "1" else "device execution errors may fall back")
        )
        return lines

    def _after_sync(self, name: str) -> Any:
        """torch_neuronx's function ``name`` once queued work has run (execution is asynchronous: its figures are
        current only after a synchronize); None when this torch-neuronx has none."""
        import torch_neuronx

        get = getattr(torch_neuronx, name, None)
        if get is not None:
            self.synchronize()
        return get

    def fallback_counts(self) -> dict[str, int] | None:
        # torch_neuronx tracks the ops its eager mode ran on the CPU (get_fallback_ops / clear_op_tracking); the
        # docs do not document these calls (docs/neuron-facts.md: seen in torch-neuronx's source and tests), so
        # a release without them records "not observable" instead of "none".
        get = self._after_sync("get_fallback_ops")
        return None if get is None else measure.count_ops(get())

    def compile_figures(self) -> dict[str, Any]:
        get = self._after_sync("get_dynamo_metrics")
        return {} if get is None else measure.compile_figures(get())

    def _sysfs_cores_or_none(self) -> list[int] | None:
        """The sysfs cores of the run's whole set (under torchrun a rank's NEURON_RT_VISIBLE_CORES names its own core
        only), or None: sysfs only cross-checks the allocator, so a layout trncat cannot map (driver 2.31 moved the
        tree) costs the cross-check, never the run."""
        run_cores = constants.TRNCAT_NEURON_CORES or constants.NEURON_RT_VISIBLE_CORES or "0"
        try:
            return neuron_launch.sysfs_core_indices(
                neuron_launch.parse_visible_cores(run_cores),
                lnc=self.lnc,
                device_cores=neuron_tools.device_core_counts(self.sysfs_root),
                visible_devices=neuron_tools.visible_devices(self.dev_root),
            )
        except ConfigError as exc:
            note = f"sysfs device memory not used: {exc} (the allocator's figure is recorded)"
            if note not in self._notes:
                self._notes.append(note)
            return None

    def reset_peak_memory(self) -> None:
        import torch_neuronx

        torch_neuronx.reset_peak_memory_stats(self.device())
        if world_of()[0] == 0:
            cores = self._sysfs_cores_or_none()
            if cores is not None:
                self._cleared = neuron_tools.reset_peaks(self.sysfs_root, cores=cores)
                self._before = neuron_tools.read_device_memory(self.sysfs_root, cores=cores)

    def peak_memory_bytes(self) -> int | None:
        import torch_neuronx

        self.synchronize()  # the allocator is asynchronous: its figures are current only after a synchronize
        allocator = sum_across_ranks(int(torch_neuronx.max_memory_allocated(self.device())))
        if world_of()[0] != 0:
            return allocator
        cores = self._sysfs_cores_or_none()
        after = neuron_tools.read_device_memory(self.sysfs_root, cores=cores) if cores is not None else {}
        if cores is not None and not after:  # driver 2.31 moved the counters: the allocator's figure, said so
            self._notes.append("sysfs device memory not used: no pre-2.31 memory counters for the run's cores "
                               "(driver 2.31 moved them; the allocator's figure is recorded)")  # fmt: skip
        exceeded = bool(after) and all(a.peak > self._before[i].peak for i, a in after.items() if i in self._before)
        sysfs = neuron_tools.peak_delta(self._before, after) if after else None
        chosen = measure.choose_peak(allocator=allocator, sysfs=sysfs, sysfs_exact=self._cleared or exceeded)
        logger.info("peak device memory: allocator %s B, sysfs %s B, recorded %s B", allocator, sysfs, chosen)
        return chosen

    def memory_figures(self) -> dict[str, Any]:
        # The segments the allocator holds: the footprint an out-of-memory is about (tensors are only part of it).
        if (get := self._after_sync("max_memory_reserved")) is None:
            return {}
        return {"peak_device_memory_reserved_bytes": sum_across_ranks(int(get(self.device())))}

    def run_notes(self) -> list[str]:
        return list(self._notes)
