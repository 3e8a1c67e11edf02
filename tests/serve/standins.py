"""Stand-ins for the serving run's tools, and a driver that runs ``trncat serve`` with them (fast: no model, no
torch). Each stand-in appends ``role pid pgid`` to ``$STANDIN_PIDS`` and starts a worker (a child in its group),
so a test can check by PID and process group that nothing of a run is left.

    python -m tests.serve.standins engine PORT      an engine: /health and /v1/completions on loopback
    python -m tests.serve.standins loadgen run --scenario FILE ...   guidellm's stand-in: requests, then a report
    python -m tests.serve.standins evaluate ...     lm-eval's stand-in: holds on
    python -m tests.serve.standins serve ARGS...    ``trncat serve ARGS`` with the stand-ins above

``$STANDIN_STAGE`` names the stage at which a stand-in sends ``$STANDIN_SIGNAL`` (TERM, INT, KILL) to its parent,
``trncat serve``, and then holds on: ``starting`` (the engine, before it answers), ``warm-up`` and ``mid-point``
(the load generator, after its first warm-up or measured request), ``between`` (the load generator, once the first
point's report is written), ``evaluating`` (the evaluator); at ``never-ready`` the engine never answers.
``engine-dies`` makes the load generator kill the engine (SIGKILL, from outside) at concurrency 2 and crash with
no report, as guidellm does.
``$STANDIN_ENGINE=guidellm-mock`` serves with guidellm's own mock server instead (for the real guidellm).
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
REPORT = ROOT / "tests" / "fixtures" / "guidellm-report.json"
WORKER = "import time; time.sleep(600)"


def report_doc(points: list[tuple[int, int, int, float]]) -> dict[str, Any]:
    """A guidellm report (as guidellm 0.8.1 writes one): (concurrency, successful, errored, output tok/s) per
    benchmark, each 3 s long."""
    doc = json.loads(REPORT.read_text(encoding="utf-8"))
    template = doc["benchmarks"][0]
    doc["benchmarks"] = []
    for concurrency, ok, errored, speed in points:
        benchmark = copy.deepcopy(template)
        benchmark["config"]["strategy"]["streams"] = concurrency
        times = benchmark["scheduler_metrics"]
        times["measure_end_time"] = times["measure_start_time"] + 3.0
        metrics = benchmark["metrics"]
        metrics["request_totals"] = {"successful": ok, "errored": errored, "incomplete": 0, "total": ok + errored}
        metrics["output_tokens_per_second"]["total"]["mean"] = speed
        for name, values in (
            ("time_to_first_token_ms", {"p50": 100.0, "p90": 150.0, "p99": 190.0}),
            ("time_per_output_token_ms", {"p50": 20.0, "p90": 25.0, "p99": 40.0}),
            ("inter_token_latency_ms", {"p50": 19.0, "p90": 24.0, "p99": 39.0}),
            ("request_latency", {"p50": 1.0, "p90": 1.2, "p99": 1.5}),
        ):
            successful = metrics[name]["successful"]
            successful["count"] = ok
            successful["percentiles"].update(values)
        doc["benchmarks"].append(benchmark)
    return doc


def _note(role: str) -> None:
    """Append this process to ``$STANDIN_PIDS`` and start its worker (a member of its process group)."""
    worker = subprocess.Popen([sys.executable, "-c", WORKER])
    with open(os.environ["STANDIN_PIDS"], "a", encoding="utf-8") as pids:
        pids.write(f"{role} {os.getpid()} {os.getpgid(0)}\n{role}-worker {worker.pid} {os.getpgid(0)}\n")


def _at(stage: str) -> None:
    """At ``$STANDIN_STAGE``: signal the parent (trncat serve) and hold on until ended."""
    if os.environ.get("STANDIN_STAGE") != stage:
        return
    print(f"stand-in: at {stage}", flush=True)
    os.kill(os.getppid(), getattr(signal, "SIG" + os.environ.get("STANDIN_SIGNAL", "TERM")))
    if stage != "between":
        time.sleep(600)


def engine(port: int) -> None:
    _note("engine")
    print("stand-in engine: starting", flush=True)
    _at("starting")
    if os.environ.get("STANDIN_STAGE") == "never-ready":
        time.sleep(600)
    if os.environ.get("STANDIN_ENGINE") == "guidellm-mock":
        from guidellm.mock_server import MockServer
        from guidellm.schemas.mock_server import MockServerConfig

        config = MockServerConfig(port=port, ttft_ms=200, itl_ms=50, output_tokens=8, request_latency=0.5)
        MockServer(config).run(access_log=False)
        return

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._answer({"status": "ok"})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            key = os.environ.get("VLLM_API_KEY")  # vLLM's rule: with a key, /v1 answers 401 to a request without it
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            usage = {"prompt_tokens": 16, "completion_tokens": 4, "total_tokens": 20}
            self._answer({"id": "c", "object": "text_completion", "choices": [{"text": " a b c d", "index": 0,
                          "finish_reason": "length"}], "usage": usage})  # fmt: skip

        def log_message(self, *args: object) -> None:
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def _request(target: str, key: str | None = None) -> None:
    body = json.dumps({"prompt": "hello", "max_tokens": 4}).encode()
    auth = {"Authorization": f"Bearer {key}"} if key else {}  # as guidellm sends its backend's api_key
    ask = urllib.request.Request(f"{target}/v1/completions", body, {"Content-Type": "application/json", **auth})
    with urllib.request.urlopen(ask, timeout=30) as answer:  # noqa: S310 - loopback
        answer.read()


def loadgen(argv: list[str]) -> None:
    scenario = json.loads(Path(argv[argv.index("--scenario") + 1]).read_text(encoding="utf-8"))
    _note("loadgen")
    target, key = scenario["spec"]["backend"]["target"], scenario["spec"]["backend"].get("api_key")
    points = []
    for benchmark in scenario["benchmarks"]:
        concurrency = benchmark["profile.streams"]
        print(f"stand-in loadgen: warm-up at concurrency {concurrency}", flush=True)
        _request(target, key)
        _at("warm-up")
        print(f"stand-in loadgen: measuring concurrency {concurrency}", flush=True)
        _request(target, key)
        _at("mid-point")
        if os.environ.get("STANDIN_STAGE") == "engine-dies" and concurrency == 2:
            for line in Path(os.environ["STANDIN_PIDS"]).read_text(encoding="utf-8").splitlines():
                role, pid, _ = line.split()
                if role == "engine":
                    os.kill(int(pid), signal.SIGKILL)
            print("stand-in loadgen: the engine went away; no report", flush=True)
            sys.exit(1)
        points.append((concurrency, 4 * concurrency, 0, 10.0 * concurrency))
    report = Path(scenario["spec"]["outputs"][0]["path"])
    report.write_text(json.dumps(report_doc(points)), encoding="utf-8")
    _at("between")


def evaluate() -> None:
    _note("evaluator")
    _at("evaluating")


# -- the test side ------------------------------------------------------------------------------------------
def model_folder(root: Path) -> Path:
    """A model folder the stand-in engine serves (no weights: nothing reads them)."""
    folder = root / "tiny-model"
    folder.mkdir(exist_ok=True)
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def start_serve(tmp: Path, stage: str, sig: str, *args: str, folder: Path | None = None) -> subprocess.Popen[bytes]:
    """``trncat serve`` of a stand-in model at concurrency 1 and 2 with the stand-ins, its processes noted in
    ``tmp/pids``, its record at ``tmp/out/record.json``, its register under ``tmp`` (``TMPDIR``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp), "STANDIN_PIDS": str(tmp / "pids")}
    env |= {"STANDIN_STAGE": stage, "STANDIN_SIGNAL": sig}
    argv = [sys.executable, "-m", "tests.serve.standins", "serve", str(folder or model_folder(tmp))]
    argv += ["--out", str(tmp / "out" / "record.json"), "--work", str(tmp / "work"), "--concurrency", "1,2"]
    argv += ["--no-warm-restart", *(["--eval", "trncat-tiny-arith"] if stage == "evaluating" else []), *args]
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def started(tmp: Path) -> list[tuple[str, int, int]]:
    """Every process the stand-ins started: (role, pid, process group)."""
    path = tmp / "pids"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [(role, int(pid), int(pgid)) for role, pid, pgid in (line.split() for line in lines)]


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def left(processes: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """The processes (by PID) and groups (by process group id) still alive."""
    from pipeline.backends import group_members

    groups = {pgid for _, _, pgid in processes}
    return [p for p in processes if alive(p[1])] + [("group", 0, g) for g in groups if group_members(g)]


def end(processes: list[tuple[str, int, int]]) -> None:
    """End what a failed test left: each group of its own, else each process (never this test's own group)."""
    from pipeline.backends import group_members

    for _, pid, pgid in processes:
        with contextlib.suppress(ProcessLookupError):
            if pgid != os.getpgid(0) and group_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
            elif alive(pid):
                os.kill(pid, signal.SIGKILL)


def serve(argv: list[str]) -> int:
    """``trncat serve ARGV``, its engine, load generator and evaluator the stand-ins above."""
    from pipeline.cli import main
    from pipeline.serve import EngineSpec, evals, loadgen, local

    me = [sys.executable, "-m", "tests.serve.standins"]

    def stand_in_engine(device: str, folder: Path, *, port: int, **_: Any) -> EngineSpec:
        return EngineSpec("transformers-serve", (*me, "engine", str(port)), port, str(folder), {}, {"device": device})

    local.engine_for = stand_in_engine  # type: ignore[assignment]
    if os.environ.get("STANDIN_LOADGEN") != "guidellm":
        loadgen.guidellm_command = lambda: [*me, "loadgen"]
    evals._lm_eval = lambda: [*me, "evaluate"]
    return main(["serve", *argv])


if __name__ == "__main__":
    role, rest = sys.argv[1], sys.argv[2:]
    if role == "engine":
        engine(int(rest[0]))
    elif role == "loadgen":
        loadgen(rest)
    elif role == "evaluate":
        evaluate()
    else:
        sys.exit(serve(rest))
