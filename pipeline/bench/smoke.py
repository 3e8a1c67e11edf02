"""``trncat doctor --smoke``: a tiny model built here, benchmarked through the real harness on 1 and 2 cores.

The smoke run is what proves a runner before its matrix spends hours: the tiny Llama (no download) on one
core and tensor parallel on two, each a full benchmark (compile, timed calls, warm start, answer check). Its
summary keeps what a first run on a trn2 settles: each rank's device count and visible cores (the record's
notes), TorchNeuron's compile figures on the cold run and the warm start, and whether the machine was emulated.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The record's metrics a smoke summary keeps (the compile figures cold, the warm start's, device memory).
SUMMARY_METRICS = ("compile_s", "warm_start_s", "cpu_fallback_ops", "neuronx_cc_s", "compiled_graphs",
                   "cached_graphs", "warm_start_cached_graphs", "prefill_mode", "peak_device_memory_bytes",
                   "peak_device_memory_reserved_bytes", "compile_cache_hit")  # fmt: skip


def smoke(backend: Any, *, work: Path, child_runner: Any = None, timeout_s: float = 1800.0) -> list[dict[str, Any]]:
    """A tiny Llama built here (no download), benchmarked on 1 core and on 2 (tensor parallel).

    Returns:
        One summary per run: cores, status, failure, the metrics of :data:`SUMMARY_METRICS`, agreement, notes,
        and whether the hardware was emulated.
    """
    from pipeline.bench import harness
    from pipeline.bench.process import run_child
    from pipeline.bench.spec import BenchOptions, BenchSpec
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
        record = harness.bench_once(spec, model, backend=backend, options=BenchOptions(timeout_s=timeout_s),
                                    child_runner=child_runner or run_child)  # fmt: skip
        m = record["metrics"]
        runs.append(
            {
                "cores": cores,
                "status": record["status"],
                "failure": record["failure"],
                **{name: m.get(name) for name in SUMMARY_METRICS},
                "agreement": (record.get("agreement") or {}).get("logits_cosine"),
                "emulated": bool(record["hardware"].get("emulated")),
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

    compiler = ""
    if run.get("compiled_graphs") is not None:
        compiler = (
            f"; neuronx-cc {seconds(run.get('neuronx_cc_s'))} over {run['compiled_graphs']} graph(s) "
            f"({run.get('cached_graphs')} cached), warm start served {run.get('warm_start_cached_graphs')} from cache"
        )
    emulated = " [EMULATED]" if run.get("emulated") else ""
    return (
        f"smoke {run['cores']} core(s): {verdict}{emulated}; compile {seconds(run['compile_s'])}, warm start "
        f"{seconds(run['warm_start_s'])}{compiler}; CPU fallback: {fell}; logits cosine {run['agreement']}"
    )
