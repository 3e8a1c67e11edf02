"""The useful part of a traceback or a compiler log, short enough to store in a record."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_HOME = re.compile(r"(?:/home/|/Users/)[^/\s'\"]+|/root(?=/)")
_KEY_LINE = re.compile(
    r"\bNCC_[A-Z]{3,5}\d{3}\b|\[[A-Z]{1,4}\d{3}\]|^\s*[\w.]*(?:Error|Exception|Exit|Failed|Refused)\b[:(]?"
    r"|\bERROR\b|\bFATAL\b|Traceback \(most recent call last\)|^\s*Killed\b",
)
_MARK = "[...]"


def summarize_message(text: str, *, limit: int = 2000) -> str:
    """The useful part of a traceback or compiler log, at most ``limit`` characters.

    ANSI codes are stripped and home directories shortened to ``~``. When the text is too long, the
    error lines (exception lines, ``ERROR``, ``NCC_`` codes) are kept first and the rest of the budget
    goes to the tail of the log, where the final exception is.

    Args:
        text: Raw message or log.
        limit: Maximum length of the result.

    Returns:
        The summary (empty for an empty text).

    Raises:
        ValueError: If ``limit`` is smaller than 40.
    """
    if limit < 40:
        raise ValueError("limit must be at least 40")
    clean = _HOME.sub("~", _ANSI.sub("", text or "")).replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in clean.split("\n") if line.strip()]
    joined = "\n".join(lines)
    if len(joined) <= limit:
        return joined
    line_cap = max(limit // 4, 20)
    key: list[str] = []
    for line in lines:
        if _KEY_LINE.search(line) and "Traceback (most recent" not in line:
            short = line.strip()[:line_cap]
            if short not in key:
                key.append(short)
    # Error lines may fill at most half the budget; the newest ones matter most.
    head = _newest(key, limit // 2)
    used = sum(len(line) + 1 for line in head)
    tail = _newest([line[:line_cap] for line in lines], limit - used - len(_MARK) - 2)
    head = [line for line in head if line not in {t.strip() for t in tail}]
    out = "\n".join([*head, _MARK, *tail]) if head else "\n".join([_MARK, *tail])
    return out[-limit:]


def _newest(lines: list[str], budget: int) -> list[str]:
    """The last of ``lines`` that fit in ``budget`` characters together, each with its newline, in their order."""
    kept: list[str] = []
    for line in reversed(lines):
        budget -= len(line) + 1
        if budget < 0:
            break
        kept.insert(0, line)
    return kept
