"""The interface every backend implements, with the defaults most of them share, and the registry of backends.

A backend is the only thing that differs between a CPU, a CUDA and a Neuron run: the device string, how
to synchronize, whether and how ``generate()`` is compiled, peak device memory, memory per core, versions,
the environment and the launcher for N cores. The child (:mod:`pipeline.bench.child`) and the parent
(:mod:`pipeline.bench.harness`) call only these methods.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pipeline
from pipeline.errors import ConfigError
from pipeline.registry import load_entry


def package_version(name: str) -> str | None:
    """Installed version of distribution ``name`` without importing it, or None.

    Args:
        name: Distribution name as pip knows it (``torch-neuronx``, ``neuronx-cc``).

    Returns:
        The version string, or None when the distribution is not installed.
    """
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def world_of(env: Mapping[str, str] | None = None) -> tuple[int, int, int]:
    """``(rank, local_rank, world_size)`` as torchrun sets them; ``(0, 0, 1)`` outside torchrun.

    Args:
        env: Environment to read; ``os.environ`` when None.

    Returns:
        The three integers.
    """
    env = os.environ if env is None else env
    return int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), int(env.get("WORLD_SIZE", "1"))


def enable_generate_compile(
    model: Any, *, backend: str, fullgraph: bool, mode: str | None = None, prefill_chunk: int | None = None
) -> None:
    """Make ``model.generate()`` compile its decode step: static KV cache and a ``CompileConfig``.

    transformers compiles the forward inside ``generate()`` when the cache is static and the device type is
    one it trusts (cuda, neuron, ...); ``dynamic=False`` because the static cache keeps every shape fixed.
    Without chunked prefill the prompt's forward runs eagerly, op by op; with ``prefill_chunk`` (transformers'
    ``prefill_chunk_size``) ``generate()`` runs the prompt through the compiled forward too, in chunks of that
    many tokens, as AWS's TorchNeuron inference tutorial does (docs/neuron-facts.md).

    Args:
        model: A transformers model with a ``generation_config``.
        backend: ``torch.compile`` backend name (``neuron``, ``inductor``).
        fullgraph: Whether a graph break is an error instead of a split graph.
        mode: ``torch.compile`` mode; None keeps transformers' default.
        prefill_chunk: Tokens per compiled prefill chunk; None leaves the prefill eager.
    """
    import torch._dynamo
    from transformers import CompileConfig

    # A compile error must fail the run, never fall back to eager behind our back.
    torch._dynamo.config.suppress_errors = False
    compile_config = CompileConfig(backend=backend, dynamic=False, fullgraph=fullgraph)
    if mode is not None:
        compile_config.mode = mode
    config = model.generation_config
    config.cache_implementation = "static"
    config.compile_config = compile_config
    config.disable_compile = False
    if prefill_chunk is not None:
        config.prefill_chunk_size = prefill_chunk


def sum_across_ranks(value: int) -> int:
    """Sum an integer over the torch.distributed ranks, on the host (the value itself when not distributed).

    The values are gathered over a gloo group on the CPU (:func:`gather_across_ranks`), never through the device's
    collectives: neuronx-cc rejects an integer all-reduce on the Neuron device by default (docs/neuron-facts.md),
    and bookkeeping has no business on the accelerator anyway. Every rank must call it (a collective call).
    """
    return sum(gather_across_ranks(value))


def gather_across_ranks(value: Any) -> list[Any]:
    """Every rank's ``value`` (picklable), in rank order, over the host group; ``[value]`` when not distributed.
    Every rank must call it."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value, group=_host_group())
    return gathered


@functools.cache
def _host_group() -> Any:
    """A gloo process group over every rank (the default group when it is gloo already)."""
    import torch.distributed as dist

    return None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")


#: The record's ``hardware`` fields, in the record's order.
HARDWARE_FIELDS = ("name", "instance_type", "accelerator", "core_config", "memory_per_core_bytes", "cores_available")


def hardware_record(**known: Any) -> dict[str, Any]:
    """The record's ``hardware`` object: the fields a backend knows, the others of :data:`HARDWARE_FIELDS` None."""
    return {**dict.fromkeys(HARDWARE_FIELDS), **known}


@dataclass(frozen=True)
class CompiledRun:
    """What a pass's compile cache was compiled for, as its bundle's key manifest names it."""

    model_dir: Path
    task: str
    dtype: str
    workload: dict[str, Any]
    cores: int


#: Installing a record's requirements into a new virtual environment (system pips refuse: PEP 668).
FRESH_VENV = "python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt"


class Backend:
    """One kind of device. Subclasses override what differs; the harness calls only these methods.

    The methods that touch torch are called in the benchmark child process only, so importing a backend
    module never imports torch or a device runtime.
    """

    name: ClassVar[str] = ""
    #: dtype of a run that asks for none.
    default_dtype: ClassVar[str] = "bfloat16"
    #: (distribution, record version key) of the packages that name this backend's toolchain, in label order.
    toolchain_packages: ClassVar[tuple[tuple[str, str], ...]] = (("torch", "torch"), ("transformers", "transformers"))
    #: Whether generated requirements pin the torchvision that matches torch (image-text-to-text processors
    #: import it; the CPU rows come from development machines where it cannot be installed).
    pins_torchvision: ClassVar[bool] = True
    #: Whether eager ops the device does not implement run on the CPU instead (silently, unless recorded).
    cpu_fallback: ClassVar[bool] = False
    #: Whether a run on several cores shards the model over them (one torchrun process per core).
    shards_over_cores: ClassVar[bool] = False
    #: `torch.compile` backend name used when the run compiles, or None when this backend cannot compile.
    compile_backend: ClassVar[str | None] = None
    #: Whether runs compile when the spec does not say.
    compile_by_default: ClassVar[bool] = False
    #: Whether a compiling run also compiles the prompt's forward (chunked prefill) instead of running it eagerly.
    compiles_prefill: ClassVar[bool] = False

    # -- no instance needed ------------------------------------------------------------------------
    @classmethod
    def requirement_lines(cls, versions: Mapping[str, Any]) -> list[str]:
        """Lines a generated requirements.txt needs before torch for this device (an index, its packages).

        Args:
            versions: The record's versions, local ``+build`` labels removed.
        """
        return []

    @classmethod
    def install_commands(cls, versions: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(where, one-line command) pairs that install a record's requirements before ``python run.py``."""
        return [("anywhere else, in a fresh virtual environment", FRESH_VENV)]

    @classmethod
    def toolchain_label(cls, row: Mapping[str, Any]) -> str:
        """A short human label of the toolchain a flat row ran with (``torch 2.13.0, transformers 5.0``)."""
        return ", ".join(f"{package} {row.get(f'{key}_version')}" for package, key in cls.toolchain_packages)

    # -- parent side: no torch needed -------------------------------------------------------------
    def cores_for(self, *, requested: int | None, planned: int | None) -> int:
        """Cores a run shards over: the requested count, else one (backends that follow the plan override)."""
        return requested or 1

    def check_available(self) -> None:
        """Raise :class:`pipeline.errors.BackendUnavailableError` (one clear line) when unusable here."""

    def preflight(self) -> str | None:
        """Why this machine cannot give a trustworthy run right now (an infrastructure ``error``), or None."""
        return None

    #: Whether compiled programs persist across processes in a cache directory the run can own, so that a
    #: second process measures the warm start (load + first call served from that cache).
    has_compile_cache: ClassVar[bool] = False

    def environment(self, *, cores: int, compile_cache: Path | None = None) -> dict[str, str]:
        """Environment variables the benchmark child needs for ``cores`` cores (and its own compile cache)."""
        return {}

    def compile_cache_hit(self, cache_dir: Path, before: set[str]) -> bool | None:
        """Whether a process that ran with ``cache_dir`` was served from it (no new file since ``before``)."""
        return None

    def compile_cache_files(self, cache_dir: Path) -> set[str]:
        """The files in a compile cache directory (what :meth:`compile_cache_hit` compares)."""
        return set()

    def bundle_compile_cache(
        self, cache_dir: Path, out: Path, run: CompiledRun
    ) -> tuple[str | None, dict[str, Any] | None]:
        """Pack the compile cache of the pass ``run`` into the bundle ``out`` with its key manifest inside: (why
        there is no bundle, or None; the key manifest when there is one)."""
        return f"the {self.name} backend ships no compiled cache", None

    def launcher(self, *, cores: int, module_args: Sequence[str]) -> list[str]:
        """The command that runs ``python -m <module_args>`` on ``cores`` cores: plain python on one core or on a
        backend that does not shard, ``torch.distributed.run`` (torchrun) on one node with one process per core
        otherwise (``--standalone`` picks a free rendezvous port). An argument list, never a shell string.

        Args:
            cores: Cores the model is sharded over.
            module_args: Module name followed by its arguments, e.g.
                ``["pipeline.bench.child", "--spec", "spec.json"]``.

        Returns:
            The argument list for ``subprocess``.

        Raises:
            ConfigError: ``module_args`` does not start with a module name.
        """
        if not module_args or not module_args[0] or module_args[0].startswith("-"):
            raise ConfigError("module_args must start with the module name to run")
        if cores > 1 and self.shards_over_cores:
            torchrun = ["torch.distributed.run", "--standalone", "--nproc-per-node", str(cores), "-m"]
            return [sys.executable, "-m", *torchrun, *module_args]
        return [sys.executable, "-m", *module_args]

    def versions(self) -> dict[str, str | None]:
        """Versions recorded in every result of this backend (package metadata, no imports)."""
        return {
            "pipeline": pipeline.__version__,
            "python": platform.python_version(),
            "torch": package_version("torch") or "unknown",
            "transformers": package_version("transformers") or "unknown",
            # what a device's own backend fills in
            **dict.fromkeys(("torch_neuronx", "neuronx_cc", "runtime", "driver", "sdk", "container_image", "cuda")),
            "torchvision": package_version("torchvision"),
        }

    def hardware(self, *, cores: int) -> dict[str, Any]:
        """The record's ``hardware`` object."""
        raise NotImplementedError

    def bandwidth_bytes_per_s(self, *, cores: int) -> float | None:
        """Memory bandwidth available to ``cores`` cores, for the roofline; None when unknown."""
        return None

    def will_compile(self, *, requested: bool | None) -> bool:
        """Whether a run compiles: ``requested`` when given, else the backend's default.

        Raises:
            ConfigError: compilation was asked of a backend that has no compile backend.
        """
        wanted = self.compile_by_default if requested is None else requested
        if wanted and self.compile_backend is None:
            raise ConfigError(f"the {self.name} backend does not compile")
        return wanted

    def failure_notes(self, *, code: str, since: float) -> list[str]:
        """What the machine recorded about a failure of this kind since ``since`` (a Unix time), for the notes."""
        return []

    # -- child side --------------------------------------------------------------------------------
    def setup_process(self) -> None:
        """Prepare this benchmark process before torch is imported (the device runtime reads its environment
        once, when it starts)."""

    def start_distributed(self) -> None:
        """Start torch.distributed the device's way before the model is loaded (under torchrun only)."""

    def device(self) -> Any:
        """The torch device models and inputs go to."""
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait for queued device work (timings are only true after it)."""

    def reset_peak_memory(self) -> None:
        """Start a fresh peak-memory window."""

    def peak_memory_bytes(self) -> int | None:
        """Peak device memory since the last reset, or None when the backend has no device memory."""
        return None

    def prepare(
        self, model: Any, *, compile: bool = False, fullgraph: bool = True, prefill_chunk: int | None = None
    ) -> Any:
        """Move ``model`` to the device, and set ``generate()`` up to compile when ``compile``.

        Args:
            model: The loaded model (on the CPU, or already placed by ``tp_plan``).
            compile: Whether ``generate()`` compiles (see :meth:`will_compile`).
            fullgraph: Passed to ``torch.compile``.
            prefill_chunk: Tokens per compiled prefill chunk (backends with :attr:`compiles_prefill`), or None.

        Returns:
            The model to call.
        """
        if world_of()[2] == 1:  # under tp_plan transformers has already placed the shards
            model = model.to(self.device())
        if compile and self.compile_backend is not None:
            enable_generate_compile(model, backend=self.compile_backend, fullgraph=fullgraph, mode=self.compile_mode,
                                    prefill_chunk=prefill_chunk)  # fmt: skip
        return model

    #: ``torch.compile`` mode of :meth:`compile_module` (None: torch's default).
    compile_mode: ClassVar[str | None] = None

    def compile_module(self, module: Any, *, fullgraph: bool = True) -> None:
        """Compile ``module`` in place (``nn.Module.compile``) with this backend's ``torch.compile`` backend, over
        fixed shapes (``dynamic=False``): what the sentence-embeddings and text-to-image tasks compile."""
        if self.compile_backend is None:
            raise ConfigError(f"the {self.name} backend does not compile")
        options: dict[str, Any] = {"backend": self.compile_backend, "dynamic": False, "fullgraph": fullgraph}
        if self.compile_mode is not None:
            options["mode"] = self.compile_mode
        module.compile(**options)

    def observations(self) -> list[str]:
        """What this process sees of the device that the docs do not settle (recorded in the record's notes).
        Under torchrun every rank calls it."""
        return []

    def compile_figures(self) -> dict[str, Any]:
        """The compiler's own figures of this process so far (record metrics), or {} when it reports none."""
        return {}

    def memory_figures(self) -> dict[str, Any]:
        """Device-memory figures beside the peak (record metrics); every rank calls it."""
        return {}

    def run_notes(self) -> list[str]:
        """What this process could not measure and did instead (recorded in the record's notes)."""
        return []

    def fallback_counts(self) -> dict[str, int] | None:
        """How many times each op has run on the CPU instead of the device so far in this process.

        None when the backend has no such fallback (cpu, cuda) or cannot observe it.
        """
        return None

    def fallback_ops(self, before: dict[str, int] | None) -> list[dict[str, Any]] | None:
        """The ops that fell back to the CPU since ``before`` (:meth:`fallback_counts`), as ``{op, count}``."""
        after = self.fallback_counts()
        if after is None or before is None:
            return None
        grown = {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0)}
        return [{"op": op, "count": n} for op, n in sorted(grown.items())]


#: name -> "module:Class". Adding a backend = one module + one line here + tests.
REGISTRY: dict[str, str] = {
    "cpu": "pipeline.backends.cpu:CpuBackend",
    "cuda": "pipeline.backends.cuda:CudaBackend",
    "neuron": "pipeline.backends.neuron:NeuronBackend",
}


@functools.cache
def backend_class(name: str) -> type[Backend]:
    """The class of the backend called ``name``, for what it knows without an instance (dtype, requirements);
    looked up once per name (a check labels every family row's toolchain with it: thousands of rows at 100k
    models).

    Raises:
        ConfigError: no such backend.
    """
    cls: type[Backend] = load_entry(REGISTRY, name, what="device")
    return cls


def get_backend(name: str) -> Backend:
    """Instantiate the backend called ``name`` (importing nothing device-specific yet).

    Raises:
        ConfigError: no such backend.
    """
    return backend_class(name)()
