"""Which ``model_type`` values the installed transformers knows, and its version, without importing it.

Importing any of transformers' config classes imports torch (transformers 5: ``configuration_utils`` imports
``modeling_rope_utils``, which imports torch), a few seconds and a few hundred MB before anything is built. A config
of a type transformers does not know is never built, so the planner asks this module first: the names are read as
text from transformers' own auto-mapping sources (``models/auto/auto_mappings.py``, the generated table, and
``models/auto/configuration_auto.py``, its additions). Every ``("<type>", "<Name>Config")`` pair and ``"<type>":
"<Name>Config"`` entry counts, so the set can hold more than transformers does, never less: a type wrongly taken
as known is then asked of transformers itself, which says no, and the answer is the same.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from pathlib import Path

#: The sources that name every config class by its model_type (transformers 5.x), under transformers' folder.
SOURCES = ("models/auto/auto_mappings.py", "models/auto/configuration_auto.py")
_PAIR = re.compile(r"""["']([A-Za-z0-9_.-]+)["']\s*[,:]\s*["']([A-Za-z0-9_]+Config)["']""")


@functools.cache
def known_model_types() -> frozenset[str] | None:
    """Every model_type the installed transformers maps to a config class, or None when that cannot be read
    without importing it (no transformers, or sources laid out otherwise): the caller then asks transformers."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    names: set[str] = set()
    for source in SOURCES:
        try:
            names.update(match.group(1) for match in _PAIR.finditer((root / source).read_text(encoding="utf-8")))
        except OSError:
            return None
    return frozenset(names) if names else None


@functools.cache
def transformers_version() -> str:
    """The installed transformers' version, from its metadata (no import), or ``unknown``."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
