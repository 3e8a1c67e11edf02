"""The latest rows as a page build reads them: a batch at a time, each row handed to what needs it and let go.

A build of 100,000 models once held every latest row as a dict (300 MB) beside the entries made of them. Now the
rows come in batches (:class:`RowBatches`: :class:`pipeline.dataset.LatestBatches` reads them from Parquet anew
each time; :class:`RowList` serves rows already in memory), and one pass over them makes each row's entry
(:func:`pipeline.page.catalog.catalog`) and gathers (:class:`Gathered`) the little that the rest of the page needs:
each row's family row (the family table), the columns the plots draw, the Trainium2 rows' bundles (the warm-start
line), the demo rows and the rows of the keys with more than one row (the Compare view pairs only those). Rows of
such a key are held until the last of them has come (:meth:`RowBatches.repeated_keys` names them up front).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from pipeline.hardware import row_device
from pipeline.page.task_columns import task_view
from pipeline.prices import DEMO_INSTANCE
from pipeline.records import FAMILY_COLUMNS, family_row

Key = tuple[str, str]
#: A row kept as (its column names, shared with every row that has the same, and its values): a dict of 17 keys is
#: about 650 bytes, this about 230 (133,000 history rows at 100,000 models).
Packed = tuple[tuple[str, ...], tuple[Any, ...]]
#: The columns of a family row that the family table's counts read (:func:`pipeline.records.family_stats`: the key,
#: the family, the verdict, the device, the toolchain's versions, the time), in
#: :data:`pipeline.records.FAMILY_COLUMNS` order; kept as tuples (100,000 of them), without the revision, the base
#: models and the bundle's columns, which ``trncat check`` reads and the table does not (30 MB at 100,000 models).
FAMILY_NAMES = tuple(
    name
    for name, _ in FAMILY_COLUMNS
    if name in {"model_id", "task", "hardware", "device", "status", "failure_code", "cores", "finished_at"}
    or name in {"architecture", "model_type"}
    or name.endswith("_version")
)
#: The columns :func:`pipeline.page.plots.catalog_plots` reads of a latest row (and the task's speed column).
PLOT_COLUMNS = ("model_id", "task", "device", "hardware", "status", "params", "peak_device_memory_bytes", "compile_s")
#: The columns the warm-start line reads of a Trainium2 row (:func:`pipeline.page.warm.warm_summary`).
BUNDLE_COLUMNS = ("model_id", "revision", "compiled_cache_sha256", "emulated")


class RowBatches(Protocol):
    """Latest rows, a list of dicts at a time; iterable more than once."""

    def __iter__(self) -> Iterator[list[dict[str, Any]]]: ...

    def repeated_keys(self) -> set[Key]:
        """The (model id, task) keys of more than one row that is not emulated."""
        ...


class RowList:
    """Rows already in memory (a test's, the PR preview's) as :class:`RowBatches`: one batch."""

    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        self.rows = rows

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        yield list(self.rows)

    def repeated_keys(self) -> set[Key]:
        seen: set[Key] = set()
        repeated: set[Key] = set()
        for row in self.rows:
            if not row.get("emulated"):
                key = (row["model_id"], row["task"])
                (repeated if key in seen else seen).add(key)
        return repeated


def row_batches(latest: Sequence[dict[str, Any]] | RowBatches) -> RowBatches:
    """``latest`` as :class:`RowBatches` (a sequence of rows becomes a :class:`RowList`)."""
    return latest if hasattr(latest, "repeated_keys") else RowList(latest)  # type: ignore[arg-type,return-value]


def _plot_columns(task: str) -> tuple[str, ...]:
    speed = task_view(task).speed
    return PLOT_COLUMNS if speed is None or speed.column in PLOT_COLUMNS else (*PLOT_COLUMNS, speed.column)


class Gathered:
    """What the page reads of the latest rows besides their entries, gathered row by row (emulated rows never:
    they are no Trainium2 results)."""

    def __init__(self) -> None:
        self.families: list[tuple[Any, ...]] = []
        self.plots: dict[str, list[tuple[Any, ...]]] = {}
        self.bundles: list[dict[str, Any]] = []
        self.demo: list[dict[str, Any]] = []
        self.paired: list[dict[str, Any]] = []
        self._plot_columns: dict[str, tuple[str, ...]] = {}

    def add(self, row: dict[str, Any], *, repeated: bool) -> None:
        """Take what is needed of one latest row; ``repeated``: its key has other rows (a Compare candidate)."""
        get = row.get
        family = family_row(row, get("history") or ())
        self.families.append(tuple(map(family.get, FAMILY_NAMES)))
        task = row["task"]
        columns = self._plot_columns.get(task) or self._plot_columns.setdefault(task, _plot_columns(task))
        self.plots.setdefault(task, []).append(tuple(map(get, columns)))
        if get("compiled_cache_sha256") and row_device(get("device"), hardware=get("hardware"),
                                                       accelerator=get("accelerator")) == "neuron":  # fmt: skip
            self.bundles.append({c: get(c) for c in BUNDLE_COLUMNS})
        if get("instance_type") == DEMO_INSTANCE and get("status") == "pass":
            self.demo.append(row)
        if repeated:
            self.paired.append(row)

    def plot_rows(self, task: str) -> Iterator[dict[str, Any]]:
        """The rows of ``task`` as the plots read them (dicts of :data:`PLOT_COLUMNS` and the speed column), one at a
        time, let go here. Read once per task."""
        columns = self._plot_columns.get(task, PLOT_COLUMNS)
        return (dict(zip(columns, values, strict=True)) for values in self.plots.pop(task, []))

    def family_groups(self) -> Iterable[list[Mapping[str, Any]]]:
        """The family rows grouped by family (architecture, model type, task), each group as dicts only while it is
        counted, and let go after; rows without an architecture belong to none. Read once."""
        key = operator.itemgetter(*(FAMILY_NAMES.index(c) for c in ("architecture", "model_type", "task")))
        groups: dict[Any, list[tuple[Any, ...]]] = {}
        architecture = FAMILY_NAMES.index("architecture")
        for values in self.families:
            if values[architecture]:
                groups.setdefault(key(values), []).append(values)
        self.families = []
        while groups:
            members = groups.pop(next(iter(groups)))
            yield [dict(zip(FAMILY_NAMES, values, strict=True)) for values in members]


class History:
    """The result rows behind each entry's history lines and the pass-rate plots, kept packed (:data:`Packed`) and
    grouped by (model id, task); emulated rows are left out (no Trainium2 result). A row is a dict again only while
    its key's entry or its task's plot is made."""

    def __init__(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self.by_key: dict[Key, list[Packed]] = {}
        names: dict[tuple[str, ...], tuple[str, ...]] = {}
        for row in rows:
            if row.get("emulated"):
                continue
            keys = tuple(row)
            packed = (names.setdefault(keys, keys), tuple(row.values()))
            self.by_key.setdefault((row["model_id"], row["task"]), []).append(packed)

    def of(self, key: Key) -> list[dict[str, Any]]:
        """The rows of one (model id, task), in the order they came."""
        return [dict(zip(*packed, strict=True)) for packed in self.by_key.get(key, ())]

    def of_task(self, task: str) -> Iterator[dict[str, Any]]:
        """The rows of one task, key by key, one dict at a time."""
        return (dict(zip(*packed, strict=True)) for (_, t), rows in self.by_key.items() if t == task for packed in rows)
