"""Where a benchmarked model comes from: a local folder or a Hub id, and the remote-code gate.

The remote-code gate reads config.json only: a model whose architecture transformers does not ship and that
asks for its own code (``auto_map``) is refused before any of its files could be imported. A model that
declares remote code but whose ``model_type`` transformers knows runs on transformers' own code.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import ConfigError, PipelineError, RemoteCodeRefused
from pipeline.ids import is_revision, validate_model_id

if TYPE_CHECKING:
    from pipeline.hub import Hub

#: Files a benchmark needs; code files (*.py) are never fetched, so remote code cannot even be on disk.
ALLOW_PATTERNS = [
    "*.json",
    "*.safetensors",
    "*.model",
    "*.txt",
    "*.jinja",
    "*.tiktoken",
]


#: Fetched only when a revision has no safetensors at all (never beside them: that would double the download).
LEGACY_WEIGHTS = ["pytorch_model*.bin"]


@dataclass(frozen=True)
class ResolvedModel:
    """A model ready to benchmark: its folder, and the id and revision its record carries.

    ``error`` is set when the revision is known but the files could not be fetched (an infrastructure error
    that still deserves a record).
    """

    path: Path
    model_id: str
    revision: str
    error: str | None = None


def content_revision(folder: Path) -> str:
    """A 40-hex revision from the content of every file in ``folder`` (names and bytes), deterministic."""
    digest = hashlib.sha1()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = file.relative_to(folder).as_posix()
        if relative.startswith(".") or "/." in relative:
            continue
        digest.update(relative.encode())
        digest.update(b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def local_model_id(folder: Path) -> str:
    """A deterministic valid Hub-style id for a local folder: ``local/<folder name, sanitized>``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name).strip("-._") or "model"
    name = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", name))[:96].strip("-._") or "model"
    return validate_model_id(f"local/{name}")


def resolve_local(folder: Path, *, model_id: str | None = None, revision: str | None = None) -> ResolvedModel:
    """Describe a local model folder; ``model_id``/``revision`` override the derived ones."""
    if model_id is not None:
        validate_model_id(model_id)
    if revision is not None and not is_revision(revision):
        raise ConfigError(f"a revision must be a 40-hex commit sha, got {revision!r}")
    return ResolvedModel(
        path=folder,
        model_id=model_id or local_model_id(folder),
        revision=revision or content_revision(folder),
    )


def read_config(folder: Path) -> dict:
    """config.json of a model folder, or {} when absent or unreadable (loading then fails with its own error)."""
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def known_model_types() -> frozenset[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return frozenset(CONFIG_MAPPING_NAMES)


def check_remote_code(folder: Path) -> None:
    """Refuse a model that needs its own code.

    Raises:
        RemoteCodeRefused: config.json asks for remote code (``auto_map``) and transformers does not know its
            ``model_type``.
    """
    config = read_config(folder)
    if not config.get("auto_map"):
        return
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in known_model_types():
        return
    raise RemoteCodeRefused(
        f"model type {model_type!r} is not in transformers and the model asks for its own code (auto_map); "
        "trncat never runs remote code"
    )


def resolve_hub(model_id: str, *, hub: Hub, revision: str | None = None) -> ResolvedModel:
    """Download a Hub model at a revision (default: the main branch's head), without any code file.

    Raises:
        ModelIdError: not a valid model id.
        RepoNotFoundError / GatedRepoError: the model or revision is missing, private or gated (no revision to
            record, so no record can be made).
    """
    from pipeline.errors import HubError

    validate_model_id(model_id)
    if revision is not None and not is_revision(revision):
        raise ConfigError(f"a revision must be a 40-hex commit sha, got {revision!r}")
    info = hub.model_info(model_id, revision=revision)
    sha = info.sha if info.sha and is_revision(info.sha) else revision
    if sha is None:
        raise PipelineError(f"the Hub gave no commit sha for {model_id}")
    try:
        path = hub.snapshot(model_id, revision=sha, allow_patterns=ALLOW_PATTERNS)
        if not any(Path(path).glob("*.safetensors")):
            # Older checkpoints ship only PyTorch pickles; transformers loads them with weights_only=True.
            path = hub.snapshot(model_id, revision=sha, allow_patterns=[*ALLOW_PATTERNS, *LEGACY_WEIGHTS])
    except HubError as exc:
        return ResolvedModel(path=Path("."), model_id=model_id, revision=sha, error=f"download failed: {exc}")
    return ResolvedModel(path=Path(path), model_id=model_id, revision=sha)
