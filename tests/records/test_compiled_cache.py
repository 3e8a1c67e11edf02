"""A record's ``compiled_cache`` (schema 1.3, issue 25): validate refuses a malformed one, one a community or local
record names, one on a run that did not pass on neuron and one outside its run's folder; the flat columns carry it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.records import bundle_folder, bundle_path, flatten, unflatten, validate_record
from tests.support.records import sample_failure, sample_record

DIGEST = "3f" * 32


def with_bundle(record: dict[str, Any] | None = None) -> dict[str, Any]:
    record = record or sample_record()
    record["compiled_cache"] = {
        "repo_id": "trncat/trncat-compiled",
        "revision": "a1" * 20,
        "path": bundle_path(record, DIGEST),
        "sha256": DIGEST,
        "bytes": 123456,
        "files": 4,
    }
    return record


def test_a_ci_neuron_pass_naming_its_bundle_is_valid_and_round_trips_through_the_columns() -> None:
    record = with_bundle()
    assert validate_record(record) == []
    folder = bundle_folder(record)
    assert folder.startswith(f"neuronx-cc-2.21.0/{record['model_id']}/{record['revision']}/text-generation-bfloat16-")
    assert record["compiled_cache"]["path"] == f"{folder}/{DIGEST[:16]}.neff-cache.tar.gz"
    row = flatten(record)
    assert row["compiled_cache_bytes"] == 123456 and row["compiled_cache_sha256"] == DIGEST
    assert row["compiled_cache_skipped"] is None
    assert unflatten(row)["compiled_cache"] == record["compiled_cache"]
    plain = sample_record()
    assert "compiled_cache" not in unflatten(flatten(plain))  # absent stays absent


def _mutate(change: str) -> dict[str, Any]:
    record = with_bundle()
    cache = record["compiled_cache"]
    if change == "missing sha256":
        del cache["sha256"]
    elif change == "short sha256":
        cache["sha256"] = "abc"
    elif change == "branch revision":
        cache["revision"] = "main"
    elif change == "zero bytes":
        cache["bytes"] = 0
    elif change == "over the cap":
        cache["bytes"] = 2 * 1024**3 + 1
    elif change == "unknown key":
        cache["url"] = "https://example.com/x"
    elif change == "dot-dot path":
        org = record["model_id"].split("/")[0]
        cache["path"] = cache["path"].replace(f"/{org}/", "/../", 1)
    elif change == "another run's folder":
        cache["path"] = bundle_path({**record, "revision": "b2" * 20}, DIGEST)
    elif change == "name not from its digest":
        cache["path"] = cache["path"].replace(DIGEST[:16], "0" * 16)
    elif change == "beside a skip reason":
        record["compiled_cache_skipped"] = "over the cap"
    elif change == "not an object":
        record["compiled_cache"] = "trncat/trncat-compiled"
    return record


CHANGES = ["missing sha256", "short sha256", "branch revision", "zero bytes", "over the cap", "unknown key",
           "dot-dot path", "another run's folder", "name not from its digest", "beside a skip reason",
           "not an object"]  # fmt: skip


@pytest.mark.parametrize("change", CHANGES)
def test_validate_refuses_a_malformed_compiled_cache(change: str) -> None:
    problems = validate_record(_mutate(change))
    assert problems and any(field.startswith("compiled_cache") for field, _ in problems), problems


@pytest.mark.parametrize("source", ["community", "local"])
def test_a_record_not_made_by_ci_naming_a_bundle_is_refused(source: str) -> None:
    record = sample_record()
    record["run"].update(source=source, runner=None, github_run_id=None, github_sha=None)
    problems = validate_record(with_bundle(record))
    refused = f"a {source} record must not name a compiled-cache bundle: only CI makes them"
    assert ("compiled_cache", refused) in problems


def test_only_a_neuron_pass_names_a_bundle() -> None:
    problems = validate_record(with_bundle(sample_failure()))
    assert any(f == "compiled_cache" and "passing neuron" in m for f, m in problems)


def test_trncat_validate_names_the_file_and_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(with_bundle()))
    bad.write_text(json.dumps(_mutate("short sha256")))
    assert main(["validate", str(good), str(bad)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "bad.json" in text and "compiled_cache.sha256" in text and "good.json" not in text


def test_a_skip_reason_alone_is_valid() -> None:
    record = copy.deepcopy(sample_record())
    record["compiled_cache_skipped"] = "the NEFF cache holds 'ab/x.py' ...: no bundle"
    assert validate_record(record) == []
    assert flatten(record)["compiled_cache_skipped"].startswith("the NEFF cache")


def test_the_schema_states_the_bundle_rule_s_own_limits() -> None:
    """The schema's bounds on ``compiled_cache`` are the bundle module's constants, not a second copy that drifts."""
    import re

    from pipeline.backends.neuron import BUNDLE_SUFFIX, MAX_BUNDLE_BYTES, bundle_rule
    from pipeline.records import load_schema

    spec = load_schema()["properties"]["compiled_cache"]["properties"]
    assert spec["bytes"]["maximum"] == MAX_BUNDLE_BYTES
    assert spec["files"]["maximum"] == bundle_rule()["limits"]["files"]
    assert bundle_rule()["name"] in spec["path"]["pattern"]
    assert re.fullmatch(spec["path"]["pattern"], f"neuronx-cc-2.0/a/b/{'0' * 40}/k/{'1' * 16}{BUNDLE_SUFFIX}")


def test_a_serving_run_s_bundle_folder_is_keyed_by_its_engine_options() -> None:
    # vLLM Neuron compiles a bucket per max_num_seqs and max_model_len: two engines' caches never share a folder,
    # and a serving bundle never lands in its model's batch-1 folder
    from tests.support.records import sample_serving

    served = sample_serving()
    other = copy.deepcopy(served)
    other["serving"]["engine"]["options"]["max_num_seqs"] = 8
    assert bundle_folder(served) != bundle_folder(other)
    plain = copy.deepcopy(served)
    del plain["serving"]
    assert bundle_folder(served) != bundle_folder(plain)
    assert bundle_folder(served) == bundle_folder(copy.deepcopy(served))
