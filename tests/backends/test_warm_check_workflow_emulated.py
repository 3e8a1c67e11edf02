"""warm-check.yml end to end (issue 32), its steps as written against the local hub, the check on the Neuron emulator:
the queue job picks the published row's bundle from the dataset's main, both guards accept the entry, benchmark.yml's
`mode: warm` step runs `trncat warm-check` on *another* emulated machine with empty caches (every graph hits, and
the check says it was emulated), and the publish job sets that emulated check aside (no Trainium2 evidence). The same
check as a real trn2 runner would write it then goes into the dataset as one PR, a retry commits nothing, and the
next queue skips the verified bundle.

The shared emulated CI benchmark (tests/backends/conftest.py) is the row: its record without the emulator's mark
stands for a real trn2 row (validate keeps emulated rows out of a dataset), and its model is the local folder (its
revision is no commit of the local hub), passed as the step's MODEL_ID."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from pipeline.dataset import WARM_CHECKS_FILE, build
from pipeline.publish import publish_bundles
from tests import ROOT
from tests.backends.conftest import EmulatedBench
from tests.support.localhub_fixtures import repo_file
from tests.support.neuron import Machine, environment
from tests.support.neuron import build as build_machine
from tests.test_workflow_steps import Runner

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (GitHub's runners have it)"),
]
DATASET, COMPILED = "trncat/results", "trncat/trncat-compiled"


@pytest.mark.timeout(900)
def test_warm_check_steps_queue_check_on_another_machine_and_publish(
    emulated_llama_bench: EmulatedBench, localhub, tmp_path: Path
) -> None:
    record = json.loads(emulated_llama_bench.record.read_text())
    publish_bundles([(str(emulated_llama_bench.record), record)], hub=localhub.client, repo=COMPILED)
    assert record["compiled_cache"]["sha256"] and record["run"]["runner"] == "trn2-emulated-a"
    row = {**record, "hardware": {k: v for k, v in record["hardware"].items() if k != "emulated"}}
    build([row], tmp_path / "dataset")
    localhub.store.create_repo(DATASET, repo_type="dataset")
    files = {str(p.relative_to(tmp_path / "dataset")): p for p in (tmp_path / "dataset").rglob("*") if p.is_file()}
    localhub.store.commit_files(DATASET, files, message="a published CI row", repo_type="dataset")

    workspace = tmp_path / "checkout"
    workspace.mkdir()
    base = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "HF_ENDPOINT": localhub.url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_CACHE": str(localhub.cache_dir),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    run = Runner(workspace, base)

    # warm-check.yml's queue job: the dataset's main, no token; its guard step; then benchmark.yml's guard.
    run("warm-check", "queue", "queue", DATASET_REPO=DATASET, LIMIT="16")
    matrix = run("warm-check", "queue", "matrix", DATASET_REPO=DATASET)
    assert matrix["count"] == "1"
    (entry,) = json.loads(matrix["matrix"])["include"]
    assert entry["sha256"] == record["compiled_cache"]["sha256"] and entry["mode"] == "warm"
    assert entry["made_by"] == "trn2-emulated-a" and (workspace / "queue-warm" / "records").is_dir()
    guard = Runner(workspace, {"PATH": os.environ["PATH"]})
    guard("benchmark", "matrix", "matrix", CALLER_MATRIX=matrix["matrix"], MODEL_ID="", TASK="", REVISION="",
          RUNNER="", DTYPE="")  # fmt: skip

    # benchmark.yml's warm-check step on machine B: another emulated trn2, another runner, empty caches.
    machine = build_machine(tmp_path / "machine-b", Machine.of("trn2.48xlarge"))
    check_env = {**base, **environment(machine, {"PATH": base["PATH"], "HOME": str(tmp_path)}),
                 "RUNNER_NAME": "trn2-emulated-b", "TRNCAT_MACHINE": "trn2-emulated-b"}  # fmt: skip
    Runner(workspace, check_env)(
        "benchmark", "bench", "warm-check",
        MODEL_ID=str(emulated_llama_bench.model), SHA256=entry["sha256"], ARTIFACT=entry["artifact"],
    )  # fmt: skip
    check = json.loads((workspace / "warm" / f"{entry['artifact']}.json").read_text())
    assert (check["status"], check["hits"], check["misses"]) == ("verified", 2, 0), check
    assert check["emulated"] is True and check["runner"] == "trn2-emulated-b"

    # The publish job: one folder per warm-* artifact. The emulated check is set aside (the plan step says so, and
    # the job's last step fails), never published.
    downloaded = workspace / "artifacts" / "warm" / f"warm-{entry['artifact']}"
    downloaded.mkdir(parents=True)
    shutil.copy(workspace / "warm" / f"{entry['artifact']}.json", downloaded)
    assert run("warm-check", "publish", "plan", DATASET_REPO=DATASET) == {"set_aside": "true"}
    assert not localhub.store.get(DATASET, repo_type="dataset").discussions

    # As a real trn2 runner writes it, the same check goes in as one PR; a retry commits nothing.
    (downloaded / f"{entry['artifact']}.json").write_text(json.dumps({**check, "emulated": False}))
    assert run("warm-check", "publish", "plan", DATASET_REPO=DATASET) == {}
    run("warm-check", "publish", "publish", DATASET_REPO=DATASET, HF_TOKEN="localhub-token")
    repo = localhub.store.get(DATASET, repo_type="dataset")
    (pr,) = repo.discussions
    assert WARM_CHECKS_FILE in repo.tree(f"refs/pr/{pr['num']}")
    run("warm-check", "publish", "publish", DATASET_REPO=DATASET, HF_TOKEN="localhub-token")
    assert "nothing to publish" in run.stdout and len(repo.discussions) == 1

    # Merged, the bundle is verified: the next queue has nothing to check.
    data = repo_file(localhub.store, DATASET, WARM_CHECKS_FILE, revision=f"refs/pr/{pr['num']}", repo_type="dataset")
    localhub.store.commit_files(DATASET, {WARM_CHECKS_FILE: data}, message="merge", repo_type="dataset")
    shutil.rmtree(workspace / "queue-warm")
    run("warm-check", "queue", "queue", DATASET_REPO=DATASET, LIMIT="16")
    assert run("warm-check", "queue", "matrix", DATASET_REPO=DATASET)["count"] == "0"
