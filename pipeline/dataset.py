"""The dataset repo on disk: append results, keep the latest view, write scripts and the card.

Layout (DESIGN.md)::

    README.md                      card with YAML `configs`
    data/results/<run>.parquet     append-only, one file per build that added rows
    data/latest/<xx>.parquet       newest row per (model_id, task, hardware), sharded by a hash of that key
    data/rankings/*.parquet        discovery snapshots (written by discover)
    data/exclusions.parquet
    scripts/<org>/<name>/run.py, requirements.txt

A build is all-or-nothing (:mod:`pipeline.fsatomic`): killed at any moment, the folder is as before or after.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import fsatomic, render
from pipeline.errors import DatasetError, RecordError
from pipeline.ids import slug
from pipeline.records import arrow_schema, flatten, unflatten, validate_record

logger = logging.getLogger(__name__)

RESULTS_DIR = "data/results"
LATEST_DIR = "data/latest"
RANKINGS_DIR = "data/rankings"
EXCLUSIONS_FILE = "data/exclusions.parquet"
SCRIPTS_DIR = "scripts"
#: Hex digits of the key hash that name a latest shard: 2 -> at most 256 files, each rewritten only when touched.
LATEST_SHARD_DIGITS = 2


@dataclass
class BuildSummary:
    """What a build changed."""

    added: int = 0
    duplicates: int = 0
    results_file: str | None = None
    latest_files: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    changed_keys: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.added > 0


def latest_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["model_id"], row["task"], row["hardware"])


def shard_of(key: tuple[str, str, str]) -> str:
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
    return digest[:LATEST_SHARD_DIGITS]


def _table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=arrow_schema())


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _read_rows(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    try:
        return pq.read_table(path, columns=columns).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc


def existing_record_ids(root: Path) -> set[str]:
    """Ids of every record already in ``data/results`` (only that column is read)."""
    ids: set[str] = set()
    for path in sorted((root / RESULTS_DIR).glob("*.parquet")):
        ids.update(row["record_id"] for row in _read_rows(path, ["record_id"]))
    return ids


def read_latest(root: Path) -> list[dict[str, Any]]:
    """Every row of the latest view (flat rows)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((root / LATEST_DIR).glob("*.parquet")):
        rows.extend(_read_rows(path))
    return rows


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when row ``a`` supersedes row ``b`` for the same key."""
    return (a["finished_at"], a["started_at"], a["record_id"]) > (b["finished_at"], b["started_at"], b["record_id"])


def run_name(rows: Sequence[dict[str, Any]]) -> str:
    """A deterministic file name for a batch: newest finish time, then a hash of the record ids."""
    newest = max(row["finished_at"] for row in rows)
    digest = hashlib.sha256("".join(sorted(row["record_id"] for row in rows)).encode()).hexdigest()[:12]
    return f"{newest.strftime('%Y%m%dT%H%M%SZ')}-{digest}"


def _script_record(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The record a model's scripts come from: a neuron pass first, then any pass, then the newest row."""
    ranked = sorted(rows, key=lambda r: (r["status"] == "pass", r["device"] == "neuron", r["finished_at"]))
    return unflatten(ranked[-1])


def _configs(root: Path) -> list[tuple[str, str]]:
    configs = [("latest", f"{LATEST_DIR}/*.parquet"), ("results", f"{RESULTS_DIR}/*.parquet")]
    if any((root / RANKINGS_DIR).glob("*.parquet")):
        configs.append(("rankings", f"{RANKINGS_DIR}/*.parquet"))
    if (root / EXCLUSIONS_FILE).is_file():
        configs.append(("exclusions", EXCLUSIONS_FILE))
    return configs


def build(records: Iterable[dict[str, Any]], out: Path) -> BuildSummary:
    """Add ``records`` to the dataset folder ``out`` (created when missing), all or nothing.

    Records already present (same content) are skipped; nothing new means nothing is written.

    Raises:
        RecordError: a record is invalid (validate first: the CLI sets bad files aside before building).
        DatasetError: the existing folder holds unreadable Parquet.
    """
    summary = BuildSummary()
    rows_by_id: dict[str, dict[str, Any]] = {}
    for record in records:
        problems = validate_record(record)
        if problems:
            field_name, message = problems[0]
            raise RecordError(f"invalid record for {record.get('model_id')!r}: {field_name}: {message}")
        row = flatten(record)
        rows_by_id.setdefault(row["record_id"], row)
    known = existing_record_ids(out) if out.exists() else set()
    new_rows = [row for rid, row in rows_by_id.items() if rid not in known]
    summary.duplicates = len(rows_by_id) - len(new_rows)
    if not new_rows:
        logger.info("nothing new to add to %s", out)
        return summary
    new_rows.sort(key=lambda r: (r["model_id"], r["task"], r["hardware"], r["finished_at"]))
    with fsatomic.staged_folder(out) as stage:
        name = run_name(new_rows)
        results_path = f"{RESULTS_DIR}/{name}.parquet"
        fsatomic.write_bytes(stage / results_path, _parquet_bytes(_table(new_rows)))
        summary.results_file = results_path
        summary.added = len(new_rows)

        by_shard: dict[str, list[dict[str, Any]]] = {}
        for row in new_rows:
            by_shard.setdefault(shard_of(latest_key(row)), []).append(row)
        for shard, rows in sorted(by_shard.items()):
            path = stage / LATEST_DIR / f"{shard}.parquet"
            current = {latest_key(r): r for r in _read_rows(path)} if path.exists() else {}
            for row in rows:
                key = latest_key(row)
                if key not in current or _newer(row, current[key]):
                    current[key] = row
                    summary.changed_keys.append(key)
            ordered = [current[k] for k in sorted(current)]
            fsatomic.write_bytes(path, _parquet_bytes(_table(ordered)))
            summary.latest_files.append(f"{LATEST_DIR}/{shard}.parquet")

        latest = read_latest(stage)
        touched_models = {key[0] for key in summary.changed_keys}
        for model_id in sorted(touched_models):
            record = _script_record(r for r in latest if r["model_id"] == model_id)
            org, model_name = slug(model_id)
            folder = stage / SCRIPTS_DIR / org / model_name
            fsatomic.write_text(folder / "run.py", render.run_script(record))
            fsatomic.write_text(folder / "requirements.txt", render.requirements(record))
            summary.scripts.append(f"{SCRIPTS_DIR}/{org}/{model_name}")
        fsatomic.write_text(stage / "README.md", render.dataset_card(rows=latest, configs=_configs(stage)))
    logger.info("added %d rows to %s (%s)", summary.added, out, summary.results_file)
    return summary
