"""``trncat doctor --serving-smoke``: the tiny Llama (built here, no download) served by the device's engine and
swept at concurrency 1 and 2, summarised as what a first Trainium2 serving run settles (docs/neuron-facts.md,
"vLLM Neuron"): the engine answers ``/health`` and guidellm's ``/v1/completions`` requests (with ignore-EOS), its
cold and warm ready times (the warm one from the compile cache), and the compiling package's version.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pipeline.serve.local import serve_folder
from pipeline.serve.workload import serving_workload


def serving_smoke(device: str, *, work: Path) -> dict[str, Any]:
    """One small serving run on ``device``; the summary of what it settles."""
    from pipeline.testing import build_tiny_llama

    folder = build_tiny_llama(work / "tiny-llama")
    workload = dataclasses.replace(serving_workload("cpu-tiny"), concurrencies=(1, 2))
    record = serve_folder(
        folder,
        device=device,
        workload=workload,
        model_id="trncat-demo/tiny-llama",
        revision="0" * 40,
        out=work / "serving-smoke.json",
        chips=1,
        dtype="bfloat16" if device != "cpu" else None,
    )
    serving = record["serving"]
    engine = serving["engine"]
    return {
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
    )
