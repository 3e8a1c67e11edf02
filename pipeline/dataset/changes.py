"""What each publish changed, kept as ``data/changes/<run>.parquet``: the feed's source (one row per change kind).

A change of the latest row of a (model, task, hardware) key is one or more of: a new model (the key had no
row), a new pass (it did not pass before), a new failure (it fails now and did not fail before, and is no
regression), a regression (it passed before and fails now), and for a pass measured again on the same stack
(repeat-to-verify, :func:`pipeline.records.remeasured`): reproduced (its speed within the noise of the row before)
or disagrees (outside it: for a maintainer; the row before stays in the history). The PR description and the feed
read the same kinds from :func:`change_kinds`, so they always agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.dataset.layout import CHANGES_DIR, read_rows
from pipeline.records import remeasured, toolchain_label


@dataclass(frozen=True)
class Change:
    """How the latest row of one (model_id, task, hardware) key changed in a build."""

    key: tuple[str, str, str]
    before: dict[str, Any] | None
    after: dict[str, Any]

    @property
    def is_regression(self) -> bool:
        """It passed before (with an older toolchain or revision) and fails now."""
        return self.before is not None and self.before["status"] == "pass" and self.after["status"] == "fail"


#: The kinds, in the order the PR description and the feed list them, with their headings.
CHANGE_KINDS: tuple[tuple[str, str], ...] = (
    ("new_model", "New models"),
    ("new_pass", "New passes"),
    ("new_failure", "New failures"),
    ("regression", "Regressions"),
    ("disagrees", "Measured again on the same stack, and disagrees (for a maintainer)"),
    ("reproduced", "Reproduced (measured again on the same stack, within noise)"),
)
CHANGES_SCHEMA = pa.schema(
    [
        *((name, pa.string()) for name in ("kind", "model_id", "task", "hardware", "device", "status")),
        *((name, pa.string()) for name in ("failure_stage", "failure_code", "toolchain", "previous_toolchain")),
        ("record_id", pa.string()),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("results_file", pa.string()),
    ]
)


def change_kinds(change: Change) -> list[str]:
    """The kinds of one change (see the module's description), in :data:`CHANGE_KINDS` order."""
    before, after = change.before, change.after
    was = None if before is None else before["status"]
    kinds = []
    if before is None:
        kinds.append("new_model")
    if after["status"] == "pass" and was != "pass":
        kinds.append("new_pass")
    if after["status"] == "fail" and not change.is_regression and was != "fail":
        kinds.append("new_failure")
    if change.is_regression:
        kinds.append("regression")
    if again := remeasured(before, after):
        kinds.append(again)
    return kinds


def changes_table(changes: Iterable[Change], *, results_file: str) -> pa.Table:
    """The changes file of a build's changes, a row per kind of each change."""
    rows = []
    for change in changes:
        after = change.after
        for kind in change_kinds(change):
            rows.append(
                {
                    "kind": kind,
                    **{k: after.get(k) for k in CHANGES_SCHEMA.names[1:8]},
                    "toolchain": toolchain_label(after),
                    "previous_toolchain": None if change.before is None else toolchain_label(change.before),
                    "record_id": after["record_id"],
                    "finished_at": after["finished_at"],
                    "results_file": results_file,
                }
            )
    return pa.Table.from_pylist(rows, schema=CHANGES_SCHEMA)


def read_changes(root: Path) -> list[dict[str, Any]]:
    """Every change row of the folder, newest file first (file names start with the run's newest finish time).

    Raises:
        DatasetError: a changes file is unreadable.
    """
    return [row for path in sorted((root / CHANGES_DIR).glob("*.parquet"), reverse=True) for row in read_rows(path)]
