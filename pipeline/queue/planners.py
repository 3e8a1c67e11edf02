"""Planning a queue's candidates: each from its files on the Hub at the candidate's revision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pipeline.discover import Candidate
from pipeline.hardware import DEFAULT_INSTANCE
from pipeline.hub import Hub
from pipeline.plan import Plan, normalize_dtype, plan_config, plan_model
from pipeline.taskspec import default_workload, task_source


class HubPlanner:
    """Plans a candidate from its config.json at its revision (downloaded once per model and revision).

    The parameter count for architectures transformers cannot build comes from the listing (no request).

    Args:
        hub: Where config.json comes from.
        dtype: Benchmark dtype.
        instance: Instance type to plan for.
    """

    def __init__(self, *, hub: Hub, dtype: str = "bfloat16", instance: str = DEFAULT_INSTANCE) -> None:
        self.hub = hub
        self.dtype = normalize_dtype(dtype)
        self.instance = instance
        self._configs: dict[tuple[str, str | None], dict[str, Any]] = {}

    def __call__(self, candidate: Candidate) -> Plan:
        """Plan ``candidate`` for its task's workload.

        Raises:
            PlanError: the parameters cannot be counted.
            RepoNotFoundError: no config.json at that revision (or gated).
            HubError: the Hub could not answer.
        """
        workload = default_workload(candidate.task)
        if task_source(candidate.task).library == "diffusers":  # a pipeline: model_index.json and its configs
            return plan_model(candidate.model_id, revision=candidate.sha, dtype=self.dtype, instance=self.instance,
                              workload=workload, hub=self.hub, task=candidate.task)  # fmt: skip
        key = (candidate.model_id, candidate.sha)
        if key not in self._configs:
            self._configs[key] = self.hub.fetch_json(candidate.model_id, "config.json", revision=candidate.sha)
        plan = plan_config(
            self._configs[key],
            dtype=self.dtype,
            instance=self.instance,
            workload=workload,
            safetensors_params=candidate.params,
            task=candidate.task,
        )
        return replace(plan, model=candidate.model_id, revision=candidate.sha)
