"""Where a benchmarked model comes from: a local folder or a Hub id, and the remote-code gate.

The remote-code gate reads config.json only: a model whose architecture transformers does not ship and that
asks for its own code (``auto_map``) is refused before any of its files could be imported. A model that
declares remote code but whose ``model_type`` transformers knows runs on transformers' own code.

A diffusers pipeline is gated on its ``model_index.json``: ``DiffusionPipeline.from_pretrained`` loads each
component ``[library, class]`` from ``diffusers.pipelines.<library>`` when diffusers has such a pipeline module,
and otherwise with ``importlib.import_module(library)`` (diffusers' ``pipeline_utils.py``, "3. Load each module
in the pipeline"), and a ``_class_name`` given as ``[file, class]`` is a custom pipeline read from the repo. So
every component must name diffusers, transformers or one of diffusers' own pipeline modules, and the pipeline
class a plain name (:func:`check_pipeline_classes`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


#: The libraries a pipeline component may come from, besides diffusers' own pipeline modules.
PIPELINE_LIBRARIES = frozenset({"diffusers", "transformers"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def diffusers_pipeline_module(name: str) -> bool:
    """Whether diffusers ships a pipeline module ``name`` (what diffusers itself asks, ``hasattr(pipelines, name)``,
    answered from the installed package's files: ``diffusers/pipelines/<name>/`` or ``<name>.py``).

    Imports nothing (not even diffusers, which would bring torch); False when diffusers is not installed.
    """
    import importlib.util

    if not _IDENTIFIER.match(name):
        return False
    try:
        spec = importlib.util.find_spec("diffusers")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    for root in spec.submodule_search_locations:
        pipelines = Path(root) / "pipelines"
        if (pipelines / name / "__init__.py").is_file() or (pipelines / f"{name}.py").is_file():
            return True
    return False


def read_model_index(folder: Path) -> dict | None:
    """model_index.json of a pipeline folder, None when there is none.

    Raises:
        RemoteCodeRefused: the file is there but is no JSON object (it cannot be judged, so it is not loaded).
    """
    data = _judged_json(folder / "model_index.json")
    if data is not None and not isinstance(data, dict):
        raise RemoteCodeRefused("model_index.json is not a JSON object, so its classes cannot be checked")
    return data


def _judged_json(path: Path) -> Any:
    """A JSON file the remote-code gate judges: None when absent; refused when it cannot be read (what cannot be
    judged is not loaded)."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RemoteCodeRefused(f"{path.name} cannot be read, so what it names cannot be checked: {exc}") from None


def check_pipeline_classes(folder: Path, *, pipeline_module: Callable[[str], bool] = diffusers_pipeline_module) -> None:
    """Refuse a diffusers pipeline that would import code from outside diffusers and transformers.

    Reads ``model_index.json`` only (nothing is imported before the verdict but diffusers' own pipelines package,
    and only for a component that names neither diffusers nor transformers). A folder without the file is no
    pipeline and passes (loading it then fails with its own error).

    Args:
        folder: The model folder.
        pipeline_module: Whether diffusers has a pipeline module of that name (e.g. ``stable_diffusion``, where
            Stable Diffusion's safety checker lives).

    Raises:
        RemoteCodeRefused: a component names another library (or the repo's own module), the pipeline class is
            a custom pipeline, or a name is not a plain Python identifier.
    """
    index = read_model_index(folder)
    if index is not None:
        check_model_index(index, pipeline_module=pipeline_module)


def check_model_index(index: dict, *, pipeline_module: Callable[[str], bool] = diffusers_pipeline_module) -> None:
    """The check of :func:`check_pipeline_classes` on a parsed ``model_index.json`` (from a folder or the Hub).

    Raises:
        RemoteCodeRefused: as :func:`check_pipeline_classes`.
    """
    class_name = index.get("_class_name")
    if not isinstance(class_name, str) or not _IDENTIFIER.match(class_name):
        raise RemoteCodeRefused(
            f"model_index.json names the pipeline class {str(class_name)[:80]!r}, not a diffusers class name "
            "(a [file, class] pair is a custom pipeline read from the repo); trncat never runs remote code"
        )
    dynamic: list[tuple[str, str]] = []
    for component, value in index.items():
        if component.startswith("_") or not isinstance(value, list):
            continue  # metadata (_diffusers_version, ...) and plain settings (requires_safety_checker, ...)
        if value == [None, None]:
            continue  # an absent optional component: diffusers loads nothing for it
        if len(value) != 2 or not all(isinstance(v, str) and _IDENTIFIER.match(v) for v in value):
            raise RemoteCodeRefused(
                f"model_index.json: component {component[:60]!r} is {str(value)[:80]}, not [library, class] of "
                "plain names; trncat never runs remote code"
            )
        library = value[0]
        if library not in PIPELINE_LIBRARIES:
            dynamic.append((component, library))
    for component, library in dynamic:
        if not pipeline_module(library):
            raise RemoteCodeRefused(
                f"model_index.json: component {component[:60]!r} comes from {library!r}, which is neither diffusers, "
                "transformers nor a diffusers pipeline module: diffusers would import it as a module; "
                "trncat never runs remote code"
            )


#: The modules a sentence-transformers model's modules.json may name: the library's own.
SENTENCE_MODULE_PREFIX = "sentence_transformers."


def check_sentence_modules(folder: Path) -> None:
    """Refuse a sentence-transformers model whose ``modules.json`` names a module class outside the library.

    sentence-transformers imports each module's ``type`` by its dotted path; a type that is not the library's
    own is the repo's code. Reads the JSON only; a folder without the file is no sentence-transformers model.

    Raises:
        RemoteCodeRefused: a module's type is outside ``sentence_transformers``, or the file cannot be judged.
    """
    modules = _judged_json(folder / "modules.json")
    if modules is None:
        return
    if not isinstance(modules, list):
        raise RemoteCodeRefused("modules.json is not a list of modules, so they cannot be checked")
    for module in modules:
        kind = module.get("type") if isinstance(module, dict) else None
        if not isinstance(kind, str) or not kind.startswith(SENTENCE_MODULE_PREFIX):
            raise RemoteCodeRefused(
                f"modules.json names the module {str(kind)[:80]!r}, not one of sentence-transformers' own: "
                "sentence-transformers would import it from the repo; trncat never runs remote code"
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
                  and value != [None, None] and _IDENTIFIER.match(name)]  # fmt: skip
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
    return ResolvedModel(path=Path(path), model_id=model_id, revision=sha)
