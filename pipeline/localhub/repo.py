"""A repo of the local hub as held in memory: its refs, commits and discussions (mirroring its folder)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import StoreError
from pipeline.localhub.tree import Tree


@dataclass
class Repo:
    """A repo held in memory (mirrors its folder)."""

    repo_id: str
    repo_type: str
    path: Path
    meta: dict[str, Any]
    refs: dict[str, str]
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    discussions: list[dict[str, Any]] = field(default_factory=list)

    def resolve(self, revision: str) -> str:
        """Commit sha of a branch, PR ref or (full) commit sha.

        Raises:
            StoreError: 404 RevisionNotFound.
        """
        for branch in (revision, revision.removeprefix("refs/heads/")):
            if branch in self.refs:
                return self.refs[branch]
        if revision in self.commits:
            return revision
        raise StoreError(f"Invalid rev id: {revision}", status=404, code="RevisionNotFound")

    def tree(self, revision: str) -> Tree:
        """The tree (path -> entry) at a revision."""
        return self.commits[self.resolve(revision)]["tree"]
