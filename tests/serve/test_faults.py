"""The serving run's faults, each a verdict and a reason, with stand-in engines (fast: no model, no torch)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pipeline.backends import group_members
from pipeline.records import validate_record
from pipeline.serve import (
    EngineSpec,
    ServeOptions,
    ServingRun,
    ServingWorkload,
    free_port,
    serve_model,
)
from pipeline.serve import sweep as sweep_module
from pipeline.serve.loadgen import LoadRun
from tests.serve.conftest import fake_engine_argv, report_of
from tests.serve.standins import end, left, start_serve, started

if TYPE_CHECKING:
    from guidellm.benchmark import GenerativeBenchmarksReport

WORKLOAD = ServingWorkload(name="cpu-tiny", input_tokens=16, output_tokens=4, concurrencies=(1, 2, 4))
HARDWARE = {
    "name": "cpu-x86_64",
    "instance_type": None,
    "accelerator": "cpu",
    "core_config": None,
    "memory_per_core_bytes": None,
    "cores_available": None,
}
VERSIONS: dict[str, str | None] = {"pipeline": "0.1.0", "python": "3.11.7", "torch": "2.13.0", "transformers": "5.0"}


def _run(**changes: Any) -> ServingRun:
    """A CPU run on :data:`WORKLOAD`; ``changes`` to its options or to the run."""
    how: dict[str, Any] = dict(
        device="cpu", workload=WORKLOAD, out=Path("/nonexistent/record.json"), ready_timeout_s=20, warm_restart=False
    )
    values: dict[str, Any] = dict(
        model_id="trncat-demo/tiny-llama",
        revision="0" * 40,
        tokenizer=Path("/nonexistent"),
        hardware=dict(HARDWARE),
        versions=dict(VERSIONS),
        params=1000,
    )
    options = {f.name for f in dataclasses.fields(ServeOptions)}
    for name, value in changes.items():
        (how if name in options else values)[name] = value
    return ServingRun(options=ServeOptions(**how), **values)


def _spec(argv: tuple[str, ...], port: int) -> EngineSpec:
    return EngineSpec("transformers-serve", argv, port, "/nonexistent", {}, {"device": "cpu"})


def _gone(pgid: int) -> bool:
    return group_members(pgid) == []


def test_a_port_in_use_is_an_error_record_that_says_so(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        record = serve_model(_spec(fake_engine_argv(port), port), _run(), tmp_path)
    assert record["status"] == "error"
    assert (record["failure"]["stage"], record["failure"]["code"]) == ("load", "port_in_use")
    assert str(port) in record["failure"]["message"]
    assert validate_record(record) == []


def test_an_engine_that_never_becomes_ready_is_an_infra_error_with_its_log_tail(tmp_path: Path) -> None:
    argv = (sys.executable, "-c", "import sys, time; print('loading the model slowly', flush=True); time.sleep(600)")
    port = free_port()
    record = serve_model(_spec(argv, port), _run(ready_timeout_s=2), tmp_path)
    assert record["status"] == "error"
    assert (record["failure"]["stage"], record["failure"]["code"]) == ("timeout", "engine_not_ready")
    assert "loading the model slowly" in record["serving"]["engine"]["log_tail"]
    assert record["serving"]["points"] == []
    assert validate_record(record) == []


def _as_bench_records_it(log: str, returncode: int, stage: str) -> tuple[str, str, str]:
    """What ``trncat bench`` records for a child that printed ``log`` at ``stage`` and exited with ``returncode``."""
    from pipeline.bench.process import ChildOutcome

    outcome = ChildOutcome({"stage": stage, "metrics": {}, "done": False}, returncode, False, False, log)
    found = outcome.failure(timeout_s=60)
    assert found is not None
    return found[0], found[1]["stage"], found[1]["code"]


@pytest.mark.parametrize(
    ("log", "verdict"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", ("fail", "oom", "device_oom")),
        ("ValueError: The checkpoint you are trying to load has model type `nope` but Transformers does not "
         "recognize this architecture.", ("fail", "load", "unknown_architecture")),
        ("ERROR: [Errno 98] error while attempting to bind: address already in use", ("error", "load", "port_in_use")),
        ("ValueError: The hidden size (10) is not a multiple of the number of attention heads (3)",
         ("fail", "load", "bad_config")),
        ("OSError: [Errno 28] No space left on device", ("error", "load", "disk_full")),
    ],
)  # fmt: skip
def test_an_engine_that_exits_at_start_is_classified_as_bench_classifies_its_child(
    tmp_path: Path, log: str, verdict: tuple[str, str, str]
) -> None:
    """Issue 48.4: one event, one verdict: a broken config was `error` from serve and `fail` from bench."""
    argv = (sys.executable, "-c", f"import sys; print({log!r}, file=sys.stderr); sys.exit(1)")
    record = serve_model(_spec(argv, free_port()), _run(), tmp_path)
    assert (record["status"], record["failure"]["stage"], record["failure"]["code"]) == verdict
    assert _as_bench_records_it(log, 1, "load") == verdict  # the same stage, code and retry rule
    assert log[:30] in record["serving"]["engine"]["log_tail"]
    assert validate_record(record) == []


def test_a_feature_asked_of_an_engine_that_never_served_is_not_probed_and_the_run_s_verdict_decides_it(
    tmp_path: Path,
) -> None:
    """Issue 49: the engine exits at start with prefix caching's flags on: the record names the feature, unprobed
    (``passed`` None), and the stage matrix takes the run's fail as the feature's (the engine did not serve with it)."""
    from pipeline.queue import load_support, matrix_rows

    argv = (sys.executable, "-c", "import sys; print('AssertionError: block_size must be set', file=sys.stderr); "
            "sys.exit(1)")  # fmt: skip
    record = serve_model(_spec(argv, free_port()), _run(features=("prefix_caching",)), tmp_path)
    assert record["status"] == "fail" and validate_record(record) == [], record["failure"]
    [feature] = record["serving"]["features"]
    assert (feature["name"], feature["passed"], feature["hit_rate"]) == ("prefix_caching", None, None)
    rows = matrix_rows(models=[(record["model_id"], "text-generation")], latest=[], serving=[record],
                       support=load_support())  # fmt: skip
    cell = next(r for r in rows if (r["device_class"], r["item"]) == ("trn2", "prefix_caching"))
    code = record["failure"]["code"]
    assert (cell["state"], cell["detail"]) == ("cpu", f"--enable-prefix-caching --block-size 32: {code}")


def _fake_load(reports: list[GenerativeBenchmarksReport], on_call: Any = None) -> Any:
    calls: list[list[int]] = []

    def run_guidellm(doc: dict[str, Any], folder: Path, *, timeout_s: float, name: str) -> LoadRun:
        calls.append([b["profile.streams"] for b in doc["benchmarks"]])
        if on_call:
            on_call(len(calls))
        return LoadRun(reports[len(calls) - 1], 0, "", ("guidellm", "run"))

    run_guidellm.calls = calls  # type: ignore[attr-defined]
    return run_guidellm


def test_a_point_whose_requests_fail_ends_the_sweep_and_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_load([report_of((1, 6, 0, 40.0)), report_of((2, 7, 5, 30.0))])
    monkeypatch.setattr(sweep_module, "run_guidellm", fake)
    port = free_port()
    record = serve_model(_spec(fake_engine_argv(port), port), _run(), tmp_path)
    assert fake.calls == [[1], [2]]  # concurrency 4 never ran
    points = record["serving"]["points"]
    assert [p["concurrency"] for p in points] == [1, 2]
    assert points[1]["success_rate"] == pytest.approx(7 / 12)
    assert "success rate 0.583 at concurrency 2" in record["serving"]["stopped"]
    assert record["status"] == "pass"  # concurrency 1 served every request
    assert validate_record(record) == []


def test_rounds_measure_each_point_again_on_the_same_engine_and_keep_the_median_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 50: ``rounds=3`` runs each point three times; the point kept is its median round's, counted."""
    speeds = {1: (40.0, 44.0, 38.0), 2: (70.0, 66.0, 75.0), 4: (120.0, 130.0, 125.0)}
    fake = _fake_load([report_of((c, 6, 0, x)) for c, xs in speeds.items() for x in xs])
    monkeypatch.setattr(sweep_module, "run_guidellm", fake)
    port = free_port()
    record = serve_model(_spec(fake_engine_argv(port), port), _run(rounds=3), tmp_path)
    assert fake.calls == [[1], [1], [1], [2], [2], [2], [4], [4], [4]]
    points = record["serving"]["points"]
    assert [(p["output_tok_s"], p["spread"]["rounds"]) for p in points] == [(40.0, 3), (70.0, 3), (125.0, 3)]
    assert len(record["serving"]["tool"]["commands"]) == 3 and validate_record(record) == []


def test_an_engine_that_dies_mid_sweep_keeps_its_points_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines: list[Any] = []
    real_engine = sweep_module.Engine

    class Recorded(real_engine):  # type: ignore[misc, valid-type]
        def __enter__(self) -> Any:
            engines.append(super().__enter__())
            return engines[-1]

    def kill_engine(call: int) -> None:
        os.kill(engines[0].process.pid, signal.SIGKILL)  # the engine, not its worker: the group must still go
        engines[0].process.wait(timeout=30)

    monkeypatch.setattr(sweep_module, "Engine", Recorded)
    monkeypatch.setattr(sweep_module, "run_guidellm", _fake_load([report_of((1, 6, 0, 40.0))], kill_engine))
    port = free_port()
    record = serve_model(_spec(fake_engine_argv(port), port), _run(), tmp_path)
    # killed from outside: an error (retried), as bench records its child killed so (issue 48.4), never a `fail`
    verdict = (record["status"], record["failure"]["stage"], record["failure"]["code"])
    assert verdict == ("error", "run", "killed_sigkill") == _as_bench_records_it("", -signal.SIGKILL, "run")
    assert [p["concurrency"] for p in record["serving"]["points"]] == [1]
    assert "exited with -9 under load at concurrency 1" in record["serving"]["stopped"]
    assert _gone(engines[0].process.pid)
    assert validate_record(record) == []


def test_a_load_generator_that_measures_nothing_is_an_infra_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(doc: dict[str, Any], folder: Path, *, timeout_s: float, name: str) -> LoadRun:
        return LoadRun(None, 2, "Error: Invalid value for '--scenario'", ("guidellm", "run"))

    monkeypatch.setattr(sweep_module, "run_guidellm", broken)
    port = free_port()
    record = serve_model(_spec(fake_engine_argv(port), port), _run(), tmp_path)
    assert record["status"] == "error"
    assert (record["failure"]["stage"], record["failure"]["code"]) == ("run", "loadgen_failed")
    assert "Invalid value" in record["failure"]["message"]
    assert validate_record(record) == []


@pytest.mark.slow
def test_an_engine_killed_mid_sweep_loses_only_the_point_in_flight_and_the_record_says_which(tmp_path: Path) -> None:
    """Issue 48.3: on the CPU one guidellm run swept every point, and an engine killed at concurrency 2 lost all."""
    serve = start_serve(tmp_path, "engine-dies", "TERM")  # `trncat serve` as a user runs it: the default grouping
    try:
        output = serve.communicate(timeout=120)[0].decode()
        record = json.loads((tmp_path / "out" / "record.json").read_text(encoding="utf-8"))
        assert [p["concurrency"] for p in record["serving"]["points"]] == [1], output  # measured before it died
        assert "at concurrency 2" in record["serving"]["stopped"] and "at concurrency 2" in record["failure"]["message"]
        assert validate_record(record) == []
        assert left(started(tmp_path)) == []
    finally:
        serve.kill()
        end(started(tmp_path))


def test_a_port_taken_after_the_check_by_a_server_that_answers_is_an_error_not_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48.4: another server bound the port between trncat's check and the engine's bind, and answered
    /health: the sweep measured it, and the engine's exit was filed as the model's `fail`."""
    import http.server
    import threading

    from pipeline.serve import engine as engine_module

    port = free_port()
    servers: list[http.server.HTTPServer] = []
    real_check = engine_module.port_in_use

    def taken_after_the_check(checked: int) -> bool:
        free = real_check(checked)
        servers.append(http.server.HTTPServer(("127.0.0.1", checked), _Answers))
        threading.Thread(target=servers[-1].serve_forever, daemon=True).start()
        return free

    monkeypatch.setattr(engine_module, "port_in_use", taken_after_the_check)
    monkeypatch.setattr(sweep_module, "run_guidellm", _fake_load([report_of((1, 6, 0, 40.0))] * 3))
    try:
        record = serve_model(_spec(fake_engine_argv(port), port), _run(), tmp_path)
    finally:
        for server in servers:
            server.shutdown()
    verdict = (record["status"], record["failure"]["stage"], record["failure"]["code"])
    assert verdict == ("error", "load", "port_in_use"), record["failure"]
    assert record["serving"]["points"] == [] and validate_record(record) == []


class _Answers(__import__("http.server").server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_ready_timeout_that_is_no_positive_number_is_one_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    argv = ["serve", str(tmp_path), "--device", "cpu", "--out", str(tmp_path / "r.json"), "--ready-timeout", value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--ready-timeout" in err and "above 0" in err and "Traceback" not in err


def test_the_ready_timeout_is_settable_and_an_engine_never_ready_ends_in_it(tmp_path: Path) -> None:
    """Issue 48.6: an engine that never became ready held the run for 900 s, which the CLI could not set."""
    serve = start_serve(tmp_path, "never-ready", "TERM", "--ready-timeout", "2")
    try:
        output = serve.communicate(timeout=120)[0].decode()
        assert serve.returncode == 1, output
        record = json.loads((tmp_path / "out" / "record.json").read_text(encoding="utf-8"))
        assert (record["status"], record["failure"]["code"]) == ("error", "engine_not_ready")
        assert "not ready after 2 s" in record["failure"]["message"]
        assert left(started(tmp_path)) == []  # the record says the 2 s it was given, not the default 900 s
    finally:
        serve.kill()
        end(started(tmp_path))
