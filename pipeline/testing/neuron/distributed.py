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

from pipeline.testing.neuron import device, runtime
from pipeline.testing.neuron.rules import cite

_INTEGERS = {torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool}


def _options(name: str) -> Any:
    """A default c10d options object (the stubs do not list every one of them)."""
    return getattr(dist, name)()


def _host(value: Any) -> Any:
    """Host views of ``neuron`` tensors, in the same (nested list) shape; other values as they are."""
    if isinstance(value, list):
        return [_host(v) for v in value]
    if isinstance(value, torch.Tensor) and value.device.type == "neuron":
        return device.host_view(value)
    return value


def _flat(tensors: Any) -> list[torch.Tensor]:
    if isinstance(tensors, list):
        return [t for v in tensors for t in _flat(v)]
    return [tensors] if isinstance(tensors, torch.Tensor) else []


def _on_device(tensors: Any) -> list[torch.Tensor]:
    flat: list[torch.Tensor] = []
    for value in tensors if isinstance(tensors, list) else [tensors]:
        if isinstance(value, list):
            flat.extend(_on_device(value))
        elif isinstance(value, torch.Tensor) and value.device.type == "neuron":
            flat.append(value)
    return flat


class NeuronProcessGroup(dist.ProcessGroup):
    """The process group ``init_process_group("neuron")`` creates (one per group)."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)  # type: ignore[call-arg]  # the (rank, size) constructor of Python groups
        self._gloo: Any = dist.ProcessGroupGloo(dist.PrefixStore("neuron-over-gloo", store), rank, size, timeout)

    def getBackendName(self) -> str:  # noqa: N802  (c10d's name)
        return "neuron"

    @property
    def group_name(self) -> str:
        # A process group written in Python has no name of its own: c10d keeps it in its registry.
        return str(dist.distributed_c10d._world.pg_names[self])

    def _reduce_check(self, tensors: Any) -> None:
        # Inside a compiled graph the emulated device runs on host views of the device's tensors.
        for tensor in _on_device(tensors) or (_flat(tensors) if device.in_graph() else []):
            if tensor.dtype in _INTEGERS:
                raise RuntimeError(
                    "ERROR NCC_EVRF061 AllReduce performs its reduction compute in floating point (f32) and does not "
                    f"support 32-bit or 64-bit integer operands ({tensor.dtype}) {cite('integer_all_reduce')}"
                )

    def allreduce(self, tensors: Any, opts: Any = None) -> Any:
        self._reduce_check(tensors)
        return self._gloo.allreduce(_host(tensors), opts or _options("AllreduceOptions"))

    def allreduce_coalesced(self, tensors: Any, opts: Any = None) -> Any:
        self._reduce_check(tensors)
        return self._gloo.allreduce_coalesced(_host(tensors), opts or _options("AllreduceCoalescedOptions"))

    def allgather(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        return self._gloo.allgather(_host(outputs), _host(inputs), opts or _options("AllgatherOptions"))

    def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> Any:
        return self._gloo._allgather_base(_host(output), _host(input), opts or _options("AllgatherOptions"))

    all_gather_single = _allgather_base

    def allgather_into_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return works[-1] if works else self.barrier()

    def reduce_scatter(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        self._reduce_check(inputs)
        return self._gloo.reduce_scatter(_host(outputs), _host(inputs), opts or _options("ReduceScatterOptions"))

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any = None) -> Any:
        self._reduce_check(input)
        return self._gloo._reduce_scatter_base(_host(output), _host(input), opts or _options("ReduceScatterOptions"))

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs, strict=True)]
        return works[-1] if works else self.barrier()

    def alltoall_base(self, output: Any, input: Any, output_split: Any, input_split: Any, opts: Any = None) -> Any:
        return self._gloo.alltoall_base(
            _host(output), _host(input), output_split, input_split, opts or _options("AllToAllOptions")
        )

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        return self._gloo.alltoall(_host(outputs), _host(inputs), opts or _options("AllToAllOptions"))

    def broadcast(self, tensors: Any, opts: Any = None) -> Any:
        return self._gloo.broadcast(_host(tensors), opts or _options("BroadcastOptions"))

    def barrier(self, opts: Any = None) -> Any:
        return self._gloo.barrier(opts or _options("BarrierOptions"))

    def gather(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        return self._gloo.gather(_host(outputs), _host(inputs), opts or _options("GatherOptions"))

    def scatter(self, outputs: Any, inputs: Any, opts: Any = None) -> Any:
        return self._gloo.scatter(_host(outputs), _host(inputs), opts or _options("ScatterOptions"))

    def send(self, tensors: Any, dst: int, tag: int = 0) -> Any:
        return self._gloo.send(_host(tensors), dst, tag)

    def recv(self, tensors: Any, src: int, tag: int = 0) -> Any:
        return self._gloo.recv(_host(tensors), src, tag)


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
