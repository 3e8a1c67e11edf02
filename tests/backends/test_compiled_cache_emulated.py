"""Compiled once, shared (issue 25), end to end on the Neuron emulator, as processes: ``trncat bench`` (neuron,
emulated, CI provenance) packs its NEFF cache beside its record -> publish uploads the bundle to the (local) hub and
names it in the record -> the row's run.py, in a fresh process with a fresh NEFF cache, downloads exactly that
bundle, checks it, unpacks it and starts warm: every graph served by the cache, no compile. ``--cold`` compiles;
a bad digest or another toolchain says so and compiles (checked on run.py's own function, without a model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.backends.neuron import bundle_beside
from pipeline.publish import publish_bundles
from pipeline.render import run_script
from tests.backends.conftest import EmulatedBench
from tests.support.neuron import environment

pytestmark = pytest.mark.slow
COMPILED = "trncat/trncat-compiled"


@pytest.fixture(scope="module")
def benched(emulated_llama_bench: EmulatedBench) -> tuple[Path, Path, Path]:
    """The session's one emulated CI benchmark (tests/backends/conftest.py): the machine, model folder and record."""
    return emulated_llama_bench.machine, emulated_llama_bench.model, emulated_llama_bench.record


def _run_py(root: Path, model: Path, record: dict[str, Any], work: Path, hub_url: str, *args: str) -> str:
    work.mkdir(parents=True)
    script = work / "run.py"
    script.write_text(run_script(record))
    env = {**environment(root), "HF_ENDPOINT": hub_url, "HF_HUB_CACHE": str(work / "hf"), "HF_HUB_DISABLE_XET": "1",
           "TORCH_NEURONX_NEFF_CACHE_DIR": str(work / "neff"), "XDG_CACHE_HOME": str(work / "xdg"),
           "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    done = subprocess.run([sys.executable, str(script), "--model", str(model), "--iterations", "1", *args],
                          env=env, capture_output=True, text=True, timeout=600, cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_bench_bundle_publish_then_run_py_starts_warm_in_a_fresh_process(benched, localhub, tmp_path: Path) -> None:
    root, model, out = benched
    record = json.loads(out.read_text())
    assert record["status"] == "pass" and record["hardware"]["emulated"] is True
    assert "compiled_cache_skipped" not in record and bundle_beside(out).is_file()
    cold_compile = record["metrics"]["neuronx_cc_s"]
    assert cold_compile > 0 and record["metrics"]["compiled_graphs"] == 2  # the benchmark compiled its 2 graphs

    done = publish_bundles([(str(out), record)], hub=localhub.client, repo=COMPILED)
    assert len(done.uploaded) == 1
    cache = record["compiled_cache"]
    # Its 2 NEFFs and the key manifest (issue 32) beside them.
    assert cache["repo_id"] == COMPILED and cache["revision"] == done.commit and cache["files"] == 3

    warm = _run_py(root, model, record, tmp_path / "warm", localhub.url)
    assert "compiled cache: started warm: 3 file(s)" in warm, warm
    # No compile: the fresh process's TorchNeuron served both graphs from the unpacked cache.
    assert "neuronx_cc_s  0.00  (2 of 2 graph(s) served by the cache)" in warm, warm
    # Into a folder of the row's own (keyed by the bundle's digest); the NEFF cache the user had is left alone.
    own = tmp_path / "warm" / "xdg" / "trncat" / "compiled-cache" / cache["sha256"]
    assert len(list(own.rglob("*.neff"))) == 2 and not (tmp_path / "warm" / "neff").exists()

    cold = _run_py(root, model, record, tmp_path / "cold", localhub.url, "--cold")
    assert "--cold given; compiling from scratch" in cold and "(0 of 2 graph(s) served by the cache)" in cold, cold
    assert not (tmp_path / "cold" / "xdg").exists()  # --cold never touches the row's compiled cache


def _start_warm(record: dict[str, Any], compiled_with: dict[str, Any] | None = None) -> tuple[bool, str]:
    """Run the generated run.py's ``start_warm`` in this process (no model, no torch): its verdict and its words."""
    import contextlib
    import io

    namespace: dict[str, Any] = {"__name__": "run"}
    exec(compile(run_script(record), "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
    if compiled_with is not None:  # the toolchain this machine has, in the key too (issue 32's key check)
        namespace["COMPILED_WITH"] = compiled_with
        toolchain = {"torch_neuronx": compiled_with["torch-neuronx"], "neuronx_cc": compiled_with["neuronx-cc"]}
        namespace["CACHE_KEY"] = {**record["compiled_cache_key"], **toolchain, "nki": None}
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        warm = namespace["start_warm"](False)
    return warm, said.getvalue()


@pytest.mark.timeout(300)
def test_a_bad_digest_or_another_toolchain_says_so_and_compiles(
    benched, localhub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, out = benched
    record = json.loads(out.read_text())
    publish_bundles([(str(out), record)], hub=localhub.client, repo=COMPILED)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    absent = {"torch-neuronx": None, "neuronx-cc": None}  # what this machine has installed: neither
    tampered = {**record, "compiled_cache": {**record["compiled_cache"], "sha256": "0" * 64}}
    warm, said = _start_warm(tampered, absent)
    assert not warm and "refused" in said and "sha256" in said and not (tmp_path / "neff").exists()
    assert list((tmp_path / "xdg" / "trncat" / "compiled-cache").iterdir()) == []  # nothing of it kept
    warm, said = _start_warm(record)  # the row's toolchain is the emulator's; this machine has none
    assert not warm and "the bundle was compiled with" in said and "compiling" in said
    warm, said = _start_warm(record, absent)  # the same toolchain: the bundle is used
    own = tmp_path / "xdg" / "trncat" / "compiled-cache" / record["compiled_cache"]["sha256"]
    assert warm and "started warm" in said and len(list(own.rglob("*.neff"))) == 2
