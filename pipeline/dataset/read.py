"""Reading the dataset folder: the latest view, results columns, rankings, exclusions and scripts."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    FAMILIES_DIR,
    HISTORY_COLUMN,
    LATEST_DIR,
    RANKINGS_DIR,
    RESULTS_DIR,
    SCRIPT_FILES,
    SCRIPTS_DIR,
    newest_rankings,
    read_rows,
    script_folder,
)
from pipeline.dataset.rankings import EXCLUSIONS_SCHEMA, SNAPSHOT_SCHEMA
from pipeline.dataset.shards import family_files
from pipeline.errors import DatasetError, ModelIdError
from pipeline.records import MEASURED, OPTIONAL_COLUMNS


def require_dataset(root: Path) -> Path:
    """``root`` when it is a dataset folder that holds rows (a latest shard or the family index).

    A command given a folder to read (``trncat check --dataset-dir``, ``trncat page --from-folder``) calls it
    first: a missing or empty folder is the caller's mistake, never an empty catalog.

    Raises:
        DatasetError: no such folder, or it holds no dataset.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder")
    if not any((root / LATEST_DIR).glob("*.parquet")) and not family_files(root):
        raise DatasetError(f"{root}: holds no dataset (no {LATEST_DIR}/*.parquet, no {FAMILIES_DIR}/*.parquet)")
    return root


def read_latest(root: Path) -> list[dict[str, Any]]:
    """Every row of the latest view (flat rows, with ``history``).

    Raises:
        DatasetError: a shard is unreadable.
    """
    return [row for path in sorted((root / LATEST_DIR).glob("*.parquet")) for row in read_rows(path)]


#: Rows converted to Python at a time by :func:`read_latest_columns`: the Arrow side never holds more than this.
BATCH_ROWS = 2048


def read_latest_columns(root: Path, columns: Sequence[str]) -> list[dict[str, Any]]:
    """``columns`` of every latest row: :class:`LatestBatches`' rows in one list.

    The page shows 80 of the 130 columns; reading only those, a batch at a time, with one object per distinct
    short text (:func:`_share_texts`), took 1.9 s and 314 MB at 100,000 rows where :func:`read_latest` took 4.3 s
    and 544 MB.

    Raises:
        DatasetError: a shard is unreadable.
    """
    return [row for batch in LatestBatches(root, columns) for row in batch]


class LatestBatches:
    """``columns`` of the latest rows, a batch of rows (dicts) at a time, read anew each time it is iterated: what a
    page build holds is one batch of rows, never the whole view as dicts (at 100,000 rows, 300 MB).

    ``history``, when asked for, is a list only for the rows whose status is neither pass nor fail, and None for the
    others: a key's earlier runs count for the family rule (:func:`pipeline.records.family_row`) only when its latest
    run was an infrastructure error.
    """

    def __init__(self, root: Path, columns: Sequence[str]) -> None:
        self.root = Path(root)
        self.columns = list(columns)

    def _paths(self) -> list[Path]:
        return sorted((self.root / LATEST_DIR).glob("*.parquet"))

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        """Raises: DatasetError: a shard is unreadable."""
        texts: dict[str, str] = {}
        flat = [c for c in self.columns if c != HISTORY_COLUMN]
        history = HISTORY_COLUMN in self.columns
        wanted = list(dict.fromkeys([*flat, *([HISTORY_COLUMN, "status"] if history else [])]))
        for path in self._paths():
            for batch in _batches(path, wanted):
                # an optional column newer than a shard is absent from its rows (a required one still fails)
                part = _rows(
                    batch.select([c for c in flat if c in batch.schema.names or c not in OPTIONAL_COLUMNS]), texts
                )
                if history:
                    for row in part:
                        row[HISTORY_COLUMN] = None
                    unmeasured = pc.invert(pc.fill_null(pc.is_in(batch["status"], pa.array(MEASURED)), False))
                    which = pc.indices_nonzero(unmeasured).to_pylist()
                    earlier = batch[HISTORY_COLUMN].take(which) if which else pa.array([])
                    for i, runs in zip(which, earlier.to_pylist(), strict=True):
                        part[i][HISTORY_COLUMN] = runs
                yield part

    def repeated_keys(self) -> set[tuple[str, str]]:
        """The (model id, task) keys with more than one latest row that is not emulated (one per hardware): the keys
        whose rows a reader must hold together (:func:`pipeline.records.representative`). Read from three columns.

        Raises:
            DatasetError: a shard is unreadable.
        """
        counts: dict[tuple[str, str], int] = {}
        for path in self._paths():
            for batch in _batches(path, ["model_id", "task", "emulated"]):
                columns = (batch[name].to_pylist() for name in ("model_id", "task", "emulated"))
                for model_id, task, emulated in zip(*columns, strict=True):
                    if not emulated:
                        counts[(model_id, task)] = counts.get((model_id, task), 0) + 1
        return {key for key, count in counts.items() if count > 1}


def _batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    try:
        with pq.ParquetFile(path) as parquet:
            yield from parquet.iter_batches(BATCH_ROWS, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"{path}: unreadable Parquet file: {exc}") from exc
    finally:
        # Arrow's allocator keeps what a file's reading freed for its next use; given back, a page build of 100,000
        # rows peaks lower (its Python objects take the room instead).
        pa.default_memory_pool().release_unused()


def _rows(batch: pa.RecordBatch, texts: dict[str, str]) -> list[dict[str, Any]]:
    rows = batch.to_pylist()
    _share_texts(rows, batch, texts)
    return rows


def _share_texts(rows: list[dict[str, Any]], batch: pa.RecordBatch, texts: dict[str, str]) -> None:
    """One str object per distinct value of each text column with few distinct values (device, status, versions,
    price source), kept in ``texts`` across batches: ``to_pylist`` makes one per cell, about 100 MB of copies at
    100,000 rows of the page's columns."""
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if not pa.types.is_string(column.type):
            continue
        distinct = pc.unique(column)
        if len(distinct) * 4 > len(column):  # an id, a message: nothing to share
            continue
        values = [None if v is None else texts.setdefault(v, v) for v in distinct.to_pylist()]
        for row, index in zip(rows, pc.index_in(column, distinct).to_pylist(), strict=True):
            row[name] = values[index]


def iter_results(root: Path, columns: list[str]) -> Iterator[dict[str, Any]]:
    """``columns`` of every row of every results file, file by file in name order, a batch at a time (one object per
    distinct short text, as :func:`_share_texts`).

    Raises:
        DatasetError: a results file is unreadable.
    """
    texts: dict[str, str] = {}
    for path in sorted((root / RESULTS_DIR).glob("*.parquet")):
        for batch in _batches(path, columns):
            yield from _rows(batch, texts)


def read_rankings(root: Path) -> list[dict[str, Any]]:
    """The rows of the newest snapshot per task and view (a file named otherwise is read in full).

    Raises:
        DatasetError: a snapshot is unreadable.
    """
    names = [p.relative_to(root).as_posix() for p in (root / RANKINGS_DIR).glob("*.parquet")]
    newest, others = newest_rankings(names)
    return [row for name in [*newest, *others] for row in read_rows(root / name, SNAPSHOT_SCHEMA.names)]


def read_exclusions(root: Path) -> list[dict[str, Any]]:
    """The rows of ``data/exclusions.parquet`` (none when absent).

    Raises:
        DatasetError: the file is unreadable.
    """
    path = root / EXCLUSIONS_FILE
    return read_rows(path, EXCLUSIONS_SCHEMA.names) if path.is_file() else []


class ScriptTexts(Mapping[str, dict[str, str]]):
    """model id -> ``{"run.py": text, "requirements.txt": text}`` for every model with scripts, read on demand:
    which models have them comes from a list of the script files (by default the folder's, one walk), a model's
    texts are read when asked for. A page with data files reads none (its details fetch the files beside it):
    reading every one took seconds at 100,000 models. Only regular files count, as in :func:`script_files`."""

    def __init__(self, root: Path, paths: Iterable[str] | None = None) -> None:
        """``paths``: the script files (relative to ``root``, a repo's listing) where the folder holds only some of
        them, a listed file the folder lacks reading as absent; None: the folder's own (:func:`script_files`)."""
        self._root = root
        self._folders: set[str] = set()
        names = set(SCRIPT_FILES)
        for path in script_files(root) if paths is None else paths:
            folder, _, name = path.rpartition("/")
            if name in names and folder.count("/") == 2 and folder.startswith(f"{SCRIPTS_DIR}/"):
                self._folders.add(folder)

    def __contains__(self, model_id: object) -> bool:
        try:
            return isinstance(model_id, str) and script_folder(model_id) in self._folders
        except ModelIdError:  # no valid id has no folder
            return False

    def __getitem__(self, model_id: str) -> dict[str, str]:
        if model_id not in self:
            raise KeyError(model_id)
        folder = self._root / script_folder(model_id)
        return {name: (folder / name).read_text(encoding="utf-8") for name in SCRIPT_FILES if _regular(folder / name)}

    def __iter__(self) -> Iterator[str]:
        return (folder.removeprefix(f"{SCRIPTS_DIR}/") for folder in sorted(self._folders))

    def __len__(self) -> int:
        return len(self._folders)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def script_files(root: Path) -> list[str]:
    """Every regular file under the folder's ``scripts/``, as paths relative to ``root``, in the order the folders
    list them (making their copies in that order is a third faster than in sorted order). A symlink, to a file or a
    folder, and anything else that is no regular file are skipped: a trncat dataset never holds one (files are
    written whole, and a snapshot's ``local_dir`` holds real files), and following one would carry whatever it
    points at (a runner's secret) into the Space."""
    found: list[str] = []
    top = root / SCRIPTS_DIR
    folders = [] if top.is_symlink() else [SCRIPTS_DIR]
    base = os.fspath(root)
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(os.path.join(base, folder)) as entries:  # text paths: 100,000 folders at 100k models
                for entry in entries:  # the entry's type comes from the listing: no stat, no link followed
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(f"{folder}/{entry.name}")
                    elif entry.is_file(follow_symlinks=False):
                        found.append(f"{folder}/{entry.name}")
        except (FileNotFoundError, NotADirectoryError):
            continue
    return found
