"""The remote-code gates: what a model's own files ask to import, judged before anything of it is loaded.

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

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.errors import RemoteCodeRefused
from pipeline.models.family import MAX_FILE_BYTES, read_small_json


def read_config(folder: Path) -> dict:
    """config.json of a model folder, or {} when absent or unreadable (loading then fails with its own error)."""
    data = read_small_json(folder / "config.json")
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
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def diffusers_pipeline_module(name: str) -> bool:
    """Whether diffusers ships a pipeline module ``name`` (what diffusers itself asks, ``hasattr(pipelines, name)``,
    answered from the installed package's files: ``diffusers/pipelines/<name>/`` or ``<name>.py``).

    Imports nothing (not even diffusers, which would bring torch); False when diffusers is not installed.
    """
    import importlib.util

    if not IDENTIFIER.fullmatch(name):
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
    if (size := path.stat().st_size) > MAX_FILE_BYTES:
        raise RemoteCodeRefused(f"{path.name} is {size} bytes, over the {MAX_FILE_BYTES} a small file may be")
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
    if not isinstance(class_name, str) or not IDENTIFIER.fullmatch(class_name):
        raise RemoteCodeRefused(
            f"model_index.json names the pipeline class {str(class_name)[:80]!r}, not a diffusers class name "
            "(a [file, class] pair is a custom pipeline read from the repo); trncat never runs remote code"
        )
    for component, value in index.items():
        if component.startswith("_") or not isinstance(value, list):
            continue  # metadata (_diffusers_version, ...) and plain settings (requires_safety_checker, ...)
        if value == [None, None]:
            continue  # an absent optional component: diffusers loads nothing for it
        if len(value) != 2 or not all(isinstance(v, str) and IDENTIFIER.fullmatch(v) for v in value):
            raise RemoteCodeRefused(
                f"model_index.json: component {component[:60]!r} is {str(value)[:80]}, not [library, class] of "
                "plain names; trncat never runs remote code"
            )
        library = value[0]
        if library not in PIPELINE_LIBRARIES and not pipeline_module(library):
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


def refusal(folder: Path) -> str | None:
    """Why a model folder's own files ask for code trncat never runs (each gate above: config.json, model_index.json,
    modules.json), or None: the verdict the bench and ``trncat check`` act on before anything of it is loaded."""
    try:
        check_remote_code(folder)
        check_pipeline_classes(folder)
        check_sentence_modules(folder)
    except RemoteCodeRefused as exc:
        return str(exc)
    return None
