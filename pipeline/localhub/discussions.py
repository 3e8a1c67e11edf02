"""Discussions and pull requests of the local hub's repos (a part of :class:`~pipeline.localhub.LocalHubStore`)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pipeline.errors import StoreError
from pipeline.localhub.files import now, write_json

if TYPE_CHECKING:
    from pipeline.localhub.storage import Repo


class DiscussionStore:
    """The discussion half of the store: PRs (``refs/pr/N``), comments, status changes, saved per repo."""

    lock: threading.RLock
    _counter: int

    def get(self, repo_id: str, *, repo_type: str = "model") -> Repo:
        raise NotImplementedError

    def open_pull_request(self, repo: Repo, *, title: str, author: str, description: str = "") -> int:
        """Create refs/pr/N from main and its discussion; returns N."""
        with self.lock:
            num = len(repo.discussions) + 1
            repo.refs[f"refs/pr/{num}"] = repo.refs["main"]
            write_json(repo.path / "refs.json", repo.refs)
            repo.discussions.append(
                {
                    "num": num,
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

    def set_discussion_status(self, repo_id: str, num: int, status: str, *, repo_type: str = "dataset") -> None:
        """Close, merge or reopen a discussion (what a maintainer does on the Hub)."""
        with self.lock:
            repo = self.get(repo_id, repo_type=repo_type)
            self.discussion(repo, num)["status"] = status
            self._save_discussions(repo)

    def discussion(self, repo: Repo, num: int) -> dict[str, Any]:
        """Discussion ``num``, or a 404."""
        if not 1 <= num <= len(repo.discussions):
            raise StoreError(f"Discussion {num} not found", status=404)
        return repo.discussions[num - 1]

    def _save_discussions(self, repo: Repo) -> None:
        write_json(repo.path / "discussions.json", repo.discussions)

    def _comment_event(self, text: str, author: str) -> dict[str, Any]:
        self._counter += 1
        return {
            "id": f"{self._counter:024x}",
            "type": "comment",
            "createdAt": now(),
            "author": {"name": author},
            "data": {
                "edited": False,
                "hidden": False,
                "latest": {"raw": text, "html": text, "updatedAt": now(), "author": {"name": author}},
                "history": [],
            },
        }

    def comment(self, repo: Repo, num: int, text: str, *, author: str) -> dict[str, Any]:
        """Add a comment; returns the event."""
        with self.lock:
            event = self._comment_event(text, author)
            self.add_discussion_event(repo, num, event)
            return event
