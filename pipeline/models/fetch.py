"""Where a benchmarked model comes from: a local folder or a Hub id, fetched without any code file.

A Hub model is downloaded at a revision with the files a benchmark needs only, chosen by exact path from the
repo's listing and checked against the plan's checkpoint bytes and the free disk first
(:mod:`pipeline.models.select`); a text-to-image pipeline fetches its ``model_index.json`` first and is judged on
it (:func:`pipeline.models.gates.check_pipeline_classes`) before any component is fetched.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import ConfigError, HubError, PipelineError, RemoteCodeRefused
from pipeline.ids import is_revision, validate_model_id
from pipeline.models.gates import IDENTIFIER, check_pipeline_classes, read_model_index
from pipeline.models.select import choose, module_folders, size_problem

if TYPE_CHECKING:
    from pipeline.hub import Hub

logger = logging.getLogger(__name__)
#: The largest weight index or modules.json read: a 405B model's index lists a few thousand tensors in ~100 KB.
MAX_INDEX_BYTES = 8 << 20


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
        digest.update(relative.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
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


def pipeline_folders(hub: Hub, model_id: str, sha: str) -> list[str] | None:
    """The component folders of a diffusers pipeline (``model_index.json``), or None when the index names code
    outside diffusers and transformers (:func:`check_pipeline_classes`): then nothing more is fetched, and the
    harness records the refusal."""
    index_path = hub.download(model_id, "model_index.json", revision=sha)
    try:
        check_pipeline_classes(index_path.parent)
    except RemoteCodeRefused:
        return None
    index = read_model_index(index_path.parent) or {}
    return [name for name, value in index.items() if not name.startswith("_") and isinstance(value, list)
            and value != [None, None] and IDENTIFIER.fullmatch(name)]  # fmt: skip


def resolve_hub(
    model_id: str,
    *,
    hub: Hub,
    revision: str | None = None,
    task: str | None = None,
    expected_bytes: int | None = None,
) -> ResolvedModel:
    """Download a Hub model at a revision (default: the main branch's head), without any code file.

    The files are chosen from the repo's listing by exact path (:mod:`pipeline.models.select`: no pattern
    crosses a folder, only the weights the library loads), their listed sizes checked against
    ``expected_bytes`` (the plan's checkpoint bytes, when known) and the free disk first; a text-to-image
    pipeline fetches only what its ``model_index.json`` names.

    Raises:
        ModelIdError: not a valid model id.
        RepoNotFoundError / GatedRepoError: the model or revision is missing, private or gated (no revision to
            record, so no record can be made).
    """
    validate_model_id(model_id)
    if revision is not None and not is_revision(revision):
        raise ConfigError(f"a revision must be a 40-hex commit sha, got {revision!r}")
    info = hub.model_info(model_id, revision=revision)
    sha = info.sha if info.sha and is_revision(info.sha) else revision
    if sha is None:
        raise PipelineError(f"the Hub gave no commit sha for {model_id}")
    try:
        sizes = hub.file_sizes(model_id, revision=sha)

        def read_json(path: str) -> Any:  # an index or modules.json: a few KB (a bigger one is no such file)
            if sizes.get(path, 0) > MAX_INDEX_BYTES:
                return None
            try:
                return json.loads(hub.download(model_id, path, revision=sha).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None

        if task == "text-to-image":
            components = pipeline_folders(hub, model_id, sha)
            files, weights = choose(sizes, components, read_json) if components is not None else ([], [])
            files = sorted({"model_index.json", *files})
        else:
            files, weights = choose(sizes, ["", *module_folders(sizes, read_json)], read_json)
        problem = size_problem(sizes, files, weights, expected_bytes=expected_bytes, free_bytes=hub.cache_free_bytes())
        if problem is not None:
            logger.warning("%s: download refused: %s", model_id, problem)
            return ResolvedModel(path=Path("."), model_id=model_id, revision=sha, error=f"download refused: {problem}")
        # Exact names: glob.escape keeps a name's own [, * or ? from matching anything else.
        path = hub.snapshot(model_id, revision=sha, allow_patterns=[glob.escape(f) for f in files])
    except HubError as exc:
        return ResolvedModel(path=Path("."), model_id=model_id, revision=sha, error=f"download failed: {exc}")
    return ResolvedModel(path=Path(path), model_id=model_id, revision=sha, base_model=info.base_model)
