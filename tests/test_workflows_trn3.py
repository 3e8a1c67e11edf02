"""benchmark.yml on a Trainium3 chunk: its guard admits trn3-<N>c labels, outputs the chunk's runner class (the label
after self-hosted, linux of the smoke and bench jobs) and refuses a chunk that mixes trn2 and trn3 jobs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline.discover import Candidate
from pipeline.plan import plan_config
from pipeline.queue import build_queue
from tests.test_workflows import CONFIGS, jobs, load, runs_on_labels

pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")


def _chunk(instance: str) -> dict[str, Any]:
    config = json.loads((CONFIGS / "qwen2.5-0.5b.json").read_text())
    candidates = [Candidate(model_id=f"org/m-{i}", task="text-generation", view="trending", rank=i + 1,
                            sha=f"{i:040x}") for i in range(3)]  # fmt: skip
    queue = build_queue(candidates=candidates, dataset_root=None, toolchain={"transformers": "5.24.0"},
                        planner=lambda c: plan_config(config, instance=instance), instance=instance)  # fmt: skip
    (chunk,) = queue.chunks
    return chunk


def _guard(matrix: str | None, tmp_path: Path, **inputs: str) -> tuple[int, str, dict[str, str]]:
    s = jobs("benchmark")["matrix"]["steps"][0]
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "output"
    env = {"PATH": os.environ["PATH"], "CALLER_MATRIX": matrix or "", "GITHUB_OUTPUT": str(out),
           "GITHUB_STEP_SUMMARY": os.devnull, **inputs}  # fmt: skip
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = out.read_text().splitlines() if out.exists() else []
    return done.returncode, done.stdout, dict(line.split("=", 1) for line in lines)


def test_a_trainium3_chunk_passes_the_guard_and_names_its_runner_class(tmp_path: Path) -> None:
    chunk = _chunk("trn3.48xlarge")
    assert {e["runner"] for e in chunk["include"]} == {"trn3-1c"}
    code, _, outputs = _guard(json.dumps(chunk), tmp_path)
    assert code == 0 and outputs["family"] == "trn3"
    code, _, outputs = _guard(json.dumps(_chunk("trn2.48xlarge")), tmp_path / "b")
    assert code == 0 and outputs["family"] == "trn2"


def test_a_chunk_mixing_trainium2_and_trainium3_jobs_is_refused(tmp_path: Path) -> None:
    mixed = {"include": _chunk("trn3.48xlarge")["include"][:1] + _chunk("trn2.48xlarge")["include"][:1]}
    code, stdout, _ = _guard(json.dumps(mixed), tmp_path)
    assert code == 1 and "one chunk holds one runner class" in stdout
    bad = {"include": [_chunk("trn3.48xlarge")["include"][0] | {"runner": "trn4-1c"}]}
    assert _guard(json.dumps(bad), tmp_path / "b")[0] == 1


def test_a_dispatched_trainium3_run_benches_on_a_trn3_48xlarge(tmp_path: Path) -> None:
    code, _, outputs = _guard(None, tmp_path, MODEL_ID="org/m", TASK="text-generation", REVISION="a" * 40,
                              RUNNER="trn3-8c", DTYPE="bfloat16")  # fmt: skip
    assert code == 0 and outputs["family"] == "trn3"
    (entry,) = json.loads(outputs["matrix"])["include"]
    assert (entry["instance"], entry["cores"], entry["runner"]) == ("trn3.48xlarge", 8, "trn3-8c")
    assert "trn3-8c" in load("benchmark")["on"]["workflow_dispatch"]["inputs"]["runner"]["options"]


def test_the_smoke_and_bench_jobs_run_on_the_chunk_s_runner_class() -> None:
    family = "${{ needs.matrix.outputs.family }}"
    assert runs_on_labels(jobs("benchmark")["smoke"]) == ["self-hosted", "linux", family, family + "-1c"]
    assert runs_on_labels(jobs("benchmark")["bench"])[:3] == ["self-hosted", "linux", family]


@pytest.mark.parametrize(("workflow", "runner"), [("benchmark", "trn2-4c"), ("benchmark-gpu", "gpu-2g")])
def test_a_dispatched_run_builds_its_one_entry_matrix(workflow: str, runner: str, tmp_path: Path) -> None:
    """The hand-dispatched path built its entry with `artifact: (...) + ...`, an object value jq refuses without
    parentheses ("May need parentheses around object key expression"): every dispatch failed at the guard."""
    s = jobs(workflow)["matrix"]["steps"][0]
    out = tmp_path / "output"
    env = {"PATH": os.environ["PATH"], "CALLER_MATRIX": "", "GITHUB_OUTPUT": str(out),
           "GITHUB_STEP_SUMMARY": os.devnull, "MODEL_ID": "org/m", "TASK": "text-generation", "REVISION": "b" * 40,
           "RUNNER": runner, "DTYPE": ""}  # fmt: skip
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    matrix = next(line for line in out.read_text().splitlines() if line.startswith("matrix="))
    (entry,) = json.loads(matrix.split("=", 1)[1])["include"]
    assert entry["artifact"].startswith("org--m--text-generation--bbbbbbbbbbbb") and entry["dtype"] == "bfloat16"
