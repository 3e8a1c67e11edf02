"""``trncat page``: rebuild the catalog Space from the dataset's merged main, committing only what changed.

The page is built from a snapshot of the dataset's ``main`` (never a pull request: what is shown was reviewed),
and committed to the Space's main when a file differs from what the Space holds (nothing changed: no commit).
Nothing is downloaded to tell: the Space's and the dataset's tree listings give each file's git blob id. The
dataset's ``data/`` is downloaded whole; of its scripts (two per model), only those the Space does not already hold
as they are, unless the page is one file, which inlines their texts.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.dataset import SCRIPTS_DIR, tree_digests
from pipeline.errors import RepoNotFoundError
from pipeline.hub import Hub, file_additions, file_deletions, git_blob_id
from pipeline.ids import validate_model_id
from pipeline.page import INLINE_ENTRIES
from pipeline.space.tree import SiteNames, write_site

logger = logging.getLogger(__name__)

#: What the Space is built from: the dataset's data and scripts (not its card or its preview page). The data is
#: downloaded whole (:data:`DATA_PATTERNS`); the scripts are fetched apart, only those the Space lacks.
DATA_PATTERNS = ["data/**"]
DATASET_PATTERNS = [*DATA_PATTERNS, f"{SCRIPTS_DIR}/**"]
#: A file's identity in a tree listing: its LFS sha256 (None for a regular file) and its git blob id.
Listed = tuple[str | None, str]


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


def _held(listed: Listed | None, path: Path, sha256: str) -> bool:
    """Whether the Space's file, as its listing gives it (LFS sha256 or None, git blob id), is the built file."""
    if listed is None:
        return False
    lfs, blob = listed
    return lfs == sha256 if lfs is not None else blob == git_blob_id(path.read_bytes())


def build_space(
    *,
    hub: Hub,
    dataset_repo: str,
    space_repo: str,
    out: Path,
    site_url: str = "",
    note: str | None = None,
    held: Mapping[str, Listed] | None = None,
) -> tuple[str, Path, dict[str, Listed]]:
    """Build the Space tree of the dataset's main into ``out``.

    Args:
        held: the Space's files as its listing gives them (:meth:`pipeline.hub.Hub.file_ids`); a dataset script
            the Space holds as it is is neither downloaded nor in ``out``, and is kept. None: fetch every script.

    Returns:
        The dataset main's sha, ``out``, and the scripts kept (path -> listed identity).

    Raises:
        HubError: (or a child) the Hub failed.
    """
    sha = hub.head_sha(dataset_repo, repo_type="dataset", revision="main")
    listed = hub.file_ids(dataset_repo, revision=sha, repo_type="dataset")
    scripts = {path: ids for path, ids in listed.items() if path.startswith(f"{SCRIPTS_DIR}/")}
    kept: dict[str, Listed] = {}
    # A model with scripts has an entry: past INLINE_ENTRIES of them the page has data files and reads no script text.
    if held and len({path.rsplit("/", 1)[0] for path in scripts}) > INLINE_ENTRIES:
        kept = {path: ids for path, ids in scripts.items() if held.get(path) == ids}
    with tempfile.TemporaryDirectory(prefix="trncat-page-") as tmp:
        snapshot = Path(tmp) / "dataset"
        hub.snapshot(dataset_repo, revision=sha, repo_type="dataset", local_dir=snapshot, allow_patterns=DATA_PATTERNS)
        wanted = sorted(scripts.keys() - kept.keys())
        logger.info(
            "fetching %d of the dataset's %d script files (the Space holds the rest)", len(wanted), len(scripts)
        )
        hub.fetch_files(dataset_repo, wanted, revision=sha, into=snapshot, repo_type="dataset")
        names = SiteNames(
            dataset_repo=dataset_repo, space_repo=space_repo, site_url=site_url, dataset_sha=sha, note=note
        )
        write_site(snapshot, out, names=names, script_paths=sorted(scripts))
    return sha, out, kept


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
        out: Keep the built tree here (default: a temporary folder); the scripts the Space already holds as they
            are are not in it.

    Raises:
        HubError: (or a child) the Hub failed after retries; nothing is half-committed.
    """
    validate_model_id(dataset_repo)
    validate_model_id(space_repo)
    with tempfile.TemporaryDirectory(prefix="trncat-space-") as tmp:
        tree = out or Path(tmp) / "space"
        try:
            held_at: str | None = hub.head_sha(space_repo, repo_type="space", revision="main")
        except RepoNotFoundError:
            held_at = None
        # What the Space holds, from its listing (no file downloaded: 200,000 scripts at 100k models).
        held = {} if held_at is None else hub.file_ids(space_repo, revision=held_at, repo_type="space")
        sha, _, kept = build_space(
            hub=hub,
            dataset_repo=dataset_repo,
            space_repo=space_repo,
            out=tree,
            site_url=site_url,
            note=note,
            held=held,
        )
        built = tree_digests(tree)
        if held_at is None:
            if dry_run:
                return SpaceResult(space=space_repo, dataset_sha=sha, changed=sorted(built), dry_run=True)
            logger.info("creating the Space %s", space_repo)
            hub.create_repo(space_repo, repo_type="space", exist_ok=True)
        result = SpaceResult(space=space_repo, dataset_sha=sha, dry_run=dry_run)

        def operations(parent: str) -> list[Any]:
            now = held if parent == held_at else hub.file_ids(space_repo, revision=parent, repo_type="space")
            # A kept script the Space changed since it was listed (another build committed in between): fetch it.
            if stale := sorted(path for path, ids in kept.items() if now.get(path) != ids):
                hub.fetch_files(dataset_repo, stale, revision=sha, into=tree, repo_type="dataset")
                built.update((path, hashlib.sha256((tree / path).read_bytes()).hexdigest()) for path in stale)
                for path in stale:
                    del kept[path]
            result.changed = sorted(p for p, digest in built.items() if not _held(now.get(p), tree / p, digest))
            result.deleted = sorted(p for p in now if p not in built and p not in kept and p != ".gitattributes")
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
