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

import datetime as dt
import hashlib
import io
import json
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
from pipeline.page import build_page
from pipeline.records import arrow_schema, flatten, unflatten, validate_record

logger = logging.getLogger(__name__)

RESULTS_DIR = "data/results"
LATEST_DIR = "data/latest"
RANKINGS_DIR = "data/rankings"
EXCLUSIONS_FILE = "data/exclusions.parquet"
SCRIPTS_DIR = "scripts"
#: Hex digits of the key hash that name a latest shard: 1 -> at most 16 files, each rewritten only when touched
#: (a catalog of 20k models keeps them near 1k rows each; a publish downloads them all for the card and page).
LATEST_SHARD_DIGITS = 1


@dataclass(frozen=True)
class Change:
    """How the latest row of one (model_id, task, hardware) key changed in a build."""

    key: tuple[str, str, str]
    before: dict[str, Any] | None
    after: dict[str, Any]

    @property
    def is_new_model(self) -> bool:
        return self.before is None

    @property
    def is_regression(self) -> bool:
        """It passed before (with an older toolchain or revision) and fails now."""
        return self.before is not None and self.before["status"] == "pass" and self.after["status"] == "fail"


@dataclass
class BuildSummary:
    """What a build changed."""

    added: int = 0
    duplicates: int = 0
    results_file: str | None = None
    latest_files: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.added > 0


def latest_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["model_id"], row["task"], row["hardware"])


def shard_of(key: tuple[str, str, str]) -> str:
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
    return digest[:LATEST_SHARD_DIGITS]


#: The latest view has one more column than the results: the key's earlier runs, newest first, as JSON
#: (at most HISTORY_LIMIT of them: the full history is data/results).
HISTORY_COLUMN = "history_json"
HISTORY_LIMIT = 10
_HISTORY_FIELDS = (
    "record_id",
    "finished_at",
    "status",
    "failure_stage",
    "failure_code",
    "revision",
    "device",
    "cores",
    "neuronx_cc_version",
    "torch_neuronx_version",
    "transformers_version",
    "torch_version",
    "compile_s",
    "ttft_s",
    "decode_tokens_per_s",
    "peak_device_memory_bytes",
)


def latest_schema() -> pa.Schema:
    return arrow_schema().append(pa.field(HISTORY_COLUMN, pa.string(), nullable=False))


def _table(rows: Sequence[dict[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=schema or arrow_schema())


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def _read_rows(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    try:
        return pq.read_table(path, columns=columns).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc


def read_latest(root: Path) -> list[dict[str, Any]]:
    """Every row of the latest view (flat rows, with ``history_json``)."""
    rows: list[dict[str, Any]] = []
    for path in sorted((root / LATEST_DIR).glob("*.parquet")):
        rows.extend(_read_rows(path))
    return rows


def history(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The earlier runs of a latest row's key, newest first."""
    return json.loads(row.get(HISTORY_COLUMN) or "[]")


def results_file_time(name: str) -> dt.datetime | None:
    """The newest ``finished_at`` of the rows in a results file, from its name (see :func:`run_name`)."""
    try:
        return dt.datetime.strptime(name.rsplit("/", 1)[-1][:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def results_files_since(names: Iterable[str], since: dt.datetime | None) -> list[str]:
    """The results files that may hold a record finished at ``since`` or later.

    A file is named after the newest ``finished_at`` it holds, so a record finished at T can only be in a file
    whose name's time is T or later: publishing new runs reads no old file at all (publish is O(new rows)).
    Files with an unexpected name are always included.
    """
    if since is None:
        return []
    floor = since.replace(microsecond=0)
    out = []
    for name in names:
        when = results_file_time(name)
        if when is None or when >= floor:
            out.append(name)
    return sorted(out)


def published_ids(root: Path, *, since: dt.datetime | None) -> set[str]:
    """Record ids already in ``data/results`` among the files that may hold records finished at ``since`` or later."""
    folder = root / RESULTS_DIR
    if since is None or not folder.is_dir():
        return set()
    names = [p.name for p in folder.glob("*.parquet")]
    ids: set[str] = set()
    for name in results_files_since(names, since):
        ids.update(row["record_id"] for row in _read_rows(folder / name, ["record_id"]))
    return ids


def _history_entry(row: dict[str, Any]) -> dict[str, Any]:
    entry = {name: row.get(name) for name in _HISTORY_FIELDS}
    entry["finished_at"] = row["finished_at"].isoformat()
    return entry


def toolchain(row: dict[str, Any]) -> str:
    """A short human label of the toolchain a row ran with."""
    if row.get("device") == "neuron":
        return (
            f"neuronx-cc {row.get('neuronx_cc_version')}, torch-neuronx {row.get('torch_neuronx_version')}, "
            f"transformers {row.get('transformers_version')}"
        )
    return f"torch {row.get('torch_version')}, transformers {row.get('transformers_version')}"


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


def _merge_shard(
    current: dict[tuple[str, str, str], dict[str, Any]], rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Change], int]:
    """Fold new rows into one shard's latest rows; returns the rows appended to results, changes, duplicates."""
    appended: list[dict[str, Any]] = []
    duplicates = 0
    before = {key: dict(row) for key, row in current.items()}
    for row in sorted(rows, key=lambda r: (r["finished_at"], r["started_at"], r["record_id"])):
        key = latest_key(row)
        existing = current.get(key)
        past = history(existing) if existing else []
        if existing and (
            row["record_id"] == existing["record_id"] or row["record_id"] in {h["record_id"] for h in past}
        ):
            duplicates += 1
            continue
        appended.append(row)
        if existing is None:
            current[key] = {**row, HISTORY_COLUMN: "[]"}
        elif _newer(row, existing):
            entries = [_history_entry(existing), *past]
            current[key] = {**row, HISTORY_COLUMN: json.dumps(entries, separators=(",", ":"))}
        else:  # a late result older than the latest: it joins the history, in order
            entries = sorted([*past, _history_entry(row)], key=lambda e: e["finished_at"], reverse=True)
            existing[HISTORY_COLUMN] = json.dumps(entries, separators=(",", ":"))
    changes = [
        Change(key=key, before=before.get(key), after=row)
        for key, row in current.items()
        if key not in before or before[key]["record_id"] != row["record_id"]
    ]
    return appended, changes, duplicates


def build(records: Iterable[dict[str, Any]], out: Path, *, page: bool = True) -> BuildSummary:
    """Add ``records`` to the dataset folder ``out`` (created when missing), all or nothing.

    Only the latest shards of the keys the records touch are read and rewritten, and only the results files
    that could already hold one of the records (:func:`results_files_since`) are read to skip duplicates.
    Nothing new: nothing is written. ``out`` may be a partial mirror of the dataset repo holding only those
    files (what publish uses).

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
        if row["record_id"] in rows_by_id:
            summary.duplicates += 1
        rows_by_id.setdefault(row["record_id"], row)
    known = published_ids(out, since=min((r["finished_at"] for r in rows_by_id.values()), default=None))
    for record_id in [rid for rid in rows_by_id if rid in known]:
        del rows_by_id[record_id]
        summary.duplicates += 1
    by_shard: dict[str, list[dict[str, Any]]] = {}
    for row in rows_by_id.values():
        by_shard.setdefault(shard_of(latest_key(row)), []).append(row)
    merged: dict[str, list[dict[str, Any]]] = {}
    new_rows: list[dict[str, Any]] = []
    for shard, rows in sorted(by_shard.items()):
        path = out / LATEST_DIR / f"{shard}.parquet"
        current = {latest_key(r): r for r in _read_rows(path)} if path.exists() else {}
        appended, changes, duplicates = _merge_shard(current, rows)
        summary.duplicates += duplicates
        if appended:
            new_rows.extend(appended)
            summary.changes.extend(changes)
            merged[shard] = [current[k] for k in sorted(current)]
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
        for shard, rows in sorted(merged.items()):
            fsatomic.write_bytes(stage / LATEST_DIR / f"{shard}.parquet", _parquet_bytes(_table(rows, latest_schema())))
            summary.latest_files.append(f"{LATEST_DIR}/{shard}.parquet")

        latest = read_latest(stage)
        touched_models = {change.key[0] for change in summary.changes}
        for model_id in sorted(touched_models):
            record = _script_record(r for r in latest if r["model_id"] == model_id)
            org, model_name = slug(model_id)
            folder = stage / SCRIPTS_DIR / org / model_name
            fsatomic.write_text(folder / "run.py", render.run_script(record))
            fsatomic.write_text(folder / "requirements.txt", render.requirements(record))
            summary.scripts.append(f"{SCRIPTS_DIR}/{org}/{model_name}")
        write_front_files(stage, latest=latest, page=page)
    logger.info("added %d rows to %s (%s)", summary.added, out, summary.results_file)
    return summary


def write_front_files(root: Path, *, latest: list[dict[str, Any]] | None = None, page: bool = True) -> None:
    """(Re)write README.md (the card) and index.html (the catalog page) from the folder's current content."""
    latest = read_latest(root) if latest is None else latest
    fsatomic.write_text(root / "README.md", render.dataset_card(rows=latest, configs=_configs(root)))
    if page:
        fsatomic.write_text(root / "index.html", build_page(root))
