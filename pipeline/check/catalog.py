"""The dataset side of ``trncat check``: the family rows of the dataset's merged main (never a PR), or of a folder.

From the Hub: the head of main and a listing of its ``data/families/`` folder, sent together (a process that checked
the dataset at the same head before asks for the head only: the listing of a commit never changes); then the family
index's files (:func:`pipeline.dataset.family_index_paths` names them), downloaded at that commit into the download
cache (a second check on the same commit asks nothing more for them). The index is read as Arrow, once per process
for the same files, and asked only for the rows a check needs (:class:`pipeline.dataset.FamilyIndex`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.dataset import FAMILIES_DIR, MATRIX_FILE, FamilyIndex, family_index_paths, folder_family_index
from pipeline.errors import RepoNotFoundError
from pipeline.hub import together

if TYPE_CHECKING:
    from pipeline.hub import Hub


@dataclass(frozen=True)
class Catalog:
    """The family index of one dataset, and where it was read (``repo@sha`` or a folder)."""

    index: FamilyIndex
    source: str
    #: The dataset folder that holds its stage matrix (``data/matrix.parquet``), or None when it has none.
    matrix_root: Path | None = None


def from_folder(folder: Path) -> Catalog:
    """The family rows of a local dataset folder.

    Raises:
        DatasetError: no such folder, it holds no dataset, or a file is unreadable.
    """
    return Catalog(index=folder_family_index(folder), source=str(folder), matrix_root=folder)


def from_repo(hub: Hub, repo: str) -> Catalog:
    """The family rows of the Hub dataset ``repo`` at the head of its main branch.

    Raises:
        RepoNotFoundError: no such dataset.
        HubError: the Hub failed.
        DatasetError: a file it holds is unreadable.
    """
    # The listing is of main, the reads at the sha: a commit between the two can only make a file look absent
    # (read as an index without it), never mix two commits' files.
    key = (hub.endpoint, repo)
    head = functools.partial(hub.head_sha, repo, repo_type="dataset", revision="main")
    listing = functools.partial(hub.list_files, repo, revision="main", under=FAMILIES_DIR, recursive=False)
    known = _PATHS.get(key)
    if known is None:
        sha, files = together.results(head, listing)
        paths = family_index_paths(files)
    else:  # the head alone; the listing only when main has moved since
        sha = head()
        paths = known[1] if sha == known[0] else family_index_paths(listing())
    index = _index(hub, repo, sha, paths)
    if index is None:
        index = FamilyIndex.read(Path(), [])
    else:
        _PATHS[key] = (sha, paths)
    return Catalog(index=index, source=f"{repo}@{sha[:12]}", matrix_root=_matrix_root(hub, repo, sha))


#: (Hub endpoint, dataset repo) -> (sha, its index's paths) of the last check of the repo in this process: the files
#: of a commit never change, so a check that finds main at the same commit asks the Hub for the head only.
_PATHS: dict[tuple[str, str], tuple[str, list[str]]] = {}


#: (Hub endpoint, dataset repo, sha) -> the folder its stage matrix was downloaded into, or None: asked once per commit.
_MATRIX: dict[tuple[str, str, str], Path | None] = {}


def _matrix_root(hub: Hub, repo: str, sha: str) -> Path | None:
    key = (hub.endpoint, repo, sha)
    if key not in _MATRIX:
        try:
            [path] = hub.download_all(repo, [MATRIX_FILE], revision=sha, repo_type="dataset")
            _MATRIX[key] = path.parents[1]
        except RepoNotFoundError:  # a dataset from before the matrix
            _MATRIX[key] = None
    return _MATRIX[key]


def _index(hub: Hub, repo: str, sha: str, paths: list[str]) -> FamilyIndex | None:
    if not paths:
        return None
    try:  # (a download cache holding every one at the sha: no download call)
        local = hub.download_all(repo, paths, revision=sha, repo_type="dataset")
    except RepoNotFoundError:  # gone at the sha (the race above): read as an empty index
        return None
    root = local[0].parents[len(Path(paths[0]).parts) - 1]  # the snapshot folder the files landed in
    stamps = tuple((p.stat().st_size, p.stat().st_mtime_ns) for p in map(Path, local))
    return _read_index(root, tuple(paths), stamps)


@functools.lru_cache(maxsize=4)
def _read_index(root: Path, paths: tuple[str, ...], stamps: tuple[tuple[int, int], ...]) -> FamilyIndex:
    """The index in ``paths`` under ``root``, read once per process for the same files (``stamps``: their sizes
    and times): a process that checks several models at one commit of the dataset reads its index once (the index
    is immutable: Arrow tables)."""
    del stamps  # in the key only: a file rewritten in place is read again
    return FamilyIndex.read(root, paths)
