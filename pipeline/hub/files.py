"""Reading a repo's files: one file (cached), a snapshot, the file list, a partial mirror's GETs and the git
ids of files the repo holds. A part of :class:`pipeline.hub.Hub`, which gives it the retry loop."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import EntryNotFoundError as HfEntryNotFound  # RemoteEntryNotFoundError's parent
from huggingface_hub.hf_api import RepoFile

from pipeline import fsatomic
from pipeline.hub.listing import RepoType
from pipeline.hub.together import results as all_results

T = TypeVar("T")
#: Paths per ``paths-info`` request: the Hub answers 413 beyond 1,000 (huggingface_hub sends 500 at a time).
PATHS_INFO_BATCH = 500


class RepoFiles:
    """The file-reading calls of :class:`pipeline.hub.Hub` (which sets these attributes and the retry loop)."""

    endpoint: str
    token: str | None
    cache_dir: Path | None
    _api: HfApi

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        raise NotImplementedError

    def _where(self) -> dict[str, Any]:
        """Where huggingface_hub's download functions go and what they send: this client's endpoint, token, cache."""
        return {"endpoint": self.endpoint, "token": self.token, "cache_dir": self.cache_dir}

    def download(
        self, repo_id: str, filename: str, *, revision: str | None = None, repo_type: RepoType = "model"
    ) -> Path:
        """Download one file (cached) and return its local path.

        Raises:
            RepoNotFoundError: no such repo, revision or file.
            GatedRepoError: gated without access.
            HubError: other failures.
        """
        return Path(
            self._call(
                f"downloading {filename} from {repo_id}",
                lambda: hf_hub_download(repo_id, filename, revision=revision, repo_type=repo_type, **self._where()),
            )
        )

    def cached(self, repo_id: str, filename: str, *, revision: str, repo_type: RepoType = "model") -> Path | None:
        """The local path of ``filename`` when the download cache already holds it at the commit ``revision``,
        else None; asks the Hub nothing."""
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(
            repo_id, filename, cache_dir=self.cache_dir, revision=revision, repo_type=repo_type
        )
        return Path(found) if isinstance(found, str) else None

    def download_all(
        self, repo_id: str, filenames: list[str], *, revision: str | None, repo_type: RepoType = "model"
    ) -> list[Path]:
        """:meth:`download` of each of ``filenames``, sent together; at a commit whose files the download cache
        holds all of, their cached paths without a download call (the same answer: a download at a commit asks
        the Hub nothing for a cached file).

        Raises:
            RepoNotFoundError: no such repo, revision or file.
        """
        from pipeline.ids import is_revision

        if revision and is_revision(revision):
            cached = [self.cached(repo_id, name, revision=revision, repo_type=repo_type) for name in filenames]
            if filenames and all(path is not None for path in cached):
                return [path for path in cached if path is not None]
        fetch = functools.partial(self.download, repo_id, revision=revision, repo_type=repo_type)
        return all_results(*(functools.partial(fetch, name) for name in filenames))

    def snapshot(
        self,
        repo_id: str,
        *,
        revision: str | None = None,
        repo_type: RepoType = "model",
        local_dir: Path | None = None,
        allow_patterns: list[str] | None = None,
    ) -> Path:
        """Download a repo (or the files matching ``allow_patterns``) and return the folder."""
        return Path(
            self._call(
                f"downloading {repo_id}",
                lambda: snapshot_download(
                    repo_id,
                    revision=revision,
                    repo_type=repo_type,
                    local_dir=local_dir,
                    allow_patterns=allow_patterns,
                    **self._where(),
                ),
            )
        )

    def list_files(
        self,
        repo_id: str,
        *,
        revision: str | None = None,
        repo_type: RepoType = "dataset",
        under: str | None = None,
        recursive: bool = True,
    ) -> list[str]:
        """Every file path of a repo at a revision, or only those under the folder ``under`` (none if absent;
        ``recursive=False``: only the files right in it, one page of the tree, not its subfolders'), sorted."""

        def listing() -> list[str]:
            try:
                entries = list(
                    self._api.list_repo_tree(
                        repo_id, path_in_repo=under, recursive=recursive, revision=revision, repo_type=repo_type
                    )
                )
            except HfEntryNotFound:  # no such folder: nothing under it
                return []
            return sorted(e.path for e in entries if isinstance(e, RepoFile))

        return self._call(f"listing {under or 'files'} of {repo_id}", listing)

    def _repo_files(self, repo_id: str, *, revision: str, repo_type: RepoType) -> list[RepoFile]:
        """Every file of a repo at ``revision``, from one recursive tree listing (no file downloaded)."""

        def listing() -> list[RepoFile]:
            entries = self._api.list_repo_tree(repo_id, recursive=True, revision=revision, repo_type=repo_type)
            return [e for e in entries if isinstance(e, RepoFile)]

        return self._call(f"listing files of {repo_id}", listing)

    def file_ids(
        self, repo_id: str, *, revision: str, repo_type: RepoType = "model"
    ) -> dict[str, tuple[str | None, str]]:
        """Every file of a repo at ``revision``: its LFS sha256 (None for a regular file) and its git blob id, from
        one recursive tree listing, no file downloaded: what a rebuilt tree is compared against (a regular file by
        :func:`pipeline.hub.operations.git_blob_id` of its bytes, an LFS file by its sha256)."""
        files = self._repo_files(repo_id, revision=revision, repo_type=repo_type)
        return {e.path: (e.lfs.sha256 if e.lfs is not None else None, e.blob_id) for e in files}

    def file_sizes(self, repo_id: str, *, revision: str, repo_type: RepoType = "model") -> dict[str, int]:
        """Every file of a repo at ``revision`` with its size in bytes (one recursive tree listing; an LFS file's
        size is its content's), what a download is checked against before it starts."""
        return {e.path: int(e.size or 0) for e in self._repo_files(repo_id, revision=revision, repo_type=repo_type)}

    def cache_free_bytes(self) -> int:
        """Free bytes on the disk downloads go to (the cache folder, or the nearest folder above it that exists)."""
        from huggingface_hub import constants as hf_constants

        folder = Path(self.cache_dir or hf_constants.HF_HUB_CACHE).resolve()
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return shutil.disk_usage(folder).free

    def fetch_files(
        self, repo_id: str, paths: list[str], *, revision: str, into: Path, repo_type: RepoType = "dataset"
    ) -> list[str]:
        """Download ``paths`` at ``revision`` into ``into`` with one GET each on huggingface_hub's shared HTTP
        session (no metadata request, no cache: what a partial mirror needs), sent together
        (:func:`pipeline.hub.together.results`); a path the repo lacks is skipped.

        Returns:
            The paths downloaded.

        Raises:
            HubError: (or a child) the Hub failed on one of them (once the others are done).
        """
        from huggingface_hub import get_session, hf_hub_url
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        headers = build_hf_headers(token=self.token)

        def fetch(path: str) -> bool:
            url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=self.endpoint)

            def get() -> bytes | None:
                response = get_session().get(url, headers=headers, follow_redirects=True)
                if response.status_code == 404:
                    return None
                hf_raise_for_status(response)
                return response.content

            body = self._call(f"downloading {path} from {repo_id}", get)
            if body is not None:  # written as it comes: a migration's many files are never all in memory
                fsatomic.write_bytes(into / path, body)
            return body is not None

        found = all_results(*(functools.partial(fetch, path) for path in paths))
        return [path for path, here in zip(paths, found, strict=True) if here]

    def _paths_info(
        self, repo_id: str, paths: list[str], *, revision: str, repo_type: RepoType, expand: bool = False
    ) -> list[RepoFile]:
        """The files among ``paths`` the repo holds at ``revision`` (``paths-info``, one POST per
        :data:`PATHS_INFO_BATCH` paths, each on its own retry budget; ``expand`` adds each file's last commit)."""
        files: list[RepoFile] = []
        for start in range(0, len(paths), PATHS_INFO_BATCH):
            batch = paths[start : start + PATHS_INFO_BATCH]

            def info(batch: list[str] = batch) -> list[Any]:
                return self._api.get_paths_info(repo_id, batch, revision=revision, repo_type=repo_type, expand=expand)

            infos = self._call(f"reading {len(batch)} path(s) of {repo_id}@{revision}", info)
            files.extend(i for i in infos if isinstance(i, RepoFile))
        return files

    def held_files(
        self, repo_id: str, paths: list[str], *, revision: str, repo_type: RepoType = "model"
    ) -> dict[str, tuple[str | None, str, str | None]]:
        """Of ``paths``, each the repo holds at ``revision``: its LFS sha256 (None for a regular file), its git blob
        id and the last commit that changed it (``paths-info`` with ``expand``)."""
        found: dict[str, tuple[str | None, str, str | None]] = {}
        for item in self._paths_info(repo_id, paths, revision=revision, repo_type=repo_type, expand=True):
            last = item.last_commit.oid if item.last_commit is not None else None
            found[item.path] = (item.lfs.sha256 if item.lfs is not None else None, item.blob_id, last)
        return found

    def blob_ids(
        self, repo_id: str, paths: list[str], *, revision: str, repo_type: RepoType = "dataset"
    ) -> dict[str, str]:
        """The git blob id of each of ``paths`` the repo holds at ``revision`` as a regular (not LFS) file, from
        ``paths-info``; a path it lacks is left out. Compare with :func:`pipeline.hub.operations.git_blob_id` of a
        local file to tell one the repo already holds."""
        files = self._paths_info(repo_id, paths, revision=revision, repo_type=repo_type)
        return {i.path: i.blob_id for i in files if i.lfs is None}
