"""The commit operations a Hub commit is made of (huggingface_hub's CommitOperation*), built only here."""

from __future__ import annotations

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
