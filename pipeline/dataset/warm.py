"""The dataset's second-machine warm checks: ``data/warm_checks.parquet``, the newest check per (model, revision,
bundle sha256, emulated or not).

Each row is one validated check (:func:`pipeline.records.warm_check_problems`, the fields of
:data:`pipeline.records.WARM_FIELDS`): what a runner that did not make a row's compiled-cache bundle saw running
the row's run.py ``--require-warm`` with empty caches. The newest ``checked_at`` of a key wins; a check already held
(the same key and time: a retried publish) changes nothing, so the file's bytes stay the same. An emulated check is
a key of its own: it never replaces a real machine's check. Reading keeps only valid rows of any older column set
(a missing column reads as null and fails validation; an extra one is ignored).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import fsatomic
from pipeline.dataset.layout import WARM_CHECKS_FILE, is_latest_file, parquet_bytes, read_rows
from pipeline.dataset.serving import keep_newest
from pipeline.errors import DatasetError
from pipeline.records import WARM_FIELDS, parse_time, warm_check_problems

#: The file's bound: a few checks per bundle at most (a catalog of thousands of bundles fits).
MAX_WARM_CHECKS = 50_000
WARM_SCHEMA = pa.schema(
    [
        ("model_id", pa.string()), ("revision", pa.string()), ("sha256", pa.string()), ("status", pa.string()),
        ("hits", pa.int64()), ("misses", pa.int64()), ("first_call_s", pa.float64()), ("message", pa.string()),
        ("runner", pa.string()), ("emulated", pa.bool_()), ("checked_at", pa.string()), ("machine", pa.string()),
    ]
)  # fmt: skip
assert tuple(WARM_SCHEMA.names) == WARM_FIELDS

WarmKey = tuple[str, str, str, bool]


def warm_key(check: Mapping[str, Any]) -> WarmKey:
    """(model id lowercased, revision, bundle sha256, emulated): the checks of one bundle on one kind of machine."""
    return (str(check["model_id"]).lower(), str(check["revision"]), str(check["sha256"]), bool(check["emulated"]))


def read_warm_checks(root: Path) -> list[dict[str, Any]]:
    """The dataset's warm checks (each valid; an invalid row is left out), or [] when it has none.

    Raises:
        DatasetError: the file is unreadable.
    """
    path = root / WARM_CHECKS_FILE
    if not path.is_file():
        return []
    checks = ({name: row.get(name) for name in WARM_FIELDS} for row in read_rows(path))
    return [check for check in checks if not warm_check_problems(check, name=WARM_CHECKS_FILE)]


def add_warm_checks(root: Path, checks: Iterable[Mapping[str, Any]]) -> int:
    """Merge valid ``checks`` into ``data/warm_checks.parquet`` (atomically); returns how many keys changed.

    Raises:
        DatasetError: a check is invalid (validate first), or the file would pass :data:`MAX_WARM_CHECKS`.
    """
    current = {warm_key(c): c for c in read_warm_checks(root)}
    entries = [{name: check.get(name) for name in WARM_FIELDS} for check in checks]
    for entry in entries:
        if problems := warm_check_problems(entry, name="warm check"):
            raise DatasetError(f"an invalid warm check reached the dataset: {problems[0]}")
    changed = keep_newest(current, entries, key=warm_key, rank=_when)
    if changed:
        if len(current) > MAX_WARM_CHECKS:
            raise DatasetError(f"{WARM_CHECKS_FILE}: more than {MAX_WARM_CHECKS} warm checks")
        table = pa.Table.from_pylist([current[k] for k in sorted(current)], schema=WARM_SCHEMA)
        fsatomic.write_bytes(root / WARM_CHECKS_FILE, parquet_bytes(table))
    return changed


#: A tie of two checks of one key at the same time goes to the less flattering one, the same way in any order.
_TIE = {"verified": 0, "missed": 1, "refused": 2, "error": 3}


def _when(check: Mapping[str, Any]) -> tuple[str, int]:
    when = parse_time(str(check["checked_at"]))  # validated: a real time, compared in UTC
    return (when.isoformat() if when else "", _TIE.get(str(check["status"]), 4))


def warm_queue_paths(listing: Iterable[str]) -> list[str]:
    """From a listing of the dataset repo, what the warm queue reads: the latest view's files and the warm checks."""
    return sorted(p for p in listing if is_latest_file(p) or p == WARM_CHECKS_FILE)
