"""The emulated machine's command-line tools: ``neuron-ls`` (as Neuron 2.33 prints it, or as 2.34 is announced)
and ``dpkg-query`` for the Neuron Debian packages. ``tests.support.neuron.machine`` writes a script for each
into the machine's ``bin/``; the scripts call these functions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.neuron.machine import DEBIANS, EMULATOR, Machine
from tests.support.neuron.rules import cite
from tests.support.neuron.runtime import holders


def _lnc() -> int:
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2").strip()
    return int(value) if value in ("1", "2") else 2


def _torus(host: int, count: int) -> list[int] | None:
    """The devices a trn2.48xlarge's device is linked to, in the order of the docs' neuron-ls example (device 0:
    12, 3, 4, 1: up, left, down, right on the 4x4 torus); None where the host is not a 16-device torus (a
    trn2.3xlarge's capture shows ``null``)."""
    if count != 16:
        return None
    row, col = divmod(host, 4)
    return [((row - 1) % 4) * 4 + col, row * 4 + (col - 1) % 4, ((row + 1) % 4) * 4 + col, row * 4 + (col + 1) % 4]


def devices(root: Path, machine: Machine) -> list[dict[str, Any]]:
    """One entry per device this process sees, as ``neuron-ls --json-output`` lists them (the docs' example)."""
    lnc = _lnc()
    per_device = machine.physical_cores // lnc
    held = holders(root)
    out = []
    for number, host in enumerate(machine.visible_devices):
        processes: dict[int, dict[str, Any]] = {}
        for name, owner in held.items():
            device, _, _ = name.partition("-")
            if device == f"nd{host}" and owner.get("pid"):
                processes[owner["pid"]] = {"pid": owner["pid"], "command": "python",
                                           "neuron_runtime_version": owner.get("runtime_version")}  # fmt: skip
        out.append(
            {
                "neuron_device": number,
                "bdf": f"0000:{0x10 + host:02x}:00.0",
                # Trn3's chips meet through NeuronSwitch, all to all: what its neuron-ls prints there is not
                # documented, so the emulator prints null (as a trn2.3xlarge's capture does).
                "connected_to": _torus(host, machine.devices) if machine.instance_type.startswith("trn2") else None,
                "nc_count": per_device,
                "logical_neuroncore_config": lnc,
                "memory_size": machine.hbm_per_device,
                "neuroncore_ids": list(range(number * per_device, (number + 1) * per_device)),
                "neuron_processes": sorted(processes.values(), key=lambda p: p["pid"]),
                "emulator": EMULATOR,
            }
        )
    return out


def _table(machine: Machine, listed: list[dict[str, Any]]) -> str:
    lines = [f"instance-type: {machine.instance_type}", "instance-id: i-emulated",
             f"logical-neuroncore-config: {_lnc()}", f"# {EMULATOR}",
             "| NEURON DEVICE | NEURON CORES | NEURON CORE IDS | NEURON MEMORY |"]  # fmt: skip
    for d in listed:
        ids = f"{d['neuroncore_ids'][0]}-{d['neuroncore_ids'][-1]}"
        lines.append(f"| {d['neuron_device']} | {d['nc_count']} | {ids} | {d['memory_size'] // 1024**3} GB |")
    return "\n".join(lines) + "\n"


def neuron_ls_main(root_text: str, argv: list[str]) -> int:
    """``neuron-ls [--json-output | -j | --output-format json]``."""
    root = Path(root_text)
    machine = Machine.load(root)
    listed = devices(root, machine)
    json_233 = any(a in ("--json-output", "-j") for a in argv)
    output_format = None
    for i, arg in enumerate(argv):
        if arg == "--output-format" and i + 1 < len(argv):
            output_format = argv[i + 1]
        elif arg.startswith("--output-format="):
            output_format = arg.split("=", 1)[1]
    if machine.neuron_ls == "2.33":
        if output_format is not None:
            print("neuron-ls: error: unrecognized arguments: --output-format", file=sys.stderr)
            return 2
        print(json.dumps(listed, indent=4) if json_233 else _table(machine, listed), end="" if not json_233 else "\n")
        return 0
    if json_233:
        print(f"neuron-ls: --json-output is no longer supported; use --output-format json {cite('neuron_ls_234')}",
              file=sys.stderr)  # fmt: skip
        return 2
    if output_format == "json":
        # The docs publish no sample of 2.34's JSON, only "top-level fields for information that applies to more
        # than one device, such as instance and UltraServer details": this shape is the emulator's own.
        instance = {"instance_type": machine.instance_type, "instance_id": "i-emulated"}
        shown = {"instance": instance, "ultraserver": None, "devices": listed, "emulator": EMULATOR}
        print(json.dumps(shown, indent=4))
    else:
        print(_table(machine, listed), end="")
    return 0


def dpkg_query_main(root_text: str, argv: list[str]) -> int:
    """``dpkg-query -W -f=${Version} PACKAGE`` for the Neuron packages; anything else goes to the real one."""
    package = argv[-1] if argv else ""
    if package in DEBIANS:
        print(DEBIANS[package], end="")
        return 0
    real = "/usr/bin/dpkg-query"
    if Path(real).exists():
        return subprocess.run([real, *argv], check=False).returncode
    print(f"dpkg-query: no packages found matching {package}", file=sys.stderr)
    return 1
