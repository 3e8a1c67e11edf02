"""The dataset's front files: the card (README.md) and the catalog page (index.html), from the folder's data."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import fsatomic, render
from pipeline.dataset.layout import (
    CARD_FILE,
    CHANGES_DIR,
    EXCLUSIONS_FILE,
    FAMILIES_FILE,
    LATEST_DIR,
    PAGE_FILE,
    RANKINGS_DIR,
    RESULTS_DIR,
)
from pipeline.dataset.read import (
    LatestBatches,
    ScriptTexts,
    iter_results,
    read_exclusions,
    read_latest,
    read_rankings,
)
from pipeline.dataset.releases import read_release_diffs
from pipeline.dataset.shards import FAMILIES_DIR, families_sharded
from pipeline.dataset.warm import read_warm_checks
from pipeline.page import HISTORY_READ, LATEST_READ, render_page


def card_configs(root: Path, *, known: Iterable[str] = (), sharded: bool = False) -> list[tuple[str, str]]:
    """The card's YAML ``configs``: (name, file glob) of each Parquet view the folder holds, or that
    ``known`` names (views the repo holds beyond a partial mirror); ``sharded``: the repo's family index is in
    shards (:func:`pipeline.dataset.shards.families_sharded`), which a partial mirror may not show."""
    known = set(known)
    configs = [("latest", f"{LATEST_DIR}/*.parquet"), ("results", f"{RESULTS_DIR}/*.parquet")]
    if "rankings" in known or any((root / RANKINGS_DIR).glob("*.parquet")):
        configs.append(("rankings", f"{RANKINGS_DIR}/*.parquet"))
    if "exclusions" in known or (root / EXCLUSIONS_FILE).is_file():
        configs.append(("exclusions", EXCLUSIONS_FILE))
    if "changes" in known or any((root / CHANGES_DIR).glob("*.parquet")):
        configs.append(("changes", f"{CHANGES_DIR}/*.parquet"))
    if sharded or any((root / FAMILIES_DIR).glob("*.parquet")):  # the one file is gone once the index is split
        configs.append(("families", f"{FAMILIES_DIR}/*.parquet"))
    elif "families" in known or (root / FAMILIES_FILE).is_file():
        configs.append(("families", FAMILIES_FILE))
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
    )


def write_front_files(
    root: Path,
    *,
    latest: list[dict[str, Any]] | None = None,
    page: bool = True,
    counts: dict[str, Any] | None = None,
    known: Iterable[str] = (),
    names: CardNames | None = None,
    held: Callable[[str, bytes], bool] | None = None,
) -> None:
    """(Re)write README.md (the card) and index.html (a preview of the catalog page, for the PR's reviewer; the
    public page is the Space's, built from main) from the folder's current content.

    ``counts`` (the summary file's, see :mod:`pipeline.dataset.summary`) and ``known`` views make the same
    card on a partial mirror; the page needs the whole latest view. On such a mirror, a card the repo
    already holds byte for byte (``held``, see :func:`pipeline.dataset.build.build`) is not written.
    """
    configs = card_configs(root, known=known, sharded=families_sharded(counts))
    repo, space = (names.repo, names.space) if names else (None, None)
    if counts is not None and not page:
        text = render.dataset_card(counts=counts, configs=configs, repo=repo, space=space).encode("utf-8")
        if held is None or not held(CARD_FILE, text):
            fsatomic.write_bytes(root / CARD_FILE, text)
        return
    latest = read_latest(root) if latest is None else latest
    card = render.dataset_card(rows=latest, counts=counts, configs=configs, repo=repo, space=space)
    fsatomic.write_text(root / CARD_FILE, card)
    if page:
        fsatomic.write_text(root / PAGE_FILE, page_html(root, latest=latest))
