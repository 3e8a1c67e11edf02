"""Partial mirrors of a remote dataset repo: which files a publish or a queue needs, and what a change touched.

A publish builds its commit on a mirror holding ``data/summary.json``, the latest shards its records touch
(:mod:`pipeline.dataset.shards`), and the results files that could already hold its records
(:func:`summary_paths`); a dataset without a summary gets its whole latest view mirrored once
(:func:`publish_paths`), which writes the summary.
A queue needs only the results.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline.dataset.layout import (
    CARD_FILE,
    EXCLUSIONS_FILE,
    RANKINGS_DIR,
    SCRIPT_FILES,
    is_latest_file,
    is_results_file,
    newest_rankings,
    results_files_since,
    script_folder,
)
from pipeline.dataset.shards import latest_shard_path, model_shard
from pipeline.records import column_value


def tree_digests(root: Path) -> dict[str, str]:
    """path -> sha256 of the dataset files under ``root`` (client caches and temp files left out)."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)
    }


def overlay_files(overlay: Path | None) -> dict[str, Path]:
    """Discovery outputs to publish along: rankings snapshots and the exclusions (path in repo -> file)."""
    if overlay is None:
        return {}
    files = {f"{RANKINGS_DIR}/{p.name}": p for p in sorted((overlay / RANKINGS_DIR).glob("*.parquet"))}
    if (overlay / EXCLUSIONS_FILE).is_file():
        files[EXCLUSIONS_FILE] = overlay / EXCLUSIONS_FILE
    return files


def publish_paths(
    remote_files: Iterable[str], *, extra: Iterable[str] = (), since: dt.datetime | None = None
) -> list[str]:
    """Which remote files a publish downloads from a dataset without a summary file (a new one, or one whose summary
    is unreadable): the whole latest view (the summary is counted from it), the newest rankings and the exclusions
    (the card names their views), and the results files that could already hold records finished at ``since`` or
    later (none, for new runs). The card is rewritten and the page is not built, so neither is downloaded."""
    remote = set(remote_files)
    wanted = {p for p in remote if is_latest_file(p)}
    wanted.update(results_files_since([p for p in remote if is_results_file(p)], since))
    newest, others = newest_rankings(p for p in remote if p.startswith(f"{RANKINGS_DIR}/") and p.endswith(".parquet"))
    wanted.update(newest, others)
    wanted.update(p for p in (EXCLUSIONS_FILE, *extra) if p in remote)
    return sorted(wanted)


def summary_paths(
    summary: dict[str, Any],
    records: Iterable[dict[str, Any]],
    *,
    remote_results: Iterable[str],
    since: dt.datetime | None,
    extra: Iterable[str] = (),
) -> list[str]:
    """Which remote files a publish downloads when the dataset has ``data/summary.json``: the latest shards of the
    records' models (a model's whole set of rows, every task and hardware, so the scripts come from all of them), the
    results files that could already hold the records, and the overlay's paths (to tell an unchanged snapshot). The
    family shards are written from the latest shards, and never downloaded."""
    models = {column_value(r, "model_id") for r in records}
    wanted = set(results_files_since(list(remote_results), since))
    shards = {model_shard(model_id, summary["shards"]) for model_id in models}
    wanted.update(latest_shard_path(name) for name in shards & set(summary["shards"]))
    wanted.update(extra)
    return sorted(wanted)


def held_paths(records: Iterable[dict[str, Any]]) -> list[str]:
    """The files a publish of ``records`` rewrites but leaves out when the repo holds them byte for byte (see
    :func:`pipeline.dataset.build.build`'s ``held``): the card and the scripts of every model they name."""
    models = {column_value(r, "model_id") for r in records}
    return [CARD_FILE, *sorted(f"{script_folder(model_id)}/{name}" for model_id in models for name in SCRIPT_FILES)]


def results_paths(remote_files: Iterable[str]) -> list[str]:
    """The results files among a repo's files (what the queue reads to skip measured models)."""
    return sorted(p for p in remote_files if is_results_file(p))
