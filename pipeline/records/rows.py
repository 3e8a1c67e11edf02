"""Judgments over a model's flat rows that no single column holds: which row stands for the model (on the page, in
its scripts) and the toolchain a row ran with, as people name it."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.hardware import row_device


def representative(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The one row that stands for a model (on the page, in its scripts): a Trainium2 result before any other, a
    Trainium3 one next (never in a Trainium2 row's place while one exists), then the project's own (CI) result
    before a community or local one, then a pass before a failure, then the newest. An emulated row (which
    validation keeps out of the dataset anyway) comes after every other row: it is no Trainium result and stands
    for a model only when nothing else does.

    Args:
        rows: Flat rows of one model (non-empty).

    Returns:
        The chosen row.
    """
    return max(
        rows,
        key=lambda r: (
            not r.get("emulated"),
            r.get("device") == "neuron" and not r.get("emulated"),  # an emulated row is never a Trainium one
            device_of(r) == "neuron",
            r.get("source") == "ci",
            r.get("status") == "pass",
            r["finished_at"],
        ),
    )


def device_of(row: Mapping[str, Any]) -> str | None:
    """The device a row is counted under (:func:`pipeline.hardware.row_device`: ``trainium3`` for a Trn3 row)."""
    return row_device(row.get("device"), hardware=row.get("hardware"), accelerator=row.get("accelerator"))


def toolchain_label(row: Mapping[str, Any]) -> str:
    """A short human label of the toolchain a (valid) row ran with: its backend's packages and versions."""
    device = row["device"]
    columns = _version_columns(device)
    # Labelled once per device and versions (a check or a page labels ~100,000 rows with a handful of toolchains).
    try:
        return _label(device, tuple(map(row.get, columns)), columns)
    except TypeError:  # a version that is not hashable (no valid row has one): labelled from the row itself
        from pipeline.backends import backend_class

        return backend_class(device).toolchain_label(row)


@functools.cache
def _version_columns(device: str) -> tuple[str, ...]:
    """The version columns a backend's label reads (:attr:`pipeline.backends.base.Backend.toolchain_packages`)."""
    from pipeline.backends import backend_class

    return tuple(f"{key}_version" for _, key in backend_class(device).toolchain_packages)


@functools.lru_cache(maxsize=4096)
def _label(device: str, versions: tuple[Any, ...], columns: tuple[str, ...]) -> str:
    from pipeline.backends import backend_class

    return backend_class(device).toolchain_label(dict(zip(columns, versions, strict=True)))
