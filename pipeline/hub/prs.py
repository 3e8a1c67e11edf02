"""Pull requests and their comments: finding the bot's open PRs, commenting, closing, merging. A part of
:class:`pipeline.hub.Hub`, which gives it the retry loop.

Opening a PR and posting a comment are not idempotent: when the answer to one is lost (a dropped connection, a
timeout) the Hub may have done it all the same, and a blind retry opens a second PR or posts the comment twice.
So each carries a marker, a random token in an HTML comment (the Hub's Markdown hides it), and before it is
tried again the retry loop looks for its effect: the bot's open PR whose description holds the marker
(:meth:`PullRequests.pr_with_marker`), the comment that holds it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from huggingface_hub import HfApi
from huggingface_hub.community import DiscussionComment, DiscussionCommit

from pipeline.errors import HubError
from pipeline.hub.listing import ONLY_SHA, CommitResult, RepoType

T = TypeVar("T")


def new_marker() -> str:
    """A fresh marker: an HTML comment holding a random token, appended to a PR description or a comment."""
    return f"<!-- trncat-op {uuid.uuid4().hex} -->"


def with_marker(text: str, marker: str) -> str:
    return f"{text}\n\n{marker}" if text else marker


class PullRequests:
    """The PR and comment calls of :class:`pipeline.hub.Hub` (which sets these attributes and the retry loop)."""

    token: str | None
    _api: HfApi
    _user: str | None

    def _call(self, what: str, fn: Callable[[], T], *, effect: Callable[[], T | None] | None = None) -> T:
        raise NotImplementedError

    def whoami(self) -> str:
        """The user (or bot account) the token belongs to (asked once per client).

        Raises:
            HubError: no valid token, or the Hub failed.
        """
        if self._user is None:
            info = self._call("reading the token's user", lambda: self._api.whoami(token=self.token))
            name = info.get("name") if isinstance(info, dict) else None
            if not isinstance(name, str) or not name:
                raise HubError("the Hub did not say whose token this is")
            self._user = name
        return self._user

    def _open_prs(self, repo_id: str, repo_type: RepoType, author: str | None, title_prefix: str | None) -> list[Any]:
        return [
            d
            for d in self._api.get_repo_discussions(
                repo_id, author=author, discussion_type="pull_request", discussion_status="open", repo_type=repo_type
            )
            if d.is_pull_request and d.status == "open" and (not title_prefix or d.title.startswith(title_prefix))
        ]

    def open_bot_prs(
        self,
        repo_id: str,
        *,
        repo_type: RepoType = "dataset",
        author: str | None = None,
        title_prefix: str | None = None,
    ) -> list[int]:
        """Numbers of the open PRs by ``author`` whose title starts with ``title_prefix``, oldest first."""
        return self._call(
            f"looking up open PRs of {repo_id}",
            lambda: sorted(d.num for d in self._open_prs(repo_id, repo_type, author, title_prefix)),
        )

    def pr_with_marker(self, repo_id: str, marker: str, *, repo_type: RepoType = "dataset") -> CommitResult | None:
        """The token's user's open PR whose description holds ``marker``, with its head; None when there is none.
        Raw calls: it runs inside the retry loop of the call it checks."""
        author = self.whoami()
        for d in sorted(self._open_prs(repo_id, repo_type, author, None), key=lambda d: -d.num):
            details = self._api.get_discussion_details(repo_id, d.num, repo_type=repo_type)
            first = details.events[0] if details.events else None
            if isinstance(first, DiscussionComment) and marker in first.content:
                info = self._api.repo_info(repo_id, repo_type=repo_type, revision=f"refs/pr/{d.num}", expand=ONLY_SHA)
                if info.sha:
                    return CommitResult(sha=info.sha, pr_num=d.num, pr_url=details.url)
        return None

    def pr_events(self, repo_id: str, pr_num: int, *, repo_type: RepoType = "dataset") -> tuple[list[str], list[str]]:
        """A PR's commits (their shas, oldest first) and its comments' texts, as its discussion lists them."""
        what = f"reading {repo_id}#{pr_num}"
        events = self._call(what, lambda: self._api.get_discussion_details(repo_id, pr_num, repo_type=repo_type)).events
        commits = [e.oid for e in events if isinstance(e, DiscussionCommit)]
        return commits, [e.content for e in events if isinstance(e, DiscussionComment)]

    def comment(self, repo_id: str, pr_num: int, text: str, *, repo_type: RepoType = "dataset") -> None:
        """Comment on a discussion or PR, once: a retry first looks for the comment by its marker."""
        marker = new_marker()
        body = with_marker(text, marker)

        def post() -> bool:
            self._api.comment_discussion(repo_id, pr_num, body, repo_type=repo_type)
            return True

        def posted() -> bool | None:
            events = self._api.get_discussion_details(repo_id, pr_num, repo_type=repo_type).events
            return True if any(isinstance(e, DiscussionComment) and marker in e.content for e in events) else None

        self._call(f"commenting on {repo_id}#{pr_num}", post, effect=posted)

    def close_pr(self, repo_id: str, pr_num: int, *, repo_type: RepoType = "dataset") -> None:
        """Close a discussion or PR (a retry first reads whether it is closed already)."""

        def close() -> bool:
            self._api.change_discussion_status(repo_id, pr_num, "closed", repo_type=repo_type)
            return True

        def closed() -> bool | None:
            status = self._api.get_discussion_details(repo_id, pr_num, repo_type=repo_type).status
            return True if status == "closed" else None

        self._call(f"closing {repo_id}#{pr_num}", close, effect=closed)

    def merge(self, repo_id: str, pr_num: int, *, repo_type: RepoType = "dataset") -> None:
        """Merge a PR (what a maintainer does after review; the demo does it to show the flow); a retry first reads
        whether it is merged already."""

        def merged() -> bool | None:
            status = self._api.get_discussion_details(repo_id, pr_num, repo_type=repo_type).status
            return True if status == "merged" else None

        def merge() -> bool:
            self._api.merge_pull_request(repo_id, pr_num, repo_type=repo_type)
            return True

        self._call(f"merging {repo_id}#{pr_num}", merge, effect=merged)
