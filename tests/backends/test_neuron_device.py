"""On a Trainium2 runner: one tiny model per task through ``trncat bench --device neuron`` (skipped elsewhere).

The benchmark workflow runs ``pytest -m neuron`` on the runner before its matrix; a few minutes on a
trn2.3xlarge (the tiny models compile in seconds; a warm compile cache makes reruns faster). Each run is the
command a user runs, as a process: every task on one core (the step before, ``trncat doctor --smoke``, runs the
tiny Llama on one core and tensor parallel on two). ``tests/test_workflow_steps.py`` runs both steps on the Neuron
emulator, where the records say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.records import validate_record

pytestmark = pytest.mark.neuron

#: A smaller workload than each task's fixed one: the runner's smoke proves the path, not the speed. The tiny
#: Llama's own runs are the previous step's (``trncat doctor --smoke``: one core, and two under torchrun).
WORKLOADS = {
    "image-text-to-text": ["input_tokens=16", "output_tokens=8", "image_size=64"],
    "sentence-embeddings": ["input_tokens=16", "batch_size=4", "batch_sizes=1,4"],
    "text-to-image": ["image_size=32", "steps=2"],
}
#: The tiny random UNet's denoising update is not stable in bfloat16 against the float32 reference (cosine about
#: 0.5 on the emulator): its smoke checks the path in float32, the others in the benchmark's bfloat16.
DTYPES = {"text-to-image": "float32"}


def bench(folder: Path, task: str, tmp_path: Path, *, cores: int = 1) -> dict[str, Any]:
    """``trncat bench`` of a tiny model as a process; its record, checked valid (an emulated one allowed)."""
    out = tmp_path / f"{task}-{cores}.json"
    workload = [arg for item in WORKLOADS[task] for arg in ("--workload", item)]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "bench", str(folder), "--task", task, "--device", "neuron",
         "--cores", str(cores), "--dtype", DTYPES.get(task, "bfloat16"), "--iterations", "2", "--timeout", "900",
         *workload,
         "--out", str(out)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert validate_record(record, allow_emulated=True) == []
    assert record["status"] == "pass", record["failure"]
    return record


@pytest.mark.parametrize("task", sorted(WORKLOADS))
def test_tiny_model_runs_on_one_neuroncore(task: str, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    record = bench(tiny_models[task], task, tmp_path)
    m = record["metrics"]
    assert m["peak_device_memory_bytes"] > 0 and m["compile_cache_hit"] in (True, False)
    assert record["hardware"]["core_config"].startswith("lnc=")
    assert record["versions"]["torch_neuronx"] and record["versions"]["neuronx_cc"] and record["versions"]["driver"]
    assert m.get("compiled_graphs", 1) >= 1  # TorchNeuron's own figures, where it reports them
    if task == "image-text-to-text":
        assert m["prefill_mode"] == "eager"  # its raw image inputs cannot be chunked: the record says so
