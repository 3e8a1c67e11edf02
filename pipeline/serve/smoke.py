"""``trncat doctor --serving-smoke``: the tiny Llama (built here, no download) served by the device's engine and
swept at concurrency 1 and 2, summarised as what a first Trainium2 serving run settles (docs/neuron-facts.md,
"vLLM Neuron"): the engine answers ``/health`` and guidellm's ``/v1/completions`` requests (with ignore-EOS), its
cold and warm ready times (the warm one from the compile cache), the compiling package's version, and on
Trainium2 what vLLM Neuron's compile cache holds (its files by kind: the docs do not list them) and whether the
serving bundle packed it (:mod:`pipeline.serve.cache`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.backends.neuron import bundle_beside
from pipeline.serve.cache import compile_cache_dir, run_cache_root
from pipeline.serve.local import serve_folder
from pipeline.serve.options import ServeOptions
from pipeline.serve.workload import serving_workload


def serving_smoke(device: str, *, work: Path) -> dict[str, Any]:
    """One small serving run on ``device``; the summary of what it settles."""
    from pipeline.testing import build_tiny_llama

    folder = build_tiny_llama(work / "tiny-llama")
    workload = dataclasses.replace(serving_workload("cpu-tiny"), concurrencies=(1, 2))
    out, run_work = work / "serving-smoke.json", work / "serving-smoke.serving"
    record = serve_folder(
        folder,
        model_id="trncat-demo/tiny-llama",
        revision="0" * 40,
        options=ServeOptions(
            device=device,
            workload=workload,
            out=out,
            chips=1,
            dtype="bfloat16" if device != "cpu" else None,
            work=run_work,
        ),
    )
    serving = record["serving"]
    engine = serving["engine"]
    cache = compile_cache_dir(run_cache_root(run_work))
    kinds = Counter(p.suffix or p.name for p in cache.rglob("*") if p.is_file()) if cache.is_dir() else Counter()
    bundled = bundle_beside(out).is_file()
    return {
        "compile_cache_files": dict(sorted(kinds.items())),
        "bundle": "packed" if bundled else record.get("compiled_cache_skipped"),
        "device": device,
        "status": record["status"],
        "failure": record["failure"],
        "engine": engine["name"],
        "command": engine["command"],
        "ready_s": engine["ready_s"],
        "warm_ready_s": engine["warm_ready_s"],
        "success_rates": [p["success_rate"] for p in serving["points"]],
        "versions": serving["versions"],
        "stopped": serving["stopped"],
        "emulated": bool(record["hardware"].get("emulated")),
    }


def serving_smoke_line(summary: dict[str, Any]) -> str:
    failure = summary["failure"]
    why = f" ({failure['code']}: {failure['message'][:200]})" if failure else ""
    return (
        f"serving smoke on {summary['device']} ({summary['engine']}): {summary['status']}{why}; ready "
        f"{summary['ready_s']} s cold, {summary['warm_ready_s']} s warm; success {summary['success_rates']}; "
        f"versions {summary['versions']}"
        + (
            f"; compile cache {summary['compile_cache_files']}, bundle: {summary['bundle']}"
            if summary.get("compile_cache_files") or summary.get("bundle")
            else ""
        )  # fmt: skip
    )
