"""Building the dataset folder: append results, keep the latest view with each key's history, write scripts.

A build is all-or-nothing (:mod:`pipeline.fsatomic`): killed at any moment, the folder is as before or after.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import fsatomic, render
from pipeline.dataset.changes import Change, changes_table
from pipeline.dataset.front import (
    CardNames,
    apply_changes,
    card_configs,
    read_summary,
    summarize,
    write_front_files,
)
from pipeline.dataset.layout import (
    CHANGES_DIR,
    HISTORY_COLUMN,
    LATEST_DIR,
    RESULTS_DIR,
    SCRIPT_FILES,
    earlier_runs,
    fresh_run_name,
    parquet_bytes,
    read_rows,
    read_table,
    results_files_since,
    script_folder,
)
from pipeline.dataset.read import read_latest
from pipeline.dataset.serving import add_serving
from pipeline.dataset.shards import (
    capped,
    folder_shards,
    history_entry,
    latest_key,
    model_shard,
    rank,
    read_shard,
    shard_table,
    write_shard,
)
from pipeline.errors import PipelineError
from pipeline.prices import Pricing, row_costs
from pipeline.records import arrow_schema, flatten, representative, unflatten, validate_record

logger = logging.getLogger(__name__)


@dataclass
class BuildSummary:
    """What a build changed."""

    added: int = 0
    duplicates: int = 0
    results_file: str | None = None
    latest_files: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    #: Records set aside (model id, field, why): invalid, or not storable; the rest was built.
    set_aside: list[tuple[str, str, str]] = field(default_factory=list)
    #: The compiled-cache bundles the new rows name: (model id, repo, revision, path, sha256), for the PR's reviewer.
    bundles: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    #: The latest and family shards written, and those removed (a shard split in sixteen), as repo paths.
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    #: Serving records that changed an entry of data/serving.json.
    serving: int = 0

    @property
    def changed(self) -> bool:
        return self.added > 0 or self.serving > 0


def published_ids(root: Path, *, since: dt.datetime | None) -> set[str]:
    """Record ids already in ``data/results`` among the files that may hold records finished at ``since`` or later."""
    folder = root / RESULTS_DIR
    if since is None or not folder.is_dir():
        return set()
    names = [p.name for p in folder.glob("*.parquet")]
    ids: set[str] = set()
    for name in results_files_since(names, since):
        ids.update(row["record_id"] for row in read_rows(folder / name, ["record_id"]))
    return ids


def _model_rows(
    root: Path, touched: dict[str, tuple[pa.Table | None, dict[tuple[str, str, str], Any]]], models: set[str]
) -> dict[str, list[dict[str, Any]]]:
    """The latest rows of ``models`` in the folder, by model, in :func:`read_latest`'s order (shard by shard,
    each in key order), for the scripts (a row of a touched key keeps its history; the others come without).
    A shard in ``touched`` (just merged: its untouched rows as Arrow, its touched ones as Python rows, see
    :func:`~pipeline.dataset.shards.read_shard`) is taken from there, so the rows just merged are not turned into
    Arrow and back.

    Raises:
        DatasetError: a shard is unreadable.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    wanted = pa.array(sorted(models), pa.string())
    for path in sorted((root / LATEST_DIR).glob("*.parquet")):
        rest, current = touched.get(path.stem, (None, None))
        table = read_table(path) if current is None else rest
        rows = []
        if table is not None:
            table = table.drop_columns([HISTORY_COLUMN])
            rows = table.filter(pc.is_in(table["model_id"], value_set=wanted)).to_pylist()
        if current is not None:
            rows.extend(row for row in current.values() if row["model_id"] in models)
            rows.sort(key=latest_key)
        for row in rows:
            out.setdefault(row["model_id"], []).append(row)
    return out


def _merge_shard(
    current: dict[tuple[str, str, str], dict[str, Any]], rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Change], int]:
    """Fold new rows into one shard's latest rows; returns the rows appended to results, changes, duplicates."""
    appended: list[dict[str, Any]] = []
    duplicates = 0
    before = {key: dict(row) for key, row in current.items()}
    for row in sorted(rows, key=rank):
        key = latest_key(row)
        existing = current.get(key)
        past = earlier_runs(existing) if existing else []
        if existing and (
            row["record_id"] == existing["record_id"] or row["record_id"] in {h["record_id"] for h in past}
        ):
            duplicates += 1
            continue
        appended.append(row)
        if existing is None:
            current[key] = {**row, HISTORY_COLUMN: []}
        elif rank(row) > rank(existing):  # it supersedes the latest
            current[key] = {**row, HISTORY_COLUMN: capped([history_entry(existing), *past])}
        else:  # a late result older than the latest (or not from CI): it joins the history, in order
            existing[HISTORY_COLUMN] = capped([*past, history_entry(row)])
    changes = [
        Change(key=key, before=before.get(key), after=row)
        for key, row in current.items()
        if key not in before or before[key]["record_id"] != row["record_id"]
    ]
    return appended, changes, duplicates


def refresh_card(root: Path, *, names: CardNames | None = None) -> None:
    """Rewrite the card (and the summary's list of views) after discovery files were added to ``root``.

    With ``data/summary.json`` the card comes from its counts (``root`` may be a partial mirror); without
    one, from the whole latest view, which then writes the summary.
    """
    summary = read_summary(root)
    if summary is None:
        summary = summarize(read_latest(root), shards=folder_shards(root))
    write_front_files(root, page=False, summary=summary, names=names)


def refresh_new_views(root: Path, *, names: CardNames | None = None) -> None:
    """:func:`refresh_card` when the folder now holds a view its summary does not list yet (the stage matrix, written
    after the build): once per dataset, so a publish that changed nothing leaves the card as it was."""
    summary = read_summary(root)
    if summary is not None and {n for n, _ in card_configs(root, known=summary["configs"])} - set(summary["configs"]):
        refresh_card(root, names=names)


def build(
    records: Iterable[dict[str, Any]],
    out: Path,
    *,
    page: bool = True,
    names: CardNames | None = None,
    held: Callable[[str, bytes], bool] | None = None,
    pricing: Pricing | None = None,
) -> BuildSummary:
    """Add ``records`` to the dataset folder ``out`` (created when missing), all or nothing.

    Only the latest shards of the keys the records touch are read and rewritten, and only the results files
    that could already hold one of the records (:func:`results_files_since`) are read to skip duplicates.
    Nothing new: nothing is written. ``out`` may be a partial mirror of the dataset repo holding only those
    files (what publish uses); ``held(path, content)`` then tells a file the repo already holds with that
    very content, which is left out of the mirror instead of written: the scripts of every model the records
    touch (most come out the same) and the card (:func:`pipeline.dataset.mirror.held_paths`).

    Each new row is priced with ``pricing`` (its instance's price under the option, and its task's cost:
    :func:`pipeline.prices.row_costs`); None leaves the price and cost columns null. A row keeps the price it
    was built with: rows already in the folder are never repriced.

    A record that is invalid, or cannot be stored, is set aside (``set_aside`` of the summary, and the log) and the
    rest is built: validate first, as the CLI does, to report bad files by name.

    Raises:
        DatasetError: the existing folder holds unreadable Parquet.
    """
    summary = BuildSummary()
    rows_by_id: dict[str, dict[str, Any]] = {}
    serving_records: list[dict[str, Any]] = []
    for record in records:
        name = str(record.get("model_id") if isinstance(record, dict) else "?")[:200]
        problems = validate_record(record)
        if problems:  # a bad record never stops the good ones (issue 22.6: one stamp crashed every publish)
            summary.set_aside.append((name, *problems[0]))
            logger.warning("set aside: %s: %s: %s", name, *problems[0])
            continue
        if record.get("serving"):  # a serving record: kept whole in data/serving.json, never a results row
            serving_records.append(record)
            continue
        try:
            row = flatten(record)
        except (ValueError, TypeError, OverflowError) as exc:  # valid yet not storable: a validator gap, reported
            summary.set_aside.append((name, "(record)", f"cannot be stored: {type(exc).__name__}: {exc}"))
            logger.warning("set aside: %s: cannot be stored: %s", name, exc)
            continue
        row.update(row_costs(row, pricing))
        if row["record_id"] in rows_by_id:
            summary.duplicates += 1
        rows_by_id.setdefault(row["record_id"], row)
    if serving_records:
        summary.serving = add_serving(out, serving_records)
    known = published_ids(out, since=min((r["finished_at"] for r in rows_by_id.values()), default=None))
    for record_id in [rid for rid in rows_by_id if rid in known]:
        del rows_by_id[record_id]
        summary.duplicates += 1
    summary_file = read_summary(out)
    shards = summary_file["shards"] if summary_file is not None else folder_shards(out)
    by_shard: dict[str, list[dict[str, Any]]] = {}
    for row in rows_by_id.values():
        by_shard.setdefault(model_shard(row["model_id"], shards), []).append(row)
    # Each shard a record changed: its untouched rows (Arrow) and its touched keys' rows (Python), merged.
    touched: dict[str, tuple[pa.Table | None, dict[tuple[str, str, str], Any]]] = {}
    new_rows: list[dict[str, Any]] = []
    for shard, rows in sorted(by_shard.items()):
        path = out / LATEST_DIR / f"{shard}.parquet"
        rest, current = read_shard(path, {latest_key(r) for r in rows}) if path.exists() else (None, {})
        appended, changes, duplicates = _merge_shard(current, rows)
        summary.duplicates += duplicates
        if appended:
            new_rows.extend(appended)
            summary.changes.extend(changes)
            touched[shard] = (rest, current)
    if not new_rows:
        if summary.serving:  # the serving configs may be new: the card lists them
            refresh_card(out, names=names)
        logger.info("nothing new to add to %s", out)
        return summary
    new_rows.sort(key=lambda r: (r["model_id"], r["task"], r["hardware"], r["finished_at"]))
    with fsatomic.staged_folder(out) as stage:
        name = fresh_run_name(stage, new_rows)  # never a name another publish's file already has
        results_path = f"{RESULTS_DIR}/{name}.parquet"
        fsatomic.write_bytes(stage / results_path, parquet_bytes(pa.Table.from_pylist(new_rows, schema=arrow_schema())))
        summary.results_file = results_path
        summary.added = len(new_rows)
        summary.bundles = [
            (r["model_id"], r["compiled_cache_repo_id"], r["compiled_cache_revision"], r["compiled_cache_path"],
             r["compiled_cache_sha256"]) for r in new_rows if r.get("compiled_cache_path")
        ]  # fmt: skip
        changed = changes_table(summary.changes, results_file=results_path)
        if changed.num_rows:  # a publish that changed no key's kind writes none (a 0-row file breaks `datasets`)
            fsatomic.write_bytes(stage / CHANGES_DIR / f"{name}.parquet", parquet_bytes(changed))
        split: set[str] = set()
        for shard, (rest, current) in sorted(touched.items()):
            files, removed = write_shard(stage, shard, shard_table(rest, current))
            summary.latest_files.extend(p for p in files if p.startswith(f"{LATEST_DIR}/"))
            summary.written.extend(files)
            summary.removed.extend(removed)
            if removed:  # split in sixteen: its rows are read back from its children below
                split.add(shard)
                del touched[shard]
        kept = {Path(p).stem for p in summary.latest_files}

        touched_models = {change.after["model_id"] for change in summary.changes}
        # The whole latest view is read only when counted (no summary yet) or shown (the page); else only the
        # touched models' rows are.
        latest = read_latest(stage) if summary_file is None or page else None
        if summary_file is None:  # the whole latest view is here: count it
            summary_file = summarize(latest or [], shards=folder_shards(stage))
        else:
            apply_changes(summary_file, [(change.before, change.after) for change in summary.changes])
            summary_file["shards"] = sorted((set(summary_file["shards"]) - split) | kept)
        by_model: dict[str, list[dict[str, Any]]] = {}
        if latest is None:
            by_model = _model_rows(stage, touched, touched_models)
        else:
            for row in latest:
                by_model.setdefault(row["model_id"], []).append(row)
        for model_id in sorted(touched_models):
            # The scripts come from the same row the page shows for the model (pipeline.records.representative).
            record = unflatten(representative(by_model[model_id]))
            folder = script_folder(model_id)
            try:
                script, requirements = render.run_script(record), render.requirements(record)
            except PipelineError as exc:  # an odd (schema-valid) version string: this model only, never the build
                logger.warning("%s: no scripts written: %s", model_id, exc)
                continue
            written = False
            for name, text in zip(SCRIPT_FILES, (script, requirements), strict=True):
                in_repo, data = f"{folder}/{name}", text.encode("utf-8")
                if held is None or not held(in_repo, data):
                    fsatomic.write_bytes(stage / in_repo, data)
                    written = True
            if written:
                summary.scripts.append(folder)
        write_front_files(stage, latest=latest, page=page, summary=summary_file, names=names, held=held)
    logger.info("added %d rows to %s (%s)", summary.added, out, summary.results_file)
    return summary
