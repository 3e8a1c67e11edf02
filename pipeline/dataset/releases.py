"""Release diffs kept in the dataset: ``data/releases/<old>--<new>.parquet``, one row per model and task.

Written by ``trncat diff --toolchain OLD NEW --write`` (the rows come from :mod:`pipeline.release`), read by the
Space (the page's "Neuron OLD -> NEW" section and one feed entry per diff). A diff of the same two toolchains
replaces the file: it is a view of the results at the time, which stay the history.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline import fsatomic
from pipeline.dataset.layout import parquet_bytes, read_rows
from pipeline.errors import ConfigError

RELEASES_DIR = "data/releases"
#: A toolchain's name in a file name (``2.33.0``; the demo's ``cpu-run-1``).
_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._+-]{0,39}$")
_TIME = pa.timestamp("us", tz="UTC")
_SIDE = (
    ("speed_low", pa.float64()), ("speed_high", pa.float64()),  # the speed's 95 % interval (pipeline/records/spread.py)
    ("status", pa.string()), ("failure_stage", pa.string()), ("failure_code", pa.string()),
    ("finished_at", _TIME), ("device", pa.string()), ("instance", pa.string()), ("compile_s", pa.float64()),
    ("first_call_s", pa.float64()), ("speed", pa.float64()), ("peak_memory_bytes", pa.float64()),
    ("source", pa.string()),
)  # fmt: skip
#: The deltas between the two sides, each with its verdict: changed, within_noise, no_interval
#: (pipeline.records.spread.verdict).
_DELTAS = ("compile_s", "first_call_s", "speed_pct", "peak_memory_bytes")
RELEASE_SCHEMA = pa.schema(
    [
        *((name, pa.string()) for name in ("old_toolchain", "new_toolchain", "model_id", "task", "kind")),
        *((f"old_{name}", kind) for name, kind in _SIDE),
        *((f"new_{name}", kind) for name, kind in _SIDE),
        *((name, pa.float64()) for name in _DELTAS),
        ("note", pa.string()),
        *((f"{name}_verdict", pa.string()) for name in _DELTAS),
    ]
)


def release_path(old: str, new: str) -> str:
    """``data/releases/<old>--<new>.parquet``.

    Raises:
        ConfigError: a name that cannot be part of a file name.
    """
    for name in (old, new):
        if not _NAME.fullmatch(name) or "--" in name:
            raise ConfigError(f"toolchain name {name[:50]!r} cannot name a release diff file")
    return f"{RELEASES_DIR}/{old}--{new}.parquet"


def write_release_diff(root: Path, *, old: str, new: str, entries: Sequence[dict[str, Any]]) -> Path:
    """Write one diff's entries (``pipeline.release.ReleaseDiff.entries``) into the dataset folder ``root``."""
    path = root / release_path(old, new)
    rows = [{"old_toolchain": old, "new_toolchain": new, **e} for e in entries]
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in RELEASE_SCHEMA} for r in rows], schema=RELEASE_SCHEMA)
    fsatomic.write_bytes(path, parquet_bytes(table))
    return path


def read_release_diffs(root: Path) -> list[dict[str, Any]]:
    """Every release diff of the folder: ``{"old", "new", "entries"}``, the newest (by its rows' dates) first.

    Raises:
        DatasetError: a file is unreadable.
    """
    files = (read_rows(path) for path in sorted((root / RELEASES_DIR).glob("*--*.parquet")))
    diffs = [
        {"old": rows[0]["old_toolchain"], "new": rows[0]["new_toolchain"], "entries": rows} for rows in files if rows
    ]
    newest = [max((e["new_finished_at"] or e["old_finished_at"] for e in d["entries"]), default=None) for d in diffs]
    order = sorted(range(len(diffs)), key=lambda i: (newest[i] is not None, newest[i] or 0), reverse=True)
    return [diffs[i] for i in order]
