"""The tests' local hub server: the embedded hub (:mod:`pipeline.localhub`) that also misbehaves on purpose.

:class:`FaultyHubServer` answers chosen requests with error statuses (:meth:`~FaultyHubServer.inject`), runs a
callback before chosen requests (:meth:`~FaultyHubServer.on_request`: a concurrent writer) and counts logged
requests, through the server's :meth:`~pipeline.localhub.server.LocalHubServer.intercept`. The ``localhub``
fixture (``tests/support/localhub_fixtures.py``) serves one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.localhub import LocalHubServer
from pipeline.localhub.messages import Response, error


@dataclass
class Fault:
    """Answer matching requests with ``statuses`` (cycled) ``count`` times, then serve them normally.

    ``count=None`` means once per status; ``forever=True`` never stops. ``hits`` counts faulted answers.
    """

    path_regex: str
    method: str
    statuses: tuple[int, ...]
    count: int | None = None
    forever: bool = False
    retry_after: float | None = None
    hits: int = 0

    def take(self, method: str, path: str) -> int | None:
        """The status to answer with, or None when this fault does not apply (any more)."""
        if self.method not in {"*", method} or not re.search(self.path_regex, path):
            return None
        budget = len(self.statuses) if self.count is None else self.count
        if not self.forever and self.hits >= budget:
            return None
        status = self.statuses[self.hits % len(self.statuses)]
        self.hits += 1
        return status


@dataclass
class Hook:
    """Run ``callback(server)`` before serving matching requests, ``count`` times."""

    path_regex: str
    method: str
    callback: Callable[[FaultyHubServer], None]
    count: int = 1
    hits: int = 0


class FaultyHubServer(LocalHubServer):
    """A local hub server with fault injection and request hooks (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._faults: list[Fault] = []
        self._hooks: list[Hook] = []

    def inject(
        self,
        path_regex: str,
        method: str = "*",
        *,
        statuses: list[int] | tuple[int, ...] = (429, 500),
        count: int | None = None,
        forever: bool = False,
        retry_after: float | None = None,
    ) -> Fault:
        """Answer requests matching ``path_regex`` (re.search on the path with query) and ``method``
        with ``statuses`` before serving them normally.

        Args:
            path_regex: Regular expression searched in the request path.
            method: HTTP method, or ``*``.
            statuses: Statuses answered in turn.
            count: Faulted answers in all (default: one per status).
            forever: Never stop (a Hub that is down).
            retry_after: Send ``Retry-After`` (seconds) with each faulted answer.

        Returns:
            The fault; its ``hits`` counts the faulted answers.
        """
        fault = Fault(path_regex, method.upper(), tuple(statuses), count, forever, retry_after)
        with self._lock:
            self._faults.append(fault)
        return fault

    def on_request(
        self, path_regex: str, method: str, callback: Callable[[FaultyHubServer], None], *, count: int = 1
    ) -> Hook:
        """Run ``callback(server)`` before serving the next ``count`` matching requests."""
        hook = Hook(path_regex, method.upper(), callback, count)
        with self._lock:
            self._hooks.append(hook)
        return hook

    def move_branch_before_commit(
        self, repo_id: str, *, repo_type: str = "dataset", branch: str = "main", count: int = 1
    ) -> Hook:
        """Simulate a concurrent writer: before each of the next ``count`` commit requests on the repo,
        commit a file to ``branch``, so a commit whose parentCommit was read before gets 412.

        Returns:
            The hook; its ``hits`` counts the moves.
        """
        prefix = "datasets" if repo_type == "dataset" else "models" if repo_type == "model" else "spaces"
        regex = rf"^/api/{prefix}/{re.escape(repo_id)}/commit/"

        def move(server: FaultyHubServer) -> None:
            n = hook.hits
            server.store.commit_files(
                repo_id, {f"concurrent/{n}.txt": f"concurrent writer {n}\n".encode()},
                message=f"Concurrent commit {n}", repo_type=repo_type, branch=branch,
            )  # fmt: skip

        hook = self.on_request(regex, "POST", move, count=count)
        return hook

    def clear_faults(self) -> None:
        """Remove every fault and hook."""
        with self._lock:
            self._faults.clear()
            self._hooks.clear()

    def count_requests(self, path_regex: str = "", method: str = "*") -> int:
        """How many logged requests match."""
        return sum(1 for m, p in list(self.requests) if method in {"*", m} and re.search(path_regex, p) is not None)

    def intercept(self, method: str, path: str) -> Response | None:
        with self._lock:
            hooks = []
            for hook in self._hooks:
                if hook.hits < hook.count and hook.method in {"*", method} and re.search(hook.path_regex, path):
                    hook.hits += 1
                    hooks.append(hook)
            for fault in self._faults:
                status = fault.take(method, path)
                if status is not None:
                    extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
                    return error(status, f"Injected fault {status}", extra=extra)
        for hook in hooks:
            hook.callback(self)
        return None
