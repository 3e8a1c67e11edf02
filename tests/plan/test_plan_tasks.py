"""The planner under sentence-embeddings: sentence-transformers configs counted as sentence-transformers loads them
(the bare AutoModel). text-to-image pipelines are planned from their components (tests/plan/test_plan_diffusers.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from pipeline.plan import plan_config
from pipeline.taskspec import default_workload
from tests import FIXTURES

ST = FIXTURES / "configs" / "sentence-transformers"
SOURCES: dict[str, dict] = yaml.safe_load((ST / "SOURCES.yaml").read_text(encoding="utf-8"))


def test_every_config_has_a_published_count() -> None:
    assert {p.stem for p in ST.glob("*.json")} == set(SOURCES)
    assert len(SOURCES) >= 5


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_sentence_transformers_counts_match_the_published_count(name: str) -> None:
    config = json.loads((ST / f"{name}.json").read_text(encoding="utf-8"))
    plan = plan_config(config, task="sentence-embeddings")
    published = SOURCES[name]["published"]
    assert abs(plan.params - published) <= 0.01 * published, (plan.params, published)
    assert plan.workload == default_workload("sentence-embeddings").to_dict()


def test_the_bare_model_is_counted_not_the_class_the_config_names() -> None:
    """all-MiniLM-L6-v2 by hand: embeddings 11,918,592 + 6 layers x 1,774,464 + pooler 147,840."""
    config = json.loads((ST / "all-MiniLM-L6-v2.json").read_text(encoding="utf-8"))
    assert plan_config(config, task="sentence-embeddings").params == 11_918_592 + 6 * 1_774_464 + 147_840
    mpnet = json.loads((ST / "all-mpnet-base-v2.json").read_text(encoding="utf-8"))
    # MPNetForMaskedLM adds an LM head the sentence-transformers checkpoint does not hold
    assert plan_config(mpnet).params > plan_config(mpnet, task="sentence-embeddings").params
