"""The release watch: a Neuron release newer than the runners' -> the files of the pull request that bumps them.

Every pin it writes comes from the release's own manifest entry (:mod:`pipeline.release.manifest`) and the pull
request says where each one came from; what the manifest does not name is left as it is, and the body says so.
One bump changes together: ``runners/toolchain.yaml`` (the Python pins and its ``apt:`` section), the runner
image tag (``trncat-runner:<release>`` in ``runners/Dockerfile`` and ``runners/arc-values.yaml``) and the
``vllm_neuron`` (and ``libtorch_neuronx_lite``) pin where the toolchain file has one. Nothing is new (the
manifest's latest release is not newer than the one the toolchain file names): no bump, and no pull request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.errors import ConfigError
from pipeline.release.manifest import INSTANCE, Manifest, Release, version_key

TOOLCHAIN_FILE, DOCKERFILE, ARC_VALUES = "runners/toolchain.yaml", "runners/Dockerfile", "runners/arc-values.yaml"
#: toolchain.yaml key -> the manifest's package name.
PYTHON_PINS: Mapping[str, str] = {
    "neuronx_cc": "neuronx-cc",
    "torch_neuronx": "torch-neuronx",
    "nki": "nki",
    "vllm_neuron": "vllm-neuron",
    # what vLLM Neuron compiles through (one build per PyTorch version, like torch-neuronx)
    "libtorch_neuronx_lite": "libtorch_neuronx_lite",
}
#: Pins listed once per PyTorch version: the one whose first two components are the torch pin's is taken.
_PER_TORCH = ("torch_neuronx", "libtorch_neuronx_lite")
#: The Debian packages of the ``apt:`` section (their manifest names are theirs).
APT_PACKAGES = ("aws-neuronx-runtime-lib", "aws-neuronx-collectives", "aws-neuronx-tools", "aws-neuronx-dkms")
DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
_RELEASE = re.compile(r"Neuron SDK (\d+\.\d+\.\d+)")
_TOP = re.compile(r'^(?P<key>[a-z_]+): *"(?P<value>[^"]*)"(?P<rest>.*)$')
_APT = re.compile(r'^  (?P<key>[a-z0-9-]+): *"(?P<value>[^"]*)"(?P<rest>.*)$')
_IMAGE = "trncat-runner:"


def current_release(toolchain_text: str) -> str:
    """The Neuron release the toolchain file names in its header (``Neuron SDK 2.33.0``).

    Raises:
        ConfigError: it names none.
    """
    match = _RELEASE.search(toolchain_text)
    if match is None:
        raise ConfigError(f"{TOOLCHAIN_FILE} names no Neuron release (a 'Neuron SDK X.Y.Z' in its header)")
    return match.group(1)


@dataclass(frozen=True)
class Pin:
    """One pin the bump looked at: where it lives, what it was, what it is now and why."""

    file: str
    key: str
    old: str
    new: str
    source: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass
class Bump:
    """The pull request a new release asks for: its files (path -> new text), title, branch and body."""

    old: str
    new: str
    pins: list[Pin] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    body: str = ""

    @property
    def title(self) -> str:
        return f"Neuron {self.new}: bump the runners' toolchain from {self.old}"

    @property
    def branch(self) -> str:
        return f"release-watch/neuron-{self.new}"


def _pin(
    name: str, old: str, release: Release, *, family: str | None, source: str, suffix: str = ""
) -> tuple[str, str]:
    """The pin of the manifest's package ``name`` (``family``: its version for that PyTorch), and why; else ``old``."""
    versions = release.versions(name)
    if family is not None:
        versions = tuple(v for v in versions if v.startswith(family + "."))
        if not versions:
            return old, f"kept: the manifest's {release.version} lists no {name} for torch {family} on {INSTANCE}"
    if not versions:
        return old, f"kept: the manifest's {release.version} lists no {name} on {INSTANCE}"
    return versions[0] + suffix, f"{source}: neuron_releases {release.version}, {name} (supported on {INSTANCE})"


def _edit_toolchain(text: str, release: Release, source: str) -> tuple[str, list[Pin], list[str]]:
    pins = {m["key"]: m["value"] for line in text.splitlines() if (m := _TOP.match(line))}
    family = ".".join(pins["torch"].split(".")[:2]) if "torch" in pins else None
    found, notes, out, section = [], [], [], None
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if bare and not bare.startswith((" ", "#")):
            section = bare.split(":", 1)[0]
        top, apt = _TOP.match(bare), _APT.match(bare)
        if top and top["key"] in PYTHON_PINS:
            per_torch = family if top["key"] in _PER_TORCH else None
            new, why = _pin(PYTHON_PINS[top["key"]], top["value"], release, family=per_torch, source=source)
            found.append(Pin(TOOLCHAIN_FILE, top["key"], top["value"], new, why))
            line = f'{top["key"]}: "{new}"{top["rest"]}\n'
        elif top:
            why = "kept: not a Neuron package (the manifest never names it)"
            if top["key"] == "torch":
                why = f"kept: torch-neuronx's family is PyTorch {family} (the manifest names no torch)"
            found.append(Pin(TOOLCHAIN_FILE, top["key"], top["value"], top["value"], why))
        elif apt and section == "apt" and apt["key"] in APT_PACKAGES:
            # the docs print no Debian revision: any of this version's
            new, why = _pin(apt["key"], apt["value"], release, family=None, source=source, suffix="*")
            found.append(Pin(TOOLCHAIN_FILE, f"apt.{apt['key']}", apt["value"], new, why))
            line = f'  {apt["key"]}: "{new}"{apt["rest"]}\n'
        out.append(line)
    if "vllm_neuron" not in pins and release.versions("vllm-neuron"):
        notes.append(
            f"vllm-neuron {release.versions('vllm-neuron')[0]} is in the manifest's {release.version}; "
            f"{TOOLCHAIN_FILE} has no vllm_neuron pin to bump"
        )
    return "".join(out), found, notes


def plan_bump(files: Mapping[str, str], manifest: Manifest, *, source: str) -> Bump | None:
    """The bump to the manifest's latest Trn2 release, or None when it is not newer than the toolchain's.

    Args:
        files: the repository's ``runners/toolchain.yaml``, ``runners/Dockerfile`` and ``runners/arc-values.yaml``
            (path -> text; the last two may be absent).
        manifest: the parsed manifest.
        source: where the manifest was read from (its URL), named beside every pin it gave.

    Raises:
        ConfigError: the toolchain file names no release; the manifest has no latest Trn2 release.
    """
    old = current_release(files[TOOLCHAIN_FILE])
    release = manifest.latest_release(INSTANCE)
    if version_key(release.version) <= version_key(old):
        return None
    bump = Bump(old=old, new=release.version)
    text, bump.pins, bump.notes = _edit_toolchain(files[TOOLCHAIN_FILE], release, source)
    text = text.replace(f"Neuron SDK {old}", f"Neuron SDK {release.version}")
    bump.files[TOOLCHAIN_FILE] = text.replace(
        f"release content of Neuron {old}", f"release content of Neuron {release.version}"
    )
    for path in (DOCKERFILE, ARC_VALUES):
        if path in files and _IMAGE + old in files[path]:
            bump.files[path] = files[path].replace(_IMAGE + old, _IMAGE + release.version)
            bump.pins.append(Pin(path, "runner image tag", old, release.version, "the release's own version"))
    bump.body = pr_body(bump, manifest=manifest, source=source)
    return bump


def pr_body(bump: Bump, *, manifest: Manifest, source: str) -> str:
    """The pull request's description: the release's links, each pin with where it came from, what is left."""
    old_family = ".".join(bump.old.split(".")[:2])
    lines = [
        f"Neuron {bump.new} is out (the release manifest's latest for {INSTANCE}: manifest {manifest.manifest_version}"
        + (f" of {manifest.manifest_date}" if manifest.manifest_date else "")
        + f"). The runners pin {bump.old}.",
        "",
        # the release's notes and release-content pages (docs/neuron-facts.md, "release notes pages")
        f"- release notes: {DOCS}/latest/release-notes/{bump.new}.html",
        f"- release content: {DOCS}/v{bump.new}/release-notes/releasecontent.html",
        f"- the manifest: {source}",
        "",
        "| file | pin | was | now | from |",
        "| --- | --- | --- | --- | --- |",
        *(f"| `{p.file}` | `{p.key}` | {p.old} | {p.new} | {p.source} |" for p in bump.pins if p.changed),
        "",
        "Unchanged:",
        "",
        *(f"- `{p.key}` {p.old}: {p.source}" for p in bump.pins if not p.changed),
        *(f"- {note}" for note in bump.notes),
        "",
        "Before merging: build the runner image from this branch and run `trncat doctor` on a trn2 runner; comments "
        f"that name {old_family} (the image's base, the wheels' OS) are for review, not rewritten.",
        "",
        "Once merged, every model is re-queued on the new toolchain (the queue keys results by these pins): what "
        "passed first, then what failed at compile, then the rest, within the budget the discover run's "
        "estimate prints. The old rows stay as history; `trncat diff --toolchain OLD NEW` then lists what the "
        "release changed, model by model.",
    ]
    return "\n".join(lines) + "\n"
