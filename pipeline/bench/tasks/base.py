"""What a task implements. Tasks run in the benchmark child, so they may import torch and their library.

The child (:mod:`pipeline.bench.child`) does what every task shares: load the model with the task's library,
count its weights, move it to the device (compiled when the backend compiles), time the first call (the
compile), the untimed warm-up calls, the memory peaks and the CPU fallback. The task says what one call of its
fixed workload is (:meth:`TaskRunner.call`), how its timed calls are measured (:meth:`TaskRunner.measure`) and
what answer the device's run is checked on (:meth:`TaskRunner.capture`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

#: The one line the failure rules match when a task whose library cannot shard is asked for several cores.
ONE_CORE = "{library} has no tensor parallelism: its models are benchmarked on one core"
#: Text the prompts are cut from: long enough for any workload once repeated.
PROMPT_TEXT = (
    "Engineers want to know, in minutes rather than weeks, whether a model runs on Trainium, how many "
    "NeuronCores it needs, how long it takes to compile and how fast it generates. "
)


@dataclass
class Run:
    """One benchmark in the child: the spec, the prepared model and what the task set up for its calls.

    Args:
        spec: The :class:`pipeline.bench.spec.BenchSpec`.
        backend: The backend of ``spec.device``.
        model: The prepared model (on the device; compiled when ``compiles``).
        processor: The task's tokenizer or processor (None when the model carries its own).
        compiles: Whether the run compiles.
        weights_bytes: Bytes of parameters and buffers (before sharding).
        state: What :meth:`TaskRunner.setup` built for the calls (inputs on the device, call arguments).
        clock: The clock of the timed calls.
        primary: Whether this process reports (rank 0 under torchrun).
    """

    spec: Any
    backend: Any
    model: Any
    processor: Any
    compiles: bool
    weights_bytes: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    clock: Callable[[], float] = time.perf_counter
    primary: bool = True


@dataclass
class Measured:
    """What a task's timed calls gave.

    Args:
        metrics: The record's metrics the task measured (``latency_s`` always).
        steady_s: The time the first call would have taken without compiling (the sum of the p50 of the calls
            the first call made): ``compile_s`` is the first call's excess over it.
        extra: Raw figures the parent keeps out of the record (the report's ``extra``).
    """

    metrics: dict[str, Any]
    steady_s: float
    extra: dict[str, Any] = field(default_factory=dict)


class TaskRunner:
    """One Hub task (``text-generation``, ``sentence-embeddings``, ...) run with its own library."""

    #: transformers auto class that loads the model (transformers tasks).
    auto_model: ClassVar[str] = ""
    #: transformers auto class that loads its tokenizer or processor (transformers tasks).
    auto_processor: ClassVar[str] = "AutoTokenizer"
    #: How a compiling run runs the prompt of a task that generates: ``chunked`` (through the compiled forward,
    #: transformers' chunked prefill), ``eager``; None for a task that does not generate.
    prefill: ClassVar[str | None] = None

    def load(self, path: Path, *, dtype: Any, world_size: int) -> Any:
        """Load the model from a local folder with transformers' own code (never remote code), as the child runs it:
        sharded by tensor parallelism under torchrun (transformers's ``tp_plan="auto"``)."""
        import transformers

        sharded = {"tp_plan": "auto"} if world_size > 1 else {}
        auto = getattr(transformers, self.auto_model)
        return auto.from_pretrained(path, dtype=dtype, trust_remote_code=False, **sharded).eval()

    def load_processor(self, path: Path) -> Any:
        """The task's tokenizer or processor, by :attr:`auto_processor` (transformers' own code, never remote code)."""
        import transformers

        return getattr(transformers, self.auto_processor).from_pretrained(path, trust_remote_code=False)

    def modules(self, model: Any) -> list[Any]:
        """The ``torch.nn.Module`` objects that hold the model's weights (a pipeline has several)."""
        return [model]

    def prepare(
        self, model: Any, backend: Any, *, compile: bool, fullgraph: bool, prefill_chunk: int | None = None
    ) -> Any:
        """Move the model to the device; when ``compile``, set it up to compile (the backend's own way), the
        prompt in compiled chunks of ``prefill_chunk`` tokens when given."""
        return backend.prepare(model, compile=compile, fullgraph=fullgraph, prefill_chunk=prefill_chunk)

    def setup(self, run: Run) -> None:
        """Build what the calls need (inputs on the device) into ``run.state``."""
        raise NotImplementedError

    def call(self, run: Run) -> None:
        """One call of the fixed workload, as the first (compiling) call and the warm-up make it."""
        raise NotImplementedError

    def measure(self, run: Run) -> Measured:
        """The timed calls (``run.spec.iterations`` each) and the task's metrics from them."""
        raise NotImplementedError

    def capture(self, run: Run, path: Path, *, perturb: bool = False) -> None:
        """Save the answer the device's run is checked on (:mod:`pipeline.bench.agreement`).

        ``perturb`` (tests only) makes a model that runs but answers wrong.
        """
        raise NotImplementedError


class OneCoreTask(TaskRunner):
    """A task whose library has no tensor parallelism (sentence-transformers, diffusers, transformers' pipelines):
    one core, the model carries its own processor, and a compiling run compiles one part of it in place."""

    #: The library, as the one-core failure names it.
    library: ClassVar[str] = ""

    def load(self, path: Path, *, dtype: Any, world_size: int) -> Any:
        if world_size > 1:
            raise RuntimeError(ONE_CORE.format(library=self.library))
        return self.load_pipeline(path, dtype=dtype)

    def load_pipeline(self, path: Path, *, dtype: Any) -> Any:
        """Load the model as its library's users do, on the CPU."""
        raise NotImplementedError

    def load_processor(self, path: Path) -> Any:
        return None  # the model carries its tokenizer or processor

    def prepare(
        self, model: Any, backend: Any, *, compile: bool, fullgraph: bool, prefill_chunk: int | None = None
    ) -> Any:
        model = self.to_device(model, backend.device())
        if compile:
            backend.compile_module(self.compiled_part(model), fullgraph=fullgraph)
        return model

    def to_device(self, model: Any, device: Any) -> Any:
        """The model moved to ``device``."""
        return model.to(device)

    def compiled_part(self, model: Any) -> Any:
        """The module a compiling run compiles in place."""
        return model


def quantiles(values: list[float]) -> dict[str, float]:
    """The record's ``{"p50", "p90"}`` of a non-empty list."""
    return {"p50": percentile(values, 50), "p90": percentile(values, 90)}


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty list."""
    import numpy as np

    return float(np.percentile(values, q))


def timed_calls(fn: Callable[[], Any], run: Run) -> list[float]:
    """``run.spec.iterations`` calls of ``fn``, each synchronized on ``run``'s backend; their wall times in seconds
    by ``run``'s clock."""
    times: list[float] = []
    for _ in range(run.spec.iterations):
        start = run.clock()
        fn()
        run.backend.synchronize()
        times.append(run.clock() - start)
    return times


def save_output(output: Any, path: Path, *, perturb: bool) -> None:
    """Save a one-tensor answer, batch first (``torch.save``: ``{"output": output}``); with ``perturb`` (tests) rolled
    by one along its last dimension, a wrong answer the check must catch."""
    import torch

    torch.save({"output": torch.roll(output, shifts=1, dims=-1) if perturb else output}, path)


def cosine_rows(a: Any, b: Any) -> float:
    """The smallest cosine similarity between matching rows of two tensors (flattened per row), in float64."""
    import torch

    x, y = a.double().flatten(1), b.double().flatten(1)
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: device {tuple(a.shape)}, reference {tuple(b.shape)}")
    return float(torch.nn.functional.cosine_similarity(x, y, dim=-1).min().item())
