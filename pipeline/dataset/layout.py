"""Names and file formats of the dataset folder: the only place that knows where each file lives.

Layout::

    README.md                                 card with YAML `configs`
    data/results/<run>.parquet                append-only, one file per build that added rows
    data/latest/<x>.parquet                   newest row per (model_id, task, hardware), sharded by the model's
                                              hash once past a size (pipeline/dataset/shards.py: every shard name)
    data/families/<x>.parquet                 one small row per latest key (how its model fared, its family),
                                              one file beside each latest shard
    data/rankings/<date>-<task>-<view>.parquet   one discovery snapshot per task and view
    data/exclusions.parquet                   hand-kept and discovered exclusions
    data/changes/<run>.parquet                what each publish changed (new models, passes, failures, regressions)
    data/summary.json                         the card's counts and the latest view's shard layout
    data/serving.json                         the latest serving records, whole (pipeline/dataset/serving.py)
    data/serving_points.parquet               their points, one row each (the `serving` config)
    data/inferencex.parquet                   their points in InferenceX's result keys (the `inferencex` config)
    data/warm_checks.parquet                  the newest second-machine warm check per bundle (pipeline/dataset/warm.py)
    data/matrix.parquet                       the stage matrix, rewritten by every publish (the `matrix` config)
    scripts/<org>/<name>/run.py, requirements.txt
    index.html                                the catalog page

This is dataset layout 1 (``layout_version`` in every results and latest row): the only one.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import DatasetError
from pipeline.ids import slug
from pipeline.records import FAMILY_COLUMNS, arrow_schema, arrow_type

#: The folder of every data file (what a reader lists to find the family index: :func:`family_index_paths`).
DATA_DIR = "data"
RESULTS_DIR = "data/results"
LATEST_DIR = "data/latest"
RANKINGS_DIR = "data/rankings"
EXCLUSIONS_FILE = "data/exclusions.parquet"
CHANGES_DIR = "data/changes"
SUMMARY_FILE = "data/summary.json"
#: The family index's folder: one file beside each latest shard, the same name (:mod:`pipeline.dataset.shards`).
FAMILIES_DIR = "data/families"
#: The family index of a dataset whose latest view is one shard (``all``).
FAMILIES_FILE = f"{FAMILIES_DIR}/all.parquet"
#: The latest serving records (pipeline/dataset/serving.py): JSON, whole records.
SERVING_FILE = "data/serving.json"
#: Their points, one row each, and the same points in InferenceX's aggregated result keys (Parquet views).
SERVING_POINTS_FILE = "data/serving_points.parquet"
INFERENCEX_FILE = "data/inferencex.parquet"
#: The second-machine warm checks of the published compiled-cache bundles (pipeline/dataset/warm.py).
WARM_CHECKS_FILE = "data/warm_checks.parquet"
#: The stage matrix (pipeline/dataset/matrix.py): each discovered model's stages and features per device class.
MATRIX_FILE = "data/matrix.parquet"
SCRIPTS_DIR = "scripts"
CARD_FILE = "README.md"
PAGE_FILE = "index.html"
SCRIPT_FILES = ("run.py", "requirements.txt")
#: The views a rankings snapshot can be of (discovery's ranked views and the curated list).
RANKED_VIEWS = ("selected", "trending", "downloads")


#: The latest view has one more column than the results: the key's earlier runs, newest first, as a list of
#: structs (at most ``HISTORY_LIMIT`` of them: the full history is data/results).
HISTORY_COLUMN = "history"
#: One history entry: a past run of the key (a subset of the results columns).
HISTORY_FIELDS: tuple[str, ...] = (
    "record_id", "finished_at", "source", "status", "failure_stage", "failure_code", "revision", "device", "cores",
    "neuronx_cc_version", "torch_neuronx_version", "transformers_version", "torch_version", "compile_s", "ttft_s",
    "decode_tokens_per_s", "peak_device_memory_bytes",
)  # fmt: skip


def latest_schema() -> pa.Schema:
    """The Arrow schema of a latest shard: the results columns, then ``history``: ``list<struct<...>>`` of
    :data:`HISTORY_FIELDS`, each typed as its results column."""
    schema = arrow_schema()
    history = pa.list_(pa.struct([schema.field(name) for name in HISTORY_FIELDS]))
    return schema.append(pa.field(HISTORY_COLUMN, history, nullable=False))


@functools.cache
def families_schema() -> pa.Schema:
    """The Arrow schema of a family index file (each column typed as its results column)."""
    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in FAMILY_COLUMNS])


def earlier_runs(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The earlier runs of a latest row's key, newest first (from its ``history``)."""
    return list(row.get(HISTORY_COLUMN) or [])


#: The codec of every Parquet file the dataset writes: Snappy, pyarrow's default and what ``datasets`` writes.
#: zstd made files about a third smaller, but its per-column cost made writing a 100-row file ~2.5x slower (our
#: files have ~90 columns and few rows), and a publish writes three of them and reads a latest shard
#: (``benchmarks/publish_scale.py``).
PARQUET_CODEC = "snappy"


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as Parquet bytes (every Parquet file of the dataset is written so: :data:`PARQUET_CODEC`).

    Without pyarrow's copy of the schema in the footer (``ARROW:schema``, base64): every column of the dataset's
    schemas reads back as the same Arrow type from the Parquet types alone, and the copy was 12.7 KB of each latest
    file's 32 KB footer, which a publish downloads once per shard it touches (``benchmarks/publish_scale.py``).
    """
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=PARQUET_CODEC, store_schema=False)
    return sink.getvalue()


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file as a table (only ``columns``, when given).

    Raises:
        DatasetError: the file is unreadable, or lacks one of ``columns``.
    """
    try:
        # One file: ParquetFile skips the dataset machinery read_table sets up (a third of a small file's read).
        with pq.ParquetFile(path) as parquet:
            table = parquet.read(columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc
    missing = [name for name in columns or () if name not in table.column_names]
    if missing:  # (pyarrow reads a column a file lacks as no column at all)
        raise DatasetError(f"{path}: not a file of this dataset (no {missing[0]!r} column)")
    return table


def read_rows(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one Parquet file.

    Raises:
        DatasetError: the file is unreadable.
    """
    table = read_table(path, columns)
    try:
        return table.to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc


def is_results_file(path: str) -> bool:
    return path.startswith(f"{RESULTS_DIR}/") and path.endswith(".parquet")


def is_latest_file(path: str) -> bool:
    return path.startswith(f"{LATEST_DIR}/") and path.endswith(".parquet")


def run_name(rows: Sequence[dict[str, Any]]) -> str:
    """A deterministic results file name for a batch: newest finish time, then a hash of the record ids."""
    newest = max(row["finished_at"] for row in rows)
    digest = hashlib.sha256("".join(sorted(row["record_id"] for row in rows)).encode()).hexdigest()[:12]
    return f"{newest.strftime('%Y%m%dT%H%M%SZ')}-{digest}"


def fresh_run_name(root: Path, rows: Sequence[dict[str, Any]]) -> str:
    """:func:`run_name`, or, when a results or changes file of the folder ``root`` already has it, the first of
    ``<name>-1``, ``<name>-2``, ... that none has: a publish never overwrites another's history (issue 22.12). A
    publish's partial mirror holds every results file named at or after its records' oldest finish time
    (:func:`results_files_since`), so every name its batch could take is there to be seen."""
    base = name = run_name(rows)
    serial = 0
    while (root / RESULTS_DIR / f"{name}.parquet").exists() or (root / CHANGES_DIR / f"{name}.parquet").exists():
        serial += 1
        name = f"{base}-{serial}"
    return name


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
    return sorted(name for name in names if (when := results_file_time(name)) is None or when >= floor)


def rankings_path(date: dt.date, task: str, view: str) -> str:
    """Where the snapshot of one task and view on one date lives."""
    return f"{RANKINGS_DIR}/{date.isoformat()}-{task}-{view}.parquet"


def parse_rankings_name(name: str) -> tuple[str, str, str] | None:
    """``(date, task, view)`` of a snapshot file name (``<YYYY-MM-DD>-<task>-<view>.parquet``), or None."""
    name = name.rsplit("/", 1)[-1]
    if not name.endswith(".parquet"):
        return None
    stem = name.removesuffix(".parquet")
    date, rest = stem[:10], stem[11:]
    task, _, view = rest.rpartition("-")
    try:
        dt.date.fromisoformat(date)
    except ValueError:
        return None
    if view not in RANKED_VIEWS or not task or stem[10:11] != "-":
        return None
    return date, task, view


def newest_rankings(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """The newest snapshot per (task, view) among ``paths``, and the paths named otherwise (read in full)."""
    newest: dict[tuple[str, str], tuple[str, str]] = {}
    others: list[str] = []
    for path in paths:
        parsed = parse_rankings_name(path)
        if parsed is None:
            others.append(path)
            continue
        date, task, view = parsed
        if (task, view) not in newest or date > newest[(task, view)][0]:
            newest[(task, view)] = (date, path)
    return sorted(path for _, path in newest.values()), sorted(others)


def script_folder(model_id: str) -> str:
    """The folder of a model's ``run.py`` and ``requirements.txt``."""
    org, name = slug(model_id)
    return f"{SCRIPTS_DIR}/{org}/{name}"
