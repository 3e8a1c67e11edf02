"""What the Hub tells of a model's own files in its info: ``cardData`` (the README's YAML front matter) and
``config`` (a summary of config.json, or of a diffusers repo's model_index.json), read from the commit's tree.

huggingface_hub parses them into ``ModelInfo.card_data`` and ``ModelInfo.config``. Parsed once per blob: a listing
of thousands of models must not parse thousands of files per request, and a blob's content never changes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.hub import front_matter

CARD_FILE = "README.md"
#: The keys of config.json the summary keeps (what trncat and huggingface_hub's callers read from it).
CONFIG_KEYS = ("architectures", "model_type", "auto_map", "quantization_config")
#: A card or config larger than this is not parsed (a real card is a few KB; a YAML bomb is refused).
MAX_PARSED_BYTES = 1 << 20


@functools.lru_cache(maxsize=4096)
def _parsed(path: Path, kind: str) -> Any:
    try:
        if path.stat().st_size > MAX_PARSED_BYTES:
            return None
        text = path.read_text(encoding="utf-8")
        return front_matter(text) if kind == "card" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def card_and_config(
    tree: dict[str, dict[str, Any]], blob_path: Callable[[str], Path]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(cardData, config)`` of a commit's tree: None for what the tree does not hold.

    Args:
        tree: path -> entry of the commit (entries name their blob's sha256).
        blob_path: sha256 -> the blob's file.
    """

    def parsed(name: str, kind: str) -> Any:
        entry = tree.get(name)
        return _parsed(blob_path(entry["sha256"]), kind) if entry else None

    card = parsed(CARD_FILE, "card")
    config: dict[str, Any] | None = None
    raw = parsed("config.json", "json")
    if isinstance(raw, dict):
        config = {key: raw[key] for key in CONFIG_KEYS if key in raw}
    index = parsed("model_index.json", "json")
    if isinstance(index, dict) and "_class_name" in index:
        config = {**(config or {}), "diffusers": {"_class_name": index["_class_name"]}}
    return (card or None), config
