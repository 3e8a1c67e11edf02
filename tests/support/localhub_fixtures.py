"""pytest fixtures ``localhub`` (a running local hub and a :class:`pipeline.hub.Hub` pointed at it) and
``localhub_proxy`` (a :class:`~tests.support.fault_proxy.FaultProxy` in front of it, and a Hub pointed at the
proxy), enabled by ``pytest_plugins`` in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.hub import Hub, point_client_at
from pipeline.localhub import LocalHub, LocalHubStore
from tests.support.fault_proxy import FaultProxy
from tests.support.faulty_hub import FaultyHubServer

#: The read timeout (seconds) of a client behind ``localhub_proxy``: a stalled answer costs this long.
PROXY_READ_TIMEOUT_S = 1.0


@dataclass
class LocalHubFixture:
    """What the ``localhub`` fixture yields.

    ``client`` is a Hub whose retries sleep through ``sleeps.append`` (no real waiting); ``sleeps`` holds the
    delays it asked for.
    """

    url: str
    store: LocalHubStore
    server: FaultyHubServer
    client: Hub
    cache_dir: Path
    sleeps: list[float] = field(default_factory=list)

    def make_client(self, **kwargs: object) -> Hub:
        """Another Hub on this local hub (e.g. with another ``max_retries``), sleeping into ``sleeps``."""
        options: dict = {"endpoint": self.url, "sleep": self.sleeps.append, "token": "localhub-token"}
        options.update({"cache_dir": self.cache_dir, **kwargs})
        return Hub(**options)


@pytest.fixture
def localhub(tmp_path: Path) -> Iterator[LocalHubFixture]:
    """A local hub on a free loopback port, with huggingface_hub pointed at it (Xet off, private cache)."""
    with LocalHub(tmp_path / "localhub", server=FaultyHubServer) as hub:
        cache_dir = tmp_path / "hf-cache"
        restore = point_client_at(hub.url, cache_dir=cache_dir)
        try:
            sleeps: list[float] = []
            client = Hub(endpoint=hub.url, token="localhub-token", sleep=sleeps.append, cache_dir=cache_dir)
            assert isinstance(hub.server, FaultyHubServer)
            yield LocalHubFixture(hub.url, hub.store, hub.server, client, cache_dir, sleeps)
        finally:
            restore()


@dataclass
class ProxyFixture:
    """What the ``localhub_proxy`` fixture yields: the proxy, the local hub behind it and a Hub on the proxy."""

    proxy: FaultProxy
    localhub: LocalHubFixture
    client: Hub

    def make_client(self, **kwargs: object) -> Hub:
        """Another Hub on the proxy (e.g. with another ``max_retries``), sleeping into the local hub's ``sleeps``."""
        return self.localhub.make_client(endpoint=self.proxy.url, **kwargs)


@pytest.fixture
def localhub_proxy(localhub: LocalHubFixture, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProxyFixture]:
    """A :class:`FaultProxy` in front of the ``localhub`` fixture's hub, huggingface_hub pointed at the proxy, and
    short Hub timeouts (:data:`PROXY_READ_TIMEOUT_S`, through ``pipeline.constants``) so a stall costs a second."""
    monkeypatch.setattr(constants, "TRNCAT_HUB_READ_TIMEOUT_S", PROXY_READ_TIMEOUT_S)
    monkeypatch.setattr(constants, "TRNCAT_HUB_CONNECT_TIMEOUT_S", PROXY_READ_TIMEOUT_S)
    with FaultProxy(localhub.url, hold_s=30.0) as proxy:
        restore = point_client_at(proxy.url, cache_dir=localhub.cache_dir)
        try:
            yield ProxyFixture(proxy, localhub, localhub.make_client(endpoint=proxy.url))
        finally:
            restore()


def repo_file(
    store: LocalHubStore, repo_id: str, path: str, *, revision: str = "main", repo_type: str = "model"
) -> bytes:
    """Content of a file of a local hub's repo at a revision, read from the store."""
    entry = store.get(repo_id, repo_type=repo_type).tree(revision)[path]
    return store.blob_path(entry["sha256"]).read_bytes()


def repo_history(
    store: LocalHubStore, repo_id: str, *, revision: str = "main", repo_type: str = "model"
) -> list[dict[str, Any]]:
    """The commits of a local hub's repo from ``revision`` back to the first, newest first."""
    repo = store.get(repo_id, repo_type=repo_type)
    out, sha = [], repo.resolve(revision)
    while sha is not None:
        out.append(repo.commits[sha])
        sha = repo.commits[sha]["parent"]
    return out
