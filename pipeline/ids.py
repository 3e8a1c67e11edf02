"""Hub model ids and revisions: untrusted text, validated before use anywhere."""

from __future__ import annotations

import re

from pipeline.errors import ModelIdError

#: One part of ``org/name``: alphanumerics, ``-``, ``_`` and ``.``; no leading or trailing ``-``/``.``.
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
# Used with fullmatch and anchored with \A...\Z: `$` alone also matches before a trailing newline.
MODEL_ID_RE = re.compile(rf"\A{_PART}/{_PART}\Z")
REVISION_RE = re.compile(r"\A[0-9a-f]{40}\Z")
MAX_MODEL_ID_LENGTH = 193


def model_id_problem(model_id: object) -> str | None:
    """Why ``model_id`` is not a valid Hub model id, or None when it is."""
    if not isinstance(model_id, str):
        return f"must be a string, got {type(model_id).__name__}"
    if len(model_id) > MAX_MODEL_ID_LENGTH:
        return f"longer than {MAX_MODEL_ID_LENGTH} characters"
    if not MODEL_ID_RE.fullmatch(model_id):
        return f"{model_id!r} is not 'org/name' made of letters, digits, '-', '_' and '.'"
    if "--" in model_id or ".." in model_id:
        return f"{model_id!r} contains '--' or '..', which the Hub forbids"
    if model_id.endswith(".git"):
        return f"{model_id!r} ends with '.git'"
    return None


def validate_model_id(model_id: object) -> str:
    """Return ``model_id`` when it is a valid Hub model id.

    Raises:
        ModelIdError: it is not (the message says why).
    """
    problem = model_id_problem(model_id)
    if problem is not None:
        raise ModelIdError(f"invalid model id: {problem}")
    assert isinstance(model_id, str)
    return model_id


def is_revision(value: object) -> bool:
    """True for a full 40-hex commit sha (never a branch or a short sha)."""
    return isinstance(value, str) and REVISION_RE.fullmatch(value) is not None


def slug(model_id: str) -> tuple[str, str]:
    """``org/name`` -> ``(org, name)`` for paths such as ``scripts/<org>/<name>/``; validates first."""
    org, name = validate_model_id(model_id).split("/")
    return org, name
