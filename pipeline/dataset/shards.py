"""Which file of the latest view and of the family index holds a key: the only code that knows the shard names.

Two schemes, told apart by ``data/summary.json`` (``shard_by``) or, without one, by the folder:

- **by model** (every dataset that starts with one shard): a shard is named after a prefix of the hex sha256 of
  the model's canonical id (:func:`model_hash`); the empty prefix is ``all``. The shard names of a dataset are
  prefix-free, so a model's shard is the one whose name starts its hash (or, for a child a split left empty, the
  name its siblings' depth gives): computable from the model id and the repo's listing alone. A shard whose
  Parquet file passes :data:`LATEST_SHARD_BYTES` is split in sixteen by the next hex digit when a build rewrites
  it (only that shard: the others keep their names). The family index is partitioned the same way, so a build
  writes a latest shard's family rows from the shard itself, without reading the index:
  ``data/families.parquet`` beside ``all``, else ``data/families/<prefix>.parquet``. Every row of a model (all
  tasks, all hardware) is in one shard.
- **by key** (datasets created with sixteen shards before this scheme): a shard is named after the first
  ``shard_digits`` hex digits of the sha256 of ``model_id\\0task\\0hardware`` (the id as spelt), and the
  family index is one file. Such a dataset keeps its layout; it is never split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.dataset.layout import FAMILIES_FILE, LATEST_DIR
from pipeline.errors import DatasetError

#: The family index's folder once the latest view has more than one shard (by model).
FAMILIES_DIR = "data/families"
#: The name of the one shard of a dataset that has one (the empty prefix).
ALL = "all"
#: The scheme that names shards by a prefix of the model's hash (``shard_by`` in data/summary.json).
BY_MODEL = "model"
#: A latest shard (by model) whose Parquet file passes this many bytes is split in sixteen when a build
#: rewrites it. A publish downloads and rewrites the shards its records' models are in: one such shard costs a
#: GET and an LFS upload (two requests) and the same for its family shard, so bigger shards mean fewer requests
#: for a publish of models spread over the catalog, smaller ones fewer bytes and less CPU for a publish of a
#: few models (``benchmarks/publish_scale.py`` measures both).
LATEST_SHARD_BYTES = 1 << 20
#: Hex digits a shard name may have at most (data/summary.json's rule).
MAX_SHARD_DIGITS = 8
HEX = "0123456789abcdef"


def model_hash(model_id: str) -> str:
    """The hex sha256 of a model's canonical id (Hub ids resolve without case: every spelling meets)."""
    return hashlib.sha256(model_id.lower().encode()).hexdigest()


def key_shard(key: tuple[str, str, str], digits: int) -> str:
    """The legacy (by key) shard of ``(model_id, task, hardware)``: the first ``digits`` hex digits, or ``all``."""
    if digits == 0:
        return ALL
    return hashlib.sha256("\0".join(key).encode()).hexdigest()[:digits]


def model_shard(model_id: str, shards: Iterable[str]) -> str:
    """The shard (by model) holding ``model_id``, given the names of the shards that exist; ``all`` when there are
    none yet. A shard that got no rows when its parent was split has no file: a model whose hash it starts goes
    to it all the same (the name its siblings' depth gives), so every model has one shard for ever.

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
    """The repo path of the family rows of latest shard ``name`` (scheme by model)."""
    return FAMILIES_FILE if name == ALL else f"{FAMILIES_DIR}/{name}.parquet"


def _family_shard_name(path: str) -> str | None:
    """The shard name of a family index file's repo path, or None when it is none."""
    if path == FAMILIES_FILE:
        return ALL
    if not (path.startswith(f"{FAMILIES_DIR}/") and path.endswith(".parquet")):
        return None
    name = path[len(FAMILIES_DIR) + 1 : -len(".parquet")]
    ok = 0 < len(name) <= MAX_SHARD_DIGITS and all(c in HEX for c in name)
    return name if ok else None


def is_family_path(path: str) -> bool:
    """Whether a repo path is a file of the family index (the one file or a shard)."""
    return _family_shard_name(path) is not None


def family_index_paths(repo_files: Iterable[str], key: str | None = None) -> list[str]:
    """The repo-relative paths of the family index files to read, from a listing of the dataset repo.

    Args:
        repo_files: The repo's file paths (a listing of ``data/``, or of the whole repo).
        key: A model id: only the file holding that model's family rows (none when the index has no shard for it).

    Returns:
        ``["data/families.parquet"]`` for a one-file index; else the shards under ``data/families/`` (all of
        them, or the one holding the model: :func:`model_shard`); empty when the repo holds no index (or no
        shard for the model: it has no row).

    Raises:
        DatasetError: the shard names under ``data/families/`` are no split's.
    """
    named = {path: name for path in repo_files if (name := _family_shard_name(path)) is not None}
    shards = {name: path for path, name in named.items() if name != ALL}
    if not shards:  # one file (or none)
        return [FAMILIES_FILE] if FAMILIES_FILE in named else []
    if key is None:
        return sorted(shards.values())
    name = model_shard(key, shards)
    return [shards[name]] if name in shards else []  # a shard without a file holds no row


def family_files(root: Path) -> list[Path]:
    """The family index files a dataset folder holds (the one file, or its shards), in path order."""
    repo_files = [FAMILIES_FILE] if (root / FAMILIES_FILE).is_file() else []
    repo_files += [p.relative_to(root).as_posix() for p in (root / FAMILIES_DIR).glob("*.parquet")]
    return [root / path for path in family_index_paths(repo_files)]


def folder_shards(root: Path) -> list[str]:
    """The names of the latest shards a folder holds."""
    return sorted(p.stem for p in (root / LATEST_DIR).glob("*.parquet"))


def named_by_model(summary: dict[str, Any] | None, root: Path | None = None) -> bool:
    """Whether a dataset names its shards by model: its summary says so or it has one shard (``all``); without a
    summary, when the folder has family shards or one latest shard (or none)."""
    if summary is not None:
        return summary.get("shard_by") == BY_MODEL or list(summary["shards"]) in ([], [ALL])
    if root is None:
        return True
    names = folder_shards(root)
    return names in ([], [ALL]) or any((root / FAMILIES_DIR).glob("*.parquet"))


def families_sharded(summary: dict[str, Any] | None) -> bool:
    """Whether the summary's dataset keeps its family index in shards (by model, more than ``all``)."""
    return summary is not None and named_by_model(summary) and list(summary["shards"]) not in ([], [ALL])


def depth(name: str) -> int:
    """How many hex digits name a shard (0 for ``all``)."""
    return 0 if name == ALL else len(name)


def split(table: pa.Table, name: str) -> dict[str, pa.Table]:
    """A latest shard's table split by the next hex digit of each row's model hash: child name -> its rows (a
    child without rows is left out: ``datasets`` refuses a Parquet file of no rows; see :func:`model_shard`)."""
    at = depth(name)
    if at >= MAX_SHARD_DIGITS:
        raise DatasetError(f"latest shard {name!r} cannot be split further ({MAX_SHARD_DIGITS} hex digits)")
    digits = pa.array([model_hash(m)[at] for m in table["model_id"].to_pylist()], pa.string())
    prefix = "" if name == ALL else name
    children = {f"{prefix}{d}": table.filter(pc.equal(digits, d)) for d in HEX}
    return {child: rows for child, rows in children.items() if rows.num_rows}
