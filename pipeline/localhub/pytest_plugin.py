"""pytest fixture ``localhub``: a running local hub and a :class:`pipeline.hub.Hub` pointed at it.

Enable with ``pytest_plugins = ["pipeline.localhub.pytest_plugin"]`` in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline.hub import Hub, point_client_at
from pipeline.localhub import LocalHub, LocalHubServer, LocalHubStore


@dataclass
class LocalHubFixture:
    """What the ``localhub`` fixture yields.

    ``client`` is a Hub whose retries sleep through ``sleeps.append`` (no real waiting); ``sleeps`` holds the
    delays it asked for.
    """

    url: str
    store: LocalHubStore
    server: LocalHubServer
    client: Hub
    cache_dir: Path
    sleeps: list[float] = field(default_factory=list)

    def make_client(self, **kwargs: object) -> Hub:
        """Another Hub on this local hub (e.g. with another ``max_retries``), sleeping into ``sleeps``."""
        options: dict = {"sleep": self.sleeps.append, "token": "localhub-token", "cache_dir": self.cache_dir}
        options.update(kwargs)
        return Hub(endpoint=self.url, **options)


@pytest.fixture
def localhub(tmp_path: Path) -> Iterator[LocalHubFixture]:
    """A local hub on a free loopback port, with huggingface_hub pointed at it (Xet off, private cache)."""
    with LocalHub(tmp_path / "localhub") as hub:
        cache_dir = tmp_path / "hf-cache"
        restore = point_client_at(hub.url, cache_dir=cache_dir)
        try:
            sleeps: list[float] = []
            client = Hub(endpoint=hub.url, token="localhub-token", sleep=sleeps.append, cache_dir=cache_dir)
            yield LocalHubFixture(hub.url, hub.store, hub.server, client, cache_dir, sleeps)
        finally:
            restore()
