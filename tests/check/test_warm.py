"""A fine-tune starts warm from its base's compiled cache when they share the key (pipeline.check.warm), and the
run.py check renders for it carries the base's bundle and says whose it is."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pipeline.check import base_bundle
from pipeline.check.rules import Decision
from pipeline.check.run import _run_py
from pipeline.records import FAMILY_COLUMNS

BASE = "acme/tiny-llama"
CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 300}
WORKLOAD = {"batch_size": 1, "input_tokens": 128, "output_tokens": 128}
ROW: dict[str, Any] = {
    "model_id": BASE, "task": "text-generation", "status": "pass", "cores": 1, "dtype": "bfloat16",
    "revision": "a" * 40, "neuronx_cc_version": "2.28.7631.0", "torch_neuronx_version": "2.14.3.0",
    "compiled_cache_repo_id": "trncat/trncat-compiled", "compiled_cache_revision": "b" * 40,
    "compiled_cache_path": f"neuronx-cc-2.28.7631.0/acme/tiny-llama/{'a' * 40}/w/x/acme--tiny-llama.neff-cache.tar.gz",
    "compiled_cache_sha256": "c" * 64, "compiled_cache_bytes": 1234, "compiled_cache_files": 3,
}  # fmt: skip


def _warm(row: dict[str, Any] = ROW, config: dict[str, Any] = CONFIG, **changes: Any) -> Any:
    args: dict[str, Any] = dict(model_id="someone/tiny-llama-tuned", task="text-generation", cores=1,
                                model_config=config, base_config=CONFIG, workload=WORKLOAD,
                                base_workload=WORKLOAD)  # fmt: skip
    return base_bundle(row, **{**args, **changes})


def test_the_family_row_carries_the_bundle_and_what_it_was_compiled_for() -> None:
    names = {name for name, _ in FAMILY_COLUMNS}
    assert {"dtype", "nki_version", "compiled_cache_sha256", "compiled_cache_path", "compiled_cache_revision"} <= names


def test_a_same_shape_fine_tune_gets_its_bases_bundle_and_is_told_so() -> None:
    warm = _warm(config={**CONFIG, "rope_theta": 5.0})  # no shape field differs
    assert warm.compiled_cache["sha256"] == "c" * 64 and warm.base == BASE and warm.dtype == "bfloat16"
    assert f"starts warm from {BASE}'s compiled cache" in warm.note
    evidence = Decision("likely-runs", "its base passes", rows=[{**ROW, "torch_version": "2.14.0",
                                                                  "transformers_version": "5.0.0"}])  # fmt: skip
    planned = SimpleNamespace(model_id="someone/tiny-llama-tuned", revision="d" * 40, folder=None)
    script = _run_py(evidence, planned, SimpleNamespace(cores=1), task="text-generation", warm=warm)
    namespace: dict[str, Any] = {"__name__": "run"}
    exec(compile(script, "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
    assert namespace["COMPILED_CACHE"]["sha256"] == "c" * 64 and namespace["BUNDLE_OF"] == BASE
    assert namespace["CACHE_KEY"] is None  # the key is read from inside the bundle, against the model loaded


def test_another_shape_core_count_or_task_keeps_the_bundle_and_names_the_part() -> None:
    wider = _warm(config={**CONFIG, "hidden_size": 96})
    assert wider.compiled_cache is None and "config_shapes (hidden_size 64 -> 96)" in wider.note
    other = _warm(config={**CONFIG, "architectures": ["MistralForCausalLM"]})
    assert other.compiled_cache is None and "architecture" in other.note
    assert "cores (1 -> 2)" in _warm(cores=2).note
    assert "workload" in _warm(workload={**WORKLOAD, "input_tokens": 64}).note
    assert "its config could not be read" in _warm(base_config=None).note


def test_nothing_to_say_without_a_bundle_a_pass_or_a_base() -> None:
    assert _warm(row={**ROW, "compiled_cache_sha256": None}) is None
    assert _warm(row={**ROW, "status": "fail"}) is None
    assert _warm(row=None) is None
    assert _warm(model_id=BASE) is None  # the model's own row: its own run.py, nothing handed over
