"""The family index as the tests read it: every family row of a folder, and the family rows its latest view should
give, one Python row at a time (the reference :func:`pipeline.dataset.shards.family_table` is compared with)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline.dataset import HISTORY_COLUMN
from pipeline.dataset.layout import read_rows
from pipeline.dataset.shards import family_files
from pipeline.page.families import family_entry
from pipeline.records import family_row, family_stats


def family_rows(latest: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The family row of every latest row (:func:`pipeline.records.family_row`), sorted by key."""
    rows = (family_row(row, list(row.get(HISTORY_COLUMN) or [])) for row in latest)
    return sorted(rows, key=lambda r: (str(r["model_id"]), str(r["task"]), str(r["hardware"])))


def read_families(root: Path) -> list[dict[str, Any]]:
    """The rows of the folder's family index (every shard of it, in path order); none when it has none."""
    return [row for path in family_files(root) for row in read_rows(path)]


def family_table(latest: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The page's table by architecture counted from the latest rows at once, most measured on Trainium2 first (the
    reference :func:`pipeline.page.families.grouped_family_table` is compared with)."""
    return [family_entry(s) for s in family_stats(family_row(row, row.get("history") or ()) for row in latest)]
