"""On a machine with an NVIDIA GPU: one tiny model per task through the real cuda backend (skipped elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.backends import get_backend
from pipeline.bench.run import BenchOptions, bench_model
from pipeline.records import validate_record
from pipeline.workload import Workload

pytestmark = pytest.mark.cuda

WORKLOADS = {
    "text-generation": Workload(batch_size=1, input_tokens=16, output_tokens=8),
    "image-text-to-text": Workload(batch_size=1, input_tokens=16, output_tokens=8, image_size=64),
}


@pytest.mark.parametrize("task", sorted(WORKLOADS))
def test_tiny_model_runs_on_one_gpu(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = bench_model(
        str(tiny_models[task]),
        task=task,
        backend=get_backend("cuda"),
        out=tmp_path / f"{task}.json",
        options=BenchOptions(dtype="bfloat16", workload=WORKLOADS[task], iterations=2, warmup=1, timeout_s=600),
    )
    assert validate_record(record) == []
    assert record["status"] == "pass", record["failure"]
    m = record["metrics"]
    assert m["peak_device_memory_bytes"] > 0 and m["compile_s"] == 0.0
    assert record["versions"]["cuda"] and record["hardware"]["name"].startswith("nvidia")
