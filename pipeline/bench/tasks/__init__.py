"""The tasks' runners: one module per task, named by its spec (:mod:`pipeline.taskspec`, the registry).

A task knows how to load the model and its processor, build the fixed workload's inputs and count tokens.

May import: the top-level modules (each task imports its own library lazily, in the child). Imported by the
rest of :mod:`pipeline.bench` only.
"""

from __future__ import annotations

from pipeline.bench.tasks.base import TaskRunner
from pipeline.registry import load_entry
from pipeline.taskspec import REGISTRY as TASK_SPECS


def get_task(name: str) -> TaskRunner:
    """Instantiate the task called ``name``.

    Raises:
        ConfigError: no such task.
    """
    runners = {task: spec.runner for task, spec in TASK_SPECS.items()}  # (a task module may be the one importing this)
    return load_entry(runners, name, what="task")()


__all__ = ["TaskRunner", "get_task"]
