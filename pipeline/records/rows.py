"""Rules on the flat rows of :mod:`pipeline.records.columns`: the one row that stands for a model, and a row's
toolchain label. Kept apart from the flat form itself, which only turns records into rows and back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def representative(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The one row that stands for a model (on the page, in its scripts): a Trainium result (never an emulated one,
    which validation keeps out of the dataset anyway) before any other,
    then the project's own (CI) result before a community or local one, then a pass before a failure, then the
    newest.

    Args:
        rows: Flat rows of one model (non-empty).

    Returns:
        The chosen row.
    """
    return max(
        rows,
        key=lambda r: (
            r.get("device") == "neuron" and not r.get("emulated"),  # an emulated row is never a Trainium one
            r.get("source") == "ci",
            r.get("status") == "pass",
            r["finished_at"],
        ),
    )


def toolchain_label(row: Mapping[str, Any]) -> str:
    """A short human label of the toolchain a (valid) row ran with: its backend's packages and versions."""
    from pipeline.backends import backend_class

    return backend_class(row["device"]).toolchain_label(row)
