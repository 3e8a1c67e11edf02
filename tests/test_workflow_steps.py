"""The workflows' own step scripts, run in order against a local hub: discover -> queue -> bench (cpu) ->
validate -> build -> publish.

Each step's `run:` script is taken from the YAML and run by bash exactly as written, with its `env:` (workflow,
job and step levels merged). Only the `${{ }}` values, which GitHub would fill in, come from this test, and the
test fails if a step gains one it does not know. So a flag renamed in the CLI, or a path changed in one
workflow and not the other, fails here instead of in the nightly run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.registry import COMMANDS
from pipeline.testing.tiny import build_tiny_llama, build_tiny_llava
from tests import ROOT
from tests.test_workflows import jobs, load, step

DATASET = "trncat/results"
RUN_ID = "4242"
MODELS = {
    "trncat-demo/tiny-llama": ("text-generation", build_tiny_llama, 900, 40),
    "trncat-demo/tiny-llava": ("image-text-to-text", build_tiny_llava, 500, 30),
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)"),
    pytest.mark.skipif(
        not {"discover", "queue"} <= {entry.name for entry in COMMANDS},
        reason="`trncat discover` / `trncat queue` are not wired into the CLI yet",
    ),
]


def step_env(
    workflow: str, job: str, s: dict[str, Any], values: dict[str, str], replace: dict[str, str]
) -> dict[str, str]:
    """The step's environment as GitHub builds it.

    ``values`` supplies every `${{ }}` value (and nothing else); ``replace`` swaps named literals (the device).
    """
    merged = {**load(workflow).get("env", {}), **jobs(workflow)[job].get("env", {}), **s.get("env", {})}
    assert set(replace) <= set(merged), f"{workflow}.yml {job}/{s.get('id')}: no literal {set(replace) - set(merged)}"
    env = {}
    for key, value in merged.items():
        if isinstance(value, str) and "${{" in value:
            assert key in values, f"{workflow}.yml {job}/{s.get('id')}: no test value for {key}: {value}"
            env[key] = values[key]
        else:
            assert key not in values, f"{workflow}.yml {job}/{s.get('id')}: {key} is a literal in the YAML"
            env[key] = replace.get(key, str(value).lower() if isinstance(value, bool) else str(value))
    return env


class Runner:
    """Runs step scripts in one workspace (the checkout), collecting each step's GITHUB_OUTPUT."""

    def __init__(self, workspace: Path, base_env: dict[str, str]) -> None:
        self.workspace = workspace
        self.base_env = base_env
        self.count = 0

    def __call__(
        self,
        workflow: str,
        job: str,
        step_id: str,
        *,
        replace: dict[str, str] | None = None,
        limit_s: float = 600,
        **values: str,
    ) -> dict[str, str]:
        s = step(workflow, job, step_id)
        self.count += 1
        output = self.workspace.parent / f"output-{self.count}"
        output.write_text("")
        env = {**self.base_env, **step_env(workflow, job, s, values, replace or {})}
        env |= {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(output.with_suffix(".md"))}
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=limit_s,
        )
        assert result.returncode == 0, f"{workflow}.yml {job}/{step_id} failed:\n{result.stdout}\n{result.stderr}"
        self.stdout = result.stdout
        outputs = {}
        for line in output.read_text().splitlines():
            key, _, value = line.partition("=")
            outputs[key] = value
        return outputs


def seed(localhub: Any, root: Path) -> None:
    """The two tiny models as Hub model repos with listing metadata, and an empty dataset repo."""
    for model_id, (task, builder, downloads, trending) in MODELS.items():
        folder = builder(root / model_id.split("/")[1])
        metadata = {"pipeline_tag": task, "library_name": "transformers", "tags": ["transformers"]}
        metadata |= {"downloads": downloads, "trendingScore": trending}
        localhub.store.create_repo(model_id, metadata=metadata)
        files = {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}
        localhub.store.commit_files(model_id, files, message="tiny model")
    localhub.store.create_repo(DATASET, repo_type="dataset")


def artifact_path(workflow: str, job: str, action: str, name: str) -> str:
    """The `path:` of the upload/download step whose artifact name (or pattern) starts with ``name``."""
    for s in jobs(workflow)[job]["steps"]:
        given = s.get("with", {}).get("name") or s.get("with", {}).get("pattern", "")
        if action in s.get("uses", "") and given.startswith(name):
            return s["with"]["path"].rstrip("/")
    raise AssertionError(f"{workflow}.yml {job}: no {action} of {name}")


def test_workflow_steps_run_in_order_against_a_local_hub(localhub, tmp_path: Path) -> None:
    seed(localhub, tmp_path / "models")
    workspace = tmp_path / "checkout"
    (workspace / "runners").mkdir(parents=True)
    for name in ("toolchain.yaml", "toolchain-gpu.yaml", "instances.yaml"):
        shutil.copy(ROOT / "runners" / name, workspace / "runners" / name)
    base_env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # The checkout under test, when the interpreter's own install of trncat is another one.
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
        "HOME": str(tmp_path),
        "HF_ENDPOINT": localhub.url,
        "GITHUB_RUN_ID": RUN_ID,  # what the records name; publish accepts only this run's
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_CACHE": str(localhub.cache_dir),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    run = Runner(workspace, base_env)

    # discover.yml: discover, queue, split into matrix chunks; the requests job's artifact (its download step) first:
    # no accepted model request
    (workspace / "requests").mkdir()
    (workspace / "requests" / "requests.json").write_text("[]")
    run("discover", "discover", "discover", TASKS="all", VIEWS="all", LIMIT="5")
    run("discover", "discover", "queue", DATASET_REPO=DATASET, TARGET_HOURS="24")
    # The estimate reaches the job summary before any benchmark job starts (they need this job).
    summary = (workspace.parent / f"output-{run.count}.md").read_text()
    assert summary.startswith("### Sweep estimate") and "--partition" in summary
    estimate = json.loads((workspace / "discovery" / "estimate.json").read_text())
    assert estimate["jobs"] == len(MODELS) and estimate["fleet"], "the estimate and its fleet are written"
    # The GPU runners' queue: the Selected list's gpu models only (none of them is on this hub: an empty queue).
    run("discover", "discover", "queue-gpu", DATASET_REPO=DATASET, GPU_INSTANCE="p5en.48xlarge")
    gpu_queue = json.loads((workspace / "discovery" / "queue-gpu.json").read_text())
    assert gpu_queue["count"] == 0 and {s["reason"].split(":")[0] for s in gpu_queue["skipped"]} >= {"gpu"}
    # No Trainium3 runners (TRNCAT_TRN3_INSTANCE unset): no Trainium3 queue, and its bench job is skipped.
    run("discover", "discover", "queue-trn3", DATASET_REPO=DATASET, TRN3_INSTANCE="")
    assert not (workspace / "discovery" / "queue-trn3.json").exists()
    split = run("discover", "discover", "split")
    assert split["chunks"] == "1" and split["gpu-chunks"] == "0" and "gpu-chunk-0" not in split
    assert split["trn3-chunks"] == "0" and "trn3-chunk-0" not in split
    # With them: the same candidates on the trn3 runner class, one chunk of trn3-<N>c labels (issue 33).
    run("discover", "discover", "queue-trn3", DATASET_REPO=DATASET, TRN3_INSTANCE="trn3.48xlarge")
    trn3 = json.loads(run("discover", "discover", "split")["trn3-chunk-0"])["include"]
    assert sorted(e["model_id"] for e in trn3) == sorted(MODELS)
    assert all(e["runner"].startswith("trn3-") and e["device"] == "neuron" for e in trn3), trn3
    (workspace / "discovery" / "queue-trn3.json").unlink()  # this test's runs are the trn2 chunk's, on cpu
    entries = json.loads(split["chunk-0"])["include"]
    assert sorted(e["model_id"] for e in entries) == sorted(MODELS)
    assert {e["runner"] for e in entries} == {"trn2-1c"}

    # benchmark.yml, once per matrix entry, on cpu instead of neuron
    assert step("benchmark", "bench", "bench")["env"]["DEVICE"] == "neuron"
    for entry in entries:
        matrix = {key.upper(): str(value) for key, value in entry.items()}
        values = {k: matrix[k] for k in ("MODEL_ID", "REVISION", "TASK", "CORES", "DTYPE", "ARTIFACT")}
        values["HOST_MEMORY_BYTES"] = matrix["HOST_MEMORY_BYTES"]  # the guard passes: this host has the memory
        run("benchmark", "bench", "bench", replace={"DEVICE": "cpu"}, **values)
    run("benchmark", "bench", "validate")

    # artifacts: what benchmark.yml and discover.yml upload is what publish.yml downloads
    records = workspace / artifact_path("benchmark", "bench", "upload-artifact", "record-")
    downloaded = workspace / artifact_path("publish", "publish", "download-artifact", "record-")
    assert sorted(p.name for p in records.glob("*.json")) == sorted(f"{e['artifact']}.json" for e in entries)
    assert records != downloaded
    for record in records.glob("*.json"):  # download-artifact without merge-multiple: one folder per artifact
        (downloaded / f"record-{record.stem}").mkdir(parents=True)
        shutil.copy(record, downloaded / f"record-{record.stem}" / record.name)
    discovery = artifact_path("discover", "discover", "upload-artifact", "discovery")
    assert discovery == artifact_path("publish", "publish", "download-artifact", "discovery")

    # publish.yml: collect (only what the run's queue asked for), validate, build, plan, publish as a PR.
    # collect matches each record's device with its job's: the cpu records of this test are refused as neuron jobs,
    # so the queue is told what this test ran (the device, nothing else).
    # The dataset, and the model repo the compiled-cache bundles of neuron passes go to (these cpu runs make none).
    repos = {"DATASET_REPO": DATASET, "COMPILED_REPO": "trncat/trncat-compiled"}
    queue_file = workspace / "discovery" / "queue.json"
    assert run("publish", "publish", "collect", RUN_ID=RUN_ID, **repos) == {"invalid": "true"}
    queue = json.loads(queue_file.read_text())
    for chunk in queue["chunks"]:
        for entry in chunk["include"]:
            entry["device"] = "cpu"
    queue_file.write_text(json.dumps(queue))
    shutil.rmtree(workspace / "artifacts" / "records", ignore_errors=True)
    assert run("publish", "publish", "collect", RUN_ID=RUN_ID, **repos) == {}
    validated = run("publish", "publish", "validate", **repos, COLLECT_INVALID="")
    assert validated == {"records": "2"}
    run("publish", "publish", "build", **repos)
    assert len(list((workspace / "dataset-preview" / "data" / "results").glob("*.parquet"))) == 1
    # (no Neuron bump in this checkout's history: no release diff; test_the_release_step_... covers one)
    run("publish", "publish", "plan", **repos, SET_ASIDE="", RELEASE_OLD="")
    assert not localhub.store.get(DATASET, repo_type="dataset").discussions, "the plan changes nothing"
    run("publish", "publish", "publish", **repos, SET_ASIDE="", HF_TOKEN="localhub-token", RELEASE_OLD="")

    repo = localhub.store.get(DATASET, repo_type="dataset")
    (pr,) = repo.discussions
    tree = repo.tree(f"refs/pr/{pr['num']}")
    assert any(p.startswith("data/results/") and p.endswith(".parquet") for p in tree)
    assert any(p.startswith("data/rankings/") for p in tree)
    assert "data/exclusions.parquet" in tree
    assert not [p for p in tree if p.startswith("candidates/") or p.endswith("queue.json")], "only data is published"


def test_the_release_step_finds_the_toolchain_before_the_last_neuron_bump(tmp_path: Path) -> None:
    """publish.yml's `release` step, run as written in a git checkout: the old side of the release diff is the file
    before the newest commit that changed the release the header names; a later pin edit is no bump."""
    workspace = tmp_path / "checkout"
    (workspace / "runners").mkdir(parents=True)
    git_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    git_env |= {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
                for what, value in (("NAME", "t"), ("EMAIL", "t@example.org"))}  # fmt: skip
    toolchain = workspace / "runners" / "toolchain.yaml"

    def commit(release: str, transformers: str) -> None:
        toolchain.write_text(f'# runners (Neuron SDK {release}, TorchNeuron beta)\nneuronx_cc: "{release}.1"\n'
                             f'transformers: "{transformers}"\n')  # fmt: skip
        for args in (["add", "-A"], ["commit", "-q", "-m", f"{release} {transformers}"]):
            subprocess.run(["git", *args], cwd=workspace, env=git_env, check=True)

    subprocess.run(["git", "init", "-q"], cwd=workspace, env=git_env, check=True)
    commit("2.32.0", "5.0.0")
    run = Runner(workspace, git_env)
    repos = {"DATASET_REPO": DATASET, "COMPILED_REPO": "trncat/trncat-compiled"}
    assert run("publish", "publish", "release", **repos) == {}, "no bump in the history yet: no release diff"
    commit("2.33.0", "5.0.0")  # the watch's bump
    commit("2.33.0", "5.1.0")  # a later pin edit: no bump
    outputs = run("publish", "publish", "release", **repos)
    assert outputs == {"old": "toolchain-before-bump.yaml"}
    assert "release diff: 2.32.0 -> 2.33.0" in run.stdout
    before = (workspace / outputs["old"]).read_text()
    assert "Neuron SDK 2.32.0" in before and 'transformers: "5.0.0"' in before


@pytest.mark.e2e
@pytest.mark.timeout(1800)  # a doctor smoke (two benchmarks) and one benchmark per task, each a few processes
def test_the_benchmark_smoke_steps_run_on_an_emulated_trn2(tmp_path: Path) -> None:
    """benchmark.yml's smoke job, its `trncat doctor --smoke` and `pytest -m neuron` steps as written, on the Neuron
    emulator's trn2.48xlarge (tests/testing/test_neuron_emulator.py): the production neuron backend, harness,
    child and torchrun run unchanged; every record says it was emulated."""
    from tests.support.neuron import Machine, build, environment

    root = build(tmp_path / "trn2", Machine.of("trn2.48xlarge"))
    workspace = tmp_path / "checkout"
    workspace.mkdir()
    for name in ("tests", "pipeline", "runners", "schemas", "pyproject.toml"):  # the checkout the steps run in
        (workspace / name).symlink_to(ROOT / name)
    base_env = {
        **environment(root, {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TRNCAT_REFERENCE_CACHE": str(tmp_path / "reference"),
    }
    run = Runner(workspace, base_env)
    run("benchmark", "smoke", "doctor")
    lines = run.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("fail ", "warn "))], run.stdout
    assert any(line.startswith("ok    neuron-ls") and "EMULATED" in line for line in lines)
    smoke = [line for line in lines if line.startswith("smoke ")]
    assert len(smoke) == 2 and all(": pass [EMULATED]" in line for line in smoke), smoke
    # what a first trn2 run settles: each rank's own core, TorchNeuron's compile figures cold and warm
    assert sum("NEURON_RT_VISIBLE_CORES=" in line and "device_count()=1" in line for line in lines) == 3
    assert all("neuronx-cc" in line and "warm start served 2 from cache" in line for line in smoke)
    run("benchmark", "smoke", "smoke-tests")
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout


@pytest.mark.e2e
def test_the_serve_step_serves_a_hub_model_into_a_record_publish_accepts(localhub, tmp_path: Path) -> None:
    """benchmark.yml's serve step as written (issue 28), on cpu instead of neuron and the cpu-tiny workload instead
    of 1k/1k: a queued serving job's model fetched from the hub at its revision and served into one record, alone in
    its artifact folder, that validates and that publish's collect accepts as the job it was queued as."""
    from pipeline.queue import serving_jobs
    from pipeline.records import collect_records
    from pipeline.serve import serving_workload

    seed(localhub, tmp_path / "models")
    revision = localhub.client.model_info("trncat-demo/tiny-llama").sha
    row = {"model_id": "trncat-demo/tiny-llama", "revision": revision, "task": "text-generation", "status": "pass",
           "device": "neuron", "cores": 1, "hardware": "trn2.48xlarge", "dtype": "float32"}  # fmt: skip
    (entry,) = serving_jobs([row], [], device="neuron", workload=serving_workload("1k/1k"), instance="trn2.48xlarge")
    workspace = tmp_path / "checkout"
    workspace.mkdir()
    base_env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
        "HOME": str(tmp_path),
        "HF_ENDPOINT": localhub.url,
        "GITHUB_RUN_ID": RUN_ID,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_CACHE": str(localhub.cache_dir),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    run = Runner(workspace, base_env)
    values = {
        key.upper(): str(entry[key]) for key in ("model_id", "revision", "chips", "dtype", "instance", "artifact")
    }
    # a sweep, its warm restart and two engine starts: minutes on a busy machine (the test's own timeout bounds it)
    # the job's flag-only matrix features (issue 49) go to vLLM engines; on this CPU the seeded tiny Llama is served by
    # transformers serve, which refuses them (tests/serve/test_vllm_engine.py): the step runs without (FEATURES empty)
    assert entry["features"] == ["prefix_caching"]
    run("benchmark", "bench", "serve", replace={"DEVICE": "cpu"}, limit_s=1500, **values, WORKLOAD="cpu-tiny",
        FEATURES="")  # fmt: skip
    run("benchmark", "bench", "validate")
    records = workspace / artifact_path("benchmark", "bench", "upload-artifact", "record-")
    assert sorted(p.name for p in records.iterdir()) == [f"{entry['artifact']}.json"], "the record alone"
    record = json.loads((records / f"{entry['artifact']}.json").read_text())
    assert record["status"] == "pass" and record["serving"]["points"], record["failure"]
    assert "features" not in record["serving"], "no feature asked: none recorded"
    assert (record["model_id"], record["revision"], record["run"]["source"]) == (entry["model_id"], revision, "ci")
    # publish's collect: the job as queued (its device the one this test ran on)
    downloaded = tmp_path / "downloaded" / f"record-{entry['artifact']}"
    downloaded.mkdir(parents=True)
    shutil.copy(records / f"{entry['artifact']}.json", downloaded)
    queue = tmp_path / "queue.json"
    queue.write_text(json.dumps({"chunks": [{"include": [entry | {"device": "cpu"}]}]}))
    collected = collect_records(downloaded.parent, queue_file=queue, run_id=RUN_ID, out=tmp_path / "accepted")
    assert not collected.problems and len(collected.accepted) == 1, collected.problems
