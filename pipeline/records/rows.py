"""Judgments over a model's flat rows that no single column holds: which row stands for the model (on the page, in
its scripts) and the toolchain a row ran with, as people name it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.hardware import row_device

__all__ = ["representative", "toolchain_label"]


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
            _device(r) == "neuron",
            r.get("source") == "ci",
            r.get("status") == "pass",
            r["finished_at"],
        ),
    )


def _device(row: Mapping[str, Any]) -> str | None:
    return row_device(row.get("device"), hardware=row.get("hardware"), accelerator=row.get("accelerator"))


def toolchain_label(row: Mapping[str, Any]) -> str:
    """A short human label of the toolchain a (valid) row ran with: its backend's packages and versions."""
    from pipeline.backends import backend_class

    return backend_class(row["device"]).toolchain_label(row)
