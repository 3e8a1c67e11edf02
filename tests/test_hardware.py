"""The instance table: cores, memory per core and bandwidth as AWS publishes them."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline.errors import ConfigError
from pipeline.hardware import (
    INSTANCE_NAMES,
    GiB,
    bandwidth_for_cores,
    family_for_device_memory,
    family_of,
    get_instance,
    instance_for_devices,
)


@pytest.mark.parametrize(
    ("name", "lnc", "chips", "cores", "memory_gib", "expected_lnc"),
    [
        ("trn2.48xlarge", None, 16, 64, 24, 2),
        ("trn2.48xlarge", 2, 16, 64, 24, 2),
        ("trn2.48xlarge", 1, 16, 128, 12, 1),
        ("trn2.3xlarge", None, 1, 4, 24, 2),
        ("trn2.3xlarge", 1, 1, 8, 12, 1),
        ("trn1.2xlarge", None, 1, 2, 16, 1),
        ("trn1.32xlarge", None, 16, 32, 16, 1),
        ("trn3.48xlarge", None, 16, 64, 36, 2),
        ("trn3.48xlarge", 1, 16, 128, 18, 1),
    ],
)
def test_instance_table(name: str, lnc: int | None, chips: int, cores: int, memory_gib: int, expected_lnc: int) -> None:
    inst = get_instance(name, lnc=lnc)
    assert (inst.name, inst.chips, inst.cores, inst.lnc) == (name, chips, cores, expected_lnc)
    assert inst.memory_per_core_bytes == memory_gib * GiB
    assert inst.memory_bytes == cores * memory_gib * GiB


def test_a_trn2_chip_has_96_gib_whatever_the_logical_core_config() -> None:
    for lnc in (1, 2):
        inst = get_instance("trn2.3xlarge", lnc=lnc)
        assert inst.cores_per_chip * inst.memory_per_core_bytes == 96 * GiB
    assert get_instance("trn1.2xlarge").memory_bytes == 32 * GiB


def test_families_and_accelerators() -> None:
    assert {get_instance(n).family for n in INSTANCE_NAMES} == {"trn1", "trn2", "trn3"}
    assert get_instance("trn3.48xlarge").accelerator == "trainium3"
    assert get_instance("trn2.48xlarge").accelerator == "trainium2"
    assert get_instance("trn1.32xlarge").to_dict()["accelerator"] == "trainium1"
    assert get_instance("trn2.48xlarge").to_dict()["cores_per_chip"] == 4
    assert set(INSTANCE_NAMES) == {
        "trn2.3xlarge", "trn2.48xlarge", "trn2u.48xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn3.48xlarge"
    }  # fmt: skip


def test_instances_are_frozen() -> None:
    inst = get_instance("trn2.3xlarge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        inst.cores = 8  # type: ignore[misc]


@pytest.mark.parametrize(("name", "lnc"), [("trn3.3xlarge", None), ("p5.48xlarge", None), ("", None)])
def test_unknown_instance_is_a_config_error(name: str, lnc: int | None) -> None:
    with pytest.raises(ConfigError, match="unknown instance"):
        get_instance(name, lnc=lnc)


@pytest.mark.parametrize(
    ("name", "lnc"), [("trn1.2xlarge", 2), ("trn2.48xlarge", 4), ("trn2.48xlarge", 0), ("trn3.48xlarge", 4)]
)
def test_logical_core_config_the_family_lacks_is_a_config_error(name: str, lnc: int) -> None:
    with pytest.raises(ConfigError, match="logical core config"):
        get_instance(name, lnc=lnc)


def test_chip_bandwidth_is_shared_by_its_cores() -> None:
    trn2 = get_instance("trn2.48xlarge")
    assert bandwidth_for_cores(trn2, 1) == pytest.approx(2.9e12 / 4)
    assert bandwidth_for_cores(trn2, 4) == pytest.approx(2.9e12)
    assert bandwidth_for_cores(trn2, 8) == pytest.approx(2 * 2.9e12)
    assert bandwidth_for_cores(trn2, 64) == pytest.approx(16 * 2.9e12)
    assert bandwidth_for_cores(get_instance("trn2.48xlarge", lnc=1), 1) == pytest.approx(2.9e12 / 8)
    trn1 = get_instance("trn1.2xlarge")
    assert bandwidth_for_cores(trn1, 1) == pytest.approx(410e9)
    assert bandwidth_for_cores(trn1, 2) == pytest.approx(820e9)


@pytest.mark.parametrize("cores", [0, -1, 5, True, 1.0])
def test_bandwidth_for_impossible_core_counts_is_a_config_error(cores: object) -> None:
    with pytest.raises(ConfigError, match="cores must be"):
        bandwidth_for_cores(get_instance("trn2.3xlarge"), cores)  # type: ignore[arg-type]


def test_a_trainium3_chip_has_144_gib_at_4_9_tb_s_whatever_the_logical_core_config() -> None:
    for lnc in (1, 2):
        inst = get_instance("trn3.48xlarge", lnc=lnc)
        assert inst.cores_per_chip * inst.memory_per_core_bytes == 144 * GiB
        assert bandwidth_for_cores(inst, inst.cores_per_chip) == pytest.approx(4.9e12)
    assert get_instance("trn3.48xlarge").memory_bytes == 16 * 144 * GiB


def test_only_trainium3_runs_the_mx_formats() -> None:
    assert get_instance("trn3.48xlarge").mx_formats == ("mxfp8", "mxfp4")
    assert get_instance("trn3.48xlarge").to_dict()["mx_formats"] == ["mxfp8", "mxfp4"]
    for name in INSTANCE_NAMES:
        if not name.startswith("trn3"):
            assert get_instance(name).mx_formats == ()


@pytest.mark.parametrize(
    ("memory", "family"),
    [(144 * GiB, "trn3"), (103079215104, "trn2"), (96 * GiB - GiB, "trn2"), (32 * GiB, "trn1"), (64 * GiB, None)],
)
def test_a_chip_s_memory_tells_its_family(memory: int, family: str | None) -> None:
    assert family_for_device_memory(memory) == family


def test_family_of_an_instance_type() -> None:
    assert (family_of("trn3.48xlarge"), family_of("trn2u.48xlarge"), family_of("p5.48xlarge"), family_of(None)) == (
        "trn3", "trn2", None, None
    )  # fmt: skip
    assert instance_for_devices("trn3", 16) == "trn3.48xlarge" and instance_for_devices("trn3", 1) is None
