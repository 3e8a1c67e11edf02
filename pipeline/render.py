"""Generated files from jinja2 templates: run.py, requirements.txt and the dataset card.

Templates run with StrictUndefined. Text that came from the Hub or from an error message is never inserted
raw: into Python it goes through :func:`py_literal` (a ``repr`` of plain JSON values, which cannot break out
of a literal), into Markdown through :func:`md_cell`, into YAML through :func:`yaml_scalar`. The HTML page's
environment autoescapes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

import jinja2

from pipeline.errors import PipelineError
from pipeline.ids import model_id_problem
from pipeline.workload import library_key, task_source


def py_literal(value: Any) -> str:
    """A Python literal for a JSON-like value (str, int, float, bool, None, list, dict of those).

    Raises:
        PipelineError: any other type (so a template never receives an object whose repr is arbitrary).
    """
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PipelineError("non-finite float in a generated script")
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise PipelineError(f"dict key {key!r} is not a string")
            items.append(f"{py_literal(key)}: {py_literal(item)}")
        return "{" + ", ".join(items) + "}"
    raise PipelineError(f"cannot render {type(value).__name__} as a Python literal")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md_cell(value: Any) -> str:
    """Text safe inside a Markdown table cell: one line, Markdown and HTML characters escaped."""
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def yaml_scalar(value: Any) -> str:
    """A YAML scalar: JSON strings are valid YAML double-quoted scalars, so json.dumps quotes safely."""
    return json.dumps("" if value is None else str(value), ensure_ascii=True)


def torchvision_for(torch_version: str | None) -> str | None:
    """The torchvision release built for ``torch_version`` (torch 2.N pairs with torchvision 0.N+15)."""
    if not torch_version:
        return None
    match = re.match(r"^2\.(\d+)\.(\d+)", torch_version)
    if not match:
        return None
    return f"0.{int(match.group(1)) + 15}.{match.group(2)}"


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,  # package files: no stat of the template on every render (a build renders hundreds)
    )
    env.filters["py"] = py_literal
    env.filters["md"] = md_cell
    env.filters["yaml"] = yaml_scalar
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


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


#: The run.py template of each task whose library is not transformers (the generation tasks use run.py.j2).
RUN_TEMPLATES = {
    "sentence-embeddings": "run_sentence_embeddings.py.j2",
    "text-to-image": "run_text_to_image.py.j2",
}


def run_script(record: dict[str, Any]) -> str:
    """The generated ``run.py`` for a record: runs the model unmodified with the benchmark's workload."""
    return render(
        RUN_TEMPLATES.get(record["task"], "run.py.j2"),
        model_id=record["model_id"],
        revision=record["revision"],
        task=record["task"],
        dtype=record["dtype"],
        cores=record["cores"],
        threads=record.get("threads"),
        workload=record["workload"],
        device=record["device"],
        status=record["status"],
        install=install_commands(record),
    )


def install_commands(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, one-line command) pairs that install what a record ran with: e.g. the Neuron DLAMI's venv, and a
    fresh virtual environment (Ubuntu's system pip refuses to install into the system Python)."""
    from pipeline.backends import backend_class

    return backend_class(record["device"]).install_commands(record["versions"])


def requirements(record: dict[str, Any]) -> str:
    return render("requirements.txt.j2", model_id=record["model_id"], lines=requirement_lines(record))


def card_counts(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What the card summarises of latest rows: rows per (task, device, status), per toolchain, and the total.

    JSON-ready (lists, not tuple keys): ``pipeline.dataset`` keeps it in a small summary file so that a
    publish renders the card without reading the whole latest view.
    """
    counts: dict[tuple[str, str, str], int] = {}
    toolchains: dict[tuple[str, str, str], int] = {}
    total = 0
    for row in rows:
        total += 1
        key3 = (row["task"], row["device"], row["status"])
        counts[key3] = counts.get(key3, 0) + 1
        key = (row["device"], row.get("neuronx_cc_version") or "-", row.get("transformers_version") or "-")
        toolchains[key] = toolchains.get(key, 0) + 1
    return {
        "total": total,
        "counts": [[*key, n] for key, n in sorted(counts.items())],
        "toolchains": [[*key, n] for key, n in sorted(toolchains.items())],
    }


def dataset_card(
    *,
    rows: Iterable[dict[str, Any]] | None = None,
    configs: list[tuple[str, str]],
    counts: dict[str, Any] | None = None,
    repo_title: str = "trncat",
    repo: str | None = None,
    space: str | None = None,
) -> str:
    """README.md of the dataset repo: YAML ``configs`` for the Parquet files, examples that run, a summary.

    Args:
        rows: the latest view; or
        counts: its :func:`card_counts` (the same card, without the rows).
        configs: (config name, file glob) of each Parquet view.
        repo_title: the card's title.
        repo: the dataset's repo id (validated); None for a local folder (the examples then read the folder).
        space: the Space that shows the catalog (with ``repo``).
    """
    summary = counts if counts is not None else card_counts(rows or [])
    by_status = {(task, device, status): n for task, device, status, n in summary["counts"] if n}
    toolchains = sorted(((device, cc, tf), n) for device, cc, tf, n in summary["toolchains"] if n)
    groups = sorted({(t, d) for t, d, _ in by_status}, key=lambda g: (g[0], g[1] != "neuron", g[1]))
    if repo is not None and (model_id_problem(repo) or (space is not None and model_id_problem(space))):
        raise PipelineError(f"refusing to write a card for repo {repo!r} / Space {space!r}")
    return render(
        "dataset_card.md.j2",
        title=repo_title,
        configs=configs,
        groups=groups,
        counts=by_status,
        toolchains=toolchains,
        total=summary["total"],
        repo=repo,
        space=space,
        prefix=f"hf://datasets/{repo}/" if repo else "",
    )
