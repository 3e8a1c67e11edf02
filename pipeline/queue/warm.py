"""The queue of second-machine warm checks: which published bundles a trn2 runner that did not make them checks next.

A row is checked when it is a CI pass on Trainium2 (``source: ci``, device ``neuron`` and no Trainium3 row, never
emulated) that names a compiled-cache bundle, and no check on a real machine has verified that bundle (its sha256)
yet. Rows never checked come first, then those whose last check missed, was refused or failed. Each entry is a
matrix entry the ``warm-check`` workflow's guard re-checks, and comes with the row's record (rebuilt from the latest
view's row, :func:`pipeline.records.unflatten`, and validated) that ``trncat warm-check`` renders run.py from.
Every other row is skipped with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.dataset import warm_key
from pipeline.hardware import row_device
from pipeline.ids import model_id_problem, slug
from pipeline.records import counts_as_trainium2, unflatten, validate_record

#: The most entries one warm-check run's matrix holds (GitHub's matrix limit is 256).
MAX_WARM_ENTRIES = 256


@dataclass
class WarmQueue:
    """The matrix entries, the record of each (by artifact name) and the rows skipped, each with its reason."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"include": self.entries, "count": len(self.entries), "skipped": self.skipped}


def runner_label(cores: int) -> str:
    """The trn2 runner label that holds ``cores`` NeuronCores (the next power of two: trn2-1c ... trn2-64c)."""
    return f"trn2-{1 << (cores - 1).bit_length()}c"


def _skip_reason(row: Mapping[str, Any], verified: set[tuple[str, str, str, bool]]) -> str | None:
    if row.get("status") != "pass":
        return f"not a pass ({row.get('status')})"
    if row.get("source") != "ci":
        return f"not a CI row (source {row.get('source')})"
    if row.get("emulated"):
        return "an emulated row: no Trainium2 result"
    device = row_device(row.get("device"), hardware=row.get("hardware"), accelerator=row.get("accelerator"))
    if device != "neuron":
        return f"not a Trainium2 row (device {device})"
    sha256 = row.get("compiled_cache_sha256")
    if not sha256:
        return "no compiled-cache bundle"
    if model_id_problem(str(row.get("model_id"))) is not None:
        return "not a valid model id"
    if not row.get("machine"):
        return "its record names no machine that made the bundle: a second machine cannot be told apart"
    if (str(row["model_id"]).lower(), str(row.get("revision")), str(sha256), False) in verified:
        return "its bundle is already verified on a second machine"
    return None


def warm_queue(
    latest: Iterable[Mapping[str, Any]], checks: Iterable[Mapping[str, Any]], *, limit: int = MAX_WARM_ENTRIES
) -> WarmQueue:
    """The warm checks to run next, from the dataset's latest rows and its stored checks (both as read from it).

    Args:
        latest: the latest view's rows (:func:`pipeline.dataset.read_latest`).
        checks: the stored checks (:func:`pipeline.dataset.read_warm_checks`).
        limit: at most this many entries (at most :data:`MAX_WARM_ENTRIES`); the rest are skipped, said so.
    """
    limit = max(0, min(limit, MAX_WARM_ENTRIES))
    stored = list(checks)
    verified = {warm_key(c) for c in stored if counts_as_trainium2(c)}
    tried = {warm_key(c) for c in stored if not c.get("emulated")}
    queue = WarmQueue()

    def skip(row: Mapping[str, Any], reason: str) -> None:
        queue.skipped.append({"model_id": str(row.get("model_id")), "task": str(row.get("task")), "reason": reason})

    picked: list[tuple[bool, dict[str, Any], dict[str, Any]]] = []
    for row in latest:
        if reason := _skip_reason(row, verified):
            skip(row, reason)
            continue
        record = unflatten(dict(row))
        if problems := validate_record(record):
            skip(row, f"its record does not validate: {problems[0]}")
            continue
        org, model = slug(str(row["model_id"]))
        sha256 = str(row["compiled_cache_sha256"])
        key = (str(row["model_id"]).lower(), str(row["revision"]), sha256, False)
        entry: dict[str, Any] = {
            "model_id": str(row["model_id"]),
            "revision": str(row["revision"]),
            "task": str(row["task"]),
            "sha256": sha256,
            "cores": int(row["cores"]),
            "runner": runner_label(int(row["cores"])),
            "dtype": str(row["dtype"]),
            # benchmark.yml runs a `warm` entry's `trncat warm-check` step instead of its bench.
            "mode": "warm",
            # The runner that made the bundle: `trncat warm-check` refuses to check it there.
            "made_by": str(row.get("runner") or ""),
            # The machine that made it: publish sets aside a check that ran there (runner names are per job).
            "made_on": str(row["machine"]),
            "artifact": f"{org}--{model}--{row['task']}--{sha256[:12]}",
        }
        picked.append((key in tried, entry, record))
    # Never checked first, then those a real machine checked without verifying (a retry may pass elsewhere).
    picked.sort(key=lambda p: (p[0], p[1]["model_id"].lower(), p[1]["task"]))
    for _, entry, record in picked:
        if len(queue.entries) >= limit:
            skip(entry, f"over this run's limit of {limit} check(s)")
            continue
        queue.entries.append(entry)
        queue.records[entry["artifact"]] = record
    return queue
