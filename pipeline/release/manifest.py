"""The Neuron SDK's release manifest: ``src/helperscripts/n2-manifest.json`` of aws-neuron-sdk, the file the docs'
release-content pages are generated from (docs/neuron-facts.md, "the release manifest").

Its shape (the file as published): ``manifest_version``, ``manifest_date``, ``latest_release`` (one
``{"instance", "version"}`` per instance family), ``package_properties`` and ``neuron_releases``: one entry per SDK
release, ``{"neuron_version", "packages": [{"name", "version", "supported_instances", ...}]}``; a package may appear
more than once in a release (one entry per framework family: ``torch-xla`` 2.11.0 and 2.12.0). The text is
untrusted: every version read from it must look like a version, or the whole manifest is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import ConfigError

#: The instance family trncat's runners are (the manifest lists Trn2 packages under ``trn2``).
INSTANCE = "trn2"
#: A release or package version as the manifest writes them (``2.28.7631.0``, ``14.09.x``, ``0.29.0.1.2.0``).
_VERSION = re.compile(r"^[0-9]+(\.[0-9A-Za-z]+){0,7}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: Caps on an untrusted file: releases and packages per release.
MAX_RELEASES, MAX_PACKAGES = 500, 500


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """A version's sort key: numeric parts as numbers (``2.10.0`` after ``2.9.1``), others after them."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in version.split("."))


@dataclass(frozen=True)
class Release:
    """One SDK release as the manifest lists it for one instance family."""

    version: str
    #: package name -> its versions in this release for the instance family, newest first.
    packages: Mapping[str, tuple[str, ...]]

    def versions(self, name: str) -> tuple[str, ...]:
        return self.packages.get(name, ())


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest: its own version and date, the latest release per instance family, the releases."""

    manifest_version: str
    manifest_date: str | None
    latest: Mapping[str, str]
    releases: Mapping[str, Release]

    def latest_release(self, instance: str = INSTANCE) -> Release:
        """The newest release the manifest names for ``instance`` (its ``latest_release`` entry).

        Raises:
            ConfigError: the manifest names no latest release for it, or lists no packages for that release.
        """
        version = self.latest.get(instance)
        if version is None:
            raise ConfigError(f"the Neuron manifest names no latest release for {instance}")
        release = self.releases.get(version)
        if release is None or not release.packages:
            raise ConfigError(
                f"the Neuron manifest names {version} as {instance}'s latest but lists no packages for it"
            )
        return release


def _version(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        raise ConfigError(f"Neuron manifest: {what} is not a version: {str(value)[:60]!r}")
    return value


def parse_manifest(text: str, *, instance: str = INSTANCE) -> Manifest:
    """Parse the manifest's JSON text, keeping each release's packages for ``instance``.

    Raises:
        ConfigError: not JSON, not the manifest's shape, or a name or version that is not one.
    """
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Neuron manifest: not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("neuron_releases"), list):
        raise ConfigError("Neuron manifest: no neuron_releases list")
    latest_entries = data.get("latest_release")
    if not isinstance(latest_entries, list):
        raise ConfigError("Neuron manifest: no latest_release list")
    latest: dict[str, str] = {}
    for entry in latest_entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("instance"), str):
            raise ConfigError("Neuron manifest: a latest_release entry is not {instance, version}")
        latest[entry["instance"]] = _version(entry.get("version"), f"latest_release {entry['instance'][:20]!r}")
    releases_in = data["neuron_releases"]
    if len(releases_in) > MAX_RELEASES:
        raise ConfigError(f"Neuron manifest: more than {MAX_RELEASES} releases")
    releases: dict[str, Release] = {}
    for entry in releases_in:
        if not isinstance(entry, dict) or not isinstance(entry.get("packages"), list):
            raise ConfigError("Neuron manifest: a release entry is not {neuron_version, packages}")
        version = _version(entry.get("neuron_version"), "a neuron_version")
        if len(entry["packages"]) > MAX_PACKAGES:
            raise ConfigError(f"Neuron manifest: release {version} lists more than {MAX_PACKAGES} packages")
        packages: dict[str, list[str]] = {}
        for package in entry["packages"]:
            if not isinstance(package, dict):
                raise ConfigError(f"Neuron manifest: release {version} has a package that is not an object")
            name, instances = package.get("name"), package.get("supported_instances")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(f"Neuron manifest: release {version} has a bad package name: {str(name)[:60]!r}")
            if not isinstance(instances, list):
                raise ConfigError(f"Neuron manifest: {name} {version}: supported_instances is not a list")
            if package.get("version") == "na" or instance not in instances:  # efa-installer's "na": no package
                continue
            packages.setdefault(name, []).append(_version(package.get("version"), f"{name} of {version}"))
        releases[version] = Release(
            version, {n: tuple(sorted(set(v), key=version_key, reverse=True)) for n, v in packages.items()}
        )
    date = data.get("manifest_date")
    return Manifest(
        manifest_version=_version(data.get("manifest_version"), "manifest_version"),
        manifest_date=date if isinstance(date, str) and len(date) <= 20 else None,
        latest=latest,
        releases=releases,
    )
