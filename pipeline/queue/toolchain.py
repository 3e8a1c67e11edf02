"""The toolchain the runners run: ``runners/toolchain.yaml``'s pins, and a row's version as compared with a pin.

The queue keys a measurement by these versions (:mod:`pipeline.queue.matrix`), the duration model counts compiles at
the current compiler (:mod:`pipeline.queue.durations`) and ``trncat doctor`` checks the machine against the pins.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline import constants
from pipeline.errors import ConfigError
from pipeline.records import COLUMN_NAMES

#: The toolchain file's section of Debian packages (the runner image's apt pins): not record versions, so
#: never compared with results.
APT_SECTION = "apt"
#: The serving engine's pins (``trncat release-watch`` bumps them): a serving record keeps them in its
#: ``serving.versions``, no result row carries them, so they are never compared with results either.
SERVING_PINS = ("vllm_neuron", "libtorch_neuronx_lite")


def version_column(key: str) -> str:
    return f"{key}_version"


def public_version(version: object) -> str | None:
    """A version without its local ``+build`` part (the runner may report one the pin does not carry)."""
    return None if version is None else str(version).split("+", 1)[0]


def as_pinned(version: object, pin: str) -> str | None:
    """A row's version as the queue compares it with a pin: its public part, or the pin itself when the version
    is the pin followed by more components (torch-neuronx wheels of the ``2.14.3.0.*`` family)."""
    public = public_version(version)
    return pin if public is not None and public.startswith(pin + ".") else public


def load_toolchain(path: Path | None = None) -> dict[str, str]:
    """The pinned toolchain versions, e.g. ``{"neuronx_cc": "2.28.7631.0", ...}`` (without the ``apt`` section of
    Debian packages and the serving engine's pins, which no result row carries).

    Args:
        path: A YAML (or JSON) mapping of version key -> version; None for ``TRNCAT_TOOLCHAIN``
            (``runners/toolchain.yaml`` unless set).

    Returns:
        The mapping.

    Raises:
        ConfigError: unreadable file, or a key that is no record version field, or a value not a string.
    """
    path, data = _read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of version key -> version")
    for key in (APT_SECTION, *SERVING_PINS):
        data.pop(key, None)
    try:
        return check_toolchain(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _read(path: Path | None) -> tuple[Path, Any]:
    """The toolchain file (None: ``TRNCAT_TOOLCHAIN``) and its parsed YAML; :class:`ConfigError` if unreadable."""
    path = constants.TRNCAT_TOOLCHAIN if path is None else Path(path)
    try:
        return path, yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:  # ValueError: a 5,000-digit number
        raise ConfigError(f"{path}: unreadable toolchain file: {' '.join(str(exc).split())[:300]}") from None


def check_toolchain(toolchain: Mapping[str, Any]) -> dict[str, str]:
    """The pins, stripped, or :class:`ConfigError` on an empty set, a key no record version field has, a non-string."""
    if not toolchain:
        raise ConfigError("the toolchain names no version to compare results against")
    for key, value in toolchain.items():
        if version_column(str(key)) not in COLUMN_NAMES:
            known = sorted(c.removesuffix("_version") for c in COLUMN_NAMES if c.endswith("_version"))
            raise ConfigError(f"toolchain key {key!r} is not a record version; choose from {', '.join(known)}")
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"toolchain {key}: version must be a non-empty string, got {value!r}")
    return {str(k): v.strip() for k, v in toolchain.items()}


def load_apt_pins(path: Path | None = None) -> dict[str, str]:
    """The toolchain file's ``apt:`` section: Debian package -> its pinned version (``2.35.30.0*``, apt's form);
    empty when the file has none.

    Raises:
        ConfigError: unreadable file, or a section that is not a mapping of names to version strings.
    """
    path, data = _read(path)
    section = data.get(APT_SECTION) if isinstance(data, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict) or not all(isinstance(v, str) and v.strip() for v in section.values()):
        raise ConfigError(f"{path}: its {APT_SECTION} section must map Debian packages to version strings")
    return {str(k): v.strip() for k, v in section.items()}
