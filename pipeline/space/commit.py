"""``trncat page``: rebuild the catalog Space from the dataset's merged main, committing only what changed.

The page is built from a snapshot of the dataset's ``main`` (never a pull request: what is shown was reviewed),
and committed to the Space's main when a file differs from what the Space holds (nothing changed: no commit).
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.dataset import tree_digests
from pipeline.errors import RepoNotFoundError
from pipeline.hub import Hub, file_additions, file_deletions, git_blob_id
from pipeline.ids import validate_model_id
from pipeline.space.tree import SiteNames, write_site

logger = logging.getLogger(__name__)

#: What the Space is built from: the dataset's data and scripts (not its card or its preview page).
DATASET_PATTERNS = ["data/**", "scripts/**"]


@dataclass
class SpaceResult:
    space: str
    dataset_sha: str
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    commit: str | None = None
    dry_run: bool = False

    @property
    def published(self) -> bool:
        return self.commit is not None


def _held(listed: tuple[str | None, str] | None, path: Path, sha256: str) -> bool:
    """Whether the Space's file, as its listing gives it (LFS sha256 or None, git blob id), is the built file."""
    if listed is None:
        return False
    lfs, blob = listed
    return lfs == sha256 if lfs is not None else blob == git_blob_id(path.read_bytes())


def build_space(
    *, hub: Hub, dataset_repo: str, space_repo: str, out: Path, site_url: str = "", note: str | None = None
) -> tuple[str, Path]:
    """Build the Space tree of the dataset's main into ``out``; returns (dataset main sha, ``out``).

    Raises:
        HubError: (or a child) the Hub failed.
    """
    sha = hub.head_sha(dataset_repo, repo_type="dataset", revision="main")
    with tempfile.TemporaryDirectory(prefix="trncat-page-") as tmp:
        snapshot = Path(tmp) / "dataset"
        hub.snapshot(
            dataset_repo, revision=sha, repo_type="dataset", local_dir=snapshot, allow_patterns=DATASET_PATTERNS
        )
        names = SiteNames(
            dataset_repo=dataset_repo, space_repo=space_repo, site_url=site_url, dataset_sha=sha, note=note
        )
        write_site(snapshot, out, names=names)
    return sha, out


def publish_space(
    *,
    hub: Hub,
    dataset_repo: str,
    space_repo: str,
    site_url: str = "",
    note: str | None = None,
    dry_run: bool = False,
    out: Path | None = None,
) -> SpaceResult:
    """Rebuild the Space ``space_repo`` from the main branch of ``dataset_repo``; commit only what changed.

    Args:
        hub: The Hub client (with a token that may write to the Space, unless ``dry_run``).
        dataset_repo: The dataset repo id.
        space_repo: The Space repo id (created as a static Space when missing).
        site_url: The page's address (feed links point into it); default the Space's page on the Hub.
        note: A sentence shown at the top of the page.
        dry_run: Build and compare, commit nothing.
        out: Keep the built tree here (default: a temporary folder).

    Raises:
        HubError: (or a child) the Hub failed after retries; nothing is half-committed.
    """
    validate_model_id(dataset_repo)
    validate_model_id(space_repo)
    with tempfile.TemporaryDirectory(prefix="trncat-space-") as tmp:
        tree = out or Path(tmp) / "space"
        sha, _ = build_space(
            hub=hub, dataset_repo=dataset_repo, space_repo=space_repo, out=tree, site_url=site_url, note=note
        )
        built = tree_digests(tree)
        try:
            hub.head_sha(space_repo, repo_type="space", revision="main")
        except RepoNotFoundError:
            if dry_run:
                return SpaceResult(space=space_repo, dataset_sha=sha, changed=sorted(built), dry_run=True)
            logger.info("creating the Space %s", space_repo)
            hub.create_repo(space_repo, repo_type="space", exist_ok=True)
        result = SpaceResult(space=space_repo, dataset_sha=sha, dry_run=dry_run)

        def operations(parent: str) -> list[Any]:
            # What the Space holds, from its listing (no file downloaded: 200,000 scripts at 100k models).
            now = hub.file_ids(space_repo, revision=parent, repo_type="space")
            result.changed = sorted(p for p, digest in built.items() if not _held(now.get(p), tree / p, digest))
            result.deleted = sorted(p for p in now if p not in built and p != ".gitattributes")
            if dry_run:
                return []
            return file_additions({p: tree / p for p in result.changed}) + file_deletions(result.deleted)

        if dry_run:
            operations(hub.head_sha(space_repo, repo_type="space", revision="main"))
            return result
        commit = hub.commit(
            space_repo,
            operations_factory=operations,
            message=f"Catalog page from {dataset_repo}@{sha[:12]}",
            description=f"Rebuilt by trncat from the main branch of datasets/{dataset_repo} at {sha}.",
            repo_type="space",
        )
        if commit.created:
            result.commit = commit.sha
        return result
