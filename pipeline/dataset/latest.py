"""A latest shard's table: read split in two (the keys a build touches, the rest as Arrow), merged back, split in
sixteen when it grew past its size (scheme by model), and written with its family rows.

Which shard holds a row, and the files' names, are :mod:`pipeline.dataset.shards`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import fsatomic
from pipeline.dataset import shards
from pipeline.dataset.families import family_table
from pipeline.dataset.keys import by_key, latest_key, shard_key
from pipeline.dataset.layout import parquet_bytes, read_table
from pipeline.dataset.read import latest_schema, upgrade_row
from pipeline.records import LAYOUT_VERSION

#: Hex digits of the key hash that name a latest shard in a new dataset: 0 -> one file, ``all.parquet`` (the
#: scheme by model, which splits a shard once it passes :data:`pipeline.dataset.shards.LATEST_SHARD_BYTES`).
#: Older datasets have 16 shards by key, one hex digit; ``data/summary.json`` records a dataset's layout.
LATEST_SHARD_DIGITS = 0

#: The key columns of a latest shard, in the order its rows are sorted by.
KEY_COLUMNS = ("model_id", "task", "hardware")

Key = tuple[str, str, str]


class Sharding:
    """Where a dataset's rows go: by model (a prefix of the model's hash, among the shards there are), or by key."""

    def __init__(self, root: Path, summary: dict[str, Any] | None) -> None:
        self.by_model = shards.named_by_model(summary, root) if summary is not None else self._folder_by_model(root)
        self.names = list(summary["shards"]) if summary is not None else shards.folder_shards(root)
        self.digits = int(summary["shard_digits"]) if summary is not None else self._folder_digits(root)

    @staticmethod
    def _folder_by_model(root: Path) -> bool:
        return LATEST_SHARD_DIGITS == 0 and shards.named_by_model(None, root)

    def _folder_digits(self, root: Path) -> int:
        names = shards.folder_shards(root)
        if not names:
            return LATEST_SHARD_DIGITS
        return 0 if names == [shards.ALL] else max(len(n) for n in names)

    def shard_of(self, row: dict[str, Any]) -> str:
        """The shard holding ``row``'s key."""
        if self.by_model:
            return shards.model_shard(row["model_id"], self.names)
        return shards.key_shard(shard_key(row), self.digits)


def read_shard(path: Path, keys: set[Key]) -> tuple[pa.Table | None, dict[Key, Any]]:
    """A latest shard split in two: its rows of ``keys`` (in the current layout, by key) and the other rows,
    untouched, as a table (never turned into Python rows: a publish touches few keys of a shard). A shard of
    an older layout, or one holding a key twice, is read whole into rows, and the table is None.

    Raises:
        DatasetError: the shard is unreadable.
    """
    table = read_table(path)
    if table.schema.equals(latest_schema()) and table.num_rows:
        ids = pc.utf8_lower(table["model_id"])  # the canonical id, as latest_key has it
        joined = pc.binary_join_element_wise(ids, table["task"], table["hardware"], "\0")
        current = pc.all(pc.equal(table["layout_version"], LAYOUT_VERSION)).as_py()
        unique = joined.null_count == 0 and pc.count_distinct(joined).as_py() == table.num_rows
        if current and unique:
            mask = pc.is_in(joined, value_set=pa.array(["\0".join(key) for key in keys], pa.string()))
            touched = table.filter(mask).to_pylist()
            return table.filter(pc.invert(mask)), {latest_key(r): upgrade_row(r) for r in touched}
    return None, by_key(upgrade_row(r) for r in table.to_pylist())


def shard_table(rest: pa.Table | None, current: dict[Key, Any]) -> pa.Table:
    """A latest shard's table: the untouched rows and the merged ones, sorted by key."""
    merged = pa.Table.from_pylist([current[k] for k in sorted(current)], schema=latest_schema())
    if rest is None or not rest.num_rows:
        return merged
    both = pa.concat_tables([rest.cast(latest_schema()), merged])
    return both.sort_by([(name, "ascending") for name in KEY_COLUMNS]).combine_chunks()


def write_shard(stage: Path, name: str, table: pa.Table, *, by_model: bool) -> tuple[list[str], list[str]]:
    """Write latest shard ``name`` (and, by model, its family rows) into the folder ``stage``; by model, a shard
    whose file passes :data:`~pipeline.dataset.shards.LATEST_SHARD_BYTES` is written as its sixteen children
    instead (each split again while it still passes), and its own files are removed.

    Returns:
        The repo paths written and the repo paths removed (the split shards' own files).
    """
    written: list[str] = []
    removed: list[str] = []
    pending = [(name, table)]
    while pending:
        shard, rows = pending.pop()
        data = parquet_bytes(rows)
        big = len(data) > shards.LATEST_SHARD_BYTES and rows.num_rows > 1
        if by_model and big and shards.depth(shard) < shards.MAX_SHARD_DIGITS:
            pending.extend(sorted(shards.split(rows, shard).items(), reverse=True))
            if shard == name:  # (a child split again was never written)
                for path in (shards.latest_shard_path(shard), shards.family_shard_path(shard)):
                    (stage / path).unlink(missing_ok=True)
                    removed.append(path)
            continue
        path = shards.latest_shard_path(shard)
        fsatomic.write_bytes(stage / path, data)
        written.append(path)
        if by_model:
            family = shards.family_shard_path(shard)
            fsatomic.write_bytes(stage / family, parquet_bytes(family_table(rows)))
            written.append(family)
    return sorted(written), removed
