"""``trncat doctor`` as a process on an emulated Trainium3 runner (the emulator's trn3.48xlarge machine): it tells the
instance from the chips' memory when neuron-ls names none, and from neuron-ls when it does (Neuron 2.34's JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.neuron import Machine, build, environment

pytestmark = pytest.mark.slow


def doctor(root: Path, *args: str, **env: str) -> dict[str, Any]:
    full = {**environment(root), "TOKENIZERS_PARALLELISM": "false", **env}
    done = subprocess.run([sys.executable, "-m", "pipeline", "doctor", "--json", *args], env=full,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_doctor_infers_a_trn3_48xlarge_from_its_16_chips_of_144_gib(tmp_path: Path) -> None:
    machine = Machine.of("trn3.48xlarge")
    assert (machine.devices, machine.hbm_per_device) == (16, 144 * 1024**3)
    checks = doctor(build(tmp_path / "trn3", machine), NEURON_RT_VISIBLE_CORES="8-11")
    assert checks["neuron-ls"]["status"] == "ok"
    assert checks["neuron-ls"]["detail"].startswith(
        "trn3.48xlarge (from its 16 devices) (Trainium3), 16 device(s), 64 logical cores (ids 0-63), LNC=2"
    )
    assert checks["cores"]["detail"].endswith("a 1-core run uses 8")
    assert checks["devices"]["detail"].startswith("16 Neuron device(s)")


def test_doctor_at_lnc1_on_trainium3_sees_128_cores(tmp_path: Path) -> None:
    checks = doctor(build(tmp_path / "trn3", Machine.of("trn3.48xlarge")), NEURON_LOGICAL_NC_CONFIG="1")
    assert "16 device(s), 128 logical cores (ids 0-127), LNC=1" in checks["neuron-ls"]["detail"]


def test_doctor_takes_the_instance_neuron_2_34_names(tmp_path: Path) -> None:
    checks = doctor(build(tmp_path / "trn3", Machine.of("trn3.48xlarge", neuron_ls="2.34")))
    assert checks["neuron-ls"]["detail"].startswith("trn3.48xlarge (Trainium3), 16 device(s), 64 logical cores")


def test_a_trn2_48xlarge_is_not_taken_for_a_trainium3_one(tmp_path: Path) -> None:
    checks = doctor(build(tmp_path / "trn2", Machine.of("trn2.48xlarge")))
    assert checks["neuron-ls"]["detail"].startswith("trn2.48xlarge (from its 16 devices), 16 device(s)")
