"""The Neuron emulator itself: each rule has its docs/neuron-facts.md row, and each rule holds when a real process
runs on the emulated machine (a few scripts, each checking several rules). That production never imports it:
tests/test_architecture.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.backends.neuron.tools import parse_neuron_ls
from tests import ROOT
from tests.support.neuron import EMULATOR, RULES, Machine, build, environment

pytestmark = pytest.mark.slow
FACTS = ROOT / "docs" / "neuron-facts.md"


def fact_rows(text: str) -> set[str]:
    """The first cell of every table row of docs/neuron-facts.md."""
    return {m[1].strip() for m in re.finditer(r"^\| ([^|]+?) \|", text, re.M) if not m[1].startswith("---")}


def rules_without_a_row(rules: object, text: str) -> list[str]:
    rows = fact_rows(text)
    return [r.key for r in rules if r.fact not in rows]  # type: ignore[attr-defined]


def test_every_rule_names_its_row_in_the_facts_table() -> None:
    text = FACTS.read_text(encoding="utf-8")
    assert rules_without_a_row(RULES, text) == []
    # The check fails on a rule whose row is missing.
    assert rules_without_a_row(RULES, text.replace("| a reserved NeuronCore is exclusive |", "| gone |")) == [
        "exclusive_cores"
    ]
    for rule in RULES:
        if rule.invented:  # what the emulator made up is marked in its row
            row = next(line for line in text.splitlines() if line.startswith(f"| {rule.fact} |"))
            assert "silent" in row or "emulator's" in row, rule.key


def _machine(tmp_path: Path, name: str = "m", **changes: object) -> Path:
    return build(tmp_path / name, Machine.of(changes.pop("instance_type", "trn2.3xlarge"), **changes))  # type: ignore[arg-type]


def _tool(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(root / "bin" / "neuron-ls"), *args], capture_output=True, text=True, timeout=60)


def test_neuron_ls_as_2_33_prints_it_and_as_2_34_is_announced(tmp_path: Path) -> None:
    old = _machine(tmp_path, "old", instance_type="trn2.48xlarge")
    listed = json.loads(_tool(old, "--json-output").stdout)
    assert len(listed) == 16 and listed[1]["neuroncore_ids"] == [4, 5, 6, 7] and listed[0]["nc_count"] == 4
    assert all("instance_type" not in d and d["emulator"] == EMULATOR for d in listed)  # the 2.33 docs' shape
    # connected_to as the docs' trn2 example lists it (device 0: 12, 3, 4, 1; device 15: 11, 14, 3, 12)
    assert listed[0]["connected_to"] == [12, 3, 4, 1] and listed[15]["connected_to"] == [11, 14, 3, 12]
    assert _tool(old, "--output-format", "json").returncode != 0  # 2.33 has no such flag
    new = build(tmp_path / "new", Machine.of("trn2.3xlarge", profile="2.34"))
    assert _tool(new, "--json-output").returncode != 0 and _tool(new, "-j").returncode != 0  # removed in 2.34
    shown = json.loads(_tool(new, "--output-format", "json").stdout)
    assert isinstance(shown, dict) and shown["devices"][0]["connected_to"] is None  # one chip: no link
    inventory = parse_neuron_ls(_tool(new, "--output-format", "json").stdout)
    assert (inventory.instance_type, inventory.total_cores, inventory.emulated) == ("trn2.3xlarge", 4, True)
    assert parse_neuron_ls(_tool(old, "-j").stdout).instance_type is None  # production infers it (16 devices)


def test_the_machine_on_disk(tmp_path: Path) -> None:
    # Driver 2.31 reorganised the sysfs tree ("not backwards compatible"): a machine never pairs the two.
    with pytest.raises(ValueError, match="moved the tree"):
        Machine(sysfs="pre-2.31", driver="2.31.7.0")
    old = build(tmp_path / "old", Machine.of("trn2.3xlarge", profile="pre-2.31"))
    assert list(old.glob("sys/devices/virtual/neuron_device/neuron0/neuron_core7/stats/memory_usage/device_mem"))
    root = _machine(tmp_path, mapped=(5,), instance_type="trn2.48xlarge")  # Neuron 2.33: the moved tree
    assert [p.name for p in (root / "dev").iterdir()] == ["neuron5"]  # a container keeps the host's names
    sysfs = root / "sys/devices/virtual/neuron_device"
    assert len(list(sysfs.glob("neuron*"))) == 16  # sysfs is the host's, not the container's
    assert not list(sysfs.glob("neuron0/neuron_core0/stats/memory_usage"))  # moved by driver 2.31
    assert (root / "sys/module/neuron/version").read_text().strip() == "2.31.7.0"
    assert 'VERSION_ID="26.04"' in (root / "etc/os-release").read_text()
    env = environment(root, {"PATH": "/usr/bin", "NEURON_RT_VISIBLE_CORES": "0-63"})
    assert env["TRNCAT_SYSTEM_ROOT"] == str(root) and env["PATH"].startswith(str(root / "bin"))
    assert "NEURON_RT_VISIBLE_CORES" not in env  # the machine's defaults, not the caller's
    dpkg = subprocess.run([str(root / "bin/dpkg-query"), "-W", "-f=${Version}", "aws-neuronx-runtime-lib"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert dpkg.stdout.startswith("2.35.30.0")


def _run(root: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = root / f"check-{abs(hash(code))}.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], env={**environment(root), **env}, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_device_compile_cache_and_memory_rules(tmp_path: Path) -> None:
    root = _machine(tmp_path, fallback_ops=("aten::nonzero",), failing_ops=("aten::flip",))
    code = """
        import json, os, warnings
        import torch  # autoloads the emulated torch_neuronx: no import needed (rule autoload)
        out = {"device_count": torch.neuron.device_count()}
        x = torch.arange(6.0).reshape(2, 3).to("neuron")
        out["device"] = str((x * 2).device)
        out["values"] = (x.t() * 2).cpu().tolist()
        import torch_neuronx
        out["stale"] = torch_neuronx.memory_allocated(x.device)  # before a synchronize: the last published figure
        torch.neuron.synchronize()
        out["allocated"] = torch_neuronx.memory_allocated(x.device)
        out["reserved"] = torch_neuronx.max_memory_reserved(x.device)
        torch.nonzero(x)
        os.environ["TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"] = "1"
        try:
            torch.flip(x, [0])  # fails on the device: with the variable at 1 it may not fall back
        except Exception as exc:
            out["strict"] = str(exc)
        del os.environ["TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"]
        torch.flip(x, [0])
        torch.neuron.synchronize()
        out["fallback"] = torch_neuronx.get_fallback_ops()
        f = torch.compile(lambda t: (t * 3).sum(-1), backend="neuron", fullgraph=True, dynamic=False)
        out["compiled"] = f(x).cpu().tolist()
        f(torch.ones(4, 3).to("neuron"))  # a new input signature: a second graph
        torch.neuron.synchronize()
        out["graphs"] = sorted(m["torch_neuronx_compile_us"] > 0 for m in torch_neuronx.get_dynamo_metrics().values())
        torch.compile(lambda t: t - 1, backend="neuron", mode="reduce-overhead")(x)  # warns, runs
        try:
            torch.compile(lambda t: t + 1, backend="neuron", dynamic=True)(x)
        except Exception as exc:
            out["dynamic"] = str(exc)
        try:
            torch.compile(lambda t: t.to(torch.float8_e4m3fn), backend="neuron")(x)
        except Exception as exc:
            out["float8"] = str(exc)
        print("RESULT" + json.dumps(out))
    """
    cache = tmp_path / "neff"
    done = _run(root, code, TORCH_NEURONX_NEFF_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.split("RESULT", 1)[1])
    assert out["device_count"] == 4 and out["device"] == "neuron:0"  # every core of a trn2.3xlarge by default
    assert out["values"] == [[0.0, 6.0], [2.0, 8.0], [4.0, 10.0]]
    assert out["stale"] == 0 and out["allocated"] > 0 and out["reserved"] >= 2 * 1024**2  # segments
    assert out["fallback"] == ["aten::nonzero", "aten::flip"] and "aten::flip failed on the device" in out["strict"]
    assert out["compiled"] == [9.0, 36.0] and out["graphs"] == [True, True]  # one compile per input signature
    assert "dynamic" in out["dynamic"] and "NCC_EVRF051" in out["float8"]
    assert "mode 'reduce-overhead' is not supported by the neuron backend" in done.stderr
    neffs = sorted(p.relative_to(cache).parts[:2] for p in cache.rglob("*.neff"))
    assert len(neffs) == 3 and all(len(a) == 2 and len(b) == 2 for a, b in neffs)  # ab/cd/<key>.neff, 3 graphs
    assert list((root / "tmp" / "local_cache").glob("*.lock"))  # locks in the default /tmp/local_cache
    # A second process with the same graphs is served from the persistent cache: compile time 0.
    warm = _run(root, code, TORCH_NEURONX_NEFF_CACHE_DIR=str(cache))
    assert json.loads(warm.stdout.split("RESULT", 1)[1])["graphs"] == [False, False]


def test_cores_are_exclusive_and_hbm_is_bounded(tmp_path: Path) -> None:
    # A bank of 288 MiB: the runtime's 2 x 96 MB (two physical cores at LNC=2) leaves 96 MiB for tensors.
    root = _machine(tmp_path, core_hbm_limit=288 * 1024**2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import torch, sys; torch.ones(1).to('neuron'); print('held', flush=True); "
         "sys.stdin.read()"],
        env={**environment(root), "NEURON_RT_VISIBLE_CORES": "1"}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        listed = json.loads(_tool(root, "--json-output").stdout)
        assert [p["pid"] for p in listed[0]["neuron_processes"]] == [holder.pid]
        busy = _run(root, "import torch; torch.ones(1).to('neuron')", NEURON_RT_VISIBLE_CORES="1")
        assert busy.returncode != 0 and "NeuronCore(s) not available - Requested:nc1-nc1 Available:0" in busy.stderr
        every = _run(root, "import torch; torch.ones(1).to('neuron')")  # no variable: it asks for every core
        assert every.returncode != 0 and "not available" in every.stderr
        free = _run(root, "import torch; torch.ones(1).to('neuron')", NEURON_RT_VISIBLE_CORES="2-3")
        assert free.returncode == 0, free.stderr[-2000:]
    finally:
        holder.communicate("", timeout=60)
    oom = _run(root, "import torch; x = torch.empty(40 * 2**20, device='neuron')", NEURON_RT_VISIBLE_CORES="0")
    assert oom.returncode != 0 and re.search(r"Failed to allocate \S+ \(alignment: none, usage: tensors\) on ND 0:NC 0",
                                             oom.stderr)  # fmt: skip
    assert (root / "tmp" / "neuron_mem_table_device_0_hbm_0.log").is_file()
    # LNC=1: two neighbouring physical cores share one bank (96 MB each of it is the runtime's): 60 MiB fits on
    # core 0 of bank 0 and on core 2 of bank 1, not on core 1 beside core 0.
    code = "import torch; a, b = (torch.empty(15 * 2**20, device=f'neuron:{i}') for i in (0, 1))"
    lnc1 = {"NEURON_LOGICAL_NC_CONFIG": "1"}
    shared = _run(root, code, NEURON_RT_VISIBLE_CORES="0-1", **lnc1)
    assert shared.returncode != 0 and "on ND 0:NC 1" in shared.stderr, shared.stderr[-2000:]
    apart = _run(root, code, NEURON_RT_VISIBLE_CORES="0,2", **lnc1)
    assert apart.returncode == 0, apart.stderr[-2000:]


def test_the_neuron_process_group(tmp_path: Path) -> None:
    root = _machine(tmp_path)
    code = """
        import json, os
        import torch, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("LOCAL_RANK", "0")
        out = {}
        if os.environ.get("EARLY"):
            torch.accelerator.set_device_index(0)  # binding the device starts the runtime before the group
        try:
            dist.init_process_group("neuron")
        except Exception as exc:
            out["init"] = str(exc)
            print("RESULT" + json.dumps(out)); raise SystemExit
        out["visible"] = os.environ["NEURON_RT_VISIBLE_CORES"]
        if os.environ["LOCAL_RANK"] != "0":  # the rank's one core is index LOCAL_RANK; index 2 names no core here
            out["device"] = str(torch.ones(1).to("neuron").device)
            try:
                torch.ones(1).to(torch.device("neuron", 2))
            except Exception as exc:
                out["other"] = str(exc)
            print("RESULT" + json.dumps(out)); raise SystemExit
        x = torch.ones(4).to("neuron")
        dist.all_reduce(x)
        out["float"] = x.cpu().tolist()
        try:
            dist.all_reduce(torch.ones(2, dtype=torch.int64).to("neuron"))
        except Exception as exc:
            out["integer"] = str(exc)
        print("RESULT" + json.dumps(out))
    """
    good = _run(root, code, PORT="29611")
    out = json.loads(good.stdout.split("RESULT", 1)[1])
    assert out["visible"] == "0" and out["float"] == [1.0] * 4  # the local rank's core, when none was set
    assert "NCC_EVRF061" in out["integer"]
    early = json.loads(_run(root, code, PORT="29612", EARLY="1").stdout.split("RESULT", 1)[1])
    assert "should not be initialized before the init_process_group" in early["init"]
    wide = json.loads(_run(root, code, PORT="29613", NEURON_RT_VISIBLE_CORES="0-1").stdout.split("RESULT", 1)[1])
    assert "more than one device per process" in wide["init"]
    second = json.loads(_run(root, code, PORT="29614", LOCAL_RANK="1").stdout.split("RESULT", 1)[1])
    assert second["visible"] == "1" and second["device"] == "neuron:1", second
    assert "neuron:2 is not one of this process's 1 NeuronCore(s)" in second["other"]


def test_a_number_given_for_a_tensor_argument_runs_as_on_the_cpu(tmp_path: Path) -> None:
    # The boxed fallback gets a wrapped number (the 5 of ``x % 5``, which beam search's _gather_beams computes
    # through take_along_dim) back as a Python int; the Tensor overload it was dispatched to must still run, with
    # a number's type promotion (an int32 tensor stays int32, an int tensor and a float give the default float).
    root = _machine(tmp_path)
    code = """
        import json
        import torch
        x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
        index = torch.tensor([[7], [5], [9]])
        on = {
            "remainder": (x.to("neuron") % 5).cpu(),
            "take": torch.take_along_dim(x.to("neuron"), (index % 4).to("neuron"), dim=1).cpu(),
            "float": (x.to("neuron") * 0.5).cpu(),
        }
        off = {"remainder": x % 5, "take": torch.take_along_dim(x, index % 4, dim=1), "float": x * 0.5}
        print(json.dumps({k: [on[k].tolist() == off[k].tolist(), str(on[k].dtype), str(off[k].dtype)] for k in on}))
    """
    done = _run(root, code)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "remainder": [True, "torch.int32", "torch.int32"],
        "take": [True, "torch.int32", "torch.int32"],
        "float": [True, "torch.float32", "torch.float32"],
    }
