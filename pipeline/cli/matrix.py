"""The stage matrix every publish rewrites (``data/matrix.parquet``, issue 49), handed to the publish as a derived
file beside the release diff: built here, at the edge, where the Hub the planner reads is; and the fetcher of the
vLLM Neuron recipes the release watch reads the docs' tables from (``trncat release-watch --docs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def matrix_derived(hub: Any, *, also: Any = None) -> Any:
    """A :class:`pipeline.publish.Derived` that rewrites the stage matrix after the records are built in (and first
    writes ``also``, the release diff or the warm checks, when given: the models it names are refreshed too).
    ``hub`` plans each new candidate from its config.json; without one (a publish into a folder) a new candidate's
    plan row stays untested."""
    from pipeline.discover import Candidate
    from pipeline.publish import Derived
    from pipeline.queue import HubPlanner, matrix_inputs, refresh_matrix

    planners: dict[str, Any] = {}

    def plan(model_id: str, task: str, instance: str) -> Any:
        planner = planners.setdefault(instance, HubPlanner(hub=hub, instance=instance))
        return planner(Candidate(model_id=model_id, task=task, view="selected", rank=1, sha=None))

    def paths(results: list[str]) -> list[str]:
        return sorted({*matrix_inputs(), *(also.paths(results) if also else ())})

    def write(folder: Path) -> str | None:
        notes = [also.write(folder) if also else None, refresh_matrix(folder, planner=plan if hub else None)]
        return "\n\n".join(note for note in notes if note)

    return Derived(paths=paths, write=write, models=also.models if also else ())


def recipe_fetcher(repo: str, path: str) -> tuple[str, str]:
    """The newest commit of a page of a public GitHub repository, and the page's text at that commit (GitHub's REST
    API, unauthenticated, then the raw file; the release watch reads a few pages a day).

    Raises:
        ConfigError: GitHub did not give them.
    """
    import json
    import urllib.parse
    import urllib.request

    from pipeline.constants import TRNCAT_HUB_READ_TIMEOUT_S
    from pipeline.errors import ConfigError

    def read(url: str) -> bytes:  # public pages: no token; at most 1 MB (a recipe is a few kB)
        with urllib.request.urlopen(url, timeout=TRNCAT_HUB_READ_TIMEOUT_S) as answer:  # noqa: S310 (https only)
            return bytes(answer.read(1_000_001))

    try:
        query = urllib.parse.urlencode({"path": path, "per_page": 1})
        commit = str(json.loads(read(f"https://api.github.com/repos/{repo}/commits?{query}"))[0]["sha"])
        return commit, read(f"https://raw.githubusercontent.com/{repo}/{commit}/{path}").decode("utf-8")
    except (OSError, ValueError, LookupError, TypeError) as exc:
        raise ConfigError(f"{repo} {path}: GitHub gave no newest commit and text: {str(exc)[:200]}") from None
