"""The emulated ``torch.compile(backend="neuron")``: one NEFF per graph and input signature, cached on disk.

Dynamo hands the backend each graph it captures. The emulated compiler refuses what TorchNeuron documents as
unsupported (``dynamic=True``; float8_e4m3fn on trn2), recompiles a graph per new input shape, keys the graph by
the parts vLLM Neuron documents for its cache (:func:`cache_key`: the graph's code, its inputs' dtypes, shapes
and strides, the torch-neuronx, neuronx-cc and NKI versions, the compiler arguments, the target, the replica
groups) plus the LNC and the bytes of every constant the graph holds (a parameter lifted as an input is keyed by
its shape and dtype only, a constant's values are inside the NEFF), takes a lock file in
``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR``, and either reads the NEFF from ``TORCH_NEURONX_NEFF_CACHE_DIR`` (a
persistent-cache hit: compile time 0) or "compiles" it (``compile_seconds`` of the machine) and writes it there.
The compiled graph then runs its aten ops on the
emulated device. :data:`METRICS` is what ``get_dynamo_metrics()`` reports.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from tests.support.neuron import device, runtime
from tests.support.neuron.rules import cite

logger = logging.getLogger("torch_neuronx")

#: Per graph key: torch_neuronx_fx_passes_us, torch_neuronx_lower_us, torch_neuronx_compile_us (0 on a hit).
METRICS: dict[str, dict[str, int]] = {}
NEFF_MAGIC = b"EMULATED-NEFF trncat Neuron emulator\n"


class NeuronCompileError(RuntimeError):
    """A graph the emulated neuronx-cc refuses; the message carries the compiler's error code."""


def _folder(variable: str, default: str) -> Path:
    """The folder ``variable`` names, else its default in the emulated /tmp: the persistent NEFF cache
    (TORCH_NEURONX_NEFF_CACHE_DIR, /tmp/neff_cache) or where compile locks go (TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR,
    /tmp/local_cache)."""
    return Path(os.environ.get(variable) or runtime.get().root / "tmp" / default)


def _signature(example_inputs: list[Any]) -> str:
    def part(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"{v.dtype}{tuple(v.shape)}{tuple(v.stride())}{v.device.type}"
        return repr(v)

    return ";".join(map(part, example_inputs))


def _refuse(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> None:
    # "dynamic=True is rejected during compilation": torch.compile(dynamic=True) is the one setting under which
    # dynamo stops assuming static shapes. Shapes that vary between calls otherwise recompile per new shape
    # (register() turns dynamo's automatic dynamic shapes off, so they never arrive here as symbols).
    if not torch._dynamo.config.assume_static_by_default:
        raise NeuronCompileError(
            f"dynamic shapes are not supported: compile with dynamic=False {cite('compile_backend')}"
        )
    dtypes = {v.dtype for v in example_inputs if isinstance(v, torch.Tensor)}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            dtypes.add(value.dtype)
    if torch.float8_e4m3fn in dtypes:
        raise NeuronCompileError(
            "ERROR NCC_EVRF051 Data type F8E4M3FN is not supported on TRN1/TRN2 unless the experimental F8E4M3 "
            f"conversion flag is enabled {cite('float8')}"
        )


def _compile(key: str, gm: torch.fx.GraphModule) -> int:
    """The NEFF of ``key``, from the persistent cache or "compiled" into it; returns the compile time in us."""
    neff = _folder("TORCH_NEURONX_NEFF_CACHE_DIR", "neff_cache") / key[:2] / key[2:4] / f"{key}.neff"
    locks = _folder("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "local_cache")
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one compiler per graph at a time, across processes
        if neff.is_file() and neff.read_bytes().startswith(NEFF_MAGIC):
            return 0
        start = time.perf_counter()
        time.sleep(runtime.get().machine.compile_seconds)
        neff.parent.mkdir(parents=True, exist_ok=True)
        partial = neff.with_suffix(".partial")
        partial.write_bytes(NEFF_MAGIC + gm.code.encode())
        os.replace(partial, neff)
        return int((time.perf_counter() - start) * 1e6)


def _constants(gm: torch.fx.GraphModule) -> str:
    """A digest of the tensors the graph holds as constants (``get_attr``): their values are compiled in."""
    digest = hashlib.sha256()
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        owner, _, name = str(node.target).rpartition(".")
        value = getattr(gm.get_submodule(owner) if owner else gm, name, None)
        if device._plain(value) and isinstance(value, torch.Tensor):
            host = device.host_view(value) if value.device.type == "neuron" else value
            digest.update(f"{node.target}:{host.dtype}:{tuple(host.shape)}".encode())
            digest.update(host.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _replica_groups() -> str:
    """The process group's ranks when one is started (collectives are keyed by their replica groups)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return f"[{list(range(dist.get_world_size()))}]"
    return "[]"


def cache_key(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str:
    """The emulated persistent cache's key of one graph (rule ``cache_key``; its hashing is the emulator's)."""
    rt = runtime.get()
    packages = rt.machine.packages
    parts = [
        gm.code,
        _signature(example_inputs),
        packages.get("torch-neuronx", ""),
        packages.get("neuronx-cc", ""),
        packages.get("nki", ""),
        " ".join(os.environ.get("NEURON_CC_FLAGS", "").split()),
        "trn2",
        _replica_groups(),
        f"lnc={rt.lnc}",
        _constants(gm),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _on_host(gm: torch.fx.GraphModule) -> Any:
    """The graph with its ``neuron`` device arguments turned into ``cpu``: the emulated device runs a compiled
    graph as one program on the host bytes of its inputs (the NEFF's execution), not op by op."""
    from torch.utils._pytree import tree_map

    def cpu(value: Any) -> Any:
        return torch.device("cpu") if isinstance(value, torch.device) and value.type == "neuron" else value

    host = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for node in host.graph.nodes:
        node.args = tree_map(cpu, node.args)
        node.kwargs = tree_map(cpu, node.kwargs)
        if node.op == "get_attr":  # a constant the graph holds: its host bytes (gm keeps the device tensor alive)
            owner, _, name = str(node.target).rpartition(".")
            module = host.get_submodule(owner) if owner else host
            value = getattr(module, name)
            if device._plain(value) and value.device.type == "neuron":
                setattr(module, name, device.host_view(value))
    host.recompile()
    return host.forward


def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **options: Any) -> Any:
    """The ``neuron`` dynamo backend."""
    mode = options.get("mode")
    if mode not in (None, "default"):
        logger.warning("torch.compile mode %r is not supported by the neuron backend and is ignored %s",
                       mode, cite("compile_backend"))  # fmt: skip
    rt = runtime.get()
    rt.start()
    start = time.perf_counter()
    try:
        _refuse(gm, example_inputs)
        fx_us = int((time.perf_counter() - start) * 1e6)
        key = cache_key(gm, example_inputs)
        lower_start = time.perf_counter()
        compile_us = _compile(key, gm)
        lower_us = int((time.perf_counter() - lower_start) * 1e6) - compile_us
    except NeuronCompileError:
        if os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1").strip().lower() in ("0", "false"):
            logger.warning("graph failed to compile; running it eagerly %s", cite("fallback_execution"))
            return gm.forward
        raise
    METRICS[key] = {
        "torch_neuronx_fx_passes_us": fx_us,
        "torch_neuronx_lower_us": max(lower_us, 0),
        "torch_neuronx_compile_us": compile_us,
    }

    # A graph that builds DTensors (tensor parallelism) runs op by op on the device tensors, which keeps DTensor's
    # device bookkeeping; any other runs as one program on the host bytes of its inputs (much faster).
    sharded = "from_local" in gm.code or any(
        not device._plain(v) for v in example_inputs if isinstance(v, torch.Tensor)
    )
    host = None if sharded else _on_host(gm)

    def run(*args: Any) -> Any:
        device.EXECUTED.append(f"neff:{key[:12]}")
        with device.graph_execution():
            return gm.forward(*args) if host is None else device.run_on_host(host, args)

    return run


def register() -> None:
    """Register ``neuron`` as a dynamo backend name."""
    from torch._dynamo.backends.registry import register_backend

    register_backend(name="neuron")(backend)
    # Shapes that vary between steps recompile per new shape, never into one symbolic graph (how TorchNeuron keeps
    # them static is the emulator's: the docs state the behaviour only).
    torch._dynamo.config.automatic_dynamic_shapes = False
