"""Pointing huggingface_hub (and transformers, which downloads through it) at an endpoint, and its output."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def quiet_progress_bars() -> None:
    """Turn huggingface_hub's progress bars off (the CLI does on CI, where they only clutter logs)."""
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()


def point_client_at(url: str, *, cache_dir: Path | None = None) -> Callable[[], None]:
    """Point huggingface_hub (and transformers through it) at another endpoint; returns a function that undoes it.

    huggingface_hub reads ``HF_ENDPOINT``, ``HF_HUB_DISABLE_XET`` and ``HF_HUB_CACHE`` once, at import, into
    ``huggingface_hub.constants``; its functions read those module attributes at call time. So setting the
    environment is not enough after import: this sets both. Xet must be off because the local hub speaks
    only the LFS protocol (``is_xet_available()`` checks ``constants.HF_HUB_DISABLE_XET`` before each upload).
    ``pipeline.constants.HF_ENDPOINT`` is set too, so a ``pipeline.hub.Hub()`` built after targets that endpoint.

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
    _forget_the_old_endpoint()

    def restore() -> None:
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for obj, name, value in old_attrs:
            setattr(obj, name, value)
        _forget_the_old_endpoint()

    return restore


def _forget_the_old_endpoint() -> None:
    """Drop what huggingface_hub keeps of the old endpoint: its HTTP session's pooled connections (a keep-alive
    connection to a local hub that has stopped, whose port a new one now has, still reaches the old one's handler),
    and fsspec's cached ``HfFileSystem`` (what ``pd.read_parquet("hf://...")`` uses), made for the old endpoint
    with that endpoint's directory listings."""
    import huggingface_hub
    from huggingface_hub import HfFileSystem

    huggingface_hub.close_session()
    HfFileSystem.clear_instance_cache()
