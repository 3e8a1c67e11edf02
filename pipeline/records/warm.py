"""The second-machine warm check as data: its schema (``schemas/warm_check.schema.json``) plus the semantic rules a
publish applies before the dataset takes one (``data/warm_checks.parquet``, :mod:`pipeline.dataset.warm`).

A check is untrusted until it passes here: it comes from a self-hosted runner's artifact. Beyond the schema (the
status set, ids and digests by pattern, counts that are non-negative integers), ``verified`` needs every graph
counted and served (``hits > 0``, ``misses == 0``), the time is a real one not in the future, and the free text
holds no control character. An emulated check may be stored, labelled, but never counts as Trainium2 evidence
(:func:`counts_as_trainium2`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from pipeline.ids import model_id_problem
from pipeline.records.columns import parse_time
from pipeline.records.types import WarmCheck
from pipeline.records.validate import MAX_FUTURE, Problem, schema_validator

#: The fields of a check, in the schema's order (the dataset file's columns).
WARM_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(WarmCheck))
#: A check file larger than this is no check (a real one is a few hundred bytes).
MAX_WARM_CHECK_BYTES = 16 * 1024
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def warm_check_problems(entry: Any, *, name: str, now: dt.datetime | None = None) -> list[Problem]:
    """Why ``entry`` (one parsed warm check) may not be stored, each a :class:`Problem` naming ``name``; [] if none."""
    if not isinstance(entry, Mapping):
        return [Problem(name, "(check)", "not a JSON object")]
    errors = sorted(
        schema_validator("warm_check").iter_errors(dict(entry)), key=lambda e: [str(p) for p in e.instance_path]
    )
    if errors:
        return [Problem(name, ".".join(str(p) for p in e.instance_path) or "(check)", e.message[:300]) for e in errors]
    out: list[Problem] = []
    if (problem := model_id_problem(entry["model_id"])) is not None:
        out.append(Problem(name, "model_id", problem))
    hits, misses = entry["hits"], entry["misses"]
    if entry["status"] == "verified" and not (isinstance(hits, int) and hits > 0 and misses == 0):
        out.append(Problem(name, "status", f"verified needs hits > 0 and misses == 0 (hits={hits}, misses={misses})"))
    if entry["status"] == "missed" and misses == 0 and hits:
        out.append(Problem(name, "status", "missed, yet every counted graph hit"))
    when = parse_time(entry["checked_at"])
    if when is None:
        out.append(Problem(name, "checked_at", "not a real ISO 8601 time with a timezone"))
    elif when > (now or dt.datetime.now(dt.UTC)) + MAX_FUTURE:
        out.append(Problem(name, "checked_at", "in the future"))
    if _CONTROLS.search(entry["message"]):
        out.append(Problem(name, "message", "holds a control character"))
    return out


def counts_as_trainium2(entry: Mapping[str, Any]) -> bool:
    """Whether a stored check is Trainium2 evidence that its bundle starts warm: verified on a real machine."""
    return entry.get("status") == "verified" and entry.get("emulated") is False
