"""Parameters and bytes of a checkpoint read from its ``*.safetensors`` headers alone (no weights): what the
planner counts when transformers cannot build the architecture, the bytes a download fetches, and the parameters
a serving row records (and those one token reads, which bound its points)."""

from __future__ import annotations

import json
import logging
import math
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: safetensors caps its JSON header at 100 MB (the format's own limit).
_MAX_HEADER_BYTES = 100_000_000


def _safetensors_headers(folder: Path, files: Iterable[Path] | None = None) -> list[dict[str, Any]]:
    """The JSON headers of a local folder's ``*.safetensors`` files, or of ``files`` (unreadable ones skipped with
    a warning)."""
    headers = []
    for file in sorted(folder.glob("*.safetensors") if files is None else files):
        try:
            with file.open("rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                if length > _MAX_HEADER_BYTES:  # a corrupt or hostile file: never read gigabytes for a header
                    raise ValueError(f"header of {length} bytes")
                header = json.loads(handle.read(length))
        except (OSError, struct.error, ValueError) as exc:
            logger.warning("unreadable safetensors header in %s: %s", file, exc)
            continue
        if isinstance(header, dict):
            headers.append(header)
    return headers


def _tensors(header: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, entry) of each tensor of a header (its ``__metadata__`` is none)."""
    return ((name, entry) for name, entry in header.items() if name != "__metadata__" and isinstance(entry, dict))


def safetensors_param_count(folder: Path, files: Iterable[Path] | None = None, *, active: bool = False) -> int | None:
    """Parameters in the ``*.safetensors`` files of a local folder, read from their headers only.

    Args:
        folder: a local model folder.
        files: count only these files (one variant of a diffusers component's weights), not the folder's.
        active: count those one token reads: of a mixture of experts' routed experts (tensors under ``.experts.``;
            a shared expert's are not) only ``num_experts_per_tok`` of ``num_local_experts`` (or ``num_experts``,
            ``n_routed_experts``), from the folder's ``config.json``.

    Returns:
        The element count of every tensor, or None when the folder has no readable safetensors file.
    """
    headers = _safetensors_headers(folder, files)
    sizes = [(name, math.prod(entry.get("shape", []))) for header in headers for name, entry in _tensors(header)]
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8")) if active else {}
        config = config.get("text_config") or config
        top_k, experts = config.get("num_experts_per_tok"), next(filter(None, (config.get(k) for k in (
            "num_local_experts", "num_experts", "n_routed_experts"))), None)  # fmt: skip
    except (OSError, ValueError, AttributeError):
        top_k = experts = None
    routed = sum(size for name, size in sizes if ".experts." in name)
    if not isinstance(top_k, int) or not isinstance(experts, int) or not 0 < top_k < experts:
        routed = top_k = experts = 0
    return sum(size for _, size in sizes) - routed + routed * top_k // max(experts, 1) if headers else None


def safetensors_bytes(folder: Path) -> int | None:
    """Bytes of tensor data in the ``*.safetensors`` files of a local folder (what a download fetches).

    Args:
        folder: a local model folder.

    Returns:
        The sum of every tensor's data span, or None when the folder has no readable safetensors file.
    """
    headers = _safetensors_headers(folder)
    spans = [entry.get("data_offsets") for header in headers for _, entry in _tensors(header)]
    valid = [
        span for span in spans if isinstance(span, list) and len(span) == 2 and all(isinstance(o, int) for o in span)
    ]
    return sum(max(0, end - start) for start, end in valid) if headers else None
