# c10d calls a Python process group by the C++ method names, with positional arguments; the stubs' overloads of
# the same names do not describe that protocol.
# mypy: disable-error-code="override,assignment"
"""The emulated ``neuron`` process-group backend of torch.distributed, carried over gloo on host memory.

``init_process_group("neuron")`` does what TorchNeuron's backend does before it hands back a group: it refuses to
start when this process's Neuron runtime is already running, sets ``NEURON_RT_VISIBLE_CORES`` to the local rank
when the caller has not set it, and refuses more than one visible core per process. Device index
``LOCAL_RANK`` then names the process's one core. Collectives on ``neuron`` tensors run gloo's on their host
bytes (in place, so the device tensors see the result); an all-reduce of an integer tensor on the device fails
as neuronx-cc fails it (``NCC_EVRF061``).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from tests.support.neuron import device, runtime
from tests.support.neuron.rules import cite

_INTEGERS = {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool}


def _host(value: Any) -> Any:
    """Host views of ``neuron`` tensors, in the same (nested list) shape; other values as they are."""
    if isinstance(value, list):
        return [_host(v) for v in value]
    if isinstance(value, torch.Tensor) and value.device.type == "neuron":
        return device.host_view(value)
    return value


def _flat(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, list | tuple):
        return [t for v in tensors for t in _flat(v)]
    return [tensors] if isinstance(tensors, torch.Tensor) else []


def _reduce_check(tensors: Any) -> None:
    # Inside a compiled graph the emulated device runs on host views of the device's tensors.
    for tensor in _flat(tensors):
        if (tensor.device.type == "neuron" or device.in_graph()) and tensor.dtype in _INTEGERS:
            raise RuntimeError(
                "ERROR NCC_EVRF061 AllReduce performs its reduction compute in floating point (f32) and does not "
                f"support 32-bit or 64-bit integer operands ({tensor.dtype}) {cite('integer_all_reduce')}"
            )


#: c10d's collectives as it calls them on a Python group: name -> (its options class, the positional arguments
#: before the options, whether it reduces: an integer reduction fails as neuronx-cc fails it).
_COLLECTIVES: dict[str, tuple[str, int, bool]] = {
    "allreduce": ("AllreduceOptions", 1, True),
    "allreduce_coalesced": ("AllreduceCoalescedOptions", 1, True),
    "allgather": ("AllgatherOptions", 2, False),
    "_allgather_base": ("AllgatherOptions", 2, False),
    "reduce_scatter": ("ReduceScatterOptions", 2, True),
    "_reduce_scatter_base": ("ReduceScatterOptions", 2, True),
    "alltoall_base": ("AllToAllOptions", 4, False),
    "alltoall": ("AllToAllOptions", 2, False),
    "broadcast": ("BroadcastOptions", 1, False),
    "barrier": ("BarrierOptions", 0, False),
    "gather": ("GatherOptions", 2, False),
    "scatter": ("ScatterOptions", 2, False),
}


def _over_gloo(name: str, options: str, count: int, reduces: bool) -> Any:
    """The group's ``name``: gloo's on the host bytes, with default options (c10d's, by name) when none is given."""

    def collective(self: NeuronProcessGroup, *args: Any) -> Any:
        if reduces:
            _reduce_check(args[:count])
        opts = args[count] if len(args) > count and args[count] is not None else getattr(dist, options)()
        return getattr(self._gloo, name)(*map(_host, args[:count]), opts)

    collective.__name__ = name
    return collective


class NeuronProcessGroup(dist.ProcessGroup):
    """The process group ``init_process_group("neuron")`` creates (one per group); its collectives are
    :data:`_COLLECTIVES`, set on the class below."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the (rank, size) constructor of Python groups
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore("neuron-over-gloo", store), rank, size, timeout)

    def getBackendName(self) -> str:  # noqa: N802  (c10d's name)
        return "neuron"

    @property
    def group_name(self) -> str:
        # A process group written in Python has no name of its own: c10d keeps it in its registry.
        return str(dist.distributed_c10d._world.pg_names[self])

    def allgather_into_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return works[-1] if works else self.barrier()

    def reduce_scatter_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return works[-1] if works else self.barrier()

    def send(self, tensors: Any, dst: int, tag: int = 0) -> Any:
        return self._gloo.send(_host(tensors), dst, tag)

    def recv(self, tensors: Any, src: int, tag: int = 0) -> Any:
        return self._gloo.recv(_host(tensors), src, tag)


for _name, _spec in _COLLECTIVES.items():
    setattr(NeuronProcessGroup, _name, _over_gloo(_name, *_spec))
NeuronProcessGroup.all_gather_single = NeuronProcessGroup._allgather_base
NeuronProcessGroup.reduce_scatter_single = NeuronProcessGroup._reduce_scatter_base
NeuronProcessGroup.all_to_all_single = NeuronProcessGroup.alltoall_base

_GROUPS: list[NeuronProcessGroup] = []


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> NeuronProcessGroup:
    rt = runtime.get()
    if _GROUPS:  # a later group (a device mesh's dimension) of a process whose backend is set up already
        group = NeuronProcessGroup(store, rank, size, timeout)
        _GROUPS.append(group)
        return group
    if rt.started:
        raise RuntimeError(
            f"Neuron runtime should not be initialized before the init_process_group. {cite('distributed_backend')}"
        )
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not os.environ.get("NEURON_RT_VISIBLE_CORES"):
        os.environ["NEURON_RT_VISIBLE_CORES"] = str(local_rank)  # only when the caller did not set it
    if rt.visible_count() != 1:
        raise AssertionError(
            "Attempted to have more than one device per process in distributed setup "
            f"(NEURON_RT_VISIBLE_CORES={os.environ['NEURON_RT_VISIBLE_CORES']}) {cite('distributed_backend')}"
        )
    rt.start_index = local_rank  # neuron:<local rank> is this process's one core
    group = NeuronProcessGroup(store, rank, size, timeout)
    _GROUPS.append(group)
    return group


def register() -> None:
    """Make ``neuron`` a torch.distributed backend for ``neuron`` tensors."""
    if "neuron" not in dist.Backend.backend_list:
        dist.Backend.register_backend("neuron", _create, devices=["neuron"])
