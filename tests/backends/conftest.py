"""Fixtures of the backend tests: the one emulated CI benchmark the compiled-cache and warm-start tests share."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: The CI provenance of the shared emulated benchmark (its record is a CI row, so publish uploads its bundle).
CI = {"GITHUB_RUN_ID": "4242", "GITHUB_SHA": "ab" * 20, "RUNNER_NAME": "trn2-emulated-a"}


@dataclass(frozen=True)
class EmulatedBench:
    """One ``trncat bench --device neuron --source ci`` of the tiny Llama on an emulated trn2.3xlarge: the machine,
    the model folder and the record file (its compiled-cache bundle beside it). Read-only for the tests."""

    machine: Path
    model: Path
    record: Path


@pytest.fixture(scope="session")
def emulated_llama_bench(tmp_path_factory: pytest.TempPathFactory) -> EmulatedBench:
    """The emulated CI benchmark, run once per test process for tests/backends/test_compiled_cache_emulated.py,
    test_warm_start_emulated.py and test_warm_check_workflow_emulated.py (one xdist worker runs them:
    tests/conftest.py's SAME_WORKER)."""
    from pipeline.testing import build_tiny_llama
    from tests.support.neuron import Machine, build, environment

    tmp = tmp_path_factory.mktemp("emulated-bench")
    root = build(tmp / "machine-a", Machine.of("trn2.3xlarge"))
    model = build_tiny_llama(tmp / "tiny-llama")
    env = {**environment(root), **CI, "TOKENIZERS_PARALLELISM": "false", "TRNCAT_REFERENCE_CACHE": str(tmp / "ref")}
    out = tmp / "records" / "acme--tiny-llama.json"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "bench", str(model), "--task", "text-generation", "--device", "neuron",
         "--model-id", "acme/tiny-llama", "--source", "ci", "--workload", "input_tokens=16", "--workload",
         "output_tokens=4", "--iterations", "1", "--warmup", "0", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return EmulatedBench(root, model, out)
