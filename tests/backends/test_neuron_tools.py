"""Neuron-side parsers and launch helpers, on recorded tool outputs and a fake sysfs tree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipeline.backends.neuron import NeuronBackend
from pipeline.backends.neuron.launch import (
    NEFF_CACHE_VARIABLE,
    choose_cores,
    compile_cache_hit,
    format_visible_cores,
    neuron_env,
    parse_visible_cores,
    snapshot_cache,
    sysfs_core_indices,
)
from pipeline.backends.neuron.tools import (
    CoreMemory,
    device_core_counts,
    driver_version,
    parse_neuron_ls,
    peak_delta,
    read_device_memory,
    reset_peaks,
    visible_devices,
)
from pipeline.errors import BenchError, ConfigError
from tests import FIXTURES as TEST_FIXTURES

FIXTURES = TEST_FIXTURES / "neuron"
GIB = 1024**3


# --- neuron-ls ------------------------------------------------------------------------------------


def test_neuron_ls_trn2_3xlarge():
    inv = parse_neuron_ls((FIXTURES / "neuron_ls_trn2_3xlarge.json").read_text())
    assert inv.instance_type == "trn2.3xlarge"
    assert (inv.device_count, inv.cores_per_device, inv.logical_nc_config) == (1, 4, 2)
    assert inv.memory_per_device_bytes == 96 * GIB
    assert inv.memory_per_core_bytes == 24 * GIB
    assert inv.total_cores == 4
    assert inv.busy_core_ids == () and inv.runtime_version is None


def test_neuron_ls_trn1_has_no_instance_type_or_lnc():
    inv = parse_neuron_ls((FIXTURES / "neuron_ls_trn1_2xlarge.json").read_text())
    assert inv.instance_type is None and inv.logical_nc_config is None
    assert (inv.cores_per_device, inv.memory_per_core_bytes) == (2, 16 * GIB)


def test_neuron_ls_reports_busy_cores_and_runtime_version():
    inv = parse_neuron_ls((FIXTURES / "neuron_ls_trn2_48xlarge_one_device.json").read_text())
    assert inv.instance_type == "trn2.48xlarge"
    assert inv.busy_core_ids == (0, 1, 2, 3)
    assert inv.runtime_version == "2.34.10"
    assert inv.devices[0].pids == (1966680, 1966681)


def test_neuron_ls_many_devices_and_wrapped_form():
    devices = [
        {
            "neuron_device": i,
            "nc_count": 4,
            "logical_neuroncore_config": 2,
            "memory_size": 96 * GIB,
            "neuroncore_ids": [4 * i + k for k in range(4)],
            "neuron_processes": [],
        }
        for i in reversed(range(16))
    ]
    inv = parse_neuron_ls(json.dumps({"instance_type": "trn2.48xlarge", "neuron_devices": devices}))
    assert (inv.instance_type, inv.device_count, inv.total_cores) == ("trn2.48xlarge", 16, 64)
    assert [d.index for d in inv.devices] == list(range(16))
    # Without neuroncore_ids, cores are numbered device by device.
    del devices[0]["neuroncore_ids"]
    assert parse_neuron_ls(json.dumps(devices)).devices[15].core_ids == (60, 61, 62, 63)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda d: {"instance_type": "trn2.48xlarge", "neuron_devices": d},
        lambda d: {"instance": {"instance_type": "trn2.48xlarge"}, "ultraserver": None, "devices": d},
        lambda d: {"instance": {"type": "trn2.48xlarge", "id": "i-1"}, "node": {"neuron_device_info": d}},
        lambda d: {"instance": "trn2.48xlarge", "summary": {"devices": 16}, "list": [1], "entries": d},
    ],
)
def test_neuron_ls_2_34_is_read_under_any_key_the_unpublished_shape_may_use(wrap):
    # Neuron 2.34's JSON has no published sample: the devices are found by their objects, not by a key name,
    # and the shape seen is kept for doctor's JSON (the first 2.34 machine records the real one).
    devices = [{"neuron_device": i, "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": 96 * GIB,
                "neuroncore_ids": [4 * i + k for k in range(4)]} for i in range(16)]  # fmt: skip
    inv = parse_neuron_ls(json.dumps(wrap(devices)))
    assert (inv.instance_type, inv.device_count, inv.total_cores) == ("trn2.48xlarge", 16, 64)
    assert inv.output_shape.startswith("object {") and "devices at " in inv.output_shape
    assert parse_neuron_ls(json.dumps(devices)).output_shape == "list"


@pytest.mark.parametrize(
    "text, match",
    [
        ("not json", "not JSON"),
        ("[]", "no Neuron device"),
        ('[{"nc_count": 2}]', "neuron_device"),
        ('[{"neuron_device": 0, "nc_count": "two"}]', "nc_count"),
        ('{"neuron_devices": null}', "no Neuron"),
    ],
)
def test_neuron_ls_rejects_bad_output(text, match):
    with pytest.raises(BenchError, match=match):
        parse_neuron_ls(text)


# --- sysfs ----------------------------------------------------------------------------------------

CATEGORIES = ("constants", "model_code", "tensors", "runtime_memory", "dma_rings")


def _write_core(root: Path, device: int, core: int, *, total: int, peak: int, tensors: int = 0) -> None:
    mem = (
        root
        / "devices/virtual/neuron_device"
        / f"neuron{device}"
        / f"neuron_core{core}"
        / "stats/memory_usage/device_mem"
    )
    for name, value in (("total", total), ("present", 4096), ("peak", peak)):
        (mem / name).parent.mkdir(parents=True, exist_ok=True)
        (mem / name).write_text(f"{value}\n")
    for category in CATEGORIES:
        (mem / category).mkdir(exist_ok=True)
        value = tensors if category == "tensors" else (total - tensors if category == "constants" else 0)
        for name in ("total", "present", "peak"):
            (mem / category / name).write_text(f"{value}\n")


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    # Two devices of two cores each, the structure the Neuron Sysfs User Guide documents.
    _write_core(tmp_path, 0, 0, total=100, peak=100)
    _write_core(tmp_path, 0, 1, total=0, peak=0)
    _write_core(tmp_path, 1, 0, total=50, peak=70)
    _write_core(tmp_path, 1, 1, total=0, peak=0)
    (tmp_path / "devices/virtual/neuron_device/neuron0/neuron_core0/info").mkdir()  # not a counter
    (tmp_path / "module/neuron").mkdir(parents=True)
    (tmp_path / "module/neuron/version").write_text("2.26.5.0\n")
    return tmp_path


def test_read_device_memory_numbers_cores_device_by_device(sysfs):
    mem = read_device_memory(sysfs)
    assert sorted(mem) == [0, 1, 2, 3]
    assert mem[2] == CoreMemory(device=1, core=0, current=50, peak=70)
    assert mem[0].categories["constants"] == 100
    assert set(read_device_memory(sysfs, cores=[1, 2])) == {1, 2}


def test_read_device_memory_without_driver(tmp_path):
    assert read_device_memory(tmp_path) == {}


def test_read_device_memory_falls_back_to_category_sum(sysfs):
    mem_dir = sysfs / "devices/virtual/neuron_device/neuron0/neuron_core1/stats/memory_usage/device_mem"
    (mem_dir / "total").unlink()
    (mem_dir / "peak").unlink()
    (mem_dir / "tensors" / "total").write_text("30\n")
    core = read_device_memory(sysfs, cores=[1])[1]
    assert (core.current, core.peak) == (30, 30)


def test_peak_delta_sums_peak_after_minus_current_before(sysfs):
    before = read_device_memory(sysfs)
    _write_core(sysfs, 0, 0, total=150, peak=400, tensors=250)
    _write_core(sysfs, 0, 1, total=10, peak=60, tensors=10)
    after = read_device_memory(sysfs)
    # core0: 400-100, core1: 60-0, core2: 70-50 (old peak, an upper bound), core3: 0.
    assert peak_delta(before, after) == 300 + 60 + 20
    assert peak_delta({}, {0: CoreMemory(0, 0, 5, 9)}) == 9
    assert peak_delta({0: CoreMemory(0, 0, 50, 50)}, {0: CoreMemory(0, 0, 10, 20)}) == 0


def test_reset_peaks_clears_counters(sysfs):
    assert reset_peaks(sysfs, cores=[2])
    assert read_device_memory(sysfs)[2].peak == 0
    assert read_device_memory(sysfs)[0].peak == 100


def test_reset_peaks_reports_unwritable(sysfs, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(Path, "write_text", refuse)
    assert reset_peaks(sysfs) is False


def test_driver_version(sysfs, tmp_path):
    assert driver_version(sysfs) == "2.26.5.0"
    assert driver_version(tmp_path / "nowhere") is None


# --- compile cache --------------------------------------------------------------------------------


def test_cache_miss_then_hit(tmp_path):
    # The docs name the NEFF cache directory, not its layout: any new file under it is a compile that missed.
    cache = tmp_path / "neff-cache"
    before = snapshot_cache(cache)
    assert before == set()
    (cache / "ab" / "graph_1").mkdir(parents=True)
    (cache / "ab" / "graph_1" / "model.neff").write_bytes(b"neff")
    assert not compile_cache_hit(cache, before)  # a new file: the compile really ran
    warm = snapshot_cache(cache)
    assert warm == {"ab/graph_1/model.neff"}
    assert compile_cache_hit(cache, warm)  # nothing new: served from the cache


def test_empty_cache_is_not_a_hit(tmp_path):
    assert not compile_cache_hit(tmp_path, set())


# --- launch ---------------------------------------------------------------------------------------


def test_visible_cores_and_env(tmp_path):
    assert format_visible_cores([3]) == "3"
    assert format_visible_cores([0, 1, 2, 3]) == "0-3"
    assert format_visible_cores([8, 9, 10, 11, 0, 2]) == "0,2,8-11"
    env = neuron_env(cores=[2, 3], lnc=2, cache_dir=tmp_path / "cache")
    assert env == {
        "NEURON_RT_VISIBLE_CORES": "2-3",
        "TRNCAT_NEURON_CORES": "2-3",  # the run's set, which each torchrun rank narrows to its own core
        "NEURON_LOGICAL_NC_CONFIG": "2",
        "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1",
        NEFF_CACHE_VARIABLE: str(tmp_path / "cache"),
        # the compile locks are the run's own too, never TorchNeuron's /tmp/local_cache shared by every runner
        "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(tmp_path / "cache-locks"),
    }
    assert neuron_env(cores=[0], lnc=None, cache_dir=None) == {
        "NEURON_RT_VISIBLE_CORES": "0",
        "TRNCAT_NEURON_CORES": "0",
        "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1",
    }
    with pytest.raises(ConfigError):
        neuron_env(cores=[0], lnc=3, cache_dir=None)
    with pytest.raises(ConfigError):
        format_visible_cores([])


@pytest.mark.parametrize(
    ("value", "cores"),
    [("3", [3]), ("8-15", list(range(8, 16))), ("0,2,4", [0, 2, 4]), ("8-11, 0-1", [0, 1, 8, 9, 10, 11])],
)
def test_visible_cores_accept_single_ranges_and_comma_lists(value, cores):
    assert parse_visible_cores(value) == cores


@pytest.mark.parametrize("value", ["7-3", "a", "1,,2", "-1", "0-3,2", "", "3-", "1_0", "+3", "\u0663"])
def test_malformed_visible_cores_are_config_errors(value):
    with pytest.raises(ConfigError):
        parse_visible_cores(value)


#: The documented examples (docs/neuron-facts.md: a single index, an inclusive range, the container guide's comma
#: list, one slice per process) and edge cases either side of the rule.
DOCUMENTED_VISIBLE = ["3", "0", "51,52", "0-1", "2-3", "8-15", "0-3,8-11", "5-5", "0,2,4", "8-11,0-1"]
NOT_A_VISIBLE_FORM = ["", "a", "-1", "3-", "-3", "7-3", "1,,2", ",1", "1,", "0-3,2", "1,1", "1-2-3", "1_0", "+3",
                      "\u0663", "0x1", "1.0"]  # fmt: skip


@pytest.mark.parametrize("value", DOCUMENTED_VISIBLE + NOT_A_VISIBLE_FORM)
def test_trncat_and_the_emulated_runtime_read_visible_cores_alike(value):
    # The emulator's parser is written from the documented rule, not from trncat's: where they differ, one is wrong.
    from tests.support.neuron.runtime import NeuronRuntimeError, parse_visible

    try:
        emulated: list[int] | None = parse_visible(value, total=64)
    except NeuronRuntimeError:
        emulated = None
    try:
        ours: list[int] | None = parse_visible_cores(value)
    except ConfigError:
        ours = None
    assert ours == emulated
    assert (ours is not None) == (value in DOCUMENTED_VISIBLE)


def test_the_launcher_is_a_list_torchrun_accepts():
    from torch.distributed.run import get_args_parser

    cmd = NeuronBackend().launcher(cores=4, module_args=["pipeline.bench.child", "--spec", "s.json"])
    assert cmd[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    args = get_args_parser().parse_args(cmd[3:])
    assert (args.nproc_per_node, args.module, args.standalone) == ("4", True, True)
    assert (args.training_script, args.training_script_args) == ("pipeline.bench.child", ["--spec", "s.json"])


@pytest.mark.parametrize("module_args", [[], [""], ["--flag"]])
def test_the_launcher_rejects_arguments_without_a_module(module_args):
    with pytest.raises(ConfigError, match="module name"):
        NeuronBackend().launcher(cores=2, module_args=module_args)


def test_a_run_stays_inside_the_runners_core_range() -> None:
    assert choose_cores(cores=4, inherited=None, total_cores=16) == [0, 1, 2, 3]
    assert choose_cores(cores=4, inherited="16-23") == [16, 17, 18, 19]
    assert choose_cores(cores=2, inherited="0,3,4,5") == [3, 4]  # the first consecutive block
    assert choose_cores(cores=1, inherited="5,9") == [5]
    with pytest.raises(ConfigError, match="owns only 8"):
        choose_cores(cores=16, inherited="16-23")
    with pytest.raises(ConfigError, match="no 2 consecutive"):
        choose_cores(cores=2, inherited="0,2,4")
    with pytest.raises(ConfigError, match="owns only 4"):
        choose_cores(cores=8, inherited=None, total_cores=4)  # a trn2.3xlarge has 4 logical cores
    with pytest.raises(ConfigError, match="past the instance"):
        choose_cores(cores=1, inherited="4-7", total_cores=4)


def test_sysfs_indices_of_an_offset_runner_and_a_rebased_container() -> None:
    trn2_48xl = {device: 8 for device in range(16)}  # 16 devices, 8 physical cores each
    # A host runner owning logical cores 8-11 at LNC=2: physical 16..23, i.e. device 2's cores 0-7.
    assert sysfs_core_indices([8, 9, 10, 11], lnc=2, device_cores=trn2_48xl, visible_devices=None) == list(
        range(16, 24)
    )
    assert sysfs_core_indices([1], lnc=1, device_cores=trn2_48xl, visible_devices=None) == [1]
    # A container given /dev/neuron2 and /dev/neuron3: its runtime numbers their cores from 0, sysfs is host-wide.
    assert sysfs_core_indices([0, 1], lnc=2, device_cores=trn2_48xl, visible_devices=[2, 3]) == [16, 17, 18, 19]
    assert sysfs_core_indices([4], lnc=2, device_cores=trn2_48xl, visible_devices=[2, 3]) == [24, 25]
    with pytest.raises(ConfigError, match="past the 2 Neuron device"):
        sysfs_core_indices([8], lnc=2, device_cores=trn2_48xl, visible_devices=[2, 3])
    assert sysfs_core_indices([0], lnc=2, device_cores={}, visible_devices=None) == []  # no driver


def test_device_core_counts_and_visible_devices(sysfs, tmp_path):
    assert device_core_counts(sysfs) == {0: 2, 1: 2}
    dev = tmp_path / "dev"
    dev.mkdir()
    assert device_core_counts(dev) == {}
    for name in ("neuron2", "neuron10", "neuron_x"):
        (dev / name).touch()
    assert visible_devices(dev) == [2, 10]
