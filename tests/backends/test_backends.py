"""The neuron and cuda backends without their devices: recorded tool output, fake sysfs, fake runtimes.

The production neuron backend, harness, child and torchrun launch run unchanged, as processes, against the Neuron
emulator in tests/backends/test_neuron_emulated.py (which also shows a neuron record differs from a CPU one only
in what the backend provides).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.backends.base import Backend, CompiledRun, world_of
from pipeline.backends.cuda import CudaBackend, gpu_bandwidth, hardware_name
from pipeline.backends.neuron import NeuronBackend
from pipeline.backends.neuron.launch import NEFF_CACHE_VARIABLE
from pipeline.backends.neuron.measure import choose_peak, count_ops
from pipeline.bench import child, harness
from pipeline.bench.spec import BenchSpec
from pipeline.bench.tasks import generation
from pipeline.bench.tasks.base import percentile
from pipeline.cli import main
from pipeline.errors import BackendUnavailableError, ConfigError
from pipeline.models import resolve_local
from pipeline.records import validate_record
from pipeline.workload import Workload
from tests import FIXTURES as TEST_FIXTURES

FIXTURES = TEST_FIXTURES / "neuron"
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
    return NeuronBackend(dev_root=root / "dev", sysfs_root=root / "sys", neuron_ls=lambda: neuron_ls, **kwargs)


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


def test_the_runtime_version_is_the_installed_package_not_a_neighbours_process(machine: Path) -> None:
    """neuron-ls lists every process on the device, another runner's among them: its runtime is not this one."""
    busy = (FIXTURES / "neuron_ls_trn2_48xlarge_one_device.json").read_text()  # two processes of runtime 2.34.10
    versions = _neuron(machine, neuron_ls=busy, packages={**FAKE_PACKAGES, "aws-neuronx-runtime-lib": "2.35.30.0"}.get)
    assert versions.versions()["runtime"] == "2.35.30.0"


def test_the_instance_is_inferred_from_sixteen_devices_when_nothing_names_it(machine: Path) -> None:
    import json

    listed = [{"neuron_device": i, "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": 96 * GiB,
               "neuroncore_ids": list(range(4 * i, 4 * i + 4)), "neuron_processes": []} for i in range(16)]  # fmt: skip
    backend = _neuron(machine, neuron_ls=json.dumps(listed))  # 2.33's JSON names no instance
    assert backend.hardware(cores=8)["instance_type"] == "trn2.48xlarge" and backend.instance.chips == 16
    one = _neuron(machine, neuron_ls=json.dumps(listed[:1]))  # one chip: a trn2.3xlarge, or one chip of a container
    assert one.hardware(cores=1)["instance_type"] is None


def test_neuron_environment_and_launcher(machine: Path) -> None:
    backend = _neuron(machine)
    assert backend.environment(cores=2) == {
        "NEURON_RT_VISIBLE_CORES": "0-1",
        "TRNCAT_NEURON_CORES": "0-1",
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1",
    }
    assert backend.environment(cores=1, compile_cache=machine / "cache")[NEFF_CACHE_VARIABLE] == str(machine / "cache")
    with pytest.raises(ConfigError, match="owns only 4"):
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


def test_an_offset_runner_stays_in_its_cores(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "NEURON_RT_VISIBLE_CORES", "2-3")  # this runner owns logical cores 2 and 3
    backend = _neuron(machine)
    assert backend.environment(cores=2)["NEURON_RT_VISIBLE_CORES"] == "2-3"
    with pytest.raises(ConfigError, match="owns only 2"):
        backend.environment(cores=4)
    # In the child, NEURON_RT_VISIBLE_CORES is the run's own set: at LNC=2 that is physical cores 4-7 in sysfs.
    assert backend._sysfs_cores_or_none() == [4, 5, 6, 7]


def test_neuron_compile_cache_hit_is_observed(machine: Path) -> None:
    backend = _neuron(machine)
    cache = machine / "cache"
    before = backend.compile_cache_files(cache)
    (cache / "ab" / "cd").mkdir(parents=True)
    (cache / "ab" / "cd" / "key.neff").write_bytes(b"neff")  # a cold compile writes a NEFF
    assert backend.compile_cache_hit(cache, before) is False
    assert backend.compile_cache_hit(cache, backend.compile_cache_files(cache)) is True  # nothing new: warm
    assert Backend().compile_cache_hit(cache, set()) is None  # no compile cache on the base backend


def test_missing_neuron_ls_is_an_infrastructure_error(
    machine: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _neuron(machine, neuron_ls=None)
    assert backend.preflight() is not None and "neuron-ls" in str(backend.preflight())
    monkeypatch.setattr(constants, "TRNCAT_INSTANCE_TYPE", "trn2.48xlarge")
    assert backend.preflight() is None  # the operator said which instance this is
    monkeypatch.setattr(constants, "TRNCAT_INSTANCE_TYPE", None)
    spec = BenchSpec(
        path=str(tiny_models["text-generation"]), task="text-generation", device="neuron", dtype="bfloat16"
    )
    calls: list[BenchSpec] = []
    record = harness.bench_once(
        spec,
        resolve_local(tiny_models["text-generation"]),
        backend=backend,
        child_runner=lambda spec, **kw: calls.append(spec),  # type: ignore[func-returns-value]
    )
    assert calls == []  # nothing ran on a machine whose instance is unknown
    assert record["status"] == "error" and record["failure"]["code"] == "device_unknown"
    assert validate_record(record) == []


def test_fallback_ops_are_counted_since_the_snapshot(
    machine: Path, fake_torch_neuronx: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _neuron(machine)
    assert backend.fallback_counts() is None  # a torch-neuronx without the tracking calls: not observable
    assert backend.fallback_ops(None) is None
    ran: list[str] = ["aten::nonzero"]
    monkeypatch.setattr(sys.modules["torch_neuronx"], "get_fallback_ops", lambda: list(ran), raising=False)
    before = backend.fallback_counts()
    ran.extend(["aten::topk", "aten::topk", "aten::nonzero"])
    assert backend.fallback_ops(before) == [{"op": "aten::nonzero", "count": 1}, {"op": "aten::topk", "count": 2}]
    assert count_ops({"aten::sort": 3}) == {"aten::sort": 3} and count_ops({"a", "b"}) == {"a": 1, "b": 1}
    assert count_ops(None) == {}


def _sum_on_two_ranks(rank: int, store_path: str, results: Any) -> None:
    import torch.distributed as dist

    from pipeline.backends.base import sum_across_ranks

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    try:
        results[rank] = sum_across_ranks(10 + rank)
    finally:
        dist.destroy_process_group()


def test_cross_rank_sums_run_on_the_host_over_gloo(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    from pipeline.backends.base import sum_across_ranks

    assert sum_across_ranks(7) == 7  # not distributed: the value itself
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_sum_on_two_ranks, args=(str(tmp_path / "store"), results), nprocs=2, join=True)
    assert dict(results) == {0: 21, 1: 21}


def test_choose_peak() -> None:
    assert choose_peak(allocator=100, sysfs=300, sysfs_exact=True) == 300
    assert choose_peak(allocator=100, sysfs=300, sysfs_exact=False) == 100  # stale counter: not trusted
    assert choose_peak(allocator=None, sysfs=None, sysfs_exact=True) is None


# --- neuron, child side with a fake torch_neuronx -----------------------------------------------------


@pytest.fixture
def fake_torch_neuronx(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    state = types.SimpleNamespace(peak=2 * GiB, syncs=0, resets=0, devices=[])
    module = types.ModuleType("torch_neuronx")
    module.max_memory_allocated = lambda device=None: state.peak  # type: ignore[attr-defined]

    def reset(device: Any = None) -> None:
        state.resets += 1
        state.devices.append(device)

    module.reset_peak_memory_stats = reset  # type: ignore[attr-defined]
    module.synchronize = lambda: setattr(state, "syncs", state.syncs + 1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_neuronx", module)
    return state


def test_peak_memory_cross_checks_sysfs(
    machine: Path, fake_torch_neuronx: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _neuron(machine)
    monkeypatch.setattr(backend, "device", lambda: "neuron:0")  # no neuron device in this process
    backend.reset_peak_memory()
    assert fake_torch_neuronx.devices == ["neuron:0"]  # the device named, never "the current one"
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
    from pipeline.backends.neuron import tools as neuron_tools

    monkeypatch.setattr(neuron_tools, "reset_peaks", lambda root, cores=None: False)  # not root
    backend = _neuron(machine)
    monkeypatch.setattr(backend, "device", lambda: "neuron:0")
    backend.reset_peak_memory()
    assert backend.peak_memory_bytes() == 2 * GiB  # the 5 GiB sysfs peak predates the run


# --- child: pure pieces --------------------------------------------------------------------------------


def test_from_pretrained_kwargs_use_tp_plan_under_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import transformers

    from pipeline.bench.tasks.text_generation import TextGeneration

    seen: list[dict[str, Any]] = []

    class Auto:
        @staticmethod
        def from_pretrained(path: Path, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return torch.nn.Identity()

    monkeypatch.setattr(transformers, "AutoModelForCausalLM", Auto)
    TextGeneration().load(Path("."), dtype=torch.bfloat16, world_size=1)
    assert seen[-1] == {"dtype": torch.bfloat16, "trust_remote_code": False}
    TextGeneration().load(Path("."), dtype=torch.bfloat16, world_size=4)
    assert seen[-1]["tp_plan"] == "auto" and seen[-1]["trust_remote_code"] is False
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
    per_token = generation.kv_bytes_per_token(config, element_size=2)
    assert per_token == 2 * 2 * 2 * 16 * 2
    work = Workload(batch_size=2, input_tokens=100, output_tokens=50)
    step = generation.decode_bytes_per_step(weights_bytes=10_000, kv_bytes_per_token=per_token, workload=work)
    assert step == 10_000 + 2 * 125 * per_token
    bound = 1e6 / step * 2  # tokens/s the bandwidth allows
    assert generation.roofline_fraction(tokens_per_s=bound / 2, bandwidth=1e6, bytes_per_step=step, batch_size=2) == (
        pytest.approx(0.5)
    )
    assert generation.roofline_fraction(tokens_per_s=None, bandwidth=1e6, bytes_per_step=step, batch_size=2) is None


def test_compile_choice() -> None:
    from pipeline.backends.cpu import CpuBackend

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


def test_cuda_backend_from_a_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline import constants

    monkeypatch.setattr(constants, "CUDA_VISIBLE_DEVICES", None)
    monkeypatch.setattr(constants, "TRNCAT_INSTANCE_TYPE", None)
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


def test_cuda_on_a_gpu_runner_stays_on_its_gpus_and_names_its_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline import constants
    from pipeline.errors import ConfigError

    monkeypatch.setattr(constants, "CUDA_VISIBLE_DEVICES", "4,5")
    monkeypatch.setattr(constants, "TRNCAT_INSTANCE_TYPE", "p5.48xlarge")
    h100 = {"count": 2, "name": "NVIDIA H100 80GB HBM3", "total_memory": 1, "cuda": "12.8"}
    backend = CudaBackend(probe=lambda: h100)
    assert backend.environment(cores=1) == {"CUDA_VISIBLE_DEVICES": "4"}
    assert backend.environment(cores=2) == {"CUDA_VISIBLE_DEVICES": "4,5"}
    with pytest.raises(ConfigError, match="needs 4 GPU"):
        backend.environment(cores=4)
    assert backend.hardware(cores=1)["instance_type"] == "p5.48xlarge"  # what prices the row
    assert backend.hardware(cores=1)["name"] == "nvidia-h100-80gb-hbm3"  # rows stay keyed by the GPU


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


def test_a_neuron_run_that_fails_packs_no_bundle(machine: Path, tiny_models: dict[str, Path]) -> None:
    """Issue 25: only a pass ships its compile cache; a failed run's record stands alone."""
    from pipeline.bench.process import ChildOutcome

    backend = _neuron(machine)
    spec = BenchSpec(
        path=str(tiny_models["text-generation"]), task="text-generation", device="neuron", dtype="bfloat16"
    )

    def crashed(spec: BenchSpec, **kw: Any) -> ChildOutcome:
        cache = Path(kw["env"]["TORCH_NEURONX_NEFF_CACHE_DIR"]) / "ab" / "cd"
        cache.mkdir(parents=True)
        (cache / "half.neff").write_bytes(b"NEFF")  # it compiled something before it failed
        error = {"type": "RuntimeError", "message": "boom", "module": "builtins"}
        return ChildOutcome({"stage": "run", "error": error}, 1, False, False, "boom")

    bundle = machine / "out" / "r.neff-cache.tar.gz"
    record = harness.bench_once(
        spec, resolve_local(tiny_models["text-generation"]), backend=backend, child_runner=crashed, bundle_out=bundle
    )
    assert record["status"] != "pass" and not bundle.exists() and "compiled_cache_skipped" not in record
    nothing = CompiledRun(machine / "nothing", "text-generation", "bfloat16", {}, 1)
    assert backend.bundle_compile_cache(machine / "nothing", bundle, nothing) == (
        f"the NEFF cache {machine / 'nothing'} holds no file: no bundle",
        None,
    )  # an empty cache: a reason


def test_a_percentile_interpolates_linearly_between_the_sorted_values() -> None:
    assert percentile([3.0], 90) == 3.0
    assert percentile([4.0, 1.0, 2.0, 3.0], 50) == 2.5
    assert percentile([10.0, 0.0], 90) == pytest.approx(9.0)
    assert (percentile([5.0, 1.0, 9.0], 0), percentile([5.0, 1.0, 9.0], 100)) == (1.0, 9.0)
