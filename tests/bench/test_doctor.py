"""``trncat doctor``: its fail lines and fixes, the exit code and the JSON report, on recorded tool output and a
fake sysfs. The doctor and its smoke run as processes on the Neuron emulator in tests/bench/test_doctor_emulated.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.backends.neuron import NeuronBackend
from pipeline.bench.doctor import Check, python_allowed, run_checks
from pipeline.cli import main
from tests.backends.test_backends import FAKE_PACKAGES, TRN2_3XL, _write_core

TOOLCHAIN = {"torch": "2.14.0", "torch_neuronx": "2.14.0", "neuronx_cc": "2.21.18209.0", "transformers": "5.0.0",
             "sentence_transformers": "6.2.0", "diffusers": "0.42.1"}  # fmt: skip
PACKAGES = {**FAKE_PACKAGES, "torch": "2.14.0+cpu", "transformers": "5.0.0", "sentence-transformers": "6.2.0",
            "diffusers": "0.42.1", "nki": "0.7.0"}  # fmt: skip
GiB = 1024**3


@pytest.fixture
def trn2(tmp_path: Path) -> Path:
    """A fake trn2.3xlarge with Ubuntu 26.04: /dev/neuron0, sysfs with 8 physical cores and a driver version."""
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/neuron0").touch()
    for core in range(8):
        _write_core(tmp_path / "sys", 0, core, total=0, peak=0)
    (tmp_path / "sys/module/neuron").mkdir(parents=True)
    (tmp_path / "sys/module/neuron/version").write_text("2.31.7.0\n")
    (tmp_path / "os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="26.04"\n')
    return tmp_path


def _backend(root: Path, **kwargs: Any) -> NeuronBackend:
    kwargs.setdefault("neuron_ls", lambda: TRN2_3XL)
    kwargs.setdefault("packages", PACKAGES.get)
    return NeuronBackend(dev_root=root / "dev", sysfs_root=root / "sys", find_spec=lambda name: object(), **kwargs)


def _checks(root: Path, backend: NeuronBackend | None = None, **kwargs: Any) -> dict[str, Check]:
    report = run_checks(
        backend or _backend(root),
        toolchain=TOOLCHAIN,
        os_release=root / "os-release",
        total_memory=lambda: 128 * GiB,
        python=(3, 12),
        **{"disk_free": lambda path: 200 * GiB, **kwargs},
    )
    return {check.name: check for check in report.checks}


def test_a_ready_trn2_passes_every_check(trn2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "TORCH_NEURONX_NEFF_CACHE_DIR", str(trn2 / "neff"))
    checks = _checks(trn2, cores=2)
    assert {c.status for c in checks.values()} == {"ok"}, [c.line() for c in checks.values() if c.status != "ok"]
    assert checks["driver"].detail == "Neuron driver 2.31.7.0"
    assert checks["neuron-ls"].detail == "trn2.3xlarge, 1 device(s), 4 logical cores (ids 0-3), LNC=2"
    assert checks["cores"].detail.endswith("a 2-core run uses 0-1")
    assert checks["neff-cache"].detail.startswith(str(trn2 / "neff"))


def test_each_missing_piece_is_a_fail_line_with_its_fix(trn2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (trn2 / "dev/neuron0").unlink()
    (trn2 / "sys/module/neuron/version").unlink()
    backend = _backend(trn2, neuron_ls=lambda: None, packages={"torch": "2.13.0", "transformers": "5.0.0"}.get)
    checks = _checks(trn2, backend)
    for name in ("driver", "devices", "neuron-ls", "torch", "torch-neuronx", "neuronx-cc"):
        assert checks[name].status == "fail" and checks[name].fix, name
    assert "pins 2.14.0" in checks["torch"].detail
    assert "pip.repos.neuron.amazonaws.com" in str(checks["torch-neuronx"].fix)
    line = checks["neuron-ls"].line()
    assert line.startswith("fail  neuron-ls") and "(install aws-neuronx-tools" in line


def test_a_run_that_does_not_fit_the_runners_cores_fails(trn2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "NEURON_RT_VISIBLE_CORES", "2-3")
    assert _checks(trn2, cores=2)["cores"].status == "ok"
    cores = _checks(trn2, cores=4)["cores"]
    assert cores.status == "fail" and "owns only 2" in cores.detail


def test_old_python_and_other_os_are_reported(trn2: Path) -> None:
    (trn2 / "os-release").write_text('NAME="Debian GNU/Linux"\nID=debian\nVERSION_ID="12"\n')
    report = run_checks(_backend(trn2), toolchain=TOOLCHAIN, os_release=trn2 / "os-release", python=(3, 11),
                        total_memory=lambda: 16 * GiB)  # fmt: skip
    checks = {c.name: c for c in report.checks}
    assert checks["python"].status == "fail" and "3.12-3.14" in checks["python"].detail
    assert checks["os"].status == "warn" and checks["memory"].status == "warn"
    assert not report.ok


def test_the_installed_torch_neuronx_requires_python_is_read_as_pip_reads_it() -> None:
    assert python_allowed(">=3.12,<3.15", (3, 12)) and python_allowed(">=3.12,<3.15", (3, 14))
    assert not python_allowed(">=3.12,<3.15", (3, 11)) and not python_allowed(">=3.12,<3.15", (3, 15))
    assert python_allowed("==3.12.*", (3, 12)) and not python_allowed("!=3.12.*", (3, 12))
    assert python_allowed("not a specifier", (3, 11))  # unreadable metadata decides nothing


def test_a_short_disk_warns_and_never_prints_the_missed_threshold(trn2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # CI once ran on a host with 49.96 GiB free: the check warned but printed "50 GiB free (free at least 50 GiB)".
    monkeypatch.setattr(constants, "TORCH_NEURONX_NEFF_CACHE_DIR", str(trn2 / "neff"))
    checks = _checks(trn2, disk_free=lambda path: 50 * GiB - 40 * 1024**2)
    assert checks["disk"].status == "warn" and checks["disk"].detail.endswith("49.9 GiB free")
    assert checks["disk"].line().endswith("(free at least 50 GiB)")
    assert checks["neff-cache"].status == "ok" and checks["memory"].detail == "128.0 GiB host memory"
    assert _checks(trn2, disk_free=lambda path: 50 * GiB)["disk"].status == "ok"


def test_cli_doctor_here_fails_with_lines_and_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    # This machine has no Neuron device, driver or neuron-ls: doctor says so and exits non-zero.
    assert main(["doctor"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert any(line.startswith("fail  devices") for line in lines)
    assert any(line.startswith("fail  neuron-ls") for line in lines)
    assert "Traceback" not in captured.err and "not ready" in captured.err


def test_cli_doctor_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json", "--smoke"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"ok", "checks", "smoke", "facts"} and report["ok"] is False
    # what a first run on a trn2 settles, in the JSON too (here: no neuron-ls, no torch-neuronx)
    assert set(report["facts"]) == {"neuron_ls", "packages", "container", "sysfs"}
    assert report["facts"]["neuron_ls"] is None and report["facts"]["packages"]["torch-neuronx"] is None
    assert report["smoke"] == []  # skipped: the failed checks come first
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in report["checks"])
    assert {c["status"] for c in report["checks"]} <= {"ok", "warn", "fail"}


def test_an_installed_toolchain_that_differs_from_the_pin_is_named_package_by_package(trn2: Path) -> None:
    """Issue 30: the Python packages and the Neuron Debian packages (runners/toolchain.yaml's apt: section), each
    against its pin, and one `toolchain` line that names every package that differs."""
    apt = {"aws-neuronx-runtime-lib": "2.35.30.0*", "aws-neuronx-tools": "2.33.38.0*", "aws-neuronx-dkms": "2.31.7.0*"}
    installed = {"aws-neuronx-runtime-lib": "2.35.30.0", "aws-neuronx-tools": "2.34.1.0"}  # tools moved, no dkms
    backend = _backend(trn2, packages={**PACKAGES, "neuronx-cc": "2.22.0.0"}.get)
    checks = _checks(trn2, backend, apt=apt, dpkg=installed.get)
    assert checks["aws-neuronx-runtime-lib"].status == "ok"
    assert checks["aws-neuronx-tools"].detail == "2.34.1.0, but runners/toolchain.yaml pins 2.33.38.0*"
    assert checks["aws-neuronx-dkms"].detail == "not installed; runners/toolchain.yaml pins 2.31.7.0*"
    assert "apt-get install aws-neuronx-tools=2.33.38.0*" in str(checks["aws-neuronx-tools"].fix)
    summary = checks["toolchain"]
    assert summary.status == "fail" and summary.detail == (
        "the installed toolchain differs from the pin in 3 package(s): neuronx-cc 2.22.0.0; "
        "aws-neuronx-tools 2.34.1.0; aws-neuronx-dkms not installed"
    )
    same = _checks(
        trn2, apt=apt, dpkg={**installed, "aws-neuronx-tools": "2.33.38.0", "aws-neuronx-dkms": "2.31.7.0"}.get
    )
    assert same["toolchain"].status == "ok" and same["aws-neuronx-tools"].detail == "2.33.38.0"
