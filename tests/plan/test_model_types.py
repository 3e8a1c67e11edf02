"""The model types transformers knows, read as text without importing it, and the isolated build (issue 36): the
planner of a ``trncat check`` process asks no import of transformers or torch, and answers the same."""

from __future__ import annotations

import json

import pytest

from pipeline.plan import describe, plan_config
from pipeline.plan import params as params_module
from pipeline.plan.model_types import known_model_types, transformers_version
from tests import FIXTURES


def test_the_types_read_as_text_hold_every_type_transformers_maps() -> None:
    import transformers

    known = known_model_types()
    assert known is not None
    # A superset: a type wrongly taken as known is asked of transformers itself; one missing would skip a build.
    assert set(transformers.CONFIG_MAPPING.keys()) <= known
    assert "llama" in known and "novel-type" not in known
    assert transformers_version() == transformers.__version__


def test_a_type_transformers_lacks_is_described_from_its_config_without_a_build(monkeypatch) -> None:
    monkeypatch.setattr(params_module, "_cache", {})
    config = json.loads((FIXTURES / "configs" / "gpt2.json").read_text())
    config.update(model_type="novel-type", architectures=["NovelForCausalLM"])
    shape = describe(config)
    assert not shape.instantiable and shape.params is None
    assert shape.reason == f"transformers {transformers_version()} does not know model_type 'novel-type'"


@pytest.mark.parametrize("name", ["gpt2.json", "qwen3-30b-a3b.json"])
def test_an_isolated_build_counts_exactly_what_an_in_process_build_counts(monkeypatch, name: str) -> None:
    config = json.loads((FIXTURES / "configs" / name).read_text())
    monkeypatch.setattr(params_module, "_cache", {})
    isolated = describe(config, isolated=True)
    monkeypatch.setattr(params_module, "_cache", {})
    here = describe(config)
    assert isolated.instantiable and isolated.params and isolated == here
    plans = [plan_config(config, task="text-generation", isolated=flag) for flag in (True, False)]
    assert plans[0] == plans[1] and plans[0].source == "meta-device"
