"""A model's family, from its own small files: the class it is (``architecture``), its ``model_type``, and the
base models it names (its card's ``base_model``, an adapter's ``base_model_name_or_path``).

The files are read as data, like the gates read them; nothing of a repo is imported. Every name is the repo's own
text, so it is validated (:mod:`pipeline.ids`) and dropped when it is no plain class name, model type or Hub id.
Where the architecture comes from depends on the library: config.json's ``architectures[0]`` (transformers), the
pipeline class of model_index.json (diffusers), the transformer module's config (sentence-transformers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.hub import front_matter
from pipeline.ids import architecture_name, base_model_ids, model_type_name, validate_model_id

CARD_FILE = "README.md"
ADAPTER_CONFIG = "adapter_config.json"
#: The small files a model's family and plan are read from (never weights, never code).
FAMILY_FILES = ("config.json", "model_index.json", "modules.json", ADAPTER_CONFIG, CARD_FILE)
#: A file read here larger than this is not read (these files are a few KB; a card of megabytes is no card).
MAX_FILE_BYTES = 4 << 20
_TRANSFORMER_MODULE = "sentence_transformers.models.Transformer"
_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Family:
    """What a model is: its class, its model type and the models it was made from (each may be unknown)."""

    architecture: str | None = None
    model_type: str | None = None
    base_model: tuple[str, ...] = ()

    def record_fields(self) -> dict[str, Any]:
        """The record's family fields: only those known (an unknown one is absent, not null)."""
        base_model = list(self.base_model) or None
        out = {"architecture": self.architecture, "model_type": self.model_type, "base_model": base_model}
        return {key: value for key, value in out.items() if value is not None}


def read_small_json(path: Path) -> Any:
    """A small JSON file's value (bounded by :data:`MAX_FILE_BYTES`: untrusted), or None when absent, too large or
    unreadable."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def config_family(config: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(architecture, model_type) of a transformers config: ``architectures[0]`` and ``model_type``."""
    architectures = config.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures else None
    return architecture_name(first), model_type_name(config.get("model_type"))


def transformer_config_path(modules: Any) -> str | None:
    """Where a sentence-transformers model's transformer config lives, from its modules.json (``config.json`` at
    the root for most; ``<path>/config.json`` when the module has its own folder); None when it names none."""
    if not isinstance(modules, list):
        return None
    for module in modules:
        if isinstance(module, dict) and module.get("type") == _TRANSFORMER_MODULE:
            path = module.get("path")
            if path in ("", None):
                return "config.json"
            if isinstance(path, str) and _FOLDER.fullmatch(path) and ".." not in path:
                return f"{path}/config.json"  # a plain folder name; never a path that climbs out of the repo
            return None
    return None


def adapter_base(adapter_config: Any) -> str | None:
    """The Hub id a PEFT adapter is applied to (``base_model_name_or_path``), when it is one."""
    if not isinstance(adapter_config, dict):
        return None
    base = adapter_config.get("base_model_name_or_path")
    try:
        return validate_model_id(base.strip()) if isinstance(base, str) else None
    except ValueError:
        return None  # a local path the adapter was trained from: no Hub model to follow


def card_base_models(folder: Path) -> tuple[str, ...]:
    """The Hub ids the folder's model card names as ``base_model``."""
    path = folder / CARD_FILE
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return ()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    return base_model_ids(front_matter(text).get("base_model"))


def folder_family(folder: Path) -> Family:
    """The family of a model folder (a benchmarked model, or the small files ``trncat check`` fetched).

    A diffusers pipeline is its pipeline class (it has no model type); a sentence-transformers model is its
    transformer; any other folder is its config.json. Base models: the card's, then an adapter's own base.
    """
    architecture: str | None = None
    model_type: str | None = None
    index = read_small_json(folder / "model_index.json")
    if isinstance(index, dict) and not (folder / "config.json").is_file():
        architecture = architecture_name(index.get("_class_name"))
    else:
        inner = transformer_config_path(read_small_json(folder / "modules.json")) or "config.json"
        config = read_small_json(folder / inner)
        if isinstance(config, dict):
            architecture, model_type = config_family(config)
    bases = list(card_base_models(folder))
    adapter = adapter_base(read_small_json(folder / ADAPTER_CONFIG))
    if adapter and adapter not in bases:
        bases.append(adapter)
    return Family(architecture=architecture, model_type=model_type, base_model=tuple(bases))
