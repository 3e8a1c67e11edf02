"""A second-machine warm check passes the schema and the semantic rules before the dataset takes it; hostile checks
(bad status, negative counts, verified with misses, path traversal or HTML in ids, control characters, future times)
are refused with the field named."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, get_args

import pytest

from pipeline.publish import WarmCheck
from pipeline.records import WARM_FIELDS, WarmStatus, counts_as_trainium2, load_schema, warm_check_problems
from tests.support.records import sample_warm_check


def _fields(**overrides: Any) -> set[str]:
    return {p.field for p in warm_check_problems(sample_warm_check(**overrides), name="warm-x")}


def test_a_real_check_passes_and_the_schema_matches_the_dataclass() -> None:
    assert warm_check_problems(sample_warm_check(), name="warm-x") == []
    required = tuple(f.name for f in dataclasses.fields(WarmCheck) if f.default is dataclasses.MISSING)
    assert tuple(load_schema("warm_check")["required"]) == required and WARM_FIELDS[: len(required)] == required
    assert WARM_FIELDS == tuple(f.name for f in dataclasses.fields(WarmCheck))
    assert set(load_schema("warm_check")["properties"]["status"]["enum"]) == set(get_args(WarmStatus))
    for status, hits, misses in (("missed", 1, 1), ("refused", None, None), ("error", None, None)):
        assert warm_check_problems(sample_warm_check(status=status, hits=hits, misses=misses), name="x") == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"status": "great"}, "status"),
        ({"status": "<script>"}, "status"),
        ({"hits": -1}, "hits"),
        ({"misses": -3}, "misses"),
        ({"hits": 1.5}, "hits"),
        ({"hits": "2"}, "hits"),
        ({"misses": 1}, "status"),  # verified with a miss
        ({"hits": 0}, "status"),  # verified with nothing served
        ({"hits": None, "misses": None}, "status"),
        ({"model_id": "../../etc/passwd"}, "model_id"),
        ({"model_id": "acme/<img src=x onerror=alert(1)>"}, "model_id"),
        ({"model_id": "acme/x\n"}, "model_id"),
        ({"revision": "main"}, "revision"),
        ({"sha256": "F" * 64}, "sha256"),
        ({"sha256": None}, "sha256"),
        ({"runner": "../runner"}, "runner"),
        ({"runner": "<b>r</b>"}, "runner"),
        ({"emulated": "no"}, "emulated"),
        ({"first_call_s": -0.1}, "first_call_s"),
        ({"checked_at": "yesterday"}, "checked_at"),
        ({"checked_at": "2026-02-30T00:00:00+00:00"}, "checked_at"),
        ({"checked_at": "2999-01-01T00:00:00+00:00"}, "checked_at"),
        ({"message": "ok\x1b[2Jwiped"}, "message"),
        ({"message": "x" * 601}, "message"),
        ({"extra": 1}, "(check)"),
    ],
)
def test_hostile_checks_are_refused_with_the_field_named(overrides: dict[str, Any], field: str) -> None:
    assert field in _fields(**overrides), overrides


def test_not_an_object_and_a_missing_field() -> None:
    assert warm_check_problems([1, 2], name="x")[0].message == "not a JSON object"
    check = sample_warm_check()
    del check["sha256"]
    assert warm_check_problems(check, name="x")


def test_only_a_verified_check_on_a_real_machine_is_trainium2_evidence() -> None:
    assert counts_as_trainium2(sample_warm_check())
    assert not counts_as_trainium2(sample_warm_check(emulated=True))
    assert not counts_as_trainium2(sample_warm_check(status="missed", hits=1, misses=1))
    assert not counts_as_trainium2({**sample_warm_check(), "emulated": None})


def test_a_time_just_ahead_of_the_clock_is_allowed_a_day_ahead_is_not() -> None:
    now = dt.datetime(2026, 11, 29, 8, tzinfo=dt.UTC)
    assert not warm_check_problems(sample_warm_check(checked_at="2026-11-29T09:00:00+00:00"), name="x", now=now)
    later = sample_warm_check(checked_at="2026-12-01T09:00:00Z")
    assert [p.field for p in warm_check_problems(later, name="x", now=now)] == ["checked_at"]
