"""The catalog page's tests."""

from typing import Any


def joined(texts: dict[str, list[Any]]) -> list[str]:
    """The texts of a data file's (or the inline store's) rows or details, as the page's script joins them
    (pipeline.page.chunks.texts: each distinct part once, each text its parts' places)."""
    return ["".join(texts["s"][k] for k in at) for at in texts["e"]]
