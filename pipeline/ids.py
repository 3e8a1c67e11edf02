"""Hub model ids and revisions, and the names a model's files give its family (architecture, model type, base
models): untrusted text, validated before use anywhere."""

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


# -- a model's family: the names its files and card give (untrusted text too) ----------------------------------
#: A class name as config.json's ``architectures`` or model_index.json's ``_class_name`` gives it.
ARCHITECTURE_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
#: A config's ``model_type`` (``llama``, ``qwen2_vl``, ``xlm-roberta``).
MODEL_TYPE_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
#: Base models kept from a card: a merge can name a dozen; past this many the rest are dropped.
MAX_BASE_MODELS = 32


def architecture_name(value: object) -> str | None:
    """``value`` when it is a plain class name (what a record's ``architecture`` holds), else None."""
    return value if isinstance(value, str) and ARCHITECTURE_RE.fullmatch(value) else None


def model_type_name(value: object) -> str | None:
    """``value`` when it is a plain ``model_type`` (what a record's ``model_type`` holds), else None."""
    return value if isinstance(value, str) and MODEL_TYPE_RE.fullmatch(value) else None


def base_model_ids(value: object) -> tuple[str, ...]:
    """The valid Hub ids of a card's ``base_model`` (a string or a list of them), in order, each once.

    A card is free text: an entry that is no Hub id (a local path, a URL, a number) is left out, and so is
    everything past :data:`MAX_BASE_MODELS`.
    """
    entries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    stripped = (entry.strip() for entry in entries if isinstance(entry, str))
    return tuple(dict.fromkeys(e for e in stripped if model_id_problem(e) is None))[:MAX_BASE_MODELS]
