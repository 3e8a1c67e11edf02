"""An embedded Hub-compatible HTTP server: the subset of the Hub API that :mod:`pipeline.hub` uses.

It is a test double with a real protocol: huggingface_hub talks to it unmodified. Repos live on disk with real
commit history (see :mod:`pipeline.localhub.storage`).

Usage::

    with LocalHub(tmp_path) as hub:
        hub.store.create_repo("org/tiny", metadata={"pipeline_tag": "text-generation"})
        restore = configure_client_for(hub.url)
        ...
        restore()
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from pipeline.localhub.server import Fault, Hook, LocalHubServer
from pipeline.localhub.storage import LocalHubStore, StoreError

__all__ = [
    "Fault",
    "Hook",
    "LocalHub",
    "LocalHubServer",
    "LocalHubStore",
    "StoreError",
    "configure_client_for",
    "serve",
]

logger = logging.getLogger(__name__)


class LocalHub:
    """A local hub served from a background thread on a free loopback port.

    Args:
        root: Folder holding the repos (kept after stop; reopening it serves the same repos).
        host: Interface to bind.
        port: Port; 0 picks a free one.
    """

    def __init__(self, root: Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = LocalHubStore(Path(root))
        self.server = LocalHubServer(self.store, (host, port))
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="localhub", daemon=True
        )
        self._thread.start()
        logger.info("local hub serving %s at %s", root, self.url)

    @property
    def url(self) -> str:
        """Base URL to use as the Hub endpoint."""
        return self.server.url

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LocalHub:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve(*, root: Path, host: str = "127.0.0.1", port: int = 0, ready: Callable[[str], None] | None = None) -> None:
    """Serve a local hub until interrupted (``trncat localhub serve``).

    Args:
        root: Folder holding the repos.
        host: Interface to bind.
        port: Port; 0 picks a free one.
        ready: Called with the URL once listening (the CLI prints it).
    """
    server = LocalHubServer(LocalHubStore(Path(root)), (host, port))
    if ready is not None:
        ready(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        logger.info("local hub stopped")
    finally:
        server.server_close()


def configure_client_for(url: str, *, cache_dir: Path | None = None) -> Callable[[], None]:
    """Point huggingface_hub (and transformers through it) at a local hub; returns a function that undoes it.

    huggingface_hub reads ``HF_ENDPOINT``, ``HF_HUB_DISABLE_XET`` and ``HF_HUB_CACHE`` once, at import, into
    ``huggingface_hub.constants``; its functions read those module attributes at call time. So setting the
    environment is not enough after import: this sets both. Xet must be off because the local hub speaks
    only the LFS protocol (``is_xet_available()`` checks ``constants.HF_HUB_DISABLE_XET`` before each upload).
    ``pipeline.constants.HF_ENDPOINT`` is set too, so a default ``pipeline.hub.Hub()`` targets the local hub.

    Args:
        url: The local hub's base URL.
        cache_dir: Download cache to use instead of the user's (so local repos never mix with real ones).

    Returns:
        A function restoring the previous values.
    """
    from huggingface_hub import constants as hf_constants

    from pipeline import constants

    url = url.rstrip("/")
    env = {"HF_ENDPOINT": url, "HF_HUB_DISABLE_XET": "1"}
    attrs: list[tuple[object, str, object]] = [
        (hf_constants, "ENDPOINT", url),
        (hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}"),
        (hf_constants, "HF_HUB_DISABLE_XET", True),
        (constants, "HF_ENDPOINT", url),
    ]
    if cache_dir is not None:
        env["HF_HUB_CACHE"] = str(cache_dir)
        attrs.append((hf_constants, "HF_HUB_CACHE", str(cache_dir)))
    old_env = {k: os.environ.get(k) for k in env}
    old_attrs = [(obj, name, getattr(obj, name)) for obj, name, _ in attrs]
    os.environ.update(env)
    for obj, name, value in attrs:
        setattr(obj, name, value)

    def restore() -> None:
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for obj, name, value in old_attrs:
            setattr(obj, name, value)

    return restore
