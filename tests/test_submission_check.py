"""submission.yml's own step scripts on hostile pull requests: the check fails closed (issue 11.7, 11.8, 11.11).

The steps run by bash exactly as written (tests.test_workflow_steps.Runner), with the base branch's trncat and
a local hub holding the tiny model the records name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.testing.records import sample_community, sample_record
from pipeline.testing.tiny import build_tiny_llama
from tests import ROOT
from tests.test_workflow_steps import step_env
from tests.test_workflows import step

MODEL = "trncat-demo/tiny-llama"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture
def hub_model(localhub, tmp_path: Path) -> tuple[str, int]:
    """The tiny model on the local hub: its revision and the planner's parameter count."""
    folder = build_tiny_llama(tmp_path / "tiny")
    localhub.store.create_repo(MODEL, metadata={"pipeline_tag": "text-generation"})
    files = {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}
    revision = localhub.store.commit_files(MODEL, files, message="tiny model")
    argv = [sys.executable, "-m", "pipeline", "plan", MODEL, "--revision", revision, "--json"]
    env = _env(localhub, tmp_path)
    planned = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, timeout=120)
    return revision, json.loads(planned.stdout)["params"]


def _env(localhub, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "HF_ENDPOINT": localhub.url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_CACHE": str(localhub.cache_dir),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def _community(revision: str, params: int, *, model_id: str = MODEL, **overrides: object) -> dict:
    record = sample_community(model_id=model_id, revision=revision, **overrides)
    record["metrics"]["params"] = params
    return record


def check(
    localhub, tmp_path: Path, files: dict[str, object], extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the validate and check steps on a PR holding ``files`` (path under results/ -> record or text)."""
    workspace = tmp_path / "ws"
    shutil.rmtree(workspace, ignore_errors=True)
    for name, content in files.items():
        path = workspace / "submission" / "results" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    env = (
        _env(localhub, tmp_path)
        | (extra_env or {})
        | {"GITHUB_OUTPUT": os.devnull, "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}
    )
    result = None
    for step_id in ("validate", "check"):
        s = step("submission", "validate", step_id)
        full = env | step_env("submission", "validate", s, {}, {})
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]], cwd=workspace,
                                env=full, capture_output=True, text=True, timeout=600)  # fmt: skip
        if result.returncode != 0:
            break
    assert result is not None
    return result


def test_a_good_submission_passes(localhub, tmp_path: Path, hub_model) -> None:
    revision, params = hub_model
    result = check(localhub, tmp_path, {"community/ok.json": _community(revision, params)})
    assert result.returncode == 0, result.stdout + result.stderr


def test_hostile_submissions_fail(localhub, tmp_path: Path, hub_model) -> None:
    revision, params = hub_model
    good = _community(revision, params)
    forged = _community(revision, params)
    forged["run"] |= {"runner": "trn2-runner-1", "github_run_id": "1234567890"}  # a community record naming our run
    emulated = _community(revision, params)
    emulated["hardware"]["emulated"] = True  # made on trncat's Neuron emulator: never a Trainium2 result
    cases = {
        # a newline in the name made `trncat validate` get a path that does not exist, and the failure was hidden
        "newline in the file name": ({"community/a\nb.json": good}, "not a record file"),
        "cores 0": ({"community/c.json": _community(revision, params, cores=0)}, "cores"),
        "negative speed": (
            {"community/s.json": _community(revision, params, metrics={**good["metrics"], "decode_tokens_per_s": -5})},
            "decode_tokens_per_s",
        ),
        "not planned": (
            {"community/p.json": _community(revision, params, model_id="nobody/missing")},
            "could not be planned",
        ),
        "outside results/community": ({"elsewhere/x.json": good, "community/ok.json": good}, "elsewhere/x.json"),
        "a CI record": ({"community/ci.json": sample_record(model_id=MODEL, revision=revision)}, "got 'ci'"),
        "forged provenance": ({"community/f.json": forged}, "run.github_run_id"),
        "emulated": ({"community/e.json": emulated}, "hardware.emulated"),
        "not a plain name": ({"community/-rf.json": good}, "not a record file"),
        "only a readme": ({"community/README.md": "hi"}, "no record"),
    }
    for label, (files, expected) in cases.items():
        result = check(localhub, tmp_path, files)
        assert result.returncode != 0 and expected in result.stdout, (label, result.stdout, result.stderr)


def test_a_missing_or_empty_report_is_a_failure(localhub, tmp_path: Path, hub_model) -> None:
    """A `trncat validate` that writes nothing (killed, or handed no path) used to read as "0 problems"."""
    revision, params = hub_model
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "trncat").write_text('#!/bin/sh\n[ "$1" = validate ] && exit 0\nexec "$REAL_TRNCAT" "$@"\n')
    (fake / "trncat").chmod(0o755)
    real = shutil.which("trncat", path=str(Path(sys.executable).parent))
    assert real is not None
    env = {"PATH": f"{fake}{os.pathsep}{_env(localhub, tmp_path)['PATH']}", "REAL_TRNCAT": real}
    result = check(localhub, tmp_path, {"community/ok.json": _community(revision, params)}, env)
    assert result.returncode != 0 and "wrote no report" in result.stdout, result.stdout
