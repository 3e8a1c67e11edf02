"""The second-machine warm checks into the dataset: the checks a warm-check run's queue asked for, validated, merged
into ``data/warm_checks.parquet`` and committed as one Hub pull request (or written into a local folder).

Each ``warm-<artifact>`` artifact a self-hosted runner uploaded is untrusted input: it is accepted only when its
artifact name is one the run's queue (``warm-queue.json``, written by the GitHub-hosted queue job) planned, it holds
exactly one file ``<artifact>.json`` of at most :data:`pipeline.records.MAX_WARM_CHECK_BYTES`, the check passes the
schema and the semantic rules (:func:`pipeline.records.warm_check_problems`), names the queue entry's model,
revision and bundle sha256, names the machine it ran on and that machine is not the one that made the bundle (the
queue's ``made_on``: the machines are compared, never the per-job runner names), and is not emulated (the
workflow runs on trn2 runners: an emulated check there is no Trainium2 evidence). Everything else is set aside
with its reason. The merge (:func:`pipeline.dataset.add_warm_checks`) keeps the newest check per key, so a retried
publish writes the same bytes and commits nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.dataset import WARM_CHECKS_FILE, add_warm_checks
from pipeline.errors import RecordError
from pipeline.publish.prepare import Derived
from pipeline.records import MAX_WARM_CHECK_BYTES, Problem, warm_check_problems

#: The artifact of one warm-check matrix entry is ``warm-<entry["artifact"]>`` holding ``<entry["artifact"]>.json``.
WARM_ARTIFACT_PREFIX = "warm-"
_MATCHED = ("model_id", "revision", "sha256")


@dataclass
class WarmCollected:
    """The checks accepted, and every reason something was set aside."""

    accepted: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _check_of(folder: Path, artifact: str, entry: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[Problem]]:
    name = str(folder.name)
    files = sorted(p.name for p in folder.iterdir())
    if files != [f"{artifact}.json"]:
        return None, [Problem(name, "(artifact)", f"holds {files[:5]}, not exactly {artifact}.json")]
    path = folder / f"{artifact}.json"
    if path.is_symlink() or not path.is_file():
        return None, [Problem(name, "(artifact)", "not a regular file")]
    if path.stat().st_size > MAX_WARM_CHECK_BYTES:
        return None, [Problem(name, "(artifact)", f"larger than {MAX_WARM_CHECK_BYTES} bytes")]
    try:
        check = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, [Problem(name, "(artifact)", f"not JSON: {str(exc)[:200]}")]
    if problems := warm_check_problems(check, name=name):
        return None, problems
    out = [Problem(name, key, f"{check[key]!r} is not the queue's {entry.get(key)!r}")
           for key in _MATCHED if check[key] != entry.get(key)]  # fmt: skip
    if check["runner"] is None:
        out.append(Problem(name, "runner", "the check must name its runner"))
    if not check.get("machine") or not entry.get("made_on") or check["machine"] == entry["made_on"]:
        said = f"{check.get('machine')!r} against the bundle's {entry.get('made_on')!r}"
        out.append(Problem(name, "machine", f"the check must run on another machine than the bundle's: {said}"))
    if check["emulated"]:
        out.append(Problem(name, "emulated", "an emulated check is no Trainium2 evidence: the workflow checks on trn2"))
    return (None if out else check), out


def collect_warm_checks(downloaded: Path, *, queue_file: Path) -> WarmCollected:
    """The warm checks of ``downloaded`` (one folder per ``warm-*`` artifact) that the run's queue asked for.

    Raises:
        RecordError: the queue file is not one ``trncat warm-queue`` wrote.
    """
    try:
        queue = json.loads(queue_file.read_text(encoding="utf-8"))
        entries: dict[str, dict[str, Any]] = {str(e["artifact"]): e for e in queue["include"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{queue_file}: not a warm-queue.json written by `trncat warm-queue`: {exc}") from exc
    collected = WarmCollected()
    folders = sorted(downloaded.iterdir()) if downloaded.is_dir() else []
    for folder in folders:
        artifact = folder.name.removeprefix(WARM_ARTIFACT_PREFIX)
        if not folder.name.startswith(WARM_ARTIFACT_PREFIX) or artifact not in entries or not folder.is_dir():
            collected.problems.append(Problem(folder.name, "(artifact)", "not an artifact this run's queue asked for"))
            continue
        check, problems = _check_of(folder, artifact, entries[artifact])
        collected.problems.extend(problems)
        if check is not None:
            collected.accepted.append(check)
    return collected


def warm_derived(checks: Sequence[Mapping[str, Any]]) -> Derived:
    """The derived file of a warm publish (no records): the checks merged into ``data/warm_checks.parquet``, their
    models named so that the stage matrix's refresh mirrors their latest shards (:func:`pipeline.cli.matrix`)."""

    def write(folder: Path) -> str | None:
        changed = add_warm_checks(folder, checks)
        if not changed:
            return None
        verified = sum(1 for c in checks if c["status"] == "verified")
        return f"Warm checks: {changed} bundle check(s) added ({verified} of {len(checks)} verified)"

    models = tuple(sorted({str(c["model_id"]) for c in checks}))
    return Derived(paths=lambda _results: [WARM_CHECKS_FILE], write=write, models=models)
