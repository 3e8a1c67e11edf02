"""The dataset card (the dataset repo's README.md): YAML ``configs`` for the Parquet views, examples, a summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pipeline.errors import PipelineError
from pipeline.ids import model_id_problem
from pipeline.render.templating import render


def card_counts(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What the card summarises of latest rows: rows per (task, device, status), per toolchain, and the total.

    JSON-ready (lists, not tuple keys): ``pipeline.dataset`` keeps it in a small summary file so that a
    publish renders the card without reading the whole latest view.
    """
    counts: Counter[tuple[str, str, str]] = Counter()
    toolchains: Counter[tuple[str, str, str]] = Counter()
    for row in rows:
        counts[(row["task"], row["device"], row["status"])] += 1
        toolchains[(row["device"], row.get("neuronx_cc_version") or "-", row.get("transformers_version") or "-")] += 1
    return {
        "total": counts.total(),
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
