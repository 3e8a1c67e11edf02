"""The stage matrix every publish rewrites (``data/matrix.parquet``, issue 49), handed to the publish as a derived
file beside the release diff: built here, at the edge, where the Hub the planner reads is."""

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
