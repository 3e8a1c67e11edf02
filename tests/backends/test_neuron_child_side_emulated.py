"""The neuron backend's own calls, parent and child side, in one process on each of two emulated machines.

Quicker than a benchmark (one process per machine) and aimed at what a benchmark's figures would hide: the
neuron-ls flags of Neuron 2.34, the synchronize before each figure (the emulated allocator publishes at a
synchronize only), the compile settings TorchNeuron supports, the CPU fallback count, and the sysfs reads on
both trees: the one driver 2.31 moved (Neuron 2.33's driver, 2.31.7.0) and the pre-2.31 one. The mutation check
(``python -m tests.support.mutation``) names these tests for the mutants they must kill.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pipeline.bench.failures import classify
from tests.support.neuron import Machine, build, environment

pytestmark = pytest.mark.slow
MiB = 1024**2

SCRIPT = """
    import json
    from pipeline.backends.neuron import NeuronBackend, inventory_json
    from pipeline.backends.neuron.tools import read_device_memory

    backend = NeuronBackend()
    versions = backend.versions()
    out = {"inventory": inventory_json(backend.inventory), "driver": versions["driver"], "nki": versions["nki"]}
    backend.setup_process()
    import torch
    import transformers

    device = backend.device()
    backend.reset_peak_memory()
    x = torch.empty(8 * 2**20, dtype=torch.uint8, device=device)  # queued work: no synchronize of our own here
    out["peak"] = backend.peak_memory_bytes()
    out["reserved"] = backend.memory_figures()["peak_device_memory_reserved_bytes"]
    torch.nonzero(x[:16])  # the machine's fallback op (on machine A)
    out["fallback"] = backend.fallback_counts()

    class Tiny(torch.nn.Module):
        def forward(self, t):
            return t * 2

    model = Tiny()
    model.generation_config = transformers.GenerationConfig()
    model = backend.prepare(model, compile=True, fullgraph=True)
    config = model.generation_config.compile_config
    out["compile_config"] = {k: getattr(config, k) for k in ("backend", "fullgraph", "dynamic", "mode")}
    compiled = torch.compile(model.forward, backend=config.backend, fullgraph=config.fullgraph,
                             dynamic=config.dynamic, mode=config.mode)
    out["values"] = compiled(torch.ones(4, device=device)).cpu().tolist()
    out["compile"] = backend.compile_figures()
    out["notes"] = backend.run_notes()
    memory = read_device_memory(backend.sysfs_root, cores=[0, 1])
    out["sysfs"] = {str(i): dict(m.categories) for i, m in memory.items()}
    print("RESULT" + json.dumps(out))
"""


def run_backend(root: Path) -> tuple[dict[str, Any], str]:
    script = root / "backend_calls.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**environment(root), "NEURON_RT_VISIBLE_CORES": "0", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULT", 1)[1]), done.stderr


def test_on_neuron_2_34_with_the_moved_sysfs_tree(tmp_path: Path) -> None:
    root = build(tmp_path / "a", Machine.of("trn2.3xlarge", profile="2.34", fallback_ops=("aten::nonzero",)))
    out, stderr = run_backend(root)
    inventory = out["inventory"]  # neuron-ls with 2.34's flag: no --json-output there
    assert inventory is not None and inventory["instance_type"] == "trn2.3xlarge", inventory
    assert inventory["neuroncore_ids"] == [0, 1, 2, 3] and inventory["output_shape"].startswith("object {")
    assert out["driver"] == "2.31.7.0" and out["nki"] == "0.7.0"
    # The moved tree: no sysfs cross-check, a note, and the allocator's figure after a synchronize.
    assert out["sysfs"] == {} and any(n.startswith("sysfs device memory not used") for n in out["notes"])
    assert out["peak"] >= 8 * MiB and out["reserved"] >= 8 * MiB
    assert out["fallback"] == {"aten::nonzero": 1}
    assert out["compile_config"] == {"backend": "neuron", "fullgraph": True, "dynamic": False, "mode": "default"}
    assert out["values"] == [2.0] * 4 and out["compile"]["compiled_graphs"] == 1
    assert "is not supported by the neuron backend" not in stderr  # TorchNeuron's one mode: no warning


def test_on_a_pre_2_31_driver_the_sysfs_counters_are_read(tmp_path: Path) -> None:
    root = build(tmp_path / "b", Machine.of("trn2.3xlarge", profile="pre-2.31"))
    out, _ = run_backend(root)
    assert out["inventory"]["output_shape"] == "list" and out["driver"] == "2.26.5.0"  # 2.33's neuron-ls
    # Logical core 0 at LNC=2 is physical cores 0 and 1: each holds the runtime's 96 MB and half the tensors.
    assert set(out["sysfs"]) == {"0", "1"}
    for categories in out["sysfs"].values():
        assert categories["model_code"] == 96 * MiB and categories["tensors"] >= 4 * MiB
    assert out["peak"] >= 8 * MiB and not any(n.startswith("sysfs device memory not used") for n in out["notes"])
    assert out["fallback"] == {}


def test_a_rank_left_with_several_cores_is_an_infrastructure_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every rank given the run's whole range is the launcher's fault, never the model's: "error", retried.
    from pipeline.backends.neuron import NeuronBackend
    from pipeline.errors import BenchError

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-1")
    with pytest.raises(BenchError) as raised:
        NeuronBackend().start_distributed()
    found = classify(exc_type="BenchError", message=str(raised.value), stage_hint="load")
    assert (found.status, found.code) == ("error", "nrt_init_failed"), found
