"""Partial mirrors of a remote dataset repo: which files a publish or a queue needs, and what a change touched.

A publish builds its commit on a mirror holding only the latest view, the newest rankings, the exclusions,
the front files and the results files that could already hold its records; a queue needs only the results.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from pathlib import Path

from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    FRONT_FILES,
    RANKINGS_DIR,
    is_latest_file,
    is_results_file,
    newest_rankings,
    results_files_since,
)


def tree_digests(root: Path) -> dict[str, str]:
    """path -> sha256 of the dataset files under ``root`` (client caches and temp files left out)."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and not any(part.startswith(".") for part in relative.split("/")):
            out[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


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
    """Which remote files a publish downloads: the latest view, the newest rankings, exclusions, card, page,
    and the results files that could already hold records finished at ``since`` or later (none, for new runs)."""
    remote = set(remote_files)
    wanted = {p for p in remote if is_latest_file(p)}
    wanted.update(results_files_since([p for p in remote if is_results_file(p)], since))
    newest, others = newest_rankings(p for p in remote if p.startswith(f"{RANKINGS_DIR}/") and p.endswith(".parquet"))
    wanted.update(newest)
    wanted.update(others)
    wanted.update(p for p in (EXCLUSIONS_FILE, *FRONT_FILES, *extra) if p in remote)
    return sorted(wanted)


def results_paths(remote_files: Iterable[str]) -> list[str]:
    """The results files among a repo's files (what the queue reads to skip measured models)."""
    return sorted(p for p in remote_files if is_results_file(p))


def migration_paths(remote_files: Iterable[str]) -> list[str]:
    """The files a migration to the current layout rewrites: every results, latest and rankings file."""
    return sorted(
        p
        for p in remote_files
        if is_results_file(p) or is_latest_file(p) or (p.startswith(f"{RANKINGS_DIR}/") and p.endswith(".parquet"))
    )
