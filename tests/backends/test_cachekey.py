"""The compiled cache's key manifest: what it records, how two keys compare, the schema's rule for it, and the
generated run.py's own copy of the comparison (it must build the same key from a model folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.backends.base import CompiledRun
from pipeline.backends.neuron import KEY_FILE, build_key, config_shapes, key_differences, read_config
from pipeline.records import validate_record
from pipeline.render import run_script
from tests.support.records import sample_record

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 300,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
}
VERSIONS = {"torch_neuronx": "2.13.3.0", "neuronx_cc": "2.28.7631.0", "nki": "0.7.0"}
WORKLOAD = {"batch_size": 1, "input_tokens": 16, "output_tokens": 4}


def _key(tmp_path: Path, config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    cache = tmp_path / "cache"
    (cache / "ab" / "cd").mkdir(parents=True, exist_ok=True)
    (cache / "ab" / "cd" / "abcd1234.neff").write_bytes(b"neff")
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(config))
    run = CompiledRun(model, "text-generation", "bfloat16", changes.pop("workload", WORKLOAD), changes.pop("cores", 1))
    args: dict[str, Any] = dict(cache_dir=cache, versions=VERSIONS, compiler_args="", target="trn2", lnc=2)
    return build_key(run, **{**args, **changes})


def test_config_shapes_take_integer_fields_top_level_and_nested() -> None:
    llava = {"architectures": ["LlavaForConditionalGeneration"], "text_config": {"hidden_size": 64, "use_cache": True},
             "vision_config": {"image_size": 224, "patch_size": 14}, "image_token_index": 32000}  # fmt: skip
    assert config_shapes(llava) == {"text_config.hidden_size": 64, "vision_config.image_size": 224,
                                    "vision_config.patch_size": 14}  # fmt: skip
    unet = {"_class_name": "UNet2DConditionModel", "block_out_channels": [32, 64], "sample_size": 32, "flag": True}
    assert config_shapes(unet) == {"block_out_channels": [32, 64], "sample_size": 32}  # a bool is no shape
    assert "rope_theta" not in config_shapes(LLAMA) and config_shapes(LLAMA)["hidden_size"] == 64


def test_the_key_names_every_part_and_the_cache_entries(tmp_path: Path) -> None:
    key = _key(tmp_path, LLAMA, cores=4, compiler_args="  -O1   --auto-cast none ")
    assert key["graphs"] == ["abcd1234"] and key["architecture"] == "LlamaForCausalLM"
    assert key["compiler_args"] == "-O1 --auto-cast none" and key["replica_groups"] == [[0, 1, 2, 3]]
    assert (key["torch_neuronx"], key["neuronx_cc"], key["nki"]) == tuple(VERSIONS.values())
    assert _key(tmp_path, LLAMA)["replica_groups"] == []  # one core: no collective


def test_two_keys_differ_by_the_parts_that_differ_and_say_which(tmp_path: Path) -> None:
    base = _key(tmp_path, LLAMA)
    tuned = _key(tmp_path, {**LLAMA, "rope_theta": 5.0})  # what is no shape is no part of the key
    assert key_differences(base, tuned) == []
    wider = _key(tmp_path, {**LLAMA, "hidden_size": 96})
    assert key_differences(base, wider) == ["config_shapes (hidden_size 64 -> 96)"]
    other = _key(tmp_path, LLAMA, compiler_args="-O1", versions={**VERSIONS, "neuronx_cc": "2.29"})
    assert key_differences(base, other) == ["neuronx_cc ('2.28.7631.0' -> '2.29')", "compiler_args ('' -> '-O1')"]
    assert key_differences(base, {"dtype": "float32"}) == ["dtype ('bfloat16' -> 'float32')"]  # only what is stated


def test_read_config_takes_the_tasks_file_and_refuses_nothing_silently(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    assert read_config(tmp_path, "text-generation")["hidden_size"] == 64
    (tmp_path / "unet").mkdir()
    (tmp_path / "unet" / "config.json").write_text("{not json")
    assert read_config(tmp_path, "text-to-image") == {}  # a bad file: no shapes, so no key match later


def test_the_schema_takes_a_key_and_refuses_a_hostile_one(tmp_path: Path) -> None:
    key = _key(tmp_path, LLAMA)
    assert validate_record(sample_record(compiled_cache_key=key)) == []
    assert validate_record(sample_record()) == []  # the key is optional
    for bad in ({**key, "compiler_args": "-O1\nimport os"}, {**key, "architecture": "Llama'); import os; ('"},
                {**key, "extra": 1}, {**key, "graphs": ["../../etc/passwd"]}):  # fmt: skip
        problems = validate_record(sample_record(compiled_cache_key=bad))
        assert problems and problems[0][0].startswith("compiled_cache_key"), problems


def test_run_py_builds_the_same_key_from_a_model_folder(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    record = sample_record(dtype="bfloat16", workload=WORKLOAD)
    key = _key(tmp_path, read_config(folder, "text-generation"), workload=record["workload"])
    record["compiled_cache_key"] = key
    namespace: dict[str, Any] = {"__name__": "run"}
    exec(compile(run_script(record), "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
    assert namespace["CACHE_KEY"] == key and namespace["KEY_RULE"]["file"] == KEY_FILE
    installed = {"torch-neuronx": VERSIONS["torch_neuronx"], "neuronx-cc": VERSIONS["neuronx_cc"], "nki": "0.7.0"}
    actual = namespace["model_key"](str(folder), None, installed)
    assert namespace["key_differences"](key, actual) == [] == key_differences(key, actual)
    (folder / "config.json").write_text(json.dumps({**LLAMA, "num_hidden_layers": 3}))
    actual = namespace["model_key"](str(folder), None, installed)
    assert namespace["key_differences"](key, actual) == key_differences(key, actual) != []
