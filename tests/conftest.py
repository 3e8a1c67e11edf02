"""Shared fixtures. Every test runs with network access limited to loopback (a test checks it)."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.support.localhub_fixtures"]

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


@dataclass(frozen=True)
class DemoRun:
    """One ``trncat demo`` run: its ``--out`` and ``--work`` folders, its exit code and what it printed."""

    root: Path
    work: Path
    code: int
    printed: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``trncat demo`` (the CLI's main, in this process), run once per test process for the tests that read what it
    made (tests/cli/test_demo.py, the browser tests on its Space): a test that changes its files copies them first.
    Those files run on one worker (:data:`SAME_WORKER`). The first test to ask pays for it: mark it ``e2e``."""
    from pipeline.cli import main

    base = tmp_path_factory.mktemp("demo")
    root, work = base / "demo-out", base / "work"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["demo", "--out", str(root), "--work", str(work)])
    return DemoRun(root, work, code, printed.getvalue())


#: Test files that share a session fixture's work run on one pytest-xdist worker (:func:`pytest_xdist_make_scheduler`),
#: so that work is done once: file -> the group's name.
SAME_WORKER = {
    "tests/cli/test_demo.py": "demo",
    "tests/page/test_page_browser.py": "demo",
    "tests/backends/test_compiled_cache_emulated.py": "emulated-bench",
    "tests/backends/test_warm_start_emulated.py": "emulated-bench",
    "tests/backends/test_warm_check_workflow_emulated.py": "emulated-bench",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (one file to a worker at a time), with the files of :data:`SAME_WORKER` as one unit."""
    if config.getoption("dist", None) != "loadfile":
        return None  # xdist's own scheduler for any other --dist
    from xdist.scheduler import LoadFileScheduling

    class FilesTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:  # the extension point xdist's LoadScopeScheduling documents
            file = str(super()._split_scope(nodeid))
            return SAME_WORKER.get(file, file)

    return FilesTogether(config, log)


#: A long end-to-end test (marker ``e2e``: the demo, the Neuron path as processes on the emulator, the workflow's
#: steps) gets at least this many seconds, which a loaded two-core machine meets; every other test gets its own
#: ``timeout`` marker or the ini's ``timeout``.
E2E_TIMEOUT_S = 1800


def timeout_scale() -> float:
    """``TRNCAT_TEST_TIMEOUT_SCALE`` stretches every test's timeout on a slow machine (default 1; e.g. 3)."""
    raw = os.environ.get("TRNCAT_TEST_TIMEOUT_SCALE", "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        raise pytest.UsageError(f"TRNCAT_TEST_TIMEOUT_SCALE must be a number, got {raw!r}") from None
    if not scale > 0 or scale == float("inf"):
        raise pytest.UsageError(f"TRNCAT_TEST_TIMEOUT_SCALE must be a positive finite number, got {raw!r}")
    return scale


def scaled_timeout(item: pytest.Item, default: float, scale: float) -> float:
    """The timeout one test runs under: its own marker's (or the default), at least E2E_TIMEOUT_S for an ``e2e``
    test, times the scale. 0 (no timeout) stays 0."""
    marker = item.get_closest_marker("timeout")
    base = float(marker.args[0]) if marker is not None and marker.args else default
    if base <= 0:
        return 0.0
    if item.get_closest_marker("e2e") is not None:
        base = max(base, E2E_TIMEOUT_S)
    return base * scale


def long_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The test files with an ``e2e`` test first, then the rest, each file's tests together and in their order.

    ``make test`` runs one file per worker at a time (pytest-xdist, ``--dist loadfile``, in this order): the long
    end-to-end files start first and the short ones fill in around them, rather than one worker finishing the run
    alone on the last long file. The same order on every worker (xdist requires it): it depends on the items only.
    """
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.partition("::")[0], []).append(item)
    ordered = sorted(files.values(), key=lambda tests: not any(t.get_closest_marker("e2e") for t in tests))
    return [item for tests in ordered for item in tests]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale each test's timeout (``scaled_timeout``), skip `neuron` and `cuda` tests where their device is absent
    (a Neuron device under TRNCAT_SYSTEM_ROOT: /dev on a trn2, the emulated machine's when the benchmark workflow's
    smoke steps run on the Neuron emulator), and run the long files first (``long_files_first``)."""
    from pipeline import constants

    items[:] = long_files_first(items)

    scale = timeout_scale()
    default = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    for item in items:
        timeout = scaled_timeout(item, default, scale)
        if timeout:
            item.add_marker(pytest.mark.timeout(timeout), append=False)

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
