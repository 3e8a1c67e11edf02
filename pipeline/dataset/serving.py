"""The dataset's serving records: ``data/serving.json``, the latest serving record per (model, hardware,
workload), a CI record before any other, then the newest (the rule of the latest view, :mod:`shards`).

Serving records (a ``serving`` section) are kept apart from the results' Parquet: a serving run of a
model is not another run of its batch-1 row (their latest keys would collide), and the page reads them whole
(the curve needs every point). The file holds whole, validated records, at most :data:`MAX_SERVING` of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pipeline import fsatomic
from pipeline.dataset.layout import SERVING_FILE
from pipeline.errors import DatasetError
from pipeline.records import validate_record

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


#: The file's bound: one entry per model, hardware and workload (a catalog of thousands of models fits).
MAX_SERVING = 20_000


def serving_key(record: dict[str, Any]) -> tuple[str, str, str]:
    return (
        str(record["model_id"]).lower(),
        str(record["hardware"]["name"]),
        str(record["serving"]["workload"]["name"]),
    )


def _rank(record: dict[str, Any]) -> tuple[bool, str, str]:
    run = record["run"]
    return (run["source"] == "ci", run["finished_at"], run["started_at"])


def read_serving(root: Path) -> list[dict[str, Any]]:
    """The dataset's serving records (each valid; an invalid one is left out), or [] when it has none.

    Raises:
        DatasetError: the file is not a JSON list.
    """
    path = root / SERVING_FILE
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: not a list of serving records")
    return [r for r in data if isinstance(r, dict) and r.get("serving") and not validate_record(r)]


def add_serving(root: Path, records: Iterable[dict[str, Any]]) -> int:
    """Merge valid serving ``records`` into ``data/serving.json`` (atomically); returns how many entries changed."""
    current = {serving_key(r): r for r in read_serving(root)}
    changed = keep_newest(current, records, key=serving_key, rank=_rank)
    if changed:
        if len(current) > MAX_SERVING:
            raise DatasetError(f"{SERVING_FILE}: more than {MAX_SERVING} serving entries")
        ordered = [current[k] for k in sorted(current)]
        (root / SERVING_FILE).parent.mkdir(parents=True, exist_ok=True)
        fsatomic.write_text(root / SERVING_FILE, json.dumps(ordered, indent=1, sort_keys=True) + "\n")
    return changed
