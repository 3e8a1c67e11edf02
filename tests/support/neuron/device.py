"""The emulated ``neuron`` device: PyTorch's PrivateUse1 key renamed ``neuron``, backed by host memory.

A ``neuron`` tensor's storage points at host memory that a CPU storage owns: :func:`adopt` turns a CPU result
into a ``neuron`` tensor over the same bytes (no copy), :func:`host_view` gives the CPU view of a ``neuron``
tensor's bytes. Every aten op that reaches the ``neuron`` key lands in one boxed fallback (:func:`_run`) that
runs the CPU kernel on host views and hands back ``neuron`` tensors: in-place and ``out=`` results are the
caller's own tensors, views share the caller's storage, fresh results are adopted. So PyTorch's own view and
alias machinery, autograd's view tracking and dynamo see an ordinary device tensor.

Each storage is counted on the reserved core of its device index (:mod:`tests.support.neuron.runtime`) and
released when PyTorch frees it (a finalizer on the storage object, which PyTorch keeps alive as long as the
storage lives).
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from tests.support.neuron import runtime

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_LOCAL = threading.local()
#: Op names run on the device so far and those that fell back to the CPU (read after a synchronize).
EXECUTED: list[str] = []
FALLBACK: list[str] = []
_LIBRARIES: list[Any] = []
_EXT_DEV = 12  # DLPack's kDLExtDev, which PyTorch reads as the PrivateUse1 device


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensorHead(ctypes.Structure):
    # The head of DLPack's DLManagedTensor: its DLTensor starts with the data pointer and the device.
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _on_device(cpu: torch.Tensor, index: int) -> torch.Tensor:
    """A ``neuron:index`` tensor over a CPU tensor's bytes, no copy: DLPack hands the bytes over with a deleter
    that keeps the CPU tensor alive until PyTorch frees the device storage (``from_blob`` on the device)."""
    capsule = torch.utils.dlpack.to_dlpack(cpu)
    head = _DLTensorHead.from_address(_capsule_pointer(capsule, b"dltensor"))
    head.device.device_type, head.device.device_id = _EXT_DEV, index
    return torch.utils.dlpack.from_dlpack(capsule)


def _release(position: int, nbytes: int) -> None:
    runtime.get().free(position, nbytes)


def _tensor_on(storage: Any, size: Any, stride: Any, offset: int, dtype: torch.dtype) -> torch.Tensor:
    """A ``neuron`` tensor over ``storage`` with that geometry (PyTorch's own ``set_`` kernel, run by the CPU key:
    it only sets metadata, on a tensor of the storage's device)."""
    seed = _on_device(torch.empty(0, dtype=torch.uint8), storage.device.index or 0)
    if dtype != torch.uint8:
        seed = torch.ops.aten.view.dtype.redispatch(_CPU, seed, dtype)
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(_CPU, seed, storage, offset, size, stride)
    return seed


def adopt(cpu: torch.Tensor, index: int | None) -> torch.Tensor:
    """A fresh CPU tensor as a ``neuron`` tensor on device ``index``: same bytes, counted on that core."""
    rt = runtime.get()
    position = rt.position(index)
    storage = cpu.untyped_storage()
    nbytes = storage.nbytes()
    rt.allocate(position, nbytes)
    whole = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (nbytes,), (1,))
    # "neuron" without an index is the current device (set_device's, else this process's first core: under
    # torch.distributed the local rank's index).
    device_storage = _on_device(whole, rt.start_index + position).untyped_storage()
    weakref.finalize(device_storage, _release, position, nbytes)
    return _tensor_on(device_storage, cpu.size(), cpu.stride(), int(cpu.storage_offset()), cpu.dtype)


def host_view(tensor: torch.Tensor) -> torch.Tensor:
    """The CPU tensor over a ``neuron`` tensor's bytes (valid while the ``neuron`` tensor lives)."""
    storage = tensor.untyped_storage()
    host = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), torch.device("cpu"), storage.nbytes())
    out = torch.empty(0, dtype=tensor.dtype)
    out.set_(host, tensor.storage_offset(), tensor.size(), tensor.stride())
    return out


def _is_neuron(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "neuron"


def _down(value: Any, views: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A ``neuron`` value's host counterpart (a tensor's host view, kept beside it in ``views``; a device's or a
    storage's); any other value as it is."""
    if _is_neuron(value):
        views.append((value, host_view(value)))
        return views[-1][1]
    if isinstance(value, torch.device) and value.type == "neuron":
        return torch.device("cpu")
    if isinstance(value, torch.UntypedStorage) and value.device.type == "neuron":
        return torch._C._construct_storage_from_data_pointer(value.data_ptr(), torch.device("cpu"), value.nbytes())
    return value


def _run(op: Any, *args: Any, **kwargs: Any) -> Any:
    """The boxed fallback of the ``neuron`` key: the CPU kernel on host views, results handed back."""
    name = op._schema.name
    machine = runtime.get().machine
    target: torch.device | None = None
    views: list[tuple[torch.Tensor, torch.Tensor]] = []

    def down(value: Any) -> Any:
        nonlocal target
        if _is_neuron(value) or isinstance(value, torch.device) and value.type == "neuron":
            target = target or (value if isinstance(value, torch.device) else value.device)
        return _down(value, views)

    outs = {a.name: kwargs[a.name] for a in op._schema.arguments if a.is_out and _is_neuron(kwargs.get(a.name))}
    cpu_args = tree_map(down, args)
    cpu_kwargs = tree_map(down, {k: v for k, v in kwargs.items() if k not in outs})
    for key, out in outs.items():
        cpu_kwargs[key] = torch.empty(0, dtype=out.dtype)  # a resizable CPU result, copied into out after
        target = target or out.device
    if "device" in kwargs and kwargs["device"] is not None:
        wanted = torch.device(kwargs["device"])
        target = wanted if wanted.type == "neuron" else None
    _account(name, machine)
    cpu_args, cpu_kwargs = _scalars_as_tensors(op, cpu_args, cpu_kwargs)
    result = op(*cpu_args, **cpu_kwargs)
    for key, out in outs.items():
        produced = cpu_kwargs[key]
        if tuple(out.shape) != tuple(produced.shape):
            out.resize_(produced.shape)
        host_view(out).copy_(produced)
        views.append((out, produced))
    return _hand_back(result, views, target)


_NUMBER = (bool, int, float, complex)


def _scalars_as_tensors(op: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """A boxed kernel gets a wrapped number (the ``5`` of ``x % 5`` for a ``Tensor other``) back as a Python
    number; the overload it was dispatched to takes a tensor, so it is a 0-dim CPU tensor again here (a wrapped
    number's own type promotion: a 0-dim tensor never sets the result's dtype within its category)."""
    if not any(isinstance(v, _NUMBER) for v in (*args, *kwargs.values())):
        return args, kwargs  # most ops: nothing to look up in the schema
    schema = op._schema.arguments

    def tensor(value: Any, argument: Any) -> Any:
        if isinstance(value, _NUMBER) and isinstance(argument.type, torch.TensorType):
            return torch.tensor(value)  # bool, int64, or the default float (complex) dtype, as torch types a number
        return value

    args = tuple(tensor(v, a) for v, a in zip(args, schema, strict=False)) + args[len(schema) :]
    by_name = {a.name: a for a in schema}
    return args, {k: (tensor(v, by_name[k]) if k in by_name else v) for k, v in kwargs.items()}


def _plain(value: Any) -> bool:
    """A tensor whose bytes are its own (not a subclass such as DTensor, which holds device tensors inside)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    return isinstance(value, torch.Tensor) and not is_traceable_wrapper_subclass(value)


def run_on_host(program: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run a compiled graph on the host bytes of its ``neuron`` inputs; hand its results back as the device's
    (in-place updates of an input, such as a KV cache, land in the input's own bytes)."""
    views: list[tuple[torch.Tensor, torch.Tensor]] = []
    result = program(*[_down(value, views) for value in args])
    return _hand_back(result, views, views[0][0].device if views else None)


def _hand_back(result: Any, views: list[tuple[torch.Tensor, torch.Tensor]], target: torch.device | None) -> Any:
    """CPU results of a kernel as the device's: the caller's own tensor when it is one, a view of the caller's
    storage when it is a view, a fresh device tensor otherwise (when the kernel ran for the device)."""
    by_object = {id(view): original for original, view in views}
    by_pointer = {v.untyped_storage().data_ptr(): o for o, v in views if v.untyped_storage().nbytes()}

    def up(value: Any) -> Any:
        if not _plain(value):
            return value
        if id(value) in by_object:  # in place or out=: the caller's own tensor
            return by_object[id(value)]
        if value.device.type != "cpu" or target is None:
            return value
        base = by_pointer.get(value.untyped_storage().data_ptr())
        if base is not None:  # a view: the same neuron storage, the view's geometry
            offset = int(value.storage_offset())
            return _tensor_on(base.untyped_storage(), value.size(), value.stride(), offset, value.dtype)
        return adopt(value, target.index)

    return tree_map(up, result)


def _account(name: str, machine: Any) -> None:
    """Count the op as run on the device, or as a CPU fallback (ops the emulated TorchNeuron lacks, or that fail
    on the device when fallback covers execution errors)."""
    if name in machine.fallback_ops:
        FALLBACK.append(name)
        return
    if name in machine.failing_ops:
        import os

        from tests.support.neuron.rules import cite

        if os.environ.get("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "0").strip() == "1":
            raise runtime.NeuronRuntimeError(f"{name} failed on the device {cite('fallback_unimplemented')}")
        FALLBACK.append(name)
        return
    if not getattr(_LOCAL, "graph", False):
        EXECUTED.append(name)


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    (host_view(dst) if _is_neuron(dst) else dst).copy_(host_view(src) if _is_neuron(src) else src)
    return dst


def _resize(tensor: torch.Tensor, size: Any, memory_format: Any = None) -> torch.Tensor:
    """``resize_`` of a ``neuron`` tensor: a bigger storage when the bytes do not fit (old bytes kept)."""
    size = list(size)
    stride, step = [0] * len(size), 1
    for i in range(len(size) - 1, -1, -1):
        stride[i], step = step, step * max(size[i], 1)
    need = (tensor.storage_offset() + math.prod(size)) * tensor.element_size()
    storage = tensor.untyped_storage()
    if storage.nbytes() < need:
        fresh = adopt(torch.empty(need, dtype=torch.uint8), tensor.device.index)
        old = host_view(tensor).contiguous().view(torch.uint8).reshape(-1)
        host_view(fresh)[: old.numel()].copy_(old)
        storage = fresh.untyped_storage()
    torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
        _CPU, tensor, storage, tensor.storage_offset(), size, stride
    )
    return tensor


def in_graph() -> bool:
    """Whether a compiled graph is running in this thread."""
    return bool(getattr(_LOCAL, "graph", False))


class graph_execution:
    """While a compiled graph runs, its ops count as the graph's, not as eager ops."""

    def __enter__(self) -> None:
        self._was = getattr(_LOCAL, "graph", False)
        _LOCAL.graph = True

    def __exit__(self, *exc: Any) -> None:
        _LOCAL.graph = self._was


class DeviceModule:
    """``torch.neuron``: the device module TorchNeuron registers (device count, current device, synchronize)."""

    def __init__(self, synchronize: Callable[[], None]) -> None:
        self._synchronize = synchronize

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return runtime.get().started

    def device_count(self) -> int:
        return runtime.get().visible_count()

    def current_device(self) -> int:
        rt = runtime.get()
        return rt.current if rt.current is not None else rt.start_index

    def set_device(self, device: Any) -> None:
        # Binding a device starts the runtime (and checks the index): a process group started after it is refused.
        index = torch.device(device).index if not isinstance(device, int) else device
        rt = runtime.get()
        rt.position(index)
        rt.current = index

    def synchronize(self, device: Any = None) -> None:
        self._synchronize()

    def is_bf16_supported(self) -> bool:
        return True

    def _is_in_bad_fork(self) -> bool:
        return False

    # The device's random numbers are the host's generator's (its kernels are the CPU's): torch.manual_seed seeds
    # it already, and calls these (calling it back would recurse).
    def manual_seed(self, seed: int) -> None:
        pass

    def manual_seed_all(self, seed: int) -> None:
        pass

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)


def register(synchronize: Callable[[], None], extra: dict[str, Any]) -> DeviceModule:
    """Rename PrivateUse1 to ``neuron``, register ``torch.neuron`` and the kernels (once per process)."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    module = DeviceModule(synchronize)
    for name, value in extra.items():
        setattr(module, name, value)
    _setup_privateuseone_for_python_backend(rename="neuron", backend_module=module)
    everything = torch.library.Library("_", "IMPL")
    everything.fallback(_run, "PrivateUse1")
    aten = torch.library.Library("aten", "IMPL")
    aten.impl("_copy_from", _copy_from, "PrivateUse1")
    aten.impl("resize_", _resize, "PrivateUse1")
    # The math attention (CPU's fused kernels are CPU-only ops); what TorchNeuron lowers it to is its own.
    aten.impl("_fused_sdp_choice", lambda *args, **kwargs: 0, "PrivateUse1")
    # A backend outside PyTorch receives convolutions as convolution_overrideable: run the CPU's convolution.
    aten.impl(
        "convolution_overrideable",
        lambda *args, **kwargs: _run(torch.ops.aten.convolution.default, *args, **kwargs),
        "PrivateUse1",
    )
    _LIBRARIES.extend([everything, aten])
    _bind_accelerator(module)
    return module


def _bind_accelerator(module: DeviceModule) -> None:
    """``torch.accelerator``'s device index, routed to ``torch.neuron``, as a backend's device guard routes it
    (a Python backend's guard only names its type: without this, ``set_device_index`` would do nothing here and
    ``current_device_index`` would always answer 0). transformers binds ``LOCAL_RANK`` with it before it starts a
    process group itself, so on the emulated device, as on TorchNeuron, that starts the runtime first."""
    accelerator = torch.accelerator
    set_index, current_index = accelerator.set_device_index, accelerator.current_device_index

    def neuron_current() -> bool:
        found = accelerator.current_accelerator()
        return found is not None and found.type == "neuron"

    def set_device_index(device: Any, /) -> None:
        if not neuron_current():
            return set_index(device)
        module.set_device(device)
        return None

    def current_device_index() -> int:
        return module.current_device() if neuron_current() else current_index()

    accelerator.set_device_index = set_device_index  # type: ignore[assignment]
    accelerator.current_device_index = current_device_index  # type: ignore[assignment]
