"""Warm for everyone (issue 32), end to end on the Neuron emulator, as processes: ``trncat bench`` (emulated CI run
on machine A) packs its NEFF cache with its key manifest -> publish uploads the bundle -> on *another* emulated
machine, with an empty cache, fresh processes run the row's ``run.py --require-warm``: for the base model and for
a fine-tune with other weights and the base's config every graph hits; another hidden size, another compiler
option or another toolchain is refused before anything loads and names the key part that differs; without
``--require-warm`` those compile (the emulator's cache really misses); a key manifest that says the wrong thing is
still caught after the first call, when a graph compiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pipeline.backends.neuron import KEY_FILE, bundle_beside
from pipeline.publish import publish_bundles
from pipeline.render import run_script
from pipeline.testing import build_tiny_llama
from tests.backends.conftest import EmulatedBench
from tests.support.neuron import PACKAGES, Machine, build, environment

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
COMPILED = "trncat/trncat-compiled"


@pytest.fixture(scope="module")
def benched(emulated_llama_bench: EmulatedBench) -> tuple[Path, Path]:
    """The session's one emulated CI benchmark on machine A (tests/backends/conftest.py): the model folder and the
    record file (its bundle beside it)."""
    return emulated_llama_bench.model, emulated_llama_bench.record


def _run_py(machine: Path, script: str, model: Path, work: Path, hub: str, *args: str, **env: str) -> tuple[int, str]:
    """The generated run.py in a fresh process on ``machine`` with an empty NEFF cache and an empty user cache."""
    work.mkdir(parents=True)
    (work / "run.py").write_text(script)
    environ = {**environment(machine), "HF_ENDPOINT": hub, "HF_HUB_CACHE": str(work / "hf"), "HF_HUB_DISABLE_XET": "1",
               "TORCH_NEURONX_NEFF_CACHE_DIR": str(work / "neff"), "XDG_CACHE_HOME": str(work / "xdg"),
               "TOKENIZERS_PARALLELISM": "false", **env}  # fmt: skip
    done = subprocess.run([sys.executable, "run.py", "--model", str(model), "--iterations", "1", *args],
                          env=environ, capture_output=True, text=True, timeout=900, cwd=work)  # fmt: skip
    return done.returncode, done.stdout + done.stderr[-3000:]


@pytest.mark.timeout(2400)
def test_a_bundle_starts_warm_on_another_machine_for_the_base_and_a_same_shape_fine_tune(
    benched, localhub, tmp_path: Path
) -> None:
    model, out = benched
    record: dict[str, Any] = json.loads(out.read_text())
    key = record["compiled_cache_key"]
    # The key manifest: in the record and inside the bundle, naming every part.
    assert key["task"] == "text-generation" and key["dtype"] == record["dtype"] and key["target"] == "trn2"
    assert key["config_shapes"]["hidden_size"] == 64 and key["architecture"] == "LlamaForCausalLM"
    assert key["neuronx_cc"] == PACKAGES["neuronx-cc"] and key["nki"] == PACKAGES["nki"] and key["lnc"] == 2
    assert len(key["graphs"]) == record["metrics"]["compiled_graphs"] == 2 and key["replica_groups"] == []
    import tarfile

    with tarfile.open(bundle_beside(out)) as tar:
        assert json.load(tar.extractfile(KEY_FILE)) == key  # type: ignore[arg-type]

    publish_bundles([(str(out), record)], hub=localhub.client, repo=COMPILED)
    script = run_script(record)
    other = build(tmp_path / "machine-b", Machine.of("trn2.48xlarge"))  # another machine: nothing of A's

    code, said = _run_py(other, script, model, tmp_path / "base", localhub.url, "--require-warm")
    assert code == 0 and "its key matches this model and toolchain" in said, said
    assert "warm_start    hits=2 misses=0" in said, said

    tuned = build_tiny_llama(tmp_path / "tiny-llama-tuned", seed=7)  # other weights, the base's config
    assert (tuned / "model.safetensors").read_bytes() != (model / "model.safetensors").read_bytes()
    code, said = _run_py(other, script, tuned, tmp_path / "tuned", localhub.url, "--require-warm")
    assert code == 0 and "warm_start    hits=2 misses=0" in said, said  # parameters are graph inputs

    wider = build_tiny_llama(tmp_path / "tiny-llama-wider", hidden_size=96)
    code, said = _run_py(other, script, wider, tmp_path / "wider-strict", localhub.url, "--require-warm")
    assert code == 2 and "require-warm: refused" in said and "hidden_size 64 -> 96" in said, said
    code, said = _run_py(other, script, wider, tmp_path / "wider", localhub.url)
    assert code == 0 and "compiled cache: the key differs" in said and "hits=0 misses=2" in said, said

    flags = {"NEURON_CC_FLAGS": "-O1"}
    code, said = _run_py(other, script, model, tmp_path / "cc-strict", localhub.url, "--require-warm", **flags)
    assert code == 2 and "compiler_args ('' -> '-O1')" in said, said
    code, said = _run_py(other, script, model, tmp_path / "cc", localhub.url, **flags)
    assert code == 0 and "hits=0 misses=2" in said, said  # the emulator's cache keys the compiler args too

    toolchain = {**PACKAGES, "neuronx-cc": PACKAGES["neuronx-cc"] + "+other"}
    third = build(tmp_path / "machine-c", replace(Machine.of("trn2.3xlarge"), packages=toolchain))
    code, said = _run_py(third, script, model, tmp_path / "toolchain", localhub.url, "--require-warm")
    assert code == 2 and "key part neuronx_cc differs" in said, said

    # A key manifest that says the wrong thing (here: the compiler args) passes the check before loading; the
    # graphs then miss, and --require-warm fails the run after the first call.
    lying = run_script({**record, "compiled_cache_key": {**key, "compiler_args": "-O1"}})
    code, said = _run_py(other, lying, model, tmp_path / "lying", localhub.url, "--require-warm", **flags)
    assert code == 3 and "require-warm: failed: 2 of 2 graph(s) missed the cache" in said, said
    assert os.path.isdir(tmp_path / "lying" / "xdg" / "trncat" / "compiled-cache")


@pytest.mark.timeout(1800)
def test_the_second_machine_check_verifies_a_published_bundle(benched, localhub, tmp_path: Path) -> None:
    from pipeline.publish import warm_check

    model, out = benched
    record = json.loads(out.read_text())
    publish_bundles([(str(out), record)], hub=localhub.client, repo=COMPILED)
    other = build(tmp_path / "machine-b", Machine.of("trn2.48xlarge"))
    env = {
        **environment(other),
        "HF_ENDPOINT": localhub.url,
        "HF_HUB_DISABLE_XET": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    checked = warm_check(record, model=str(model), runner="trn2-emulated-b", emulated=True, env=env)
    assert checked.verified and (checked.hits, checked.misses) == (2, 0), checked
    assert checked.sha256 == record["compiled_cache"]["sha256"] and checked.first_call_s is not None
    wider = build_tiny_llama(tmp_path / "tiny-llama-wider", hidden_size=96)
    refused = warm_check(record, model=str(wider), runner="trn2-emulated-b", emulated=True, env=env)
    assert refused.status == "refused" and "hidden_size 64 -> 96" in refused.message, refused
