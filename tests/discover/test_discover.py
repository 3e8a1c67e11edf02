"""Discovery against the local hub: rankings, reasons, snapshots, hand-kept files and the request bound."""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline.discover import (
    Candidate,
    Discovery,
    Exclusion,
    Selection,
    discover,
    discover_all,
    exclusion_rows,
    load_exclusions,
    load_selected,
    snapshot_rows,
    write_outputs,
)
from pipeline.errors import ConfigError
from pipeline.hub import ModelListing
from pipeline.queue import build_queue
from pipeline.types import TASKS
from tests import FIXTURES

TODAY = dt.date(2026, 11, 30)
TG, ITT = "text-generation", "image-text-to-text"
#: A repo's own info document (``/api/models/org/name[/revision/...]``), i.e. a request per model.
PER_MODEL = re.compile(r"^/api/models/[^/?]+/[^/?]+")


def seed(store, model_id: str, task: str = TG, **meta) -> None:
    metadata = {"pipeline_tag": task, "library_name": "transformers", "safetensors": {"total": 1_000_000}}
    metadata.update(meta)
    store.create_repo(model_id, metadata=metadata)


def seed_ranked(store, n: int, task: str = TG, prefix: str = "org") -> None:
    """``n`` models whose trending order is the reverse of their downloads order."""
    for i in range(n):
        seed(store, f"{prefix}/m{i:03d}", task, trendingScore=i + 1, downloads=(n - i) * 10, likes=i)


def test_rankings_are_ordered_and_limited(localhub) -> None:
    seed_ranked(localhub.store, 30)
    seed_ranked(localhub.store, 5, ITT, prefix="vlm")
    trending = discover(hub=localhub.client, task=TG, view="trending", limit=10, exclusions=[], today=TODAY)
    downloads = discover(hub=localhub.client, task=TG, view="downloads", limit=10, exclusions=[], today=TODAY)

    assert [c.model_id for c in trending.candidates] == [f"org/m{i:03d}" for i in range(29, 19, -1)]
    assert [c.model_id for c in downloads.candidates] == [f"org/m{i:03d}" for i in range(10)]
    assert [c.rank for c in trending.candidates] == list(range(1, 11))
    top = trending.candidates[0]
    assert (top.trending_score, top.params, top.library_name, top.eligible) == (30, 1_000_000, "transformers", True)
    assert len(top.sha or "") == 40 and top.task == TG and top.view == "trending"
    assert trending.date == TODAY


def test_ineligible_models_stay_with_their_reason_and_never_reach_the_matrix(localhub) -> None:
    store = localhub.store
    seed(store, "ok/plain", trendingScore=100)
    seed(store, "ok/also-plain", trendingScore=99)
    seed(store, "bad/remote", trendingScore=90, tags=["custom_code", "transformers"])
    seed(store, "bad/gated", trendingScore=80, gated="manual")
    seed(store, "bad/diffusers", trendingScore=70, library_name="diffusers")
    seed(store, "bad/unnamed", trendingScore=65, library_name=None)
    seed(store, "bad/low", trendingScore=60)
    seed(store, "bad/broken", trendingScore=50)
    seed(store, "ok/other-task-excluded", trendingScore=40)
    seed(store, "bad/name--dashes", trendingScore=30)  # the Hub forbids '--': an untrusted id must not pass
    exclusions = [
        Exclusion("bad/low", "low_priority", "too big for one instance"),
        Exclusion("BAD/Broken", "incompatible", "uses an op Neuron lacks", task=TG),
        Exclusion("ok/other-task-excluded", "incompatible", "vision tower fails", task=ITT),
    ]
    found = discover(hub=localhub.client, task=TG, view="trending", limit=50, exclusions=exclusions, today=TODAY)
    by_id = {c.model_id: c for c in found.candidates}

    assert len(found.candidates) == 10  # nothing dropped
    expected = {
        "bad/remote": "remote_code",
        "bad/gated": "gated",
        "bad/diffusers": "not_transformers",
        "bad/unnamed": "not_transformers",
        "bad/low": "low_priority",
        "bad/broken": "incompatible",
        "bad/name--dashes": "invalid",
    }
    assert {m: c.kind for m, c in by_id.items() if not c.eligible} == expected
    assert all(c.reason for c in found.ineligible)
    assert by_id["bad/low"].reason == "too big for one instance"
    assert "diffusers" in (by_id["bad/diffusers"].reason or "")
    assert {c.model_id for c in found.eligible} == {"ok/plain", "ok/also-plain", "ok/other-task-excluded"}

    def planner(candidate: Candidate):
        raise AssertionError(f"an ineligible model was planned: {candidate.model_id}")

    eligible_ids = {c.model_id for c in found.eligible}
    queue = build_queue(
        candidates=found.candidates,
        dataset_root=None,
        toolchain={"neuronx_cc": "2.28.7631.0"},
        planner=lambda c: planner(c) if c.model_id not in eligible_ids else _fake_plan(c),
    )
    assert {e["model_id"] for e in queue.entries} == eligible_ids
    skipped = {s["model_id"]: s["reason"] for s in queue.skipped}
    assert set(skipped) == set(expected)
    assert skipped["bad/gated"].startswith("gated: ")


@functools.cache
def _fake_plan(candidate: Candidate):
    from pipeline.plan import plan_config

    config = json.loads((FIXTURES / "configs/qwen2.5-0.5b.json").read_text())
    return plan_config(config, dtype="bfloat16")


def test_selected_reads_metadata_from_the_listing_and_records_missing_models(localhub) -> None:
    store = localhub.store
    seed(store, "sel/in-listing", downloads=500)
    seed(store, "sel/other-tag", task="text2text-generation", downloads=5)  # in no text-generation listing
    seed(store, "sel/gated", downloads=400, gated="auto")
    selected = [
        Selection("sel/in-listing", TG, "a note"),
        Selection("sel/other-tag", TG),
        Selection("sel/does-not-exist", TG),
        Selection("sel/gated", TG),
        Selection("sel/vision", ITT),  # another task: not part of this discovery
        Selection("sel/../escape", TG),  # built in code, not loaded from YAML: still never sent to the Hub
    ]
    localhub.server.requests.clear()
    found = discover(
        hub=localhub.client, task=TG, view="selected", limit=100, selected=selected, exclusions=[], today=TODAY
    )
    by_id = {c.model_id: c for c in found.candidates}

    assert [c.model_id for c in found.candidates] == [s.model_id for s in selected if s.task == TG]
    assert [c.rank for c in found.candidates] == [1, 2, 3, 4, 5]
    assert by_id["sel/../escape"].kind == "invalid"
    assert by_id["sel/in-listing"].eligible and by_id["sel/in-listing"].note == "a note"
    assert by_id["sel/other-tag"].eligible and len(by_id["sel/other-tag"].sha or "") == 40
    assert (by_id["sel/does-not-exist"].kind, by_id["sel/does-not-exist"].sha) == ("not_found", None)
    assert "not found" in (by_id["sel/does-not-exist"].reason or "")
    assert by_id["sel/gated"].kind == "gated"
    # One listing, then one info call for each selected id that no listing holds, and nothing else.
    assert localhub.server.count_requests(r"^/api/models\?", "GET") == 1
    per_model = [p for _, p in localhub.server.requests if PER_MODEL.match(p)]
    assert sorted(p.split("?")[0] for p in per_model) == ["/api/models/sel/does-not-exist", "/api/models/sel/other-tag"]

    allowed = discover(
        hub=localhub.client, task=TG, view="selected", limit=1, selected=selected, exclusions=[], allow_gated=True
    )
    assert [c.model_id for c in allowed.candidates] == ["sel/in-listing"]


def test_discover_all_bounds_requests_and_none_per_model(localhub) -> None:
    """Must-hold 2, smaller: 2,500 models, both tasks x trending and downloads at limit 1000."""
    store = localhub.store
    for i in range(2500):
        task = TG if i % 2 else ITT
        seed(store, f"org{i % 37}/model-{i}", task, trendingScore=(i * 7919) % 2500, downloads=(i * 104729) % 99991)
    seed(store, "sel/most-downloaded", TG, downloads=10**9)
    selected = [Selection("sel/most-downloaded", TG)]
    localhub.server.requests.clear()
    found = discover_all(
        hub=localhub.client, limit=1000, tasks=(TG, ITT), selected=selected, exclusions=[], today=TODAY
    )

    assert [(d.task, d.view) for d in found] == [
        (t, v) for t in (TG, ITT) for v in ("trending", "downloads", "selected")
    ]
    assert [len(d.candidates) for d in found] == [1000, 1000, 1, 1000, 1000, 0]
    requests = list(localhub.server.requests)
    assert len(requests) <= 10, requests
    assert not [p for _, p in requests if PER_MODEL.match(p)]
    scores = [c.trending_score for c in found[0].candidates]
    assert scores == sorted(scores, reverse=True)


def test_snapshot_and_exclusions_parquet_read_back_with_exact_columns(localhub, tmp_path: Path) -> None:
    seed_ranked(localhub.store, 4)
    seed(localhub.store, "x/remote", tags=["custom_code"], trendingScore=50)
    seed(localhub.store, "deepseek-ai/DeepSeek-V3", trendingScore=40)
    seed(localhub.store, "x/bad--id", trendingScore=30)
    hand_kept = [Exclusion("deepseek-ai/DeepSeek-V3", "low_priority", "671B parameters")]
    found = discover(hub=localhub.client, task=TG, view="trending", limit=10, exclusions=hand_kept, today=TODAY)
    assert [c.kind for c in found.candidates[:3]] == ["remote_code", "low_priority", "invalid"]
    written = write_outputs([found], hand_kept, tmp_path)
    path = written[1]
    assert written[0] == tmp_path / "candidates/text-generation-trending.json"
    assert json.loads(written[0].read_text())["candidates"][0]["model_id"] == "x/remote"

    assert path == tmp_path / "data/rankings/2026-11-30-text-generation-trending.parquet"
    frame = pd.read_parquet(path)
    assert list(frame.columns) == ["date", "task", "view", "rank", "model_id"]
    assert str(frame["rank"].dtype) == "int64"
    # The invalid id stays in the discovery output (with its reason) but not in published data.
    assert frame["model_id"].tolist() == [
        "x/remote", "deepseek-ai/DeepSeek-V3", "org/m003", "org/m002", "org/m001", "org/m000"
    ]  # fmt: skip
    assert set(frame["date"]) == {dt.date(2026, 11, 30)} and frame["rank"].tolist() == [1, 2, 4, 5, 6, 7]
    assert snapshot_rows(found)[0] == {
        "date": "2026-11-30",
        "task": TG,
        "view": "trending",
        "rank": 1,
        "model_id": "x/remote",
    }

    assert len(exclusion_rows(hand_kept, [found])) == 2
    excluded_path = written[2]
    assert excluded_path == tmp_path / "data/exclusions.parquet"
    excluded = pd.read_parquet(excluded_path)
    assert list(excluded.columns) == ["model_id", "task", "reason", "kind"]
    assert excluded["task"].isna().tolist() == [True, False]
    assert pq.read_table(excluded_path).to_pylist() == [
        {"model_id": "deepseek-ai/DeepSeek-V3", "task": None, "reason": "671B parameters", "kind": "low_priority"},
        {"model_id": "x/remote", "task": TG, "reason": found.candidates[0].reason, "kind": "remote_code"},
    ]


def test_discovery_round_trips_through_json_and_revalidates_ids() -> None:
    good = Candidate("org/model", TG, "trending", 1, "a" * 40, params=7, tags=("x",))
    forged = Candidate("org/../etc", TG, "trending", 2, "b" * 40)
    doc = json.loads(json.dumps(Discovery(TODAY, TG, "trending", [good, forged]).to_dict()))
    back = Discovery.from_dict(doc)
    assert back.candidates[0] == good
    assert (back.candidates[1].eligible, back.candidates[1].kind) == (False, "invalid")
    with pytest.raises(ConfigError):
        Discovery.from_dict({"date": "2026-11-30", "task": "translation", "view": "trending", "candidates": []})


def test_bad_arguments_are_config_errors(localhub) -> None:
    with pytest.raises(ConfigError, match="limit"):
        discover(hub=localhub.client, task=TG, view="trending", limit=0, exclusions=[])
    with pytest.raises(ConfigError, match="view"):
        discover(hub=localhub.client, task=TG, view="likes", limit=5, exclusions=[])
    assert localhub.server.count_requests(r"^/api/models") == 0


def test_listing_as_candidate_keeps_untrusted_sha_out() -> None:
    listing = ModelListing("org/m", "main", TG, (), False, 0, 0, 0, None, "transformers", None)
    candidate = Candidate.from_listing(listing, task=TG, view="trending", rank=1, excluded={}, allow_gated=False)
    assert (candidate.eligible, candidate.kind) == (False, "invalid")


# -- the hand-kept files --------------------------------------------------------------------------------
def test_shipped_selected_and_exclusions_are_valid() -> None:
    selected = load_selected()
    tasks = [s.task for s in selected]
    assert tasks.count(TG) >= 20 and tasks.count(ITT) >= 15
    assert "meta-llama/Llama-3.2-1B-Instruct" in {s.model_id for s in selected}
    # The GPU runner class benchmarks the entries marked gpu (the Compare view): some of every task.
    gpu = [s for s in selected if s.gpu]
    assert {s.task for s in gpu} == set(TASKS) and len(gpu) < len(selected) / 4
    assert "meta-llama/Llama-3.2-1B-Instruct" in {s.model_id for s in gpu}
    exclusions = load_exclusions()
    assert {e.kind for e in exclusions} <= {"low_priority", "incompatible"}
    assert any(e.model_id == "deepseek-ai/DeepSeek-V3" for e in exclusions)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models:\n  - model_id: a/b\n    task: translation\n", r"models\[0\] \(a/b\): task: .*translation"),
        ("models:\n  - {model_id: a/b, task: text-generation, colour: red}\n", r"models\[0\] \(a/b\): .*colour"),
        ("models:\n  - {model_id: a/b--c, task: text-generation}\n", r"models\[0\] \(a/b--c\): model_id: .*'--'"),
        ("models:\n  - {model_id: 'a b/c', task: text-generation}\n", r"models\[0\] \(a b/c\): model_id"),
        ("models:\n  - {model_id: a/b, task: text-generation}\n  - {model_id: A/B, task: text-generation}\n",
         r"models\[1\] \(A/B\): duplicates models\[0\]"),
        ("models:\n  - {model_id: a/b, task: text-generation, gpu: yes please}\n",
         r"models\[0\] \(a/b\): gpu: .*boolean"),
        ("models: [\n", r"not valid YAML \(line"),
        ("[]\n", r"top level: .*object"),
    ],
)  # fmt: skip
def test_bad_selected_file_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "selected.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_selected(path)
    assert str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_bad_exclusions_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "exclusions.yaml"
    path.write_text("exclusions:\n  - {model_id: a/b, kind: low_priority, reason: ok reason}\n  - {model_id: c/d}\n")
    with pytest.raises(ConfigError, match=r"exclusions\[1\] \(c/d\): .*(kind|reason)"):
        load_exclusions(path)
    path.write_text("exclusions:\n  - {model_id: a/b, kind: broken, reason: because}\n")
    with pytest.raises(ConfigError, match=r"exclusions\[0\] \(a/b\): kind"):
        load_exclusions(path)
    with pytest.raises(ConfigError, match="no such file"):
        load_exclusions(tmp_path / "missing.yaml")


def test_schemas_agree_with_the_literal_types() -> None:
    from typing import get_args

    from pipeline.discover import ExclusionKind
    from pipeline.records import load_schema
    from pipeline.types import TASKS

    selection = load_schema("selection")["properties"]["models"]["items"]["properties"]
    exclusion = load_schema("exclusion")["properties"]["exclusions"]["items"]["properties"]
    assert selection["task"]["enum"] == list(TASKS)
    assert exclusion["task"]["enum"] == [*TASKS, None]
    assert exclusion["kind"]["enum"] == list(get_args(ExclusionKind))


# -- sentence-embeddings and text-to-image: ranked by library over their pipeline tags ----------------------
SE, T2I = "sentence-embeddings", "text-to-image"


def test_sentence_embeddings_rank_sentence_transformers_models_over_both_tags(localhub) -> None:
    store = localhub.store
    st_meta = {"library_name": "sentence-transformers"}
    seed(store, "st/minilm", "sentence-similarity", downloads=900, trendingScore=5, **st_meta)
    seed(store, "st/bge", "feature-extraction", downloads=1000, trendingScore=1, **st_meta)
    seed(store, "st/mpnet", "sentence-similarity", downloads=100, trendingScore=9, **st_meta)
    seed(store, "hf/bert-features", "feature-extraction", downloads=10**6, trendingScore=99)  # transformers
    seed(store, "st/remote", "feature-extraction", downloads=800, tags=["custom_code"], **st_meta)
    downloads = discover(hub=localhub.client, task=SE, view="downloads", limit=3, exclusions=[], today=TODAY)
    trending = discover(hub=localhub.client, task=SE, view="trending", limit=10, exclusions=[], today=TODAY)

    # one ranking merged from the two tags by the view's figure, other libraries left out of the listing
    assert [c.model_id for c in downloads.candidates] == ["st/bge", "st/minilm", "st/remote"]
    assert [c.rank for c in downloads.candidates] == [1, 2, 3]
    assert [c.model_id for c in trending.candidates][:3] == ["st/mpnet", "st/minilm", "st/bge"]
    assert "hf/bert-features" not in {c.model_id for c in trending.candidates}
    remote = next(c for c in trending.candidates if c.model_id == "st/remote")
    assert (remote.eligible, remote.kind) == (False, "remote_code")
    # the listings asked the Hub for the library, once per tag
    assert all(c.eligible for c in downloads.candidates if c.model_id != "st/remote")


def test_new_tasks_judge_library_and_pipeline_tag_of_selected_models(localhub) -> None:
    store = localhub.store
    seed(store, "st/reranker", "text-ranking", library_name="sentence-transformers", downloads=5)
    seed(store, "hf/bert", "feature-extraction", downloads=5)
    seed(store, "sd/tiny", "text-to-image", library_name="diffusers", downloads=5)
    seed(store, "sd/gated", "text-to-image", library_name="diffusers", gated="manual", downloads=5)
    selected = [Selection("st/reranker", SE), Selection("hf/bert", SE), Selection("sd/tiny", T2I),
                Selection("sd/gated", T2I), Selection("sd/tiny", TG)]  # fmt: skip
    found = discover_all(hub=localhub.client, limit=10, views=("selected",), selected=selected, exclusions=[])
    by = {(c.task, c.model_id): c for d in found for c in d.candidates}

    reranker = by[(SE, "st/reranker")]
    assert (reranker.kind, reranker.eligible) == ("incompatible", False)
    assert "pipeline tag is 'text-ranking'" in (reranker.reason or "")
    assert by[(SE, "hf/bert")].kind == "not_transformers"
    assert "not sentence-transformers" in (by[(SE, "hf/bert")].reason or "")
    assert by[(T2I, "sd/tiny")].eligible
    assert by[(T2I, "sd/gated")].kind == "gated"
    assert "not transformers" in (by[(TG, "sd/tiny")].reason or "")


def test_selected_yaml_lists_the_new_tasks() -> None:
    tasks = {entry.task for entry in load_selected()}
    assert {SE, T2I} <= tasks


def test_candidates_carry_the_family_the_listing_tells_with_no_request_per_model(localhub, tmp_path: Path) -> None:
    store = localhub.store
    seed(store, "org/ft", downloads=10)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    store.commit_files("org/ft", {"config.json": json.dumps(config).encode(),
                                  "README.md": b"---\nbase_model: org/base\n---\n"})  # fmt: skip
    seed(store, "org/plain", downloads=5)
    found = discover(hub=localhub.client, task=TG, view="downloads", limit=10, exclusions=[], today=TODAY)
    by_id = {c.model_id: c for c in found.candidates}
    assert (by_id["org/ft"].architecture, by_id["org/ft"].model_type, by_id["org/ft"].base_model) == (
        "LlamaForCausalLM", "llama", ("org/base",)
    )  # fmt: skip
    assert by_id["org/plain"].architecture is None and by_id["org/plain"].base_model == ()
    assert not [p for _, p in localhub.server.requests if PER_MODEL.match(p)]
    # Written and read back (a discovery file is untrusted): the family survives, a forged one does not.
    data = by_id["org/ft"].to_dict()
    assert data["base_model"] == ["org/base"] and Candidate.from_dict(data) == by_id["org/ft"]
    forged = Candidate.from_dict({**data, "architecture": "x y", "base_model": ["../etc", "org/b"]})
    assert forged.architecture is None and forged.base_model == ("org/b",)
