"""Which downloaded benchmark artifacts a publish may trust: exactly what the run's own queue asked for.

A publish downloads every ``record-*`` artifact of one discover run. An artifact is untrusted input (any job
of that run, or a run that is not ours, can upload one), so each is accepted only when it is the one record
the run's queues (``queue.json``, and the GPU runners' ``queue-gpu.json``) planned under that artifact name:
same model, revision, task, device, cores (a serving job's: its chips) and dtype, ``run.source == "ci"`` and
this run's id, and naming no compiled-cache bundle (``compiled_cache``: only publish names one, after it
uploaded or verified it itself; a job that names one is pointing users' run.py at NEFFs nobody checked).
Everything else is reported and set aside, never published. Each artifact is downloaded into its own folder, so
one can never overwrite another.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.backends.neuron import bundle_beside, check_bundle
from pipeline.errors import BundleError, RecordError
from pipeline.records.validate import Problem, check_file

#: The artifact of one matrix entry is ``record-<entry["artifact"]>`` holding ``<entry["artifact"]>.json`` (and,
#: after a neuron pass, its compiled-cache bundle ``<entry["artifact"]>.neff-cache.tar.gz``, checked here too).
ARTIFACT_PREFIX = "record-"
_MATCHED = ("model_id", "revision", "task", "device", "cores", "dtype")


@dataclass
class Collected:
    """Records accepted (copied into the output folder) and every reason something was set aside."""

    accepted: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _entries(queue_files: Sequence[Path]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for queue_file in queue_files:
        try:
            queue = json.loads(queue_file.read_text(encoding="utf-8"))
            entries = [e for chunk in queue["chunks"] for e in chunk["include"]]
            named = {str(e["artifact"]): e for e in entries}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RecordError(f"{queue_file}: not a queue.json written by the queue: {exc}") from exc
        twice = sorted(set(named) & set(out))
        if twice:  # one artifact name, two jobs: which record is which could not be told
            raise RecordError(f"{queue_file}: artifact {twice[0]!r} is also in another queue of this run")
        out.update(named)
    return out


def _bundle_problem(bundle: Path, record: dict[str, Any]) -> str | None:
    """Why a compiled-cache bundle beside an accepted record is set aside (None: it may be published with it)."""
    if record["device"] != "neuron" or record["status"] != "pass":
        return "a compiled-cache bundle comes only with a passing neuron run"
    try:
        check_bundle(bundle)
    except BundleError as exc:
        return str(exc)
    except MemoryError:  # the record stands; its bundle is set aside
        return "the bundle could not be checked in this job's memory"
    return None


def collect_records(downloaded: Path, *, queue_file: Path | Sequence[Path], run_id: str, out: Path) -> Collected:
    """Copy into ``out`` the records of ``downloaded`` (one folder per artifact) that the run's queues planned,
    each with its compiled-cache bundle when one came with a neuron pass and holds only the NEFF cache's files.

    Args:
        downloaded: Folder holding one sub-folder per downloaded artifact (``record-<artifact>/``).
        queue_file: The run's ``queue.json`` (and the GPU runners' queue: one file or several).
        run_id: The run's id: every accepted record names it in ``run.github_run_id``.
        out: Where the accepted records go (created; one file per artifact).

    Raises:
        RecordError: a queue file is unreadable, or two of them name one artifact.
    """
    entries = _entries([queue_file] if isinstance(queue_file, Path) else list(queue_file))
    result = Collected()
    out.mkdir(parents=True, exist_ok=True)
    folders = sorted(downloaded.iterdir()) if downloaded.is_dir() else []
    for folder in folders:
        name = folder.name

        def refuse(message: str, field_name: str = "(artifact)", where: str = str(folder)) -> None:
            result.problems.append(Problem(where, field_name, message))

        artifact = name.removeprefix(ARTIFACT_PREFIX)
        if folder.is_symlink() or not folder.is_dir() or not name.startswith(ARTIFACT_PREFIX):
            refuse("not a record artifact folder")
            continue
        entry = entries.get(artifact)
        if entry is None:
            refuse(f"artifact {name!r} is not in this run's queue")
            continue
        files = sorted(folder.rglob("*"))
        expected = folder / f"{artifact}.json"
        bundle = bundle_beside(expected)
        if files not in ([expected], [expected, bundle]) or any(p.is_symlink() or not p.is_file() for p in files):
            refuse(
                f"must hold the regular file {expected.name!r} (and at most its bundle {bundle.name!r}), holds "
                f"{[p.name for p in files][:5]}"
            )
            continue
        record, problems = check_file(expected)
        if record is None:
            result.problems.extend(problems)
            continue
        # a serving record's cores are the chips its engine held (serving_checks), its job's `chips`
        planned = {**entry, "cores": entry.get("chips")} if entry.get("mode") == "serving" else entry
        wrong = [key for key in _MATCHED if record.get(key) != planned.get(key)]
        wrong += [
            f"run.{key}" for key, want in (("source", "ci"), ("github_run_id", run_id)) if record["run"][key] != want
        ]
        if wrong:
            refuse(f"does not match the queued job ({', '.join(wrong)})", wrong[0], str(expected))
            continue
        if "compiled_cache" in record:
            refuse("names a compiled-cache bundle: only publish names one (the bundle goes beside the record)",
                   "compiled_cache", str(expected))  # fmt: skip
            continue
        shutil.copyfile(expected, out / expected.name)
        result.accepted.append(str(out / expected.name))
        if bundle in files:
            problem = _bundle_problem(bundle, record)
            if problem:  # the record stands without it; the bundle is set aside
                refuse(problem, "compiled_cache", str(bundle))
            else:
                shutil.copyfile(bundle, out / bundle.name)
    return result
