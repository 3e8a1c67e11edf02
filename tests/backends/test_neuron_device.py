"""On a Trainium2 runner: one tiny model per task through the real neuron backend (skipped elsewhere).

The benchmark workflow runs ``pytest -m neuron`` on the runner before its matrix; a few minutes on a
trn2.3xlarge (the tiny models compile in seconds; a warm compile cache makes reruns faster).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import bench_model
from pipeline.records import validate_record
from pipeline.workload import Workload

pytestmark = pytest.mark.neuron

WORKLOADS = {
    "text-generation": Workload(batch_size=1, input_tokens=16, output_tokens=8),
    "image-text-to-text": Workload(batch_size=1, input_tokens=16, output_tokens=8, image_size=64),
}


def _bench(folder: Path, task: str, tmp_path: Path, *, cores: int = 1) -> dict:
    record = bench_model(
        str(folder),
        task=task,
        backend=get_backend("neuron"),
        out=tmp_path / f"{task}-{cores}.json",
        cores=cores,
        dtype="bfloat16",
        workload=WORKLOADS[task],
        iterations=2,
        warmup=1,
        timeout_s=900,
    )
    assert validate_record(record) == []
    assert record["status"] == "pass", record["failure"]
    return record


@pytest.mark.parametrize("task", sorted(WORKLOADS))
def test_tiny_model_runs_on_one_neuroncore(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models[task], task, tmp_path)
    m = record["metrics"]
    assert m["peak_device_memory_bytes"] > 0
    assert m["compile_cache_hit"] in (True, False)
    assert record["hardware"]["core_config"].startswith("lnc=")
    assert record["versions"]["torch_neuronx"] and record["versions"]["neuronx_cc"] and record["versions"]["driver"]


def test_tiny_llama_runs_on_two_cores_under_torchrun(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = _bench(tiny_models["text-generation"], "text-generation", tmp_path, cores=2)
    assert record["cores"] == 2 and record["metrics"]["peak_device_memory_bytes"] > 0
