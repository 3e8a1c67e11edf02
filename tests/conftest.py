"""Shared fixtures. Every test runs with network access limited to loopback (a test checks it)."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

pytest_plugins = ["pipeline.localhub.pytest_plugin"]

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# On CI, property tests replay a fixed sequence: a landing never hangs on a new random draw. Developers'
# runs keep exploring (and hypothesis' local database replays what they found).
from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() == "true":
    settings.load_profile("ci")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class NetworkBlocked(OSError):
    """Raised when a test tries to reach beyond loopback."""


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and abstract sockets stay on this machine
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: refuse rather than resolve it


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guarded_connect(self: socket.socket, address: object) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise NetworkBlocked(f"tests may only connect to loopback, not {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise NetworkBlocked(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _private_reference_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU reference answers go to a session folder, never to the developer's ~/.cache."""
    from pipeline import constants

    monkeypatch.setattr(constants, "TRNCAT_REFERENCE_CACHE", tmp_path_factory.getbasetemp() / "reference-cache")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny demo models of the four tasks, built once per session: task -> folder."""
    from pipeline.testing import tiny

    root = tmp_path_factory.mktemp("tiny-models")
    return {
        "text-generation": tiny.build_tiny_llama(root / "tiny-llama"),
        "image-text-to-text": tiny.build_tiny_llava(root / "tiny-llava"),
        "sentence-embeddings": tiny.build_tiny_sentence_bert(root / "tiny-sentence-bert"),
        "text-to-image": tiny.build_tiny_stable_diffusion(root / "tiny-sd"),
    }


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `neuron` and `cuda` tests where their device is absent (a Neuron device under TRNCAT_SYSTEM_ROOT: /dev on a
    trn2, the emulated machine's when the benchmark workflow's smoke steps run on the Neuron emulator)."""
    from pipeline import constants

    has_neuron = (constants.TRNCAT_SYSTEM_ROOT / "dev" / "neuron0").exists()
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # torch missing or broken: no cuda
        has_cuda = False
    for item in items:
        if "neuron" in item.keywords and not has_neuron:
            item.add_marker(pytest.mark.skip(reason="needs a Neuron device (/dev/neuron0)"))
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
