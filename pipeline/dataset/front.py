"""The dataset's front: the card (README.md), the catalog page (index.html) and ``data/summary.json``.

The summary is the small file that lets a publish skip the whole latest view. It holds what the card shows of the
latest view (rows per task, device and status, per toolchain, the total; see :func:`pipeline.render.card_counts`),
the card's Parquet views, and the names of the latest view's shards (:mod:`pipeline.dataset.shards`). A build
updates it from the changes it made (a key's old row out, its new row in), so a publish reads one small JSON file
and only the latest shards its records touch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import fsatomic, render
from pipeline.dataset.layout import (
    CARD_FILE,
    CHANGES_DIR,
    EXCLUSIONS_FILE,
    FAMILIES_DIR,
    INFERENCEX_FILE,
    LATEST_DIR,
    MATRIX_FILE,
    PAGE_FILE,
    RANKINGS_DIR,
    RESULTS_DIR,
    SERVING_POINTS_FILE,
    SUMMARY_FILE,
)
from pipeline.dataset.matrix import read_matrix
from pipeline.dataset.read import (
    LatestBatches,
    ScriptTexts,
    iter_results,
    read_exclusions,
    read_latest,
    read_rankings,
)
from pipeline.dataset.releases import read_release_diffs
from pipeline.dataset.warm import read_warm_checks
from pipeline.page import HISTORY_READ, LATEST_READ, render_page
from pipeline.records import schema_validator

logger = logging.getLogger(__name__)


def card_configs(root: Path, *, known: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The card's YAML ``configs``: (name, file glob) of each Parquet view the folder holds, or that ``known`` names
    (views the repo holds beyond a partial mirror). A view's glob never changes once it is there."""
    known = set(known)
    configs = [("latest", f"{LATEST_DIR}/*.parquet"), ("results", f"{RESULTS_DIR}/*.parquet")]
    for name, glob in (
        ("rankings", f"{RANKINGS_DIR}/*.parquet"),
        ("exclusions", EXCLUSIONS_FILE),
        ("changes", f"{CHANGES_DIR}/*.parquet"),
        ("families", f"{FAMILIES_DIR}/*.parquet"),
        ("serving", SERVING_POINTS_FILE),
        ("inferencex", INFERENCEX_FILE),
        ("matrix", MATRIX_FILE),
    ):
        if name in known or any(root.glob(glob)):
            configs.append((name, glob))
    return configs


@dataclass(frozen=True)
class CardNames:
    """The repo ids the card names: the dataset itself and the Space that shows it."""

    repo: str
    space: str


def page_html(root: Path, *, latest: list[dict[str, Any]] | None = None) -> str:
    """The catalog page of the dataset folder ``root``.

    Raises:
        DatasetError: a Parquet file is unreadable.
    """
    return render_page(
        # read as the Space's build reads it: the page's columns, a batch at a time (pipeline.page.rows)
        latest=LatestBatches(root, LATEST_READ) if latest is None else latest,
        history=iter_results(root, HISTORY_READ),
        rankings=read_rankings(root),
        exclusions=read_exclusions(root),
        scripts=ScriptTexts(root),
        releases=read_release_diffs(root),
        warm_checks=read_warm_checks(root),
        matrix_rows=read_matrix(root),
    )


def write_front_files(
    root: Path,
    *,
    latest: list[dict[str, Any]] | None = None,
    page: bool = True,
    summary: dict[str, Any] | None = None,
    names: CardNames | None = None,
    held: Callable[[str, bytes], bool] | None = None,
) -> None:
    """(Re)write README.md (the card) and index.html (a preview of the catalog page, for the PR's reviewer; the
    public page is the Space's, built from main) from the folder's current content.

    ``summary`` (the summary file's, :func:`read_summary`: its counts and the views it knows) makes the same card on
    a partial mirror, and is then written with the views the card names; the page needs the whole latest view. On
    such a mirror, a card the repo already holds byte for byte (``held``, see :func:`pipeline.dataset.build.build`)
    is not written.
    """
    configs = card_configs(root, known=summary["configs"] if summary is not None else ())
    repo, space = (names.repo, names.space) if names else (None, None)
    if summary is not None and not page:
        text = render.dataset_card(counts=summary, configs=configs, repo=repo, space=space).encode("utf-8")
        if held is None or not held(CARD_FILE, text):
            fsatomic.write_bytes(root / CARD_FILE, text)
    else:
        latest = read_latest(root) if latest is None else latest
        card = render.dataset_card(rows=latest, counts=summary, configs=configs, repo=repo, space=space)
        fsatomic.write_text(root / CARD_FILE, card)
        if page:
            fsatomic.write_text(root / PAGE_FILE, page_html(root, latest=latest))
    if summary is not None:  # after the card: a summary that names a view is one whose card does too
        summary["configs"] = [name for name, _ in configs]
        said = json.dumps(summary, indent=1, sort_keys=True) + "\n"
        try:  # not written when it already says exactly this (a sweep often leaves the counts as they were)
            if (root / SUMMARY_FILE).read_text(encoding="utf-8") == said:
                return
        except (OSError, UnicodeDecodeError):
            pass
        fsatomic.write_text(root / SUMMARY_FILE, said)


#: The summary's shape (``schemas/summary.schema.json``: the counts per task, device and status; the views; the latest
#: view's shard names).
SUMMARY_VERSION = 1


def read_summary(root: Path) -> dict[str, Any] | None:
    """The folder's summary, or None when it has none, it is unreadable or it does not match
    ``schemas/summary.schema.json`` (a value of the wrong type would stop the build with a traceback): then the caller
    rebuilds it."""
    path = root / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        logger.warning("%s is unreadable (%s): it is rebuilt from the latest view", path, exc)
        return None
    error = next(iter(schema_validator("summary").iter_errors(data)), None)
    if error is not None:
        where = ".".join(map(str, error.instance_path)) or "its top level"
        logger.warning("%s: %s: %s: it is rebuilt from the latest view", path, where, error.message)
        return None
    return dict(data)


def summarize(rows: Iterable[dict[str, Any]], *, shards: Iterable[str]) -> dict[str, Any]:
    """A summary of every latest row (what a full build writes), the latest view being in ``shards``."""
    rows = list(rows)
    return {
        "version": SUMMARY_VERSION,
        **render.card_counts(rows),
        "shards": sorted(set(shards)),
        "configs": [],
        "hardware": sorted({r["hardware"] for r in rows}),
    }


def apply_changes(summary: dict[str, Any], changes: Iterable[tuple[dict[str, Any] | None, dict[str, Any]]]) -> None:
    """Fold (old row or None, new row) pairs of a build into ``summary``, in place (counts, total, hardware)."""
    changes = list(changes)
    # The old rows' counts out and the new rows' in, counted in two calls (not two per change).
    gone = render.card_counts(before for before, _ in changes if before is not None)
    came = render.card_counts(after for _, after in changes)
    for name in ("counts", "toolchains"):
        tally = {tuple(k[:-1]): k[-1] for k in summary[name]}
        for part, sign in ((gone, -1), (came, 1)):
            for *key, n in part[name]:
                tally[tuple(key)] = tally.get(tuple(key), 0) + sign * n
        summary[name] = [[*k, n] for k, n in sorted(tally.items()) if n]
    summary["total"] += sum(before is None for before, _ in changes)
    if changes:
        summary["hardware"] = sorted({*summary["hardware"], *(after["hardware"] for _, after in changes)})
