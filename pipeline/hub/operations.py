"""The commit operations a Hub commit is made of (huggingface_hub's CommitOperation*), built only here, and
the git id that tells a local file from the one the Hub holds."""

from __future__ import annotations

import hashlib
from pathlib import Path

from huggingface_hub._commit_api import CommitOperation


def file_additions(files: dict[str, Path]) -> list[CommitOperation]:
    """Commit operations adding (or replacing) ``path_in_repo -> local file``; the only place they are built."""
    from huggingface_hub import CommitOperationAdd

    return [CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(local)) for path, local in sorted(files.items())]


def file_deletions(paths: list[str]) -> list[CommitOperation]:
    """Commit operations deleting ``paths`` (files) from the repo."""
    from huggingface_hub import CommitOperationDelete

    return [CommitOperationDelete(path_in_repo=path) for path in sorted(paths)]


def git_blob_id(data: bytes) -> str:
    """The git object id of a regular file holding ``data``: what the Hub reports for it (``Hub.blob_ids``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id, not security
