"""A model's family from its small files: architecture, model_type and the base models it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.models import Family, folder_family, transformer_config_path
from pipeline.models.family import adapter_base


def _write(folder: Path, files: dict[str, object]) -> Path:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def test_each_library_gives_its_own_architecture(tiny_models: dict[str, Path]) -> None:
    assert folder_family(tiny_models["text-generation"]) == Family("LlamaForCausalLM", "llama")
    assert folder_family(tiny_models["image-text-to-text"]) == Family("LlavaForConditionalGeneration", "llava")
    assert folder_family(tiny_models["sentence-embeddings"]) == Family("BertModel", "bert")
    assert folder_family(tiny_models["text-to-image"]) == Family("StableDiffusionPipeline", None)


def test_a_card_and_an_adapter_name_the_base_models(tmp_path: Path) -> None:
    card = "---\nbase_model:\n- org/base\n- ./local-dir\nlicense: mit\n---\n# text\n"
    adapter = {"base_model_name_or_path": "org/other", "peft_type": "LORA"}
    family = folder_family(_write(tmp_path, {"README.md": card, "adapter_config.json": adapter}))
    assert family == Family(None, None, ("org/base", "org/other"))
    assert family.record_fields() == {"base_model": ["org/base", "org/other"]}
    assert adapter_base({"base_model_name_or_path": "/home/me/llama"}) is None  # a local path: nothing to follow
    assert adapter_base([1, 2]) is None


def test_the_transformer_of_a_sentence_transformers_model_may_have_its_own_folder(tmp_path: Path) -> None:
    modules = [{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]
    _write(tmp_path, {"modules.json": modules, "0_Transformer/config.json": {"architectures": ["MPNetModel"],
                                                                            "model_type": "mpnet"}})  # fmt: skip
    assert folder_family(tmp_path) == Family("MPNetModel", "mpnet")


@pytest.mark.parametrize("path", ["../../etc", "/abs", "a/../../b", 3])
def test_a_module_path_that_leaves_the_repo_is_never_read(path: object) -> None:
    modules = [{"path": path, "type": "sentence_transformers.models.Transformer"}]
    assert transformer_config_path(modules) is None


def test_hostile_or_broken_files_give_an_unknown_family(tmp_path: Path) -> None:
    _write(tmp_path, {"config.json": {"architectures": ["Evil(); import os"], "model_type": "../x"},
                      "README.md": "---\nbase_model: [7, {a: b}]\n---\n"})  # fmt: skip
    assert folder_family(tmp_path) == Family()
    assert folder_family(_write(tmp_path / "broken", {"config.json": "{not json"})) == Family()
