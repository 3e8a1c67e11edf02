"""The dataset side of ``trncat check``: the family rows of the dataset's merged main (never a PR), or of a folder.

From the Hub, the latest view comes through its family index (:mod:`pipeline.dataset`): one request for the
head of main and one GET of ``data/families.parquet`` at that commit, whatever the dataset's size. A dataset
without the index (written before layout 4) is read from its latest shards instead, as ``data/summary.json``
lists them (one GET each, sent together), which costs a request per shard.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.dataset import (
    FAMILIES_FILE,
    LATEST_DIR,
    SUMMARY_FILE,
    family_rows,
    family_view,
    read_families,
    read_latest,
    read_summary,
    require_dataset,
    shard_paths,
)

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Catalog:
    """The family rows of one dataset, and where they were read (``repo@sha`` or a folder)."""

    rows: list[dict[str, Any]]
    source: str


def from_folder(folder: Path) -> Catalog:
    """The family rows of a local dataset folder (its index, else its whole latest view).

    Raises:
        DatasetError: no such folder, it holds no dataset, or a file is unreadable.
    """
    return Catalog(rows=family_view(require_dataset(folder)), source=str(folder))


def from_repo(hub: Hub, repo: str, *, work: Path | None = None) -> Catalog:
    """The family rows of the Hub dataset ``repo`` at the head of its main branch.

    Raises:
        RepoNotFoundError: no such dataset.
        HubError: the Hub failed.
        DatasetError: a file it holds is unreadable.
    """
    sha = hub.head_sha(repo, repo_type="dataset", revision="main")
    with tempfile.TemporaryDirectory(prefix="trncat-check-", dir=work) as tmp:
        root = Path(tmp)
        hub.fetch_files(repo, [FAMILIES_FILE], revision=sha, into=root)
        rows = read_families(root)
        if rows is None:
            logger.info("%s has no %s (a dataset before layout 4): reading its latest shards", repo, FAMILIES_FILE)
            hub.fetch_files(repo, [SUMMARY_FILE], revision=sha, into=root)
            summary = read_summary(root)
            shards = (
                shard_paths(summary)
                if summary is not None
                else [p for p in hub.list_files(repo, revision=sha, under=LATEST_DIR) if p.endswith(".parquet")]
            )
            hub.fetch_files(repo, shards, revision=sha, into=root)
            rows = family_rows(read_latest(root))
    return Catalog(rows=rows, source=f"{repo}@{sha[:12]}")
