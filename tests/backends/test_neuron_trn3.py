"""The Neuron backend on a Trainium3 host: the record's hardware names Trainium3, from neuron-ls's chips alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.backends.neuron.backend import NeuronBackend
from pipeline.hardware import GiB


def _neuron_ls(devices: int, memory: int, instance: str | None = None) -> str:
    entries = [
        {"neuron_device": d, "nc_count": 4, "logical_neuroncore_config": 2, "memory_size": memory,
         "neuroncore_ids": list(range(4 * d, 4 * d + 4)), "neuron_processes": []}
        | ({"instance_type": instance} if instance else {})
        for d in range(devices)
    ]  # fmt: skip
    return json.dumps(entries)


@pytest.mark.parametrize(
    ("devices", "memory", "instance", "name", "accelerator", "per_core"),
    [
        (16, 144 * GiB, None, "trn3.48xlarge", "trainium3", 36 * GiB),
        (16, 96 * GiB, None, "trn2.48xlarge", "trainium2", 24 * GiB),
        (1, 144 * GiB, None, "trn3", "trainium3", 36 * GiB),  # one chip of a host: its family, no instance
        (16, 144 * GiB, "trn3.48xlarge", "trn3.48xlarge", "trainium3", 36 * GiB),
    ],
)
def test_the_record_s_hardware_names_the_family_the_chips_are(
    tmp_path: Path, devices: int, memory: int, instance: str | None, name: str, accelerator: str, per_core: int
) -> None:
    text = _neuron_ls(devices, memory, instance)
    backend = NeuronBackend(dev_root=tmp_path, sysfs_root=tmp_path, neuron_ls=lambda: text)
    hardware = backend.hardware(cores=1)
    assert (hardware["name"], hardware["accelerator"]) == (name, accelerator)
    assert hardware["memory_per_core_bytes"] == per_core
    assert hardware["core_config"] == "lnc=2"
    assert backend.bandwidth_bytes_per_s(cores=4) == pytest.approx(4.9e12 if accelerator == "trainium3" else 2.9e12)
