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

from pipeline.testing.tiny import build_tiny_llama
from tests import ROOT
from tests.support.records import sample_community, sample_record
from tests.test_workflow_steps import step_env
from tests.test_workflows import step

MODEL = "trncat-demo/tiny-llama"

pytestmark = [
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
    pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)"),
]


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


def _fake_gh(folder: Path, listed: list[str]) -> Path:
    """A `gh` that answers the PR-files API as GitHub does: one JSON page of {filename, previous_filename}."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = [{"filename": new, **({"previous_filename": old} if old else {})}
             for new, _, old in (name.partition(" <- ") for name in listed)]  # fmt: skip
    (folder / "pages.json").write_text(json.dumps(pages))
    script = folder / "gh"
    script.write_text(
        f"#!{sys.executable}\nimport os, subprocess, sys\n"
        "assert sys.argv[1:3] == ['api', '--paginate'] and '/pulls/17/files' in sys.argv[3], sys.argv\n"
        "pages = open(os.path.join(os.path.dirname(sys.argv[0]), 'pages.json')).read()\n"
        "jq = sys.argv[sys.argv.index('--jq') + 1]\n"
        "sys.stdout.write(subprocess.run(['jq', '-c', jq], input=pages, capture_output=True, text=True).stdout)\n"
    )
    script.chmod(0o755)
    return folder


def check(
    localhub,
    tmp_path: Path,
    files: dict[str, object],
    extra_env: dict[str, str] | None = None,
    *,
    also: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the files, validate and check steps on a PR holding ``files`` (path under results/ -> record or text)
    that also changes the repository paths ``also`` (``"new <- old"`` for a rename)."""
    workspace = tmp_path / "ws"
    shutil.rmtree(workspace, ignore_errors=True)
    for name, content in files.items():
        path = workspace / "submission" / "results" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    listed = [f"results/{name}" for name in files] + list(also)
    gh = _fake_gh(tmp_path / "gh-bin", listed)
    env = (
        _env(localhub, tmp_path)
        | (extra_env or {})
        | {"GITHUB_OUTPUT": os.devnull, "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}
    )
    env["PATH"] = f"{gh}{os.pathsep}{env['PATH']}"
    values = {"GH_TOKEN": "ghs_read_only", "REPO": "acme/trncat", "PR_NUMBER": "17", "CHANGED_FILES": str(len(listed))}
    result = None
    for step_id in ("files", "validate", "check"):
        s = step("submission", "validate", step_id)
        wanted = {k: v for k, v in values.items() if k in (s.get("env") or {})}
        full = env | step_env("submission", "validate", s, wanted, {})
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
    huge_memory = good["metrics"] | {"peak_host_memory_bytes": 2**62}
    emulated = _community(revision, params)
    emulated["hardware"]["emulated"] = True  # made on trncat's Neuron emulator: never a Trainium2 result
    bundled = _community(revision, params)  # issue 25: a bundle is what CI compiled, never a submission's
    bundled["compiled_cache"] = {"repo_id": "trncat/trncat-compiled", "revision": "c" * 40, "sha256": "d" * 64,
                                 "path": f"neuronx-cc-2.21.0/{MODEL}/{revision}/k/{'d' * 16}.neff-cache.tar.gz",
                                 "bytes": 1024, "files": 2}  # fmt: skip
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
        "names a compiled-cache bundle": ({"community/b.json": bundled}, "must not name a compiled-cache bundle"),
        "not a plain name": ({"community/-rf.json": good}, "not a record file"),
        "only a readme": ({"community/README.md": "hi"}, "no record"),
        # issue 22.7: the Hub resolves ids without case; a variant would sit beside the CI row of the model
        "a case variant of the id": (
            {"community/v.json": _community(revision, params, model_id="Trncat-Demo/Tiny-Llama")},
            "model_id: 'Trncat-Demo/Tiny-Llama' is not the Hub's id of that model: 'trncat-demo/tiny-llama'",
        ),
        # issue 22.3: valid records, figures no run has (2**62 bytes steered the queue's host-memory guard)
        "host memory no host has": (
            {"community/m.json": _community(revision, params, metrics=huge_memory)},
            "peak_host_memory_bytes: implausible",
        ),
        "a run of weeks": (
            {"community/w.json": _community(revision, params, metrics={**good["metrics"], "wall_s": 3e6})},
            "wall_s: implausible",
        ),
    }
    for label, (files, expected) in cases.items():
        result = check(localhub, tmp_path, files)
        assert result.returncode != 0 and expected in result.stdout, (label, result.stdout, result.stderr)


def test_a_results_pull_request_that_touches_anything_else_fails(localhub, tmp_path: Path, hub_model) -> None:
    """Issue 22.9: a PR adding a record may also change the check itself, the runner kit or the code the check
    runs; the PR's files are now listed from GitHub (both names of a rename) and anything outside results/ fails."""
    revision, params = hub_model
    good = {"community/ok.json": _community(revision, params)}
    for also, expected in (
        ((".github/workflows/submission.yml",), "touches .github/workflows/submission.yml"),
        (("runners/setup-runner.sh",), "touches runners/setup-runner.sh"),
        (("results/community/moved.json <- pipeline/records/validate.py",), "touches pipeline/records/validate.py"),
    ):
        result = check(localhub, tmp_path, good, also=also)
        assert result.returncode != 0 and expected in result.stdout, (also, result.stdout, result.stderr)
        assert "a results/ pull request changes nothing else" in result.stdout
    assert check(localhub, tmp_path, good).returncode == 0


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
