"""Registries name their entries ``"module:Class"`` and import a module only when its entry is used."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
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
