"""The latest view's shards: which file holds a model, which row stands for a key, and a shard read, merged with a
build's rows and written with its family rows. The only code that knows the shard names.

One scheme, **by model**: a shard is named after a prefix of the hex sha256 of the model's canonical id
(:func:`model_hash`); the empty prefix is ``all``, the one shard of a new dataset. The shard names of a dataset are
prefix-free, so a model's shard is the one whose name starts its hash (or, for a child a split left empty, the
name its siblings' depth gives): computable from the model id and the repo's listing alone. A shard whose
Parquet file passes :data:`LATEST_SHARD_BYTES` is split in sixteen by the next hex digit when a build rewrites
it (only that shard: the others keep their names). Every row of a model (all tasks, all hardware) is in one shard,
so a publish reads only the shards of its records' models. The family index is partitioned the same way
(``data/families/<name>.parquet`` beside ``data/latest/<name>.parquet``), so a build writes a latest shard's family
rows from the shard itself, without reading the index.

A latest row stands for its key (:func:`latest_key`): a CI row first, then the newest; the others are in its
``history``, capped at :data:`HISTORY_LIMIT`. Keys are by the canonical id: the Hub resolves ids without case.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import fsatomic
from pipeline.dataset.layout import (
    FAMILIES_DIR,
    HISTORY_COLUMN,
    HISTORY_FIELDS,
    LATEST_DIR,
    families_schema,
    latest_schema,
    parquet_bytes,
    read_table,
)
from pipeline.errors import DatasetError
from pipeline.records import MEASURED, family_row

#: The name of the one shard of a dataset that has one (the empty prefix).
ALL = "all"
#: A latest shard whose Parquet file passes this many bytes is split in sixteen when a build rewrites it. A
#: publish downloads and rewrites the shards its records' models are in: one such shard costs a GET and an LFS
#: upload (two requests) and the same for its family shard, so bigger shards mean fewer requests for a publish of
#: models spread over the catalog, smaller ones fewer bytes and less CPU for a publish of a few models
#: (``benchmarks/publish_scale.py`` measures both).
LATEST_SHARD_BYTES = 1 << 20
#: Hex digits a shard name may have at most (data/summary.json's rule).
MAX_SHARD_DIGITS = 8
HEX = "0123456789abcdef"
#: Earlier runs kept in a latest row's ``history`` (newest first); the full history is data/results.
HISTORY_LIMIT = 10
#: The key columns of a latest shard, in the order its rows are sorted by.
KEY_COLUMNS = ("model_id", "task", "hardware")

Key = tuple[str, str, str]


def model_hash(model_id: str) -> str:
    """The hex sha256 of a model's canonical id (Hub ids resolve without case: every spelling meets)."""
    return hashlib.sha256(model_id.lower().encode()).hexdigest()


def model_shard(model_id: str, shards: Iterable[str]) -> str:
    """The shard holding ``model_id``, given the names of the shards that exist; ``all`` when there are none yet.
    A shard that got no rows when its parent was split has no file: a model whose hash it starts goes to it all
    the same (the name its siblings' depth gives), so every model has one shard for ever.

    Raises:
        DatasetError: no shard name starts the model's hash or is a sibling of one that would (no split's names).
    """
    names = set(shards)
    if not names or ALL in names:
        return ALL
    digest = model_hash(model_id)
    for digits in range(1, MAX_SHARD_DIGITS + 1):
        if digest[:digits] in names:
            return digest[:digits]
    # An empty child of a split: a sibling (same parent, same depth) has a file.
    depths = sorted({len(name) for name in names if digest.startswith(name[:-1])})
    if depths:
        return digest[: depths[0]]
    raise DatasetError(f"no latest shard holds {model_id!r}: the shard list {sorted(names)[:5]}... is incomplete")


def latest_shard_path(name: str) -> str:
    """The repo path of a latest shard."""
    return f"{LATEST_DIR}/{name}.parquet"


def family_shard_path(name: str) -> str:
    """The repo path of the family rows of latest shard ``name``."""
    return f"{FAMILIES_DIR}/{name}.parquet"


def _shard_name(path: str, folder: str) -> str | None:
    """The shard name of a latest or family file's repo path under ``folder``, or None when it is none."""
    if not (path.startswith(f"{folder}/") and path.endswith(".parquet")):
        return None
    name = path[len(folder) + 1 : -len(".parquet")]
    ok = name == ALL or (0 < len(name) <= MAX_SHARD_DIGITS and all(c in HEX for c in name))
    return name if ok else None


def is_family_path(path: str) -> bool:
    """Whether a repo path is a file of the family index."""
    return _shard_name(path, FAMILIES_DIR) is not None


def family_index_paths(repo_files: Iterable[str], key: str | None = None) -> list[str]:
    """The repo-relative paths of the family index files to read, from a listing of the dataset repo.

    Args:
        repo_files: The repo's file paths (a listing of ``data/families/``, or of the whole repo).
        key: A model id: only the file holding that model's family rows (none when the index has no shard for it).

    Returns:
        The files under ``data/families/`` (all of them, or the one holding the model: :func:`model_shard`);
        empty when the repo holds no index (or no shard for the model: it has no row).

    Raises:
        DatasetError: the shard names under ``data/families/`` are no split's.
    """
    shards = {name: path for path in repo_files if (name := _shard_name(path, FAMILIES_DIR)) is not None}
    if key is None:
        return sorted(shards.values())
    name = model_shard(key, shards) if shards else None
    return [shards[name]] if name in shards else []  # a shard without a file holds no row


def family_files(root: Path) -> list[Path]:
    """The family index files a dataset folder holds, in path order."""
    repo_files = [p.relative_to(root).as_posix() for p in (root / FAMILIES_DIR).glob("*.parquet")]
    return [root / path for path in family_index_paths(repo_files)]


def folder_shards(root: Path) -> list[str]:
    """The names of the latest shards a folder holds."""
    return sorted(p.stem for p in (root / LATEST_DIR).glob("*.parquet"))


def _depth(name: str) -> int:
    """How many hex digits name a shard (0 for ``all``)."""
    return 0 if name == ALL else len(name)


def _split(table: pa.Table, name: str) -> dict[str, pa.Table]:
    """A latest shard's table split by the next hex digit of each row's model hash: child name -> its rows (a
    child without rows is left out: ``datasets`` refuses a Parquet file of no rows; see :func:`model_shard`)."""
    at = _depth(name)
    digits = pa.array([model_hash(m)[at] for m in table["model_id"].to_pylist()], pa.string())
    prefix = "" if name == ALL else name
    children = {f"{prefix}{d}": table.filter(pc.equal(digits, d)) for d in HEX}
    return {child: rows for child, rows in children.items() if rows.num_rows}


def latest_key(row: Mapping[str, Any]) -> Key:
    """The (model, task, hardware) key a latest row stands for, by the canonical id: the Hub resolves ids without
    case, so ``Meta-Llama/X`` and ``meta-llama/X`` are one model (Hub ids are ASCII: lower() is case folding)."""
    return (row["model_id"].lower(), row["task"], row["hardware"])


def history_entry(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in HISTORY_FIELDS}


def rank(row: dict[str, Any]) -> tuple[Any, ...]:
    """Which row of a key stands as its latest: a CI row before any other (a community or local record never
    displaces the project's own measurement, however new it says it is), then the newest."""
    return (row["source"] == "ci", row["finished_at"], row["started_at"], row["record_id"])


def capped(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest ``HISTORY_LIMIT`` entries, newest first, CI runs kept first when some must go."""
    entries = sorted(entries, key=lambda e: e["finished_at"], reverse=True)
    if len(entries) > HISTORY_LIMIT:
        kept = sorted(entries, key=lambda e: (e.get("source") == "ci", e["finished_at"]), reverse=True)
        ids = {e["record_id"] for e in kept[:HISTORY_LIMIT]}
        entries = [e for e in entries if e["record_id"] in ids]
    return entries


def family_table(latest: pa.Table) -> pa.Table:
    """The family rows of a latest shard's table (:func:`pipeline.records.family_row` of each row), sorted by key.

    A measured row (pass or fail) is its own family row: those are projected in Arrow. Only the rows of an
    infrastructure error, whose family row comes from an earlier run, become Python rows.
    """
    names = families_schema().names
    measured = pc.fill_null(pc.is_in(latest["status"], value_set=pa.array(MEASURED, pa.string())), False)
    direct = latest.filter(measured).select(names).cast(families_schema())
    others = latest.filter(pc.invert(measured)).to_pylist()
    rest = pa.Table.from_pylist([family_row(r, r.get(HISTORY_COLUMN) or []) for r in others], schema=families_schema())
    both = pa.concat_tables([direct, rest]).combine_chunks()
    return both.sort_by([(name, "ascending") for name in KEY_COLUMNS])


def read_shard(path: Path, keys: set[Key]) -> tuple[pa.Table, dict[Key, Any]]:
    """A latest shard split in two: its rows of ``keys`` (by key) and the other rows, untouched, as a table (never
    turned into Python rows: a publish touches few keys of a shard).

    Raises:
        DatasetError: the shard is unreadable.
    """
    table = read_table(path)
    joined = pc.binary_join_element_wise(pc.utf8_lower(table["model_id"]), table["task"], table["hardware"], "\0")
    mask = pc.is_in(joined, value_set=pa.array(["\0".join(key) for key in keys], pa.string()))
    return table.filter(pc.invert(mask)), {latest_key(r): r for r in table.filter(mask).to_pylist()}


def shard_table(rest: pa.Table | None, current: dict[Key, Any]) -> pa.Table:
    """A latest shard's table: the untouched rows and the merged ones, sorted by key."""
    merged = pa.Table.from_pylist([current[k] for k in sorted(current)], schema=latest_schema())
    if rest is None or not rest.num_rows:
        return merged
    both = pa.concat_tables([rest.cast(latest_schema()), merged])
    return both.sort_by([(name, "ascending") for name in KEY_COLUMNS]).combine_chunks()


def write_shard(stage: Path, name: str, table: pa.Table) -> tuple[list[str], list[str]]:
    """Write latest shard ``name`` and its family rows into the folder ``stage``; a shard whose file passes
    :data:`LATEST_SHARD_BYTES` is written as its sixteen children instead (each split again while it still passes),
    and its own files are removed.

    Returns:
        The repo paths written and the repo paths removed (the split shards' own files).
    """
    written: list[str] = []
    removed: list[str] = []
    pending = [(name, table)]
    while pending:
        shard, rows = pending.pop()
        data = parquet_bytes(rows)
        if len(data) > LATEST_SHARD_BYTES and rows.num_rows > 1 and _depth(shard) < MAX_SHARD_DIGITS:
            pending.extend(sorted(_split(rows, shard).items(), reverse=True))
            if shard == name:  # (a child split again was never written)
                for path in (latest_shard_path(shard), family_shard_path(shard)):
                    (stage / path).unlink(missing_ok=True)
                    removed.append(path)
            continue
        fsatomic.write_bytes(stage / latest_shard_path(shard), data)
        fsatomic.write_bytes(stage / family_shard_path(shard), parquet_bytes(family_table(rows)))
        written += [latest_shard_path(shard), family_shard_path(shard)]
    return sorted(written), removed
