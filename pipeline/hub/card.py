"""A model card's metadata: the YAML front matter that opens its README.md (what the Hub answers as ``cardData``)."""

from __future__ import annotations

import logging
from typing import Any

import yaml

logger = logging.getLogger(__name__)


def front_matter(text: str) -> dict[str, Any]:
    """The YAML block that opens a model card (between two ``---`` lines), as a mapping; {} when there is none
    or it is no mapping (the Hub then has no card metadata either)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return {}
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        logger.debug("a card's front matter is not YAML: %s", exc)
        return {}
    return data if isinstance(data, dict) else {}
