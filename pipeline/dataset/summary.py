"""``data/summary.json``: the small file that lets a publish skip the whole latest view.

It holds what the card shows of the latest view (rows per task, device and status, per toolchain, the total; see
:func:`pipeline.render.card_counts`), the card's Parquet views, and the latest view's shard layout (the shards
that exist, how many hex digits name the longest, and, once a dataset named by model has more than one shard,
``"shard_by": "model"``; see :mod:`pipeline.dataset.shards`). A build updates it from the changes it
made (a key's old row out, its new row in), so a publish reads one small JSON file and only the latest
shards its records touch. A dataset without it (written before it existed) gets it on its next full build.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline import fsatomic, render
from pipeline.dataset.layout import LATEST_DIR, SUMMARY_FILE

logger = logging.getLogger(__name__)

#: 2: counts per (task, device, status), as the card shows them since the device split.
SUMMARY_VERSION = 2


def read_summary(root: Path) -> dict[str, Any] | None:
    """The folder's summary, or None when it has none or it is unreadable (then the caller rebuilds it)."""
    path = root / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        logger.warning("%s is unreadable (%s): it is rebuilt from the latest view", path, exc)
        return None
    keys = {"version", "total", "counts", "toolchains", "shard_digits", "shards", "configs", "hardware"}
    if not isinstance(data, dict) or data.get("version") != SUMMARY_VERSION or not keys <= set(data):
        logger.warning("%s has an unknown shape: it is rebuilt from the latest view", path)
        return None
    if problem := _type_problem(data):  # a value of the wrong type would stop the build with a traceback
        logger.warning("%s: %s: it is rebuilt from the latest view", path, problem)
        return None
    return data


_SHARD = re.compile(r"all|[0-9a-f]{1,8}")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _type_problem(data: dict[str, Any]) -> str | None:
    """What in a summary of the right keys has the wrong type (the first such field), or None."""
    if not _count(data["total"]):
        return "total is not a count"
    for name in ("counts", "toolchains"):
        rows = data[name]
        if not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) == 4 and all(isinstance(v, str) for v in r[:3]) and _count(r[3])
            for r in rows
        ):
            return f"{name} is not a list of [text, text, text, count]"
    if not _count(data["shard_digits"]) or data["shard_digits"] > 8:
        return "shard_digits is not a count up to 8"
    shards = data["shards"]
    if not isinstance(shards, list) or not all(isinstance(n, str) and _SHARD.fullmatch(n) for n in shards):
        return "shards is not a list of shard names (hex digits, or all)"
    if data.get("shard_by", "model") != "model":
        return "shard_by is not 'model'"
    for name in ("configs", "hardware"):
        if not isinstance(data[name], list) or not all(isinstance(v, str) for v in data[name]):
            return f"{name} is not a list of text"
    return None


def summarize(
    rows: Iterable[dict[str, Any]], *, shard_digits: int, shards: Iterable[str], by_model: bool = True
) -> dict[str, Any]:
    """A summary of every latest row (what a full build writes); ``by_model``: the shards are named by model
    (``shard_by``, :mod:`pipeline.dataset.shards`; written once there is more than ``all``)."""
    rows = list(rows)
    names = sorted(set(shards))
    extra = {"shard_by": "model"} if by_model and names not in ([], ["all"]) else {}
    return {
        **extra,
        "version": SUMMARY_VERSION,
        **render.card_counts(rows),
        "shard_digits": shard_digits,
        "shards": names,
        "configs": [],
        "hardware": sorted({r["hardware"] for r in rows}),
    }


def apply_changes(summary: dict[str, Any], changes: Iterable[tuple[dict[str, Any] | None, dict[str, Any]]]) -> None:
    """Fold (old row or None, new row) pairs of a build into ``summary``, in place (counts, total, hardware)."""
    changes = list(changes)
    counts = {tuple(k[:-1]): k[-1] for k in summary["counts"]}
    toolchains = {tuple(k[:-1]): k[-1] for k in summary["toolchains"]}
    # The old rows' counts out and the new rows' in, counted in two calls (not two per change).
    gone = render.card_counts(before for before, _ in changes if before is not None)
    came = render.card_counts(after for _, after in changes)
    for part, sign in ((gone, -1), (came, 1)):
        for *key, n in part["counts"]:
            counts[tuple(key)] = counts.get(tuple(key), 0) + sign * n
        for *key, n in part["toolchains"]:
            toolchains[tuple(key)] = toolchains.get(tuple(key), 0) + sign * n
    summary["total"] += sum(before is None for before, _ in changes)
    if changes:
        summary["hardware"] = sorted({*summary["hardware"], *(after["hardware"] for _, after in changes)})
    summary["counts"] = [[*k, n] for k, n in sorted(counts.items()) if n]
    summary["toolchains"] = [[*k, n] for k, n in sorted(toolchains.items()) if n]


def write_summary(root: Path, summary: dict[str, Any]) -> None:
    """Write the summary file, unless it already says exactly this (a sweep often leaves the counts as they were)."""
    path, text = root / SUMMARY_FILE, json.dumps(summary, indent=1, sort_keys=True) + "\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    fsatomic.write_text(path, text)


def shard_paths(summary: dict[str, Any]) -> list[str]:
    """The latest shards' paths in the repo, as the summary lists them."""
    return [f"{LATEST_DIR}/{name}.parquet" for name in summary["shards"]]
