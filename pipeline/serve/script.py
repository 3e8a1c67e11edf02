"""serve.sh, run.py's sibling: the exact commands that reproduce a serving row, pinned like requirements.txt.

It is made from the record alone (every value shell-quoted: a record is untrusted): the pinned installs, the
engine's command as the run started it, a wait for ``/health``, and the load generator's command per group of
points with the scenario the run used, written next to it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from pipeline.serve.workload import ServingWorkload

_PINNED = ("guidellm", "transformers", "torch", "vllm", "vllm_neuron", "libtorch_neuronx_lite")
_PIP_NAMES = {"vllm_neuron": "vllm-neuron", "libtorch_neuronx_lite": "libtorch-neuronx-lite"}


def _pins(record: dict[str, Any]) -> list[str]:
    versions = {**(record.get("versions") or {}), **(record["serving"].get("versions") or {})}
    out = []
    for name in _PINNED:
        value = versions.get(name)
        if isinstance(value, str) and value and value != "unknown":
            out.append(f"{_PIP_NAMES.get(name, name)}=={value.split('+')[0]}")
    return out


def serve_script(record: dict[str, Any]) -> str:
    """The text of serve.sh for a serving record."""
    serving = record["serving"]
    engine = serving["engine"]
    workload = serving["workload"]
    contract = ServingWorkload.from_record(workload)
    lines = [
        "#!/usr/bin/env bash",
        f"# Reproduces the serving row of {record['model_id']} at {record['revision']} on {record['device']}",
        f"# ({serving['tool']['name']} {serving['tool']['version']}, {engine['name']}, workload {contract.name}).",
        "# MODEL: the model's folder (downloaded at that revision). The engine listens on loopback only.",
        "set -euo pipefail",
        'MODEL="${MODEL:?set MODEL to the model folder}"',
        "PORT=${PORT:-8000}",
        "python -m pip install " + " ".join(shlex.quote(p) for p in _pins(record)),
        "# the engine, as the run started it (its model path and port replaced by $MODEL and $PORT)",
        _engine_line(str(engine["command"])) + " &",
        "ENGINE=$!",
        "trap 'kill $ENGINE' EXIT",
        'until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 2; done',
        "# the load generator: the scenario the run used (its synthetic images too), one guidellm run over the sweep",
        "cat > scenario.json <<'SCENARIO'",
        json.dumps(_scenario_template(engine["name"], contract), indent=2, sort_keys=True),
        "SCENARIO",
        'sed -i "s|@MODEL@|$MODEL|g; s|@PORT@|$PORT|g" scenario.json',
        "guidellm run --scenario scenario.json --disable-console-interactive",
        "",
    ]
    return "\n".join(lines)


def _engine_line(command: str) -> str:
    """The engine's command with its console script by name, the model (the word after ``serve``) as ``$MODEL``
    and its port as ``$PORT``; every other word quoted."""
    words = shlex.split(command)
    at = words.index("serve") if "serve" in words else -1
    out = []
    for index, word in enumerate(words):
        if index == at + 1 and at >= 0:
            out.append('"$MODEL"')
        elif index and words[index - 1] == "--port":
            out.append('"$PORT"')
        elif index == at - 1:
            out.append(shlex.quote(word.rsplit("/", 1)[-1]))  # the console script by name, not this machine's path
        else:
            out.append(shlex.quote(word))
    return " ".join(out)


def _scenario_template(engine: str, workload: ServingWorkload) -> dict[str, Any]:
    from pathlib import Path

    from pipeline.serve.engine import EngineSpec
    from pipeline.serve.loadgen import scenario

    spec = EngineSpec(str(engine), (), 0, "@MODEL@")
    doc = scenario(spec, workload, list(workload.concurrencies), tokenizer=Path("@MODEL@"), report=Path("report.json"))
    doc["spec"]["backend"]["target"] = "http://127.0.0.1:@PORT@"
    return doc
