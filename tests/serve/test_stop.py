"""Stopping ``trncat serve`` from outside leaves nothing of its run (issue 48.1-2).

The engine, the load generator and the evaluator each run in a session of their own, so nothing aimed at
``trncat serve`` reaches them: a SIGTERM or SIGINT must end their process groups and still write the record of
what was measured, and after a SIGKILL ``trncat reap`` must end them. The stand-ins
(:mod:`tests.serve.standins`) signal ``trncat serve`` themselves at each stage, so each run takes seconds; every
process they start is checked by PID and process group, never by name. guidellm's own workers are checked with
the real guidellm.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from pipeline.backends import group_members
from pipeline.cli import main
from pipeline.records import validate_record
from tests import ROOT
from tests.serve.standins import alive, end, left, start_serve, started

#: The stages a stand-in signals at, and what the record says of each: where, the record's stage, points kept.
STAGES: dict[str, tuple[str, str, list[int]]] = {
    "starting": ("while the engine was starting", "load", []),
    "warm-up": ("at concurrency 1, before it was measured", "run", []),
    "mid-point": ("at concurrency 1, before it was measured", "run", []),
    "between": ("after concurrency 1", "run", [1]),
    "evaluating": ("while the task score was taken", "run", [1, 2]),
}
ROLES = {
    "starting": {"engine"},
    "warm-up": {"engine", "loadgen"},
    "mid-point": {"engine", "loadgen"},
    "between": {"engine", "loadgen"},
    "evaluating": {"engine", "loadgen", "evaluator"},
}


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_serve_at_any_stage_ends_every_process_at_once_and_writes_what_was_measured(
    tmp_path: Path, stage: str, sig: signal.Signals
) -> None:
    serve = start_serve(tmp_path, stage, sig.name[3:])
    try:
        output = serve.communicate(timeout=120)[0].decode()
        processes = started(tmp_path)
        assert {role for role, _, _ in processes} >= ROLES[stage], output
        assert left(processes) == [], output  # at once: the command returns only after their groups are gone
        assert serve.returncode == 128 + sig, output
        record = json.loads((tmp_path / "out" / "record.json").read_text(encoding="utf-8"))
        assert validate_record(record) == []
        where, record_stage, kept = STAGES[stage]
        failure = record["failure"]
        assert (record["status"], failure["code"], failure["stage"]) == ("error", "interrupted", record_stage)
        assert sig.name in failure["message"] and where in failure["message"], failure["message"]
        assert [p["concurrency"] for p in record["serving"]["points"]] == kept
        assert list((tmp_path / f"trncat-children-{os.getuid()}").iterdir()) == []  # deregistered
    finally:
        serve.kill()
        end(started(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(STAGES))
def test_after_a_sigkill_of_serve_at_any_stage_trncat_reap_ends_every_process(
    tmp_path: Path, stage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    serve = start_serve(tmp_path, stage, "KILL")
    try:
        assert serve.wait(timeout=120) == -signal.SIGKILL
        processes = started(tmp_path)
        assert {role for role, _, _ in processes} >= ROLES[stage] - {"loadgen"}  # it ends itself "between"
        assert left(processes) != []  # no parent to end them: they would hold the device for ever
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        assert main(["reap"]) == 0
        assert "ended" in capsys.readouterr().out
        for _ in range(100):
            if not left(processes):
                break
            time.sleep(0.1)
        assert left(processes) == []
        assert list((tmp_path / f"trncat-children-{os.getuid()}").iterdir()) == []
    finally:
        end(started(tmp_path))


# -- the real guidellm --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline.testing import tiny

    return tiny.build_tiny_llama(tmp_path_factory.mktemp("guidellm-model") / "tiny-llama")


def _guidellm_of(parent: int, timeout_s: float = 120) -> tuple[psutil.Process, list[int]]:
    """The guidellm run among ``parent``'s children, once it has started its workers, and every process of it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(parent).children():
            try:
                if any("guidellm" in part for part in child.cmdline()[:2]) and len(child.children(True)) >= 2:
                    return child, [child.pid, *(c.pid for c in child.children(recursive=True))]
            except psutil.Error:
                continue
        time.sleep(0.2)
    pytest.fail("guidellm never started its workers")


@pytest.mark.slow
def test_guidellm_killed_leaves_none_of_its_workers(tmp_path: Path, tokenizer_model: Path) -> None:
    from pipeline.serve import Engine, EngineSpec, free_port, run_guidellm, scenario, serving_workload

    port = free_port()
    argv = (sys.executable, "-m", "tests.serve.standins", "engine", str(port))
    env = {"STANDIN_ENGINE": "guidellm-mock", "STANDIN_PIDS": str(tmp_path / "pids"), "PYTHONPATH": str(ROOT)}
    spec = EngineSpec("vllm", argv, port, "tiny", env, {})
    workload = serving_workload("cpu-tiny")
    doc = scenario(spec, workload, [4], tokenizer=tokenizer_model, report=tmp_path / "report.json")
    guidellm: list[int] = []

    def kill_guidellm() -> None:
        leader, everyone = _guidellm_of(os.getpid())
        guidellm.extend(everyone)
        leader.terminate()  # as a person or a runner's cancel would: its workers outlived it (issue 48.2)

    with Engine(spec, tmp_path / "engine.log") as engine:
        engine.wait_ready(timeout_s=60)
        killer = threading.Thread(target=kill_guidellm)
        killer.start()
        load = run_guidellm(doc, tmp_path, timeout_s=300, name="points")
        killer.join()
    assert load.returncode != 0 and len(guidellm) >= 3
    assert [pid for pid in guidellm if alive(pid)] == []  # by PID: its workers went with it


@pytest.mark.slow
def test_sigint_to_serve_under_guidellm_leaves_none_of_guidellm_s_processes(
    tmp_path: Path, tokenizer_model: Path
) -> None:
    env: dict[str, Any] = {"STANDIN_ENGINE": "guidellm-mock", "STANDIN_LOADGEN": "guidellm"}
    os.environ.update(env)
    try:
        serve = start_serve(tmp_path, "none", "INT", folder=tokenizer_model)
    finally:
        for name in env:
            del os.environ[name]
    try:
        leader, guidellm = _guidellm_of(serve.pid)
        assert os.getpgid(leader.pid) == leader.pid  # a group of its own: a stop reaches every worker
        serve.send_signal(signal.SIGINT)
        output = serve.communicate(timeout=120)[0].decode()
        assert serve.returncode == 128 + signal.SIGINT, output
        assert [pid for pid in guidellm if alive(pid)] == [] and group_members(leader.pid) == []
        assert left(started(tmp_path)) == []  # the engine's group too
        record = json.loads((tmp_path / "out" / "record.json").read_text(encoding="utf-8"))
        assert record["failure"]["code"] == "interrupted"
    finally:
        serve.kill()
        end(started(tmp_path))


def test_every_job_that_serves_reaps_what_a_killed_serve_left_even_on_a_cancel() -> None:
    import yaml

    jobs = 0
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        for job in (yaml.safe_load(path.read_text(encoding="utf-8")).get("jobs") or {}).values():
            runs = [str(step.get("run", "")) for step in job.get("steps", [])]
            serve = next((i for i, run in enumerate(runs) if "trncat serve " in run), None)
            if serve is None:
                continue
            jobs += 1
            reaps = [i for i, step in enumerate(job["steps"]) if "trncat reap" in str(step.get("run", ""))]
            assert reaps and reaps[-1] > serve, path.name
            assert "always()" in str(job["steps"][reaps[-1]].get("if")), path.name
    assert jobs >= 2
