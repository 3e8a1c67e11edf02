"""The scripts of a row: ``run.py`` (the benchmark's workload, run unmodified) and ``requirements.txt`` (what it ran
with), from the templates of :mod:`pipeline.render.templating`.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.errors import PipelineError
from pipeline.render.templating import render
from pipeline.taskspec import task_source, task_spec
from pipeline.workload import library_key


def torchvision_for(torch_version: str | None) -> str | None:
    """The torchvision release built for ``torch_version`` (torch 2.N pairs with torchvision 0.N+15)."""
    match = re.match(r"^2\.(\d+)\.(\d+)", torch_version or "")
    return f"0.{int(match.group(1)) + 15}.{match.group(2)}" if match else None


def requirement_lines(record: dict[str, Any]) -> list[str]:
    """requirements.txt lines for a record: the versions it ran with, and what its device needs besides."""
    from pipeline.backends import backend_class

    backend = backend_class(record["device"])
    versions = {k: (v.split("+", 1)[0] if isinstance(v, str) else v) for k, v in record["versions"].items()}
    # A local version label (torch 2.13.0+cpu) names a build pip cannot find on PyPI: pin the release.
    lines = backend.requirement_lines(versions)
    lines.append(f"torch=={versions['torch']}")
    lines.append(f"transformers=={versions['transformers']}")
    library = task_source(record["task"]).library
    if library != "transformers":  # the task's own library, at the version the benchmark ran
        version = versions.get(library_key(library))
        lines.append(f"{library}=={version}" if version else library)
    if record["task"] == "image-text-to-text":
        lines.append("pillow")
        # The runner's own torchvision when the record has it; else the release built for the pinned torch.
        vision = versions.get("torchvision") or torchvision_for(versions["torch"])
        if vision and backend.pins_torchvision:
            # Qwen2-VL / SmolVLM video processors import torchvision; it must match the torch pinned above.
            lines.append(f"torchvision=={vision}")
    return [_safe_requirement(line) for line in lines]


_REQUIREMENT_RE = re.compile(r"(--extra-index-url https://[A-Za-z0-9./-]+|[A-Za-z0-9._-]+(==[A-Za-z0-9.+_-]+)?)")


def _safe_requirement(line: str) -> str:
    # Versions come from records (untrusted text): a line pip would read as an option or a URL is refused.
    if not _REQUIREMENT_RE.fullmatch(line):  # fullmatch: `$` would let a trailing newline through
        raise PipelineError(f"refusing to write requirement line {line!r}")
    return line


def run_script(record: dict[str, Any], *, checked: bool = False) -> str:
    """The generated ``run.py`` for a record: runs the model unmodified with the benchmark's workload.

    ``checked``: the record is the one ``trncat check`` assembles for a model the catalog has not measured (its
    header says so instead of naming a benchmark result).

    ``install`` are the (where, one-line command) pairs that install what the record ran with (e.g. the Neuron
    DLAMI's venv, and a fresh virtual environment: Ubuntu's system pip refuses to install into the system Python);
    ``bundle_rule`` is what a bundle may hold and ``key_rule`` how run.py builds the compiled cache's key from the
    model it loads (:mod:`pipeline.backends.neuron.cachekey`'s fields), both as data for run.py's own check (it
    cannot import trncat), rendered from the bundle module's constants.
    """
    from pipeline.backends import backend_class
    from pipeline.backends.neuron import bundle_rule, key_rule

    return render(
        task_spec(record["task"]).run_template,
        model_id=record["model_id"],
        revision=record["revision"],
        task=record["task"],
        dtype=record["dtype"],
        cores=record["cores"],
        threads=record.get("threads"),
        workload=record["workload"],
        device=record["device"],
        status=record["status"],
        install=backend_class(record["device"]).install_commands(record["versions"]),
        checked=checked,
        compiled_cache=record.get("compiled_cache"),
        compiled_with=compiled_with(record),
        bundle_rule=bundle_rule(),
        cache_key=record.get("compiled_cache_key"),
        key_rule=key_rule(),
        bundle_of=record.get("compiled_cache_of"),
    )


def compiled_with(record: dict[str, Any]) -> dict[str, str | None] | None:
    """The distributions (and versions) a row's compiled-cache bundle was compiled with, which run.py requires
    installed before it uses the bundle; None when the row names no bundle."""
    if not record.get("compiled_cache"):
        return None
    versions = record["versions"]
    return {"torch-neuronx": versions.get("torch_neuronx"), "neuronx-cc": versions.get("neuronx_cc")}


def requirements(record: dict[str, Any]) -> str:
    return render("requirements.txt.j2", model_id=record["model_id"], lines=requirement_lines(record))
