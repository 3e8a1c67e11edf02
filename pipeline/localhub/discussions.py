"""Discussions and pull requests of the local hub's repos (a part of :class:`~pipeline.localhub.LocalHubStore`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pipeline.errors import StoreError
from pipeline.localhub.files import now, write_json
from pipeline.localhub.messages import USER
from pipeline.localhub.repo import Repo


class DiscussionStore:
    """The discussion half of the store: PRs (``refs/pr/N``), comments, status changes, saved per repo."""

    lock: threading.RLock
    _counter: int

    # The store's own (pipeline.localhub.storage.LocalHubStore), which this half calls.
    get: Callable[..., Repo]
    add_commit: Callable[..., str]

    def open_pull_request(self, repo: Repo, *, title: str, author: str, description: str = "") -> int:
        """Create refs/pr/N from main and its discussion; returns N."""
        with self.lock:
            num = len(repo.discussions) + 1
            repo.refs[f"refs/pr/{num}"] = repo.refs["main"]
            write_json(repo.path / "refs.json", repo.refs)
            repo.discussions.append(
                {
                    "num": num,
                    "base": repo.refs["main"],
                    "title": title,
                    "status": "open",
                    "isPullRequest": True,
                    "author": {"name": author},
                    "createdAt": now(),
                    "events": [self._comment_event(description or title, author)],
                }
            )
            self._save_discussions(repo)
            return num

    def add_discussion_event(self, repo: Repo, num: int, event: dict[str, Any]) -> None:
        """Append an event (comment, commit, status-change) to discussion ``num``."""
        with self.lock:
            self.discussion(repo, num)["events"].append(event)
            self._save_discussions(repo)

    def set_discussion_status(
        self, repo_id: str, num: int, status: str, *, repo_type: str = "dataset", author: str = USER
    ) -> dict[str, Any]:
        """Close, merge or reopen a discussion (what a maintainer does on the Hub); returns its status-change
        event."""
        with self.lock:
            repo = self.get(repo_id, repo_type=repo_type)
            d = self.discussion(repo, num)
            event = self._event("status-change", author, {"status": status})
            d["events"].append(event)
            d["status"] = status
            self._save_discussions(repo)
            return event

    def merge_pull_request(self, repo: Repo, num: int, *, author: str, comment: str | None = None) -> dict[str, Any]:
        """Merge PR ``num`` into main as the Hub does: one commit on main with the PR's changes since it branched.

        Paths the PR changed are taken from the PR; paths only main changed since are kept. A path both changed
        differently is a conflict.

        Returns:
            The status-change event.

        Raises:
            StoreError: 404 not a PR; 400 not open; 409 a conflict with main.
        """
        with self.lock:
            d = self.discussion(repo, num)
            if not d["isPullRequest"]:
                raise StoreError(f"Discussion {num} is not a pull request", status=404)
            if d["status"] not in {"open", "draft"}:
                raise StoreError(f"Pull request {num} is {d['status']}, not open", status=400)
            head = repo.refs[f"refs/pr/{num}"]
            base = d["base"]
            base_tree = repo.commits[base]["tree"]
            pr_tree, main_tree = repo.commits[head]["tree"], repo.commits[repo.refs["main"]]["tree"]
            changes: dict[str, dict[str, Any] | None] = {}
            for path in _changed_since(repo, head, base):
                ours, theirs, was = pr_tree.get(path), main_tree.get(path), base_tree.get(path)
                if ours == was:
                    continue
                if theirs != was and theirs != ours:
                    raise StoreError(f"Merge conflict on {path}", status=409, code="MergeConflict")
                if ours is not None or theirs is not None:
                    changes[path] = ours
            self.add_commit(
                repo,
                "main",
                parent=repo.refs["main"],
                changes=changes,
                message=f"Merge pull request #{num}: {d['title']}",
            )
            if comment:
                d["events"].append(self._comment_event(comment, author))
            return self.set_discussion_status(repo.repo_id, num, "merged", repo_type=repo.repo_type, author=author)

    def discussion(self, repo: Repo, num: int) -> dict[str, Any]:
        """Discussion ``num``, or a 404."""
        if not 1 <= num <= len(repo.discussions):
            raise StoreError(f"Discussion {num} not found", status=404)
        return repo.discussions[num - 1]

    def _save_discussions(self, repo: Repo) -> None:
        write_json(repo.path / "discussions.json", repo.discussions)

    def _event(self, kind: str, author: str, data: dict[str, Any]) -> dict[str, Any]:
        self._counter += 1
        event = {"id": f"{self._counter:024x}", "type": kind, "createdAt": now(), "author": {"name": author}}
        return event | {"data": data}

    def _comment_event(self, text: str, author: str) -> dict[str, Any]:
        latest = {"raw": text, "html": text, "updatedAt": now(), "author": {"name": author}}
        return self._event("comment", author, {"edited": False, "hidden": False, "latest": latest, "history": []})

    def comment(self, repo: Repo, num: int, text: str, *, author: str) -> dict[str, Any]:
        """Add a comment; returns the event."""
        with self.lock:
            event = self._comment_event(text, author)
            self.add_discussion_event(repo, num, event)
            return event


def _changed_since(repo: Repo, head: str, base: str) -> set[str]:
    """The paths the commits from ``base`` (excluded) to ``head`` changed."""
    paths: set[str] = set()
    sha = head
    while sha != base:
        paths.update(repo.commits[sha]["changes"])
        sha = repo.commits[sha]["parent"]
    return paths
