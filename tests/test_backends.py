"""The neuron and cuda backends without their devices: recorded tool output, fake sysfs, fake runtimes.

The last test runs the real child and harness with a "neuron" backend whose device methods run on the CPU
and shows that the record differs from a CPU run only in what the backend provides.
"""

from __future__ import annotations

import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.bench import backends, child, harness
from pipeline.bench.backends.base import Backend, world_of
from pipeline.bench.backends.cuda import CudaBackend, gpu_bandwidth, hardware_name
from pipeline.bench.backends.neuron import NeuronBackend, choose_peak, sysfs_core_indices
from pipeline.bench.models import resolve_local
from pipeline.bench.spec import BenchSpec
from pipeline.cli import main
from pipeline.errors import BackendUnavailableError, ConfigError
from pipeline.records import validate_record
from pipeline.workload import Workload

FIXTURES = Path(__file__).parent / "fixtures" / "neuron"
TRN2_3XL = (FIXTURES / "neuron_ls_trn2_3xlarge.json").read_text()
TRN1_2XL = (FIXTURES / "neuron_ls_trn1_2xlarge.json").read_text()
GiB = 1024**3
SMALL = Workload(batch_size=1, input_tokens=16, output_tokens=8)
FAKE_PACKAGES = {"torch-neuronx": "2.14.0", "neuronx-cc": "2.21.18209.0", "aws-neuronx-runtime-lib": "2.27.23.0"}


def _write_core(root: Path, device: int, core: int, *, total: int, peak: int) -> None:
    mem = root / f"devices/virtual/neuron_device/neuron{device}/neuron_core{core}/stats/memory_usage/device_mem"
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "total").write_text(f"{total}\n")
    (mem / "peak").write_text(f"{peak}\n")


@pytest.fixture
def machine(tmp_path: Path) -> Path:
    """A fake trn2.3xlarge: /dev/neuron0, a sysfs tree (8 physical cores, driver version), a compile cache."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/neuron0").touch()
    sys_root = tmp_path / "sys"
    for core in range(8):
        _write_core(sys_root, 0, core, total=1000, peak=5 * GiB)  # a stale peak left by an earlier process
    (sys_root / "module/neuron").mkdir(parents=True)
    (sys_root / "module/neuron/version").write_text("2.24.7.0\n")
    (tmp_path / "cache").mkdir()
    return tmp_path


def _neuron(root: Path, *, neuron_ls: str | None = TRN2_3XL, **kwargs: Any) -> NeuronBackend:
    kwargs.setdefault("find_spec", lambda name: object())
    kwargs.setdefault("packages", FAKE_PACKAGES.get)
    return NeuronBackend(
        dev_root=root / "dev", sysfs_root=root / "sys", neuron_ls=lambda: neuron_ls, cache_dir=root / "cache", **kwargs
    )


# --- neuron, parent side ---------------------------------------------------------------------------


def test_neuron_unavailable_without_torch_neuronx_is_one_line(machine: Path) -> None:
    backend = _neuron(machine, find_spec=lambda name: None)
    with pytest.raises(BackendUnavailableError, match="torch-neuronx") as info:
        backend.check_available()
    assert "\n" not in str(info.value)


def test_neuron_unavailable_without_compiler_or_device(machine: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="neuronx-cc"):
        _neuron(machine, packages=lambda name: None).check_available()
    (machine / "dev/neuron0").unlink()
    with pytest.raises(BackendUnavailableError, match="no Neuron device"):
        _neuron(machine).check_available()


def test_neuron_available_on_a_trn2(machine: Path) -> None:
    _neuron(machine).check_available()  # does not raise


def test_real_neuron_backend_here_says_torch_neuronx_is_missing() -> None:
    with pytest.raises(BackendUnavailableError, match="torch-neuronx"):
        NeuronBackend().check_available()


def test_neuron_hardware_and_bandwidth_from_recorded_neuron_ls(machine: Path) -> None:
    backend = _neuron(machine)
    assert backend.hardware(cores=2) == {
        "name": "trn2.3xlarge",
        "instance_type": "trn2.3xlarge",
        "accelerator": "trainium2",
        "core_config": "lnc=2",
        "memory_per_core_bytes": 24 * GiB,
        "cores_available": 4,
    }
    # 2.9 TB/s per chip shared by its 4 logical cores.
    assert backend.bandwidth_bytes_per_s(cores=1) == pytest.approx(2.9e12 / 4)
    assert backend.bandwidth_bytes_per_s(cores=4) == pytest.approx(2.9e12)


def test_neuron_lnc_from_environment(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "NEURON_LOGICAL_NC_CONFIG", "1")
    backend = _neuron(machine, neuron_ls=None)  # no neuron-ls: instance table figures
    hw = backend.hardware(cores=1)
    assert hw["core_config"] == "lnc=1" and hw["memory_per_core_bytes"] == 12 * GiB
    assert backend.environment(cores=2)["NEURON_LOGICAL_NC_CONFIG"] == "1"
    monkeypatch.setattr(constants, "NEURON_LOGICAL_NC_CONFIG", "3")
    with pytest.raises(ConfigError):
        _neuron(machine).environment(cores=1)


def test_neuron_versions(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "TRNCAT_IMAGE_DIGEST", "sha256:" + "ab" * 32)
    versions = _neuron(machine).versions()
    assert versions["torch_neuronx"] == "2.14.0" and versions["neuronx_cc"] == "2.21.18209.0"
    assert versions["runtime"] == "2.27.23.0" and versions["driver"] == "2.24.7.0"
    assert versions["container_image"] == "sha256:" + "ab" * 32 and versions["cuda"] is None


def test_neuron_environment_and_launcher(machine: Path) -> None:
    backend = _neuron(machine)
    assert backend.environment(cores=2) == {
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "NEURON_COMPILE_CACHE_URL": str(machine / "cache"),
    }
    with pytest.raises(ConfigError, match="do not fit"):
        backend.environment(cores=8)  # a trn2.3xlarge has 4 logical cores
    args = ["pipeline.bench.child", "spec.json", "out.json"]
    assert backend.launcher(cores=1, module_args=args) == [sys.executable, "-m", *args]
    assert backend.launcher(cores=4, module_args=args) == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "4",
        "-m",
        *args,
    ]


def test_neuron_compile_cache_hit_is_recorded(machine: Path) -> None:
    backend = _neuron(machine)
    before = backend.compile_cache_snapshot()
    (machine / "cache/neuronxcc-2.21.18209.0/MODULE_123+abc").mkdir(parents=True)  # a cold compile
    assert backend.compile_cache_hit(before) is False
    assert backend.compile_cache_hit(backend.compile_cache_snapshot()) is True  # nothing new: warm
    assert _neuron(machine / "elsewhere").compile_cache_hit(set()) is None  # no local cache


def test_sysfs_cores_behind_logical_cores() -> None:
    assert sysfs_core_indices(cores=2, lnc=2) == [0, 1, 2, 3]
    assert sysfs_core_indices(cores=1, first_core=3, lnc=2) == [6, 7]
    assert sysfs_core_indices(cores=2, lnc=1) == [0, 1]


def test_choose_peak() -> None:
    assert choose_peak(allocator=100, sysfs=300, sysfs_exact=True) == 300
    assert choose_peak(allocator=100, sysfs=300, sysfs_exact=False) == 100  # stale counter: not trusted
    assert choose_peak(allocator=None, sysfs=None, sysfs_exact=True) is None


# --- neuron, child side with a fake torch_neuronx -----------------------------------------------------


@pytest.fixture
def fake_torch_neuronx(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    state = types.SimpleNamespace(peak=2 * GiB, syncs=0, resets=0)
    module = types.ModuleType("torch_neuronx")
    module.max_memory_allocated = lambda device=None: state.peak  # type: ignore[attr-defined]
    module.reset_peak_memory_stats = lambda device=None: setattr(state, "resets", state.resets + 1)  # type: ignore[attr-defined]
    module.synchronize = lambda: setattr(state, "syncs", state.syncs + 1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_neuronx", module)
    return state


def test_peak_memory_cross_checks_sysfs(machine: Path, fake_torch_neuronx: types.SimpleNamespace) -> None:
    backend = _neuron(machine)
    backend.reset_peak_memory()
    assert fake_torch_neuronx.resets == 1
    # The counters were cleared (the fake sysfs is writable): the run's sysfs peak is exact.
    _write_core(machine / "sys", 0, 0, total=3 * GiB, peak=3 * GiB)
    _write_core(machine / "sys", 0, 1, total=GiB, peak=GiB)
    _write_core(machine / "sys", 0, 2, total=7 * GiB, peak=7 * GiB)  # another logical core: not ours
    peak = backend.peak_memory_bytes()
    assert fake_torch_neuronx.syncs >= 1  # synchronized before reading
    assert peak == 4 * GiB - 2 * 1000  # sysfs (tensors + code + scratch) beats the allocator's 2 GiB


def test_peak_memory_ignores_a_stale_sysfs_peak(
    machine: Path, fake_torch_neuronx: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.bench.backends.neuron import tools as neuron_tools

    monkeypatch.setattr(neuron_tools, "reset_peaks", lambda root, cores=None: False)  # not root
    backend = _neuron(machine)
    backend.reset_peak_memory()
    assert backend.peak_memory_bytes() == 2 * GiB  # the 5 GiB sysfs peak predates the run


# --- child: pure pieces --------------------------------------------------------------------------------


def test_from_pretrained_kwargs_use_tp_plan_under_torchrun() -> None:
    import torch

    assert child.model_load_kwargs(dtype=torch.bfloat16, world_size=1) == {
        "dtype": torch.bfloat16,
        "trust_remote_code": False,
    }
    sharded = child.model_load_kwargs(dtype=torch.bfloat16, world_size=4)
    assert sharded["tp_plan"] == "auto" and sharded["trust_remote_code"] is False
    assert world_of({"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "4"}) == (2, 2, 4)
    assert world_of({}) == (0, 0, 1)


def test_only_rank_zero_writes_progress(tmp_path: Path) -> None:
    child.Progress(tmp_path / "r1.json", enabled=False).stage("run")
    assert not (tmp_path / "r1.json").exists()
    child.Progress(tmp_path / "r0.json").stage("run")
    assert '"stage": "run"' in (tmp_path / "r0.json").read_text()


def test_roofline_counts_weights_and_kv_cache() -> None:
    from transformers import LlamaConfig

    config = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=64)
    per_token = child.kv_bytes_per_token(config, element_size=2)
    assert per_token == 2 * 2 * 2 * 16 * 2
    work = Workload(batch_size=2, input_tokens=100, output_tokens=50)
    step = child.decode_bytes_per_step(weights_bytes=10_000, kv_bytes_per_token=per_token, workload=work)
    assert step == 10_000 + 2 * 125 * per_token
    bound = 1e6 / step * 2  # tokens/s the bandwidth allows
    assert child.roofline_fraction(tokens_per_s=bound / 2, bandwidth=1e6, bytes_per_step=step, batch_size=2) == (
        pytest.approx(0.5)
    )
    assert child.roofline_fraction(tokens_per_s=None, bandwidth=1e6, bytes_per_step=step, batch_size=2) is None


def test_compile_choice() -> None:
    from pipeline.bench.backends.cpu import CpuBackend

    assert NeuronBackend().will_compile(requested=None) is True
    assert CudaBackend(probe=dict).will_compile(requested=None) is False
    assert CudaBackend(probe=dict).will_compile(requested=True) is True
    with pytest.raises(ConfigError):
        CpuBackend().will_compile(requested=True)


# --- cuda ----------------------------------------------------------------------------------------


def test_cuda_names_and_bandwidth() -> None:
    assert hardware_name("NVIDIA H200") == "nvidia-h200"
    assert hardware_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert gpu_bandwidth("NVIDIA H200") == 4.8e12
    assert gpu_bandwidth("NVIDIA H100 80GB HBM3") == 3.35e12
    assert gpu_bandwidth("NVIDIA H100 PCIe") == 2.0e12
    assert gpu_bandwidth("NVIDIA A100-SXM4-80GB") == 2.039e12
    assert gpu_bandwidth("NVIDIA A100-SXM4-40GB") == 1.555e12
    assert gpu_bandwidth("NVIDIA GH200 480GB") is None  # not an H200: unknown rather than wrong
    assert gpu_bandwidth("Tesla T4") is None


def test_cuda_backend_from_a_probe() -> None:
    h200 = {"count": 1, "name": "NVIDIA H200", "total_memory": 150_000_000_000, "cuda": "12.8"}
    backend = CudaBackend(probe=lambda: h200)
    backend.check_available()
    assert backend.hardware(cores=1) == {
        "name": "nvidia-h200",
        "instance_type": None,
        "accelerator": "NVIDIA H200",
        "core_config": None,
        "memory_per_core_bytes": 150_000_000_000,
        "cores_available": 1,
    }
    assert backend.versions()["cuda"] == "12.8"
    assert backend.bandwidth_bytes_per_s(cores=1) == 4.8e12
    assert backend.environment(cores=2) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    with pytest.raises(BackendUnavailableError, match="GPU") as info:
        CudaBackend(probe=lambda: {"count": 0}).check_available()
    assert "\n" not in str(info.value)


# --- the CLI without torch_neuronx -----------------------------------------------------------------


def test_cli_bench_on_neuron_without_torch_neuronx(
    tiny_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "neuron.json"
    code = main(
        ["bench", str(tiny_models["text-generation"]), "--task", "text-generation", "--device", "neuron"]
        + ["--out", str(out)]
    )
    assert code != 0 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1 and "torch-neuronx" in errors[0]
    assert err[-1] == errors[0] and "Traceback" not in "\n".join(err)


# --- the backend is all that differs --------------------------------------------------------------


class CpuNeuron(NeuronBackend):
    """The real neuron backend, except that its device is the CPU and it compiles with the eager backend."""

    root: Path = Path("/nonexistent")

    def __init__(self) -> None:
        super().__init__(
            dev_root=self.root / "dev",
            sysfs_root=self.root / "sys",
            neuron_ls=lambda: TRN2_3XL,
            cache_dir=self.root / "cache",
            find_spec=lambda name: object(),
            packages=FAKE_PACKAGES.get,
        )

    def device(self) -> Any:
        import torch

        return torch.device("cpu")

    def prepare(self, model: Any, *, compile: bool = True, fullgraph: bool = True) -> Any:
        from pipeline.bench.backends.base import enable_generate_compile

        model = model.to(self.device())
        if compile:
            enable_generate_compile(model, backend="eager", fullgraph=fullgraph, mode="default")
            model.generation_config.compile_config._compile_all_devices = True  # compile on the CPU too
        return model


def in_process_child(spec: BenchSpec, *, env: dict[str, str], launcher: Any, **_: Any) -> harness.ChildOutcome:
    """The real child code path, in this process (so that the test's registry entry is seen)."""
    assert launcher(["pipeline.bench.child", "s", "o"])[-3:] == ["pipeline.bench.child", "s", "o"]
    with tempfile.TemporaryDirectory() as tmp:
        progress = child.Progress(Path(tmp) / "report.json")
        try:
            child.run(spec, progress)
            progress.state["done"] = True
        except Exception as exc:
            progress.state["error"] = {"type": type(exc).__name__, "message": "".join(traceback.format_exception(exc))}
    return harness.ChildOutcome(progress.state, 0 if progress.state["done"] else 1, False, False, "")


BACKEND_METRICS = {
    "load_s",
    "compile_s",
    "ttft_s",
    "latency_s",
    "decode_tokens_per_s",
    "wall_s",
    "peak_device_memory_bytes",
    "peak_host_memory_bytes",
    "roofline_fraction",
    "compile_cache_hit",
}


def test_the_backend_module_is_all_that_differs(
    tiny_models: dict[str, Path],
    machine: Path,
    fake_torch_neuronx: types.SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CpuNeuron, "root", machine)
    monkeypatch.setitem(backends.REGISTRY, "neuron", f"{__name__}:CpuNeuron")
    from torch._dynamo.utils import counters

    counters.clear()
    resolved = resolve_local(tiny_models["text-generation"])
    records = {}
    for device in ("cpu", "neuron"):
        spec = BenchSpec(path=str(resolved.path), task="text-generation", device=device, dtype="float32")
        spec = BenchSpec(**{**spec.__dict__, "workload": SMALL, "iterations": 2, "warmup": 1})
        records[device] = harness.bench_once(
            spec, resolved, backend=backends.get_backend(device), child_runner=in_process_child
        )
    cpu, neuron = records["cpu"], records["neuron"]
    assert validate_record(neuron) == [] and neuron["status"] == "pass", neuron["failure"]
    shared = set(cpu) - {"device", "hardware", "versions", "metrics", "run"}
    assert {k: cpu[k] for k in shared} == {k: neuron[k] for k in shared}
    same_metrics = set(cpu["metrics"]) - BACKEND_METRICS
    assert {k: cpu["metrics"][k] for k in same_metrics} == {k: neuron["metrics"][k] for k in same_metrics}
    base = set(Backend().versions()) - {"torch_neuronx", "neuronx_cc", "runtime", "driver", "sdk", "cuda"}
    assert {k: cpu["versions"][k] for k in base} == {k: neuron["versions"][k] for k in base}
    # What the neuron backend brings: its hardware, versions, compilation and device memory.
    assert neuron["device"] == "neuron" and neuron["hardware"]["core_config"] == "lnc=2"
    assert neuron["versions"]["torch_neuronx"] == "2.14.0" and cpu["versions"]["torch_neuronx"] is None
    assert cpu["metrics"]["compile_s"] == 0.0 and neuron["metrics"]["compile_s"] > 0.0
    assert counters["stats"]["unique_graphs"] >= 1  # generate() really compiled its decode step
    assert neuron["metrics"]["compile_cache_hit"] is False and cpu["metrics"]["compile_cache_hit"] is None
    assert neuron["metrics"]["peak_device_memory_bytes"] == 2 * GiB
    assert cpu["metrics"]["peak_device_memory_bytes"] is None
