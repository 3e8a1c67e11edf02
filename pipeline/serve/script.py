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
        *_cache_lines(record, str(engine["command"])),
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
        if index < at and word.startswith("VLLM_CACHE_ROOT="):
            out.append('VLLM_CACHE_ROOT="$CACHE_ROOT"')  # the run's own folder: this machine's is set above
        elif index == at + 1 and at >= 0:
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


#: serve.sh's fetch of a row's serving bundle: the file at its commit, its sha256 checked before anything is read,
#: regular NEFF and JSON members only (the bundle's rule, checked by publish too), unpacked where vLLM Neuron looks.
_FETCH = """\
import hashlib, sys, tarfile
from pathlib import Path
from huggingface_hub import hf_hub_download
repo, revision, path, sha256 = {values}
bundle = hf_hub_download(repo, path, revision=revision)
digest = hashlib.sha256()
with open(bundle, "rb") as f:
    for piece in iter(lambda: f.read(1 << 20), b""):
        digest.update(piece)
if digest.hexdigest() != sha256:
    sys.exit(f"{{bundle}}: sha256 {{digest.hexdigest()}}, not the row's {{sha256}}: not unpacked")
with tarfile.open(bundle) as tar:
    for member in tar.getmembers():
        if not member.isfile() or not member.name.endswith((".neff", ".json")):
            sys.exit(f"{{member.name}}: not a NEFF or JSON file: the bundle is not unpacked")
    tar.extractall(Path(sys.argv[1]) / "neuron" / "compile_cache", filter="data")
"""


def _cache_lines(record: dict[str, Any], command: str) -> list[str]:
    """Where vLLM Neuron's compile cache goes: the row's serving bundle unpacked into a fresh folder when the row
    has one (the engine starts warm), else ``$VLLM_CACHE_ROOT`` or vLLM's default. Nothing for another engine."""
    if "VLLM_CACHE_ROOT=" not in command:
        return []
    cache = record.get("compiled_cache")
    if not cache:
        return ['CACHE_ROOT="${VLLM_CACHE_ROOT:-$HOME/.cache/vllm}"  # no serving bundle was published for this row']
    values = (cache["repo_id"], cache["revision"], cache["path"], cache["sha256"])  # schema-checked patterns
    return [
        f"# the compile cache this row's run made ({cache['sha256'][:16]}, {cache['files']} files): the engine "
        "starts warm from it",
        'CACHE_ROOT="$(mktemp -d)"',
        "python - \"$CACHE_ROOT\" <<'BUNDLE'",
        _FETCH.format(values=repr(values)).rstrip("\n"),
        "BUNDLE",
    ]
