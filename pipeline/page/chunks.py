"""The page's data as its script reads it: inline in a small catalog, else in files beside the page, fetched on demand.

Within a task, entries are numbered in model-id order (the All view's order); every list the script walks is of
those numbers. A small catalog (at most :data:`INLINE_ENTRIES` entries) keeps every entry inline, so the page stays
one file that works opened from disk. A larger one keeps inline only what its first view shows (the default task
and view's first page) and writes, per task, under :data:`DATA_DIR`:

- an index: each entry's id and filter fields (:data:`SEARCH_FIELDS`), one array per field, named in full
  (:data:`pipeline.page.catalog.FIELD_NAMES`) (a text field of few
  values as codes), which the search and the filters scan without making an object per entry, and each view's order
  with its ranks (the All view, whose order is the numbering, as runs of consecutive numbers); the page fetches it
  once its first view is painted and the browser is idle, so that a search typed at once finds it at hand;
- the sort columns (the rest of :func:`index_columns`, from the task's table columns, so a column added in
  :mod:`pipeline.page.task_columns` is sortable without more), fetched when a table is first sorted by one;
- the entries themselves, :data:`CHUNK_ENTRIES` to a file: their rows' HTML, fetched when a page of rows needs
  them, and beside it their details' HTML, fetched when a model's details are opened (:mod:`pipeline.page.cells`
  and :mod:`pipeline.page.details` make both, the only place either is made), each as its parts, every distinct
  part written once per file (:func:`texts`);
- its plots (:func:`plot_files`), fetched when they are shown and scrolled near.

Each file is named by a hash of its content: a browser that cached an older index never pairs it with newer
entries, and a rebuild that changed nothing rewrites nothing. The files are JSON read with ``fetch`` from the
page's own origin (``connect-src 'self'``); the script places the rows and details as the server escaped them.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.page.catalog import AT, ENTRY_COLUMNS, FIELD_NAMES, PAGE_VIEWS, device_shown, entry_fields
from pipeline.page.cells import row_parts
from pipeline.page.details import detail_parts
from pipeline.page.task_columns import table_metrics

#: Data files: (path relative to the page, JSON text).
Files = list[tuple[str, str]]
#: The folder beside ``index.html`` that holds the data files of a large catalog.
DATA_DIR = "catalog-data"
#: Entries per data file: a page of 100 rows in the All view needs one or two, and a search's page, whose rows may
#: lie anywhere (20 files for a query that matches a model name in every organisation), parses 20 of them.
CHUNK_ENTRIES = 100
#: Up to this many entries the page keeps them all inline.
INLINE_ENTRIES = 2000
#: Fields of a task's index (what the search and the filters test): fetched before a search needs them.
SEARCH_FIELDS = ("id", "st", "device", "reg", "ek", "need", "params")
#: Fields every task sorts by besides its table metrics (and the search fields).
_SORT_COMMON = ("date", "compile", "mem")


def _index_keys(task: str) -> list[str]:
    keys = [*SEARCH_FIELDS, *_SORT_COMMON]
    keys += [m.key for m in table_metrics(task) if m.key not in keys]
    unknown = sorted(set(keys) - set(ENTRY_COLUMNS))
    if unknown:
        raise ValueError(f"task {task!r} sorts by {unknown}, which no entry carries (ENTRY_COLUMNS)")
    return keys


def field_name(key: str) -> str:
    """An entry field's name in the data files and the page's sort fields."""
    return FIELD_NAMES.get(key, key)


def index_columns(task: str) -> list[str]:
    """The fields the page reads of ``task`` without its entries, by their full names: the filters'
    (:data:`SEARCH_FIELDS`, in its index) and every sortable column's (its table metrics', in its sort file)."""
    return [field_name(key) for key in _index_keys(task)]


def texts(made: Iterable[Sequence[str]]) -> dict[str, list[Any]]:
    """Texts made of parts (rows of their cells, details of their blocks) as a data file carries them: each distinct
    part once (``"s"``), each text as its parts' places there (``"e"``); the script only joins them. A row's empty
    cells, a price's title, a command or a history's head would otherwise be written 100,000 times."""
    made = list(made)
    distinct = dict.fromkeys(itertools.chain.from_iterable(made))  # in order, each once (in C: 4 million parts)
    places = dict(zip(distinct, itertools.count()))
    return {"s": list(distinct), "e": [list(map(places.__getitem__, parts)) for parts in made]}


def _entries(entries: Sequence[tuple[Any, ...]], start: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Entries numbered from ``start``: their rows' and their details' :func:`texts`."""
    fields = [entry_fields(values) for values in entries]
    rows = texts(row_parts(entry, no) for no, entry in enumerate(fields, start))
    return rows, texts(map(detail_parts, fields))


def _columns(task: str, entries: list[tuple[Any, ...]]) -> dict[str, Any]:
    keys = _index_keys(task)
    fields = operator.itemgetter(*(AT[key] for key in keys))
    by_column = zip(*map(fields, entries), strict=True) if entries else ([] for _ in keys)
    return {field_name(key): _column(list(values)) for key, values in zip(keys, by_column, strict=True)}


def json_text(value: Any) -> str:
    """A data file's JSON text (compact, non-ASCII as is)."""
    # orjson: the data files are some 70 MB of JSON at 100,000 rows, 1.6 s with the json module, 0.2 s here. It writes
    # the same compact JSON (non-ASCII as is), but a NaN or infinity as null where the json module refused it: the
    # figures go through catalog._num, which makes those None already; a non-finite value copied as is (a price, a
    # threshold) now reads as unknown, as a missing one does, instead of failing the build.
    return orjson.dumps(value).decode()


def data_name(task_no: int, kind: str, text: str) -> str:
    """A data file's path: its task's (or matrix group's) number, its kind and a hash of its text."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{DATA_DIR}/t{task_no}-{kind}-{digest}.json"


@dataclass
class PageStore:
    """What the page's script reads: ``meta`` goes inline (the ``store`` of the page's JSON), ``files`` beside it."""

    meta: dict[str, Any]
    #: Position of an entry in :func:`pipeline.page.catalog` ``entries`` -> its number within its task.
    numbers: dict[int, int]
    #: (path relative to the page, JSON text), in the order written; none where :attr:`emit` takes them.
    files: list[tuple[str, str]] = field(default_factory=list)
    #: Given each file as it is made (a build writes it and lets its text go: 70 MB of JSON at 100,000 models).
    emit: Callable[[str, str], None] | None = None

    def add(self, path: str, text: str) -> None:
        """A data file: to :attr:`emit`, or kept in :attr:`files`."""
        if self.emit is None:
            self.files.append((path, text))
        else:
            self.emit(path, text)


def _by_task(data: Mapping[str, Any]) -> dict[str, list[int]]:
    """Per task, the positions of its entries in model-id order."""
    entries = data["entries"]
    grouped: dict[str, list[int]] = {task: [] for task in data["tasks"]}
    task, model_id = AT["task"], AT["id"]
    for position, e in enumerate(entries):
        grouped.setdefault(e[task], []).append(position)
    for positions in grouped.values():
        positions.sort(key=lambda p: entries[p][model_id])
    return grouped


def _lists(data: Mapping[str, Any], task: str, numbers: Mapping[int, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for view in PAGE_VIEWS:
        listing = data["lists"].get(f"{task}/{view}")
        out[view] = listing and {
            "date": listing["date"],
            "items": [[numbers[position], rank] for position, rank in listing["items"]],
        }
    return out


#: A text column of an index with at most this many distinct values (and at most one per two entries) is written as
#: codes into them.
MAX_CODES = 4096


def _column(values: list[Any]) -> list[Any] | dict[str, list[Any]] | None:
    """One column of a task's index: its values in entry order; or null when every value is; or, when they are text
    of few distinct values (a status, a device, a date; never the ids), ``{"v": distinct values, "i": each entry's
    place in them, -1 for null}``; yes and no as 1 and 0. The script parses these faster and reads each as the
    column it stands for."""
    distinct = dict.fromkeys(v for v in values if v is not None)
    if not distinct:
        return None
    if all(type(v) is bool for v in distinct):
        return [None if v is None else int(v) for v in values]
    if len(distinct) > min(MAX_CODES, len(values) // 2) or not all(type(v) is str for v in distinct):
        return values
    code = {v: i for i, v in enumerate(distinct)}
    return {"v": list(distinct), "i": [-1 if v is None else code[v] for v in values]}


def _runs(listing: dict[str, Any] | None) -> dict[str, Any] | None:
    """A view's list as an index file writes it: unranked items (the All view's) as ``runs`` of consecutive entry
    numbers, ``[[first, count], ...]`` (a 50,000-entry task's All view is then a few bytes, not 640 kB)."""
    if not listing or not listing["items"] or any(rank is not None for _, rank in listing["items"]):
        return listing
    items = listing["items"]
    runs: list[list[int]] = []
    for no, _ in items:
        if runs and runs[-1][0] + runs[-1][1] == no:
            runs[-1][1] += 1
        else:
            runs.append([no, 1])
    return {"date": listing["date"], "runs": runs}


def first_page(data: Mapping[str, Any], numbers: Mapping[int, int], page_size: int) -> tuple[list[str], dict[str, Any]]:
    """The default view's first page of rows (each row's HTML: the script reads them back from the table, not from
    the inline JSON) and what the script needs to show it before any file is fetched: its items and the counts its
    pager says."""
    default = data["default"]
    listing = data["lists"][f"{default['task']}/{default['view']}"]
    rows: list[str] = []
    items: list[list[Any]] = []
    shown = hidden = 0
    device = AT["device"]
    for position, rank in listing["items"]:
        values = data["entries"][position]
        if not device_shown({"device": values[device]}, default["device"]):
            hidden += 1
            continue
        shown += 1
        if len(rows) < page_size:
            no = numbers[position]
            rows.append("".join(row_parts(entry_fields(values), no, rank)))
            items.append([no, rank])
    first = {
        "items": items,
        "shown": shown,
        "hidden": hidden,
        "total": len(listing["items"]),
    }
    return rows, first


def page_store(
    data: Mapping[str, Any],
    *,
    inline: bool,
    chunk: int = CHUNK_ENTRIES,
    emit: Callable[[str, str], None] | None = None,
) -> PageStore:
    """The page's data of :func:`pipeline.page.catalog` ``data``: inline (every entry), or its files.

    Args:
        data: what :func:`pipeline.page.catalog` returned.
        inline: keep every entry inline (the page stays one file) instead of writing data files.
        chunk: entries per data file.
        emit: given each file as it is made (path, JSON text), instead of keeping them in the store's ``files``.

    Returns:
        The inline part, the entry numbers and the files (none when inline or emitted).
    """
    entries = data["entries"]
    grouped = _by_task(data)
    numbers = {position: no for positions in grouped.values() for no, position in enumerate(positions)}
    tasks: dict[str, Any] = {}
    store = PageStore(meta={"inline": inline, "chunk": chunk, "tasks": tasks}, numbers=numbers, emit=emit)
    for task_no, task in enumerate(data["tasks"]):
        positions = grouped.get(task, [])
        lists = _lists(data, task, numbers)
        columns = _columns(task, [entries[p] for p in positions])
        if inline:
            rows, details = _entries([entries[p] for p in positions])
            tasks[task] = {"n": len(positions), "lists": lists, "cols": columns, "rows": rows, "details": details}
            continue
        search = {name: columns.pop(name) for name in map(field_name, SEARCH_FIELDS)}
        index = json_text(
            {"n": len(positions), "cols": search, "lists": {v: _runs(listing) for v, listing in lists.items()}}
        )
        sort = json_text({"cols": columns})
        index_path, sort_path = data_name(task_no, "index", index), data_name(task_no, "sort", sort)
        store.add(index_path, index)
        store.add(sort_path, sort)
        chunk_paths: list[str] = []
        detail_paths: list[str] = []
        for start in range(0, len(positions), chunk):
            made = _entries([entries[p] for p in positions[start : start + chunk]], start)
            for paths, kind, part in zip((chunk_paths, detail_paths), "ed", made, strict=True):
                text = json_text(part)
                paths.append(data_name(task_no, f"{kind}{start // chunk}", text))
                store.add(paths[-1], text)
        summary = {
            view: listing and {"date": listing["date"], "n": len(listing["items"])} for view, listing in lists.items()
        }
        tasks[task] = {
            "n": len(positions), "index": index_path, "sort": sort_path, "chunks": chunk_paths,
            "details": detail_paths, "lists": summary,
        }  # fmt: skip
    return store


def plot_files(plots: Mapping[str, Sequence[str]], tasks: Sequence[str]) -> tuple[dict[str, str], Files]:
    """Each task's plots as a data file: a JSON list of ``<svg>`` texts drawn by :mod:`pipeline.page.plots` (every
    label escaped), which the script parses as SVG and shows once the task's plots are shown and scrolled near. The
    page parses none of them before its first view (the first view's task's, inline for a reader without
    JavaScript, are in a ``noscript``, which a browser running the script reads as text).

    Args:
        plots: task -> its plots' SVG texts.
        tasks: the page's tasks, in order (a file is numbered by its task's place, as the entry files are).

    Returns:
        Task -> the path of its plots' file, and the files (path, JSON text).
    """
    paths: dict[str, str] = {}
    files: Files = []
    for task_no, task in enumerate(tasks):
        if task not in plots:
            continue
        text = json_text([str(svg) for svg in plots[task]])
        paths[task] = data_name(task_no, "plots", text)
        files.append((paths[task], text))
    return paths, files
