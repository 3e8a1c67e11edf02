"""Where a benchmarked model comes from: a local folder or a Hub id, fetched without any code file.

A Hub model is downloaded at a revision with the files a benchmark needs only (:data:`ALLOW_PATTERNS`); a
text-to-image pipeline fetches its ``model_index.json`` first and is judged on it
(:func:`pipeline.models.gates.check_pipeline_classes`) before any component is fetched.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import ConfigError, PipelineError, RemoteCodeRefused
from pipeline.ids import is_revision, validate_model_id
from pipeline.models.gates import IDENTIFIER, check_pipeline_classes, read_model_index

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
    that still deserves a record). ``base_model`` is what the Hub's card metadata names (the card itself is not
    downloaded).
    """

    path: Path
    model_id: str
    revision: str
    error: str | None = None
    base_model: tuple[str, ...] = ()


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


#: The weight files of a diffusers component: the default variant only (``diffusion_pytorch_model.safetensors``,
#: ``model.safetensors`` or their shards); ``*.fp16.safetensors`` variants and a repo's single-file checkpoints
#: at its root (several GB each) are never fetched.
COMPONENT_FILES = ("*.json", "*.txt", "*.model", "*.jinja", "*model.safetensors", "*model-*-of-*.safetensors")


def pipeline_patterns(hub: Hub, model_id: str, sha: str) -> list[str]:
    """What a diffusers pipeline needs: ``model_index.json`` and its components' configs and default weights.

    The index is fetched first and judged (:func:`check_pipeline_classes`): a pipeline that names code outside
    diffusers and transformers fetches nothing more (the harness then records the refusal).
    """
    index_path = hub.download(model_id, "model_index.json", revision=sha)
    try:
        check_pipeline_classes(index_path.parent)
    except RemoteCodeRefused:
        return ["model_index.json"]
    index = read_model_index(index_path.parent) or {}
    components = [name for name, value in index.items() if not name.startswith("_") and isinstance(value, list)
                  and value != [None, None] and IDENTIFIER.match(name)]  # fmt: skip
    return ["model_index.json", *(f"{name}/{pattern}" for name in components for pattern in COMPONENT_FILES)]


def resolve_hub(model_id: str, *, hub: Hub, revision: str | None = None, task: str | None = None) -> ResolvedModel:
    """Download a Hub model at a revision (default: the main branch's head), without any code file.

    A text-to-image pipeline fetches only what its ``model_index.json`` names (:func:`pipeline_patterns`).

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
        patterns = pipeline_patterns(hub, model_id, sha) if task == "text-to-image" else ALLOW_PATTERNS
        path = hub.snapshot(model_id, revision=sha, allow_patterns=patterns)
        if task != "text-to-image" and not any(Path(path).glob("*.safetensors")):
            # Older checkpoints ship only PyTorch pickles; transformers loads them with weights_only=True.
            path = hub.snapshot(model_id, revision=sha, allow_patterns=[*ALLOW_PATTERNS, *LEGACY_WEIGHTS])
    except HubError as exc:
        return ResolvedModel(path=Path("."), model_id=model_id, revision=sha, error=f"download failed: {exc}")
    return ResolvedModel(path=Path(path), model_id=model_id, revision=sha, base_model=info.base_model)
