"""``trncat bench --device neuron`` as a process on the Neuron emulator (tests/support/neuron/): the production
neuron backend, harness, child and torchrun, unchanged, against a machine that enforces the documented runtime.

Tensor parallelism over 4 cores of a trn2.48xlarge; a core another process holds (an infrastructure ``error``,
never a ``fail``); a device out-of-memory (the runtime's text and memory table in the record); and the emulated
record refused by ``trncat validate``, the submission check and publish. The 1-core runs of every task are the
neuron-marked tests (tests/backends/test_neuron_device.py), which the benchmark workflow's smoke steps run on the
emulator in tests/test_workflow_steps.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.records import validate_record
from pipeline.testing import build_tiny_llama
from tests.support.neuron import Machine, build, environment

pytestmark = pytest.mark.slow
SMALL = ["--workload", "input_tokens=16", "--workload", "output_tokens=8", "--iterations", "2"]


def trncat(root: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**environment(root), "TOKENIZERS_PARALLELISM": "false", "TRNCAT_REFERENCE_CACHE": str(root / "reference")}
    return subprocess.run([sys.executable, "-m", "pipeline", *args], env=env, capture_output=True, text=True,
                          timeout=1500, cwd=cwd)  # fmt: skip


def bench(root: Path, model: Path, out: Path, *args: str) -> dict[str, Any]:
    done = trncat(root, "bench", str(model), "--task", "text-generation", "--device", "neuron", *SMALL, *args,
                  "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record: dict[str, Any] = json.loads(out.read_text())
    assert validate_record(record, allow_emulated=True) == []  # valid, apart from being emulated
    return record


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_four_cores_tensor_parallel_and_the_emulated_record_is_refused(tmp_path: Path) -> None:
    # greedy decoding's argmax is an eager op: here one the emulated TorchNeuron lacks, so it runs on the CPU
    root = build(tmp_path / "trn2", Machine.of("trn2.48xlarge", fallback_ops=("aten::argmax",)))
    model = build_tiny_llama(tmp_path / "llama-kv4", kv_heads=4)  # 4 kv heads shard over 4 cores
    record = bench(root, model, tmp_path / "tp4.json", "--cores", "4")
    assert record["status"] == "pass", record["failure"]
    assert record["cores"] == 4 and record["hardware"]["name"] == "trn2.48xlarge"  # inferred from 16 devices
    assert record["hardware"]["emulated"] is True and record["hardware"]["cores_available"] == 64
    ranks = sorted(n for n in record["notes"] if n.startswith("rank "))
    # Every rank reserved its own core of the run's 0-3, and saw one device: TorchNeuron's one core per process.
    assert [n.split("NEURON_RT_VISIBLE_CORES=")[1].split(",")[0] for n in ranks] == ["0", "1", "2", "3"], ranks
    assert all("device_count()=1" in n and "run cores 0-3" in n for n in ranks)
    assert [n.split("device ")[1].split(",")[0] for n in ranks] == [f"neuron:{i}" for i in range(4)]  # LOCAL_RANK
    m = record["metrics"]
    assert m["compiled_graphs"] == 2 and m["cached_graphs"] == 0 and m["neuronx_cc_s"] > 0  # prompt and decode
    assert m["warm_start_cached_graphs"] == 2 and m["compile_cache_hit"] is True  # the second process hit
    assert m["prefill_mode"] == "compiled" and m["peak_device_memory_reserved_bytes"] >= 4 * 2 * 1024**2
    assert record["versions"]["runtime"] == "2.35.30.0" and record["versions"]["nki"] == "0.7.0"
    fallback = {entry["op"]: entry["count"] for entry in m["cpu_fallback_ops"] or []}
    assert fallback.get("aten::argmax", 0) > 0, m["cpu_fallback_ops"]  # counted, never hidden
    assert record["agreement"]["logits_cosine"] > 0.99 and record["agreement"]["skipped"] is None

    # An emulated record is never a result: trncat validate refuses it, and so do build and publish.
    refused = trncat(root, "validate", str(tmp_path / "tp4.json"))
    assert refused.returncode == 1 and "hardware.emulated" in refused.stdout + refused.stderr
    assert "Neuron emulator" in refused.stdout + refused.stderr
    published = trncat(root, "publish", str(tmp_path / "tp4.json"), "--to-folder", str(tmp_path / "dataset"))
    assert published.returncode != 0 and not list((tmp_path / "dataset").rglob("*.parquet"))


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_core_held_by_another_process_is_an_infrastructure_error(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    root = build(tmp_path / "trn2", Machine.of("trn2.3xlarge"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import torch, sys; torch.ones(1).to('neuron'); print('held', flush=True); "
         "sys.stdin.read()"],
        env={**environment(root), "NEURON_RT_VISIBLE_CORES": "0"}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        record = bench(root, tiny_models["text-generation"], tmp_path / "busy.json", "--cores", "1")
    finally:
        holder.communicate("", timeout=60)
    assert record["status"] == "error" and record["failure"]["code"] == "device_busy", record["failure"]
    assert "NeuronCore(s) not available" in record["failure"]["message"]


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_a_device_out_of_memory_fails_with_the_runtime_memory_table(
    tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    # 193 MiB of HBM: the runtime's own 96 MB on each of the two physical cores leaves no room for the first 2 MiB
    # segment of the weights.
    root = build(tmp_path / "trn2", Machine.of("trn2.3xlarge", core_hbm_limit=193 * 1024**2))
    record = bench(root, tiny_models["text-generation"], tmp_path / "oom.json", "--cores", "1")
    failure = record["failure"]
    assert (record["status"], failure["stage"], failure["code"]) == ("fail", "oom", "device_oom"), failure
    assert "Failed to allocate" in failure["message"]
    table = [n for n in record["notes"] if n.startswith("device memory table (/tmp/neuron_mem_table_device_0_hbm_0")]
    assert table and "ND 0 HBM 0" in table[0], record["notes"]
