"""A ``trncat check`` process imports no torch and no model library: the planner's build of a known architecture
runs in its child (which imports them), a type transformers does not know is never built, and the verdict's
rules read the family index as Arrow (issue 36)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.dataset import build
from tests import FIXTURES
from tests.support.records import fake_revision, sample_record

DATASET = "trncat/results"
REPO_ROOT = Path(__file__).resolve().parents[2]
#: What a check process must never hold in ``sys.modules`` when it ends.
HEAVY = ("torch", "transformers", "diffusers", "sentence_transformers", "pandas")
#: Runs the CLI in this process, then prints the heavy modules it holds (its forked children are not counted).
PROBE = (
    "import sys\n"
    "from pipeline.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


@pytest.fixture
def hub(localhub, tiny_models: dict[str, Path], tmp_path: Path) -> Any:
    """A merged dataset of two Llamas on Trainium2, a fine-tune of one, and a model of a type transformers lacks."""
    assert FIXTURES.is_dir()
    llama = {"architecture": "LlamaForCausalLM", "model_type": "llama"}
    records = [sample_record(model_id=m, revision=fake_revision(m), **llama) for m in ("acme/base", "acme/other")]
    build(records, tmp_path / "dataset", page=False)
    store = localhub.store
    store.create_repo(DATASET, repo_type="dataset")
    folder = tmp_path / "dataset"
    store.commit_files(DATASET, {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()},
                       message="merged results", repo_type="dataset")  # fmt: skip
    model = tiny_models["text-generation"]
    files: dict[str, Path | bytes] = {p.name: p for p in model.iterdir() if p.is_file()}
    meta = {"library_name": "transformers", "pipeline_tag": "text-generation", "safetensors": {"total": 1_000_000}}
    store.create_repo("acme/ft", metadata=meta)
    store.commit_files("acme/ft", {**files, "README.md": b"---\nbase_model: acme/base\n---\n"}, message="upload")
    config = json.loads((model / "config.json").read_text())
    config.update(architectures=["NovelForCausalLM"], model_type="novel-type")
    store.create_repo("acme/novel", metadata=meta)
    store.commit_files("acme/novel", {**files, "config.json": json.dumps(config).encode()}, message="upload")
    return localhub


def _check_process(localhub: Any, model_id: str) -> tuple[dict[str, Any], list[str]]:
    env = {**os.environ, "HF_ENDPOINT": localhub.url, "HF_HUB_CACHE": str(localhub.cache_dir),
           "HF_HUB_DISABLE_XET": "1", "HF_TOKEN": "localhub-token", "PYTHONPATH": str(REPO_ROOT)}  # fmt: skip
    args = ["check", model_id, "--dataset", DATASET, "--no-cache", "--json"]
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("HEAVY=")]
    return json.loads(done.stdout), [m for m in line.removeprefix("HEAVY=").split(",") if m]


def test_a_check_process_of_a_known_architecture_imports_no_torch(hub) -> None:
    answer, heavy = _check_process(hub, "acme/ft")
    assert answer["verdict"] == "likely-runs"
    # Planned on the meta device all the same (in the build's child): the exact count, not the listing's total.
    assert answer["plan"]["source"] == "meta-device" and answer["plan"]["params"] != 1_000_000
    assert heavy == []


def test_a_check_process_of_a_type_transformers_lacks_imports_no_torch(hub) -> None:
    answer, heavy = _check_process(hub, "acme/novel")
    assert answer["verdict"] == "unknown" and answer["plan"]["source"] == "safetensors"
    assert "does not know model_type 'novel-type'" not in answer["reason"]  # the plan's note, not the verdict's
    assert heavy == []
