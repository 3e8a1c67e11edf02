"""Core escalation: start at the planner's core count, and on a device or compiler OOM retry on twice the cores.

The record returned is the last attempt's (the smallest passing core count when one passed); the attempts
before it are kept in its ``attempts`` list as ``{cores, status, stage, code}``. Which failures escalate is
decided by :func:`next_cores` (device and compiler OOM only: a host OOM needs
more host memory, not more cores, and an infrastructure error is retried elsewhere at the same count).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from pipeline.backends import Backend
from pipeline.bench.harness import checked
from pipeline.bench.spec import BenchSpec
from pipeline.taskspec import task_source

logger = logging.getLogger(__name__)

RunFn = Callable[[BenchSpec], dict[str, Any]]
#: Failure codes that more cores can fix: device memory split over more cores. A host OOM is not one:
#: more ranks need more host memory, not less.
ESCALATING_CODES = frozenset({"compiler_oom", "device_oom"})


def next_cores(previous: int, status: str, code: str | None, max_cores: int) -> int | None:
    """The core count for the next attempt after a failure, or None to stop.

    Only failures more cores can fix escalate (:data:`ESCALATING_CODES`); infrastructure errors are
    retried by the harness at the same count, not here.

    Args:
        previous: Cores of the failed attempt.
        status: The attempt's status (``pass``, ``fail``, ``error``).
        code: Its failure's code (None for a pass).
        max_cores: Cores on the instance.

    Returns:
        ``2 * previous`` when that fits and the failure was a device or compiler OOM, else None.
    """
    if status != "fail" or code not in ESCALATING_CODES:
        return None
    doubled = previous * 2
    return doubled if doubled <= max_cores else None


def attempt_of(record: dict[str, Any]) -> dict[str, Any]:
    """The ``attempts`` entry summarizing one record: ``{cores, status, stage, code}``."""
    failure = record.get("failure") or {}
    return {
        "cores": record["cores"],
        "status": record["status"],
        "stage": failure.get("stage"),
        "code": failure.get("code"),
    }


def run_with_escalation(
    spec: BenchSpec,
    *,
    attempt: RunFn,
    backend: Backend,
    model_id: str,
    max_cores: int | None = None,
) -> dict[str, Any]:
    """Benchmark starting at ``spec.cores``, doubling the cores after each device/compiler OOM.

    Args:
        spec: The first attempt (its ``cores`` is the planner's count, or 1).
        attempt: Runs one attempt of a spec and returns its record (:func:`pipeline.bench.harness.bench_once`
            with the model and the run's options bound; tests inject one).
        backend: The backend of ``spec.device`` (asked for the instance's cores).
        model_id: The model, as the log and an error name it.
        max_cores: Cores of the instance; asked of the backend when None (``spec.cores`` when it cannot tell: no
            escalation).

    Returns:
        The last attempt's record, with ``attempts`` listing the failed attempts before it and
        ``run.started_at`` set to the first attempt's start.

    Raises:
        BenchError: the assembled record is invalid (a harness bug).
    """
    limit = max_cores or int(backend.hardware(cores=spec.cores).get("cores_available") or spec.cores)
    if not task_source(spec.task).tensor_parallel:
        limit = spec.cores  # its library cannot shard: more cores would not hold a larger model
    earlier: list[dict[str, Any]] = []
    started_at: str | None = None
    current = spec
    while True:
        record = attempt(current)
        started_at = started_at or record["run"]["started_at"]
        code = (record.get("failure") or {}).get("code")
        following = next_cores(current.cores, record["status"], code, limit)
        if following is None or len(earlier) >= 15:  # the schema keeps at most 16 attempts
            break
        logger.info("%s: %s on %d core(s); retrying on %d", model_id, code, current.cores, following)
        earlier.append(attempt_of(record))
        current = dataclasses.replace(current, cores=following)
    record["attempts"] = earlier
    record["run"]["started_at"] = started_at
    return checked(record, built_by="escalation")  # the harness's own check (see bench_once)
