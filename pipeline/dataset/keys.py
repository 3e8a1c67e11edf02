"""The keys of the latest view and the row that stands for each: a CI row first, then the newest; the others
in its history, capped. Keys are by the canonical id: the Hub resolves ids without case (issue 22.7).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from pipeline.dataset.read import HISTORY_COLUMN, HISTORY_FIELDS, earlier_runs


def latest_key(row: dict[str, Any]) -> tuple[str, str, str]:
    """The (model, task, hardware) key a latest row stands for, by the canonical id: the Hub resolves ids without
    case, so ``Meta-Llama/X`` and ``meta-llama/X`` are one model (Hub ids are ASCII: lower() is case folding)."""
    return (row["model_id"].lower(), row["task"], row["hardware"])


def shard_key(row: dict[str, Any]) -> tuple[str, str, str]:
    """The key a row's shard is named after: its id as spelt, as every dataset with more than one shard has
    filed its rows (a new dataset keeps one shard, where every spelling of an id meets)."""
    return (row["model_id"], row["task"], row["hardware"])


_Entry = TypeVar("_Entry")


def keep_newest(
    current: dict[Any, _Entry],
    entries: Iterable[_Entry],
    *,
    key: Callable[[_Entry], Hashable],
    rank: Callable[[_Entry], Any],
) -> int:
    """Merge ``entries`` into ``current`` (key -> entry, changed in place), an entry replacing its key's only when
    it ranks higher: the rule of the dataset's JSON and small Parquet files (serving records, warm checks).

    Returns:
        How many entries were taken.
    """
    taken = 0
    for entry in entries:
        at = key(entry)
        old = current.get(at)
        if old is None or rank(entry) > rank(old):
            current[at] = entry
            taken += 1
    return taken


#: Earlier runs kept in a latest row's ``history_json`` (newest first); the full history is data/results.
HISTORY_LIMIT = 10


def history_entry(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in HISTORY_FIELDS}


def rank(row: dict[str, Any]) -> tuple[Any, ...]:
    """Which row of a key stands as its latest: a CI row before any other (a community or local record never
    displaces the project's own measurement, however new it says it is), then the newest."""
    return (row["source"] == "ci", row["finished_at"], row["started_at"], row["record_id"])


def newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when row ``a`` supersedes row ``b`` for the same key."""
    return rank(a) > rank(b)


def capped(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest ``HISTORY_LIMIT`` entries, newest first, CI runs kept first when some must go."""
    entries = sorted(entries, key=lambda e: e["finished_at"], reverse=True)
    if len(entries) > HISTORY_LIMIT:
        kept = sorted(entries, key=lambda e: (e.get("source") == "ci", e["finished_at"]), reverse=True)
        ids = {e["record_id"] for e in kept[:HISTORY_LIMIT]}
        entries = [e for e in entries if e["record_id"] in ids]
    return entries


def by_key(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Latest rows by key; two rows of one key (two spellings of an id, stored before keys were canonical) become
    one: the row that stands for the key (:func:`rank`), the other in its history."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        key = latest_key(row)
        other = out.get(key)
        if other is None:
            out[key] = row
            continue
        first, second = (row, other) if newer(row, other) else (other, row)
        past = [*earlier_runs(first), history_entry(second), *earlier_runs(second)]
        out[key] = {**first, HISTORY_COLUMN: capped(past)}
    return out
