"""Registries name their entries ``"module:Class"`` and import a module only when its entry is used; a package
face made with :func:`lazy_face` imports a public name's module only when that name is used."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError


def load_entry(registry: Mapping[str, str], name: str, *, what: str) -> Any:
    """The class registered as ``name``, imported on first use.

    Raises:
        ConfigError: no such entry (the message lists the choices).
    """
    try:
        target = registry[name]
    except KeyError:
        raise ConfigError(f"unknown {what} {name!r}; choose from {', '.join(registry)}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def lazy_face(module_name: str) -> None:
    """Make a package face import each public name's module on that name's first use.

    The face lists its names as imports under ``if TYPE_CHECKING:`` (a type checker and the architecture test read
    them as plain imports); this reads that block from the face's own source, so the one list of names and modules
    is the face's. A command that needs one name of a package then imports that name's module, not all of the
    package's (``trncat check`` starts without the dataset build, the page or the Hub client's library). Call it
    last in the face:

        if TYPE_CHECKING:
            from pipeline.dataset.build import build
        lazy_face(__name__)

    A public name that is also a submodule's name (``pipeline.dataset.build``, the module, and ``build``, its
    function) stays the public object when the submodule is imported by another path, as with an eager face.
    """
    module = sys.modules[module_name]
    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom) and item.module:
                    table.update({a.asname or a.name: (item.module, a.name) for a in item.names})

    class LazyFace(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            try:
                source, original = table[name]
            except KeyError:
                raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
            # a submodule the face lists by name (``from pipeline.hub import together``), else a name of a module
            value = (importlib.import_module(f"{source}.{original}") if source == module_name
                     else getattr(importlib.import_module(source), original))  # fmt: skip
            setattr(self, name, value)  # the next use is a plain attribute
            return value

        def __setattr__(self, name: str, value: Any) -> None:
            entry = table.get(name)
            if entry and isinstance(value, types.ModuleType) and value.__name__ == entry[0]:
                value = getattr(value, entry[1])  # the import system binding the submodule: keep the public name
            super().__setattr__(name, value)

        def __dir__(self) -> list[str]:
            return sorted(set(vars(self)) | set(table))

    module.__class__ = LazyFace
