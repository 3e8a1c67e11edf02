"""On-disk storage of the local hub: repos with real commit history, content-addressed blobs, refs, PRs.

Layout under ``root``::

    blobs/<sha256>                         every file content, once
    repos/<type>s/<org>/<name>/meta.json   listing metadata (pipeline_tag, tags, downloads, ...)
    repos/<type>s/<org>/<name>/refs.json   {"main": sha, "refs/pr/1": sha}
    repos/<type>s/<org>/<name>/commits/<sha>.json   {sha, parent, message, date, changes: {path: entry|null}}
    repos/<type>s/<org>/<name>/discussions.json

A commit stores what it changed (an entry per added or replaced path, null per deleted one), never the whole
tree: in memory each commit's tree (:class:`~pipeline.localhub.tree.Tree`) is its parent's with those changes,
sharing every chunk of paths they do not touch, so a commit costs what it changes whatever the repo's size.

One process owns a root. Reads are served from memory (a 5,000-model listing must not read 5,000 files per
request); every write goes to disk first, atomically, then to memory.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from pipeline.errors import StoreError
from pipeline.localhub.discussions import DiscussionStore
from pipeline.localhub.files import now, write_json
from pipeline.localhub.repo import Repo
from pipeline.localhub.tree import Tree

REPO_TYPES = ("model", "dataset", "space")
#: Size from which the real Hub asks for LFS whatever the name (10 MB).
LFS_THRESHOLD = 10 * 1024 * 1024
#: The patterns of the Hub's default .gitattributes that matter here: binaries go through LFS.
LFS_PATTERNS = (
    "*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.mlmodel *.model *.msgpack *.npy *.npz *.onnx "
    "*.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar *.safetensors *.tar *.tflite *.tgz *.wasm *.xz *.zip "
    "*.zst *.png *.jpg *.jpeg *.webp *.gguf"
).split()
DEFAULT_GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS).encode()


_SHA256 = re.compile(r"[0-9a-f]{64}")
#: One part of a repo id (org or name): never empty, ``.`` or ``..``, never a path separator.
_REPO_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")


def check_sha256(oid: object) -> str:
    """``oid`` when it is a 64-hex sha256 (the only name a blob has on disk).

    Raises:
        StoreError: 400 for anything else (``../../id_rsa`` must never become a path).
    """
    if not isinstance(oid, str) or not _SHA256.fullmatch(oid):
        raise StoreError(f"Bad oid {str(oid)[:80]!r}: expected 64 hex digits (sha256)", status=400)
    return oid


def git_blob_sha(data: bytes) -> str:
    """The git object id of a blob, as the Hub reports it for regular files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id, not security


def is_lfs_path(path: str, size: int) -> bool:
    """Whether the Hub would store ``path`` through LFS."""
    name = path.rsplit("/", 1)[-1]
    return size >= LFS_THRESHOLD or any(fnmatch.fnmatch(name, p) for p in LFS_PATTERNS)


class LocalHubStore(DiscussionStore):
    """Repos of the local hub on disk; usable without HTTP to seed a hub.

    Args:
        root: Folder holding everything (created if missing).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.blobs = self.root / "blobs"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._repos: dict[tuple[str, str], Repo] = {}
        self._counter = 0
        self._load()

    # -- loading -------------------------------------------------------------------------------------
    def _load(self) -> None:
        for meta_path in sorted((self.root / "repos").glob("*s/*/*/meta.json")):
            folder = meta_path.parent
            repo_type = folder.parent.parent.name[:-1]
            repo = Repo(
                repo_id=f"{folder.parent.name}/{folder.name}",
                repo_type=repo_type,
                path=folder,
                meta=json.loads(meta_path.read_text()),
                refs=json.loads((folder / "refs.json").read_text()),
            )
            for commit_path in (folder / "commits").glob("*.json"):
                commit = json.loads(commit_path.read_text())
                repo.commits[commit["sha"]] = commit
            _build_trees(repo.commits)
            discussions = folder / "discussions.json"
            if discussions.exists():
                repo.discussions = json.loads(discussions.read_text())
            self._repos[(repo_type, repo.repo_id)] = repo

    # -- repos ---------------------------------------------------------------------------------------
    def get(self, repo_id: str, *, repo_type: str = "model") -> Repo:
        """The repo, or a 404 RepoNotFound StoreError. As on the Hub, an id resolves without case (its answers
        then carry the repo's own spelling)."""
        repo = self._repos.get((repo_type, repo_id))
        if repo is None:
            folded = (repo_type, repo_id.casefold())
            repo = next((r for (t, name), r in self._repos.items() if (t, name.casefold()) == folded), None)
        if repo is None:
            raise StoreError(f"Repository {repo_type}s/{repo_id} not found", status=404, code="RepoNotFound")
        return repo

    def repos(self, repo_type: str) -> list[Repo]:
        """All repos of one type, in creation order."""
        return [r for (t, _), r in self._repos.items() if t == repo_type]

    def create_repo(
        self, repo_id: str, *, repo_type: str = "model", metadata: dict[str, Any] | None = None, exist_ok=False
    ) -> Repo:
        """Create a repo with an initial commit holding the Hub's default ``.gitattributes``.

        Args:
            repo_id: ``org/name``.
            repo_type: ``model``, ``dataset`` or ``space``.
            metadata: Listing fields: pipeline_tag, tags, downloads, likes, trendingScore, gated (False,
                "auto", "manual"), library_name, safetensors ({"total": N}), private.
            exist_ok: Return the existing repo instead of raising 409.

        Returns:
            The repo.

        Raises:
            StoreError: 409 when it exists and not exist_ok; 400 on a bad id or type.
        """
        parts = repo_id.split("/") if isinstance(repo_id, str) else []
        if repo_type not in REPO_TYPES or len(parts) != 2 or not all(_REPO_PART.fullmatch(p) for p in parts):
            raise StoreError(f"Bad repo {repo_type}/{str(repo_id)[:200]}", status=400)
        if ".." in repo_id:  # the Hub refuses it inside a name too
            raise StoreError(f"Bad repo {repo_type}/{repo_id}", status=400)
        with self.lock:
            if (repo_type, repo_id) in self._repos:
                if exist_ok:
                    return self._repos[(repo_type, repo_id)]
                raise StoreError("You already created this repo", status=409)
            meta = {"createdAt": now(), "downloads": 0, "likes": 0, "trendingScore": 0, "tags": []}
            meta.update(metadata or {})
            folder = self.root / "repos" / f"{repo_type}s" / repo_id
            repo = Repo(repo_id=repo_id, repo_type=repo_type, path=folder, meta=meta, refs={})
            # add_commit writes meta.json and refs.json.
            self._repos[(repo_type, repo_id)] = repo
            changes: dict[str, Any] = {".gitattributes": self.entry_for_bytes(".gitattributes", DEFAULT_GITATTRIBUTES)}
            self.add_commit(repo, "main", parent=None, changes=changes, message="initial commit")
            return repo

    # -- blobs ---------------------------------------------------------------------------------------
    def put_blob(self, data: bytes) -> str:
        """Store content; returns its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.blobs / digest
        if not path.exists():
            tmp = path.with_name(f".{digest}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return digest

    def put_blob_file(self, source: Path, sha256: str) -> None:
        """Move an uploaded temp file into the blob store after checking its sha256.

        Raises:
            StoreError: 400 when the content does not match ``sha256``.
        """
        check_sha256(sha256)
        with source.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256")
        if digest.hexdigest() != sha256:
            source.unlink(missing_ok=True)
            raise StoreError(f"Uploaded content does not match oid {sha256}", status=400)
        os.replace(source, self.blobs / sha256)

    def has_blob(self, sha256: str, size: int | None = None) -> bool:
        """Whether a blob is stored (with that size, when given)."""
        path = self.blobs / check_sha256(sha256)
        return path.exists() and (size is None or path.stat().st_size == size)

    def blob_path(self, sha256: str) -> Path:
        """Where a blob lives (always a file directly under ``blobs/``).

        Raises:
            StoreError: 400 when ``sha256`` is not 64 hex digits.
        """
        return self.blobs / check_sha256(sha256)

    @staticmethod
    def _lfs_entry(sha256: str, size: int) -> dict[str, Any]:
        # The git id of the LFS pointer file, as the Hub reports it for LFS files.
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
        return {"sha256": sha256, "size": size, "oid": git_blob_sha(pointer), "lfs": True, "pointer_size": len(pointer)}

    def entry_for_lfs(self, sha256: str, size: int | None) -> dict[str, Any]:
        """Tree entry of an uploaded LFS object.

        Raises:
            StoreError: 400 on an oid that is not a sha256; 422 when the object was never uploaded.
        """
        if not self.has_blob(sha256):
            raise StoreError(f"LFS object {sha256} was not uploaded", status=422)
        return self._lfs_entry(sha256, size or self.blob_path(sha256).stat().st_size)

    def entry_for_bytes(self, path: str, data: bytes) -> dict[str, Any]:
        """Tree entry of inline content (regular git blob, or LFS when the Hub would use LFS)."""
        sha256 = self.put_blob(data)
        if is_lfs_path(path, len(data)):
            return self._lfs_entry(sha256, len(data))
        return {"sha256": sha256, "size": len(data), "oid": git_blob_sha(data), "lfs": False}

    # -- commits -------------------------------------------------------------------------------------
    def add_commit(
        self,
        repo: Repo,
        ref: str,
        *,
        parent: str | None,
        changes: dict[str, dict[str, Any] | None],
        message: str,
        description="",
    ) -> str:
        """Write a commit on ``ref`` holding ``changes`` (an entry per added or replaced path, None per deleted one:
        :meth:`changes`) on top of ``parent``; returns its sha. What it costs is what it changes."""
        with self.lock:
            self._counter += 1
            seed = json.dumps([repo.repo_id, parent, message, changes, time.time_ns(), self._counter], sort_keys=True)
            sha = hashlib.sha1(seed.encode()).hexdigest()  # noqa: S324 - an id, not security
            commit: dict[str, Any] = {
                "sha": sha,
                "parent": parent,
                "message": message,
                "description": description,
                "date": now(),
                "changes": changes,
            }
            write_json(repo.path / "commits" / f"{sha}.json", commit)
            repo.commits[sha] = commit
            _build_trees(repo.commits, [sha])
            repo.refs[ref] = sha
            write_json(repo.path / "refs.json", repo.refs)
            repo.meta["lastModified"] = commit["date"]
            write_json(repo.path / "meta.json", repo.meta)
            return sha

    def changes(
        self, repo: Repo, base: str, additions: dict[str, dict[str, Any]], deletions: list[str]
    ) -> dict[str, dict[str, Any] | None]:
        """The changes of a commit on ``base`` (a commit sha) that makes ``additions`` and deletes ``deletions`` (a
        path ending in ``/`` deletes a folder): an entry per added or replaced path, None per deleted one.

        Raises:
            StoreError: 404 EntryNotFound when deleting a path that does not exist.
        """
        tree: Tree = repo.commits[base]["tree"]
        changes: dict[str, dict[str, Any] | None] = {}
        for path in deletions:
            gone = list(tree.under(path)) if path.endswith("/") else [path] if path in tree else []
            if not gone:
                raise StoreError(f"A file with this name doesn't exist: {path}", status=404, code="EntryNotFound")
            changes |= dict.fromkeys(gone)
        return changes | additions

    def commit_files(
        self,
        repo_id: str,
        files: dict[str, bytes | Path],
        *,
        message: str = "Upload files",
        repo_type: str = "model",
        branch: str = "main",
        deletions: tuple[str, ...] = (),
    ) -> str:
        """Commit files straight into the store (seeding, or moving a branch in a test).

        Args:
            repo_id: An existing repo.
            files: path in repo -> content (bytes, or a local file).
            message: Commit message.
            repo_type: Its type.
            branch: Ref to move (``main`` or ``refs/pr/N``).
            deletions: Paths to remove.

        Returns:
            The new commit sha.
        """
        with self.lock:
            repo = self.get(repo_id, repo_type=repo_type)
            additions = {
                path: self.entry_for_bytes(path, data.read_bytes() if isinstance(data, Path) else data)
                for path, data in files.items()
            }
            base = repo.resolve(branch)
            changes = self.changes(repo, base, additions, list(deletions))
            return self.add_commit(repo, branch, parent=base, changes=changes, message=message)


def _build_trees(commits: dict[str, dict[str, Any]], shas: list[str] | None = None) -> None:
    """Give each commit of ``shas`` (each commit when None) its tree, parents first: its parent's with its
    changes."""
    for sha in commits if shas is None else shas:
        chain, at = [], sha
        while at is not None and "tree" not in commits[at]:
            chain.append(at)
            at = commits[at]["parent"]
        for at in reversed(chain):
            commit = commits[at]
            parent = commit["parent"]
            base = commits[parent]["tree"] if parent is not None else Tree()
            commit["tree"] = base.changed(commit["changes"])
