"""An embedded Hub-compatible HTTP server: the subset of the Hub API that :mod:`pipeline.hub` uses.

It is a test double with a real protocol: huggingface_hub talks to it unmodified. Repos live on disk with real
commit history (see :mod:`pipeline.localhub.storage`).

Usage::

    with LocalHub(tmp_path) as hub:
        hub.store.create_repo("org/tiny", metadata={"pipeline_tag": "text-generation"})
        restore = point_client_at(hub.url)  # pipeline.hub
        ...
        restore()

May import: the top-level modules, and :mod:`pipeline.hub` (the card metadata it answers is read with the Hub's
own front-matter rule).
Imported by: the CLI (``trncat localhub serve``, the demo) and the tests.

The tests' faulty network in front of one, their server that injects faults and hooks, and their pytest fixtures,
are the tests' own (``tests/support/fault_proxy.py``, ``tests/support/faulty_hub.py``,
``tests/support/localhub_fixtures.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Self

from pipeline.errors import StoreError
from pipeline.localhub.server import LocalHubServer
from pipeline.localhub.storage import LocalHubStore

__all__ = [
    "InBackground",
    "LocalHub",
    "LocalHubServer",
    "LocalHubStore",
    "StoreError",
    "serve",
]

logger = logging.getLogger(__name__)


class InBackground:
    """An HTTP server served from a daemon thread until :meth:`stop`; a context manager that stops it."""

    def _serve(self, server: ThreadingHTTPServer, name: str) -> None:
        self._http = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class LocalHub(InBackground):
    """A local hub served from a background thread on a free loopback port.

    Args:
        root: Folder holding the repos (kept after stop; reopening it serves the same repos).
        host: Interface to bind.
        port: Port; 0 picks a free one.
        tokens: Tokens allowed to write; None (default) lets every request write.
        latency_s: Seconds each answer is held, as a round trip to the real Hub takes (benchmarks); 0 default.
        server: The server class (the tests' injects faults: ``tests/support/faulty_hub.py``).
    """

    def __init__(
        self,
        root: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tokens: Iterable[str] | None = None,
        latency_s: float = 0.0,
        server: type[LocalHubServer] = LocalHubServer,
    ) -> None:
        self.store = LocalHubStore(Path(root))
        self.server = server(self.store, (host, port), tokens=tokens, latency_s=latency_s)
        self._serve(self.server, "localhub")
        logger.info("local hub serving %s at %s", root, self.url)

    @property
    def url(self) -> str:
        """Base URL to use as the Hub endpoint."""
        return self.server.url


def serve(
    *,
    root: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    ready: Callable[[str], None] | None = None,
    tokens: Iterable[str] | None = None,
) -> None:
    """Serve a local hub until interrupted (``trncat localhub serve``).

    Args:
        root: Folder holding the repos.
        host: Interface to bind.
        port: Port; 0 picks a free one.
        ready: Called with the URL once listening (the CLI prints it).
        tokens: Tokens allowed to write; None lets every request write.
    """
    server = LocalHubServer(LocalHubStore(Path(root)), (host, port), tokens=tokens)
    if ready is not None:
        ready(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        logger.info("local hub stopped")
    finally:
        server.server_close()
