"""The task score (issue 31): the real lm-eval, run as ``trncat serve`` runs it, against stand-in OpenAI completions
servers that answer the shipped task's sums right or wrong (its scoring is lm-eval's, its verdict the floor's),
and a serving record's verdict when the score is below the model's floor."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.records import validate_record
from pipeline.serve import EVAL_TASKS, EngineSpec, eval_task, free_port, run_eval, serve_model
from pipeline.serve import sweep as sweep_module
from pipeline.serve.loadgen import LoadRun
from pipeline.testing import build_tiny_llama
from tests.serve.conftest import report_of
from tests.serve.test_faults import _run

# four lm-eval runs (each a child process importing lm-eval and datasets): tens of seconds on two free cores
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EVAL_TASKS, reason="no eval task")]

#: An OpenAI-compatible completions server that reads "What is A plus B?" from the last question of the prompt
#: and answers A + B (or A + B + 1 with "wrong"): lm-eval's requests, its filter and its metric are the real ones.
STAND_IN = r"""
import http.server, json, re, sys
WRONG = sys.argv[2] == "wrong"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = []
        for i, prompt in enumerate(prompts):
            found = re.findall(r"What is (\d+) plus (\d+)\?", prompt) or [("0", "0")]  # readiness: "Hello"
            a, b = map(int, found[-1])
            choices.append({"index": i, "text": f" {a + b + WRONG}\n", "finish_reason": "stop", "logprobs": None})
        out = json.dumps({"id": "x", "object": "text_completion", "model": body["model"], "choices": choices}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _stand_in_argv(port: int, mode: str) -> tuple[str, ...]:
    return (sys.executable, "-c", STAND_IN, str(port), mode)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("tok") / "tiny-llama")


def _spec(port: int, mode: str) -> EngineSpec:
    return EngineSpec("transformers-serve", _stand_in_argv(port, mode), port, "tiny", {}, {"device": "cpu"})


def _serving(port: int, mode: str) -> Iterator[EngineSpec]:
    process = subprocess.Popen(_stand_in_argv(port, mode))
    try:
        for _ in range(200):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield _spec(port, mode)
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(("mode", "score"), [("right", 1.0), ("wrong", 0.0)])
def test_lm_eval_scores_the_shipped_task_against_the_endpoint(
    mode: str, score: float, tokenizer: Path, tmp_path: Path
) -> None:
    task = eval_task("trncat-tiny-arith", floor=0.5)
    for spec in _serving(free_port(), mode):
        result = run_eval(spec, task, tmp_path, tokenizer=tokenizer, timeout_s=600, model_id="acme/tiny")
    assert result["score"] == score, result["output_tail"]
    # the command reproduces it anywhere: lm-eval by name, the tokenizer by its Hub id, no path of this machine
    assert result["command"].startswith("lm-eval run ") and "tokenizer=acme/tiny," in result["command"]
    assert str(tmp_path) not in result["command"] and str(tokenizer) not in result["command"]
    assert result["passed"] is (score >= 0.5)
    assert result["tool"]["name"] == "lm-eval" and result["tool"]["version"] != "unknown"
    assert "local-completions" in result["command"] and "--trust_remote_code" not in result["command"]
    assert result["floor_source"] == "given for this model"


def test_no_score_is_said_and_a_score_below_the_floor_fails_the_serving_record(
    tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the sweep's load generator is a canned report (the faults tests' way); lm-eval and the endpoint are real
    def fake_guidellm(doc, folder, *, timeout_s, name):  # noqa: ANN001
        return LoadRun(report_of((1, 8, 0, 40.0), (2, 16, 0, 70.0), (4, 32, 0, 90.0)), 0, "", ("guidellm", "run"))

    monkeypatch.setattr(sweep_module, "run_guidellm", fake_guidellm)
    port = free_port()
    run = _run(tokenizer=tokenizer, group=3, eval_task=eval_task("trncat-tiny-arith", floor=0.5))
    record = serve_model(_spec(port, "wrong"), run, tmp_path / "wrong")
    assert record["schema_version"] == "2.0" and validate_record(record) == [], record["notes"]
    assert record["status"] == "fail" and record["failure"]["code"] == "eval_below_floor"
    assert record["failure"]["stage"] == "accuracy" and record["serving"]["eval"]["score"] == 0.0
    assert record["serving"]["points"], "the sweep's points are kept"
    # the stated test floor of the shipped task (0.0): the same answers pass it
    record = serve_model(
        _spec(free_port(), "wrong"),
        _run(tokenizer=tokenizer, group=3, eval_task=EVAL_TASKS["trncat-tiny-arith"]),
        tmp_path / "floor",
    )
    assert record["status"] == "pass" and record["serving"]["eval"]["passed"] is True
    # a pass beside a score below its floor is refused by validation, as is a verdict that is not the score's
    forged = json.loads(json.dumps(record))
    forged["serving"]["eval"] |= {"floor": 0.5}
    assert {field for field, _ in validate_record(forged)} >= {"serving.eval.passed"}
    forged["serving"]["eval"]["passed"] = False
    assert {field for field, _ in validate_record(forged)} == {"status"}
