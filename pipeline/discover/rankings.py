"""Discovery: the Hub's rankings per task and view -> candidates, plus a rankings snapshot and exclusions.

Trending and Downloads come from ONE listing call each (:meth:`pipeline.hub.Hub.list_models` expands sha,
safetensors, tags, gated, ... into the listing), so discovery makes no request per model. Selected comes from
the hand-kept ``dataset/selected.yaml``; its models' metadata is taken from a listing (one call by downloads,
or the listings of an earlier discovery passed in) and only a selected id absent from every listing costs one
``model_info`` call: at most one per entry of selected.yaml, whose schema caps it at 200 entries.

Every model the Hub ranks stays in the output. Those the queue must not take carry ``eligible=False`` with a
``kind`` and a one-line ``reason``: remote code, not a transformers model, gated, excluded by
``dataset/exclusions.yaml``, missing from the Hub, or an id/revision the Hub should never have returned (ids
from the Hub are untrusted and validated).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pipeline import fsatomic
from pipeline.dataset import write_exclusions, write_rankings
from pipeline.discover.candidates import (
    DISCOVERED_KINDS,
    Candidate,
    Discovery,
    check_task_view,
    exclusion_index,
)
from pipeline.discover.selection import Exclusion, Selection, load_exclusions, load_selected
from pipeline.errors import ConfigError, GatedRepoError, RepoNotFoundError
from pipeline.hub import Hub, HubSort, ModelListing
from pipeline.ids import model_id_problem
from pipeline.taskspec import task_source
from pipeline.types import TASKS, VIEWS

logger = logging.getLogger(__name__)

#: Sort of each ranked view on the Hub.
VIEW_SORT: dict[str, HubSort] = {"trending": "trending_score", "downloads": "downloads"}
#: Size of the listing Selected reads its metadata from when no earlier listing is given (one call).
SELECTED_LISTING_LIMIT = 1000
MAX_LIMIT = 10_000


def discover(
    *,
    hub: Hub,
    task: str,
    view: str,
    limit: int,
    selected: Sequence[Selection] | None = None,
    exclusions: Sequence[Exclusion] | None = None,
    today: dt.date | None = None,
    listings: dict[str, ModelListing] | None = None,
    allow_gated: bool = False,
) -> Discovery:
    """The candidates of one task and view, best first, ineligible ones included with their reason.

    Requests: trending/downloads make one listing call. Selected makes one listing call by downloads (none
    when ``listings`` already holds some) plus one ``model_info`` call per selected id of this task that no
    listing holds.

    Args:
        hub: The Hub client.
        task: A task of :data:`pipeline.types.TASKS`.
        view: ``trending``, ``downloads`` or ``selected``.
        limit: How many models (the top ``limit``; for selected, the first ``limit`` entries of the task).
        selected: The Selected list; None reads ``dataset/selected.yaml`` (only for the selected view).
        exclusions: Hand-kept exclusions; None reads ``dataset/exclusions.yaml``.
        today: Date of the snapshot; None for today (UTC).
        listings: A cache of listings by model id shared across calls: the views add what they fetch, and
            the selected view reads it before asking the Hub.
        allow_gated: Treat gated models as eligible (only when the runners' token has access to them).

    Returns:
        The :class:`Discovery`.

    Raises:
        ConfigError: unknown task or view, a bad limit, or a malformed selected.yaml / exclusions.yaml.
        HubError: the Hub could not answer (a selected id that does not exist is a candidate, not an error).
    """
    check_task_view(task, view)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    date = today or dt.datetime.now(dt.UTC).date()
    excluded = exclusion_index(load_exclusions() if exclusions is None else exclusions)
    judge: dict[str, Any] = {"excluded": excluded, "allow_gated": allow_gated}
    cache = {} if listings is None else listings
    candidates: list[Candidate] = []
    if view != "selected":
        for listing in _fetch(hub, task, VIEW_SORT[view], limit, cache):
            candidates.append(Candidate.from_listing(listing, task=task, view=view, rank=len(candidates) + 1, **judge))
    else:
        chosen = [s for s in (load_selected() if selected is None else selected) if s.task == task][:limit]
        if chosen and not cache:
            _fetch(hub, task, "downloads", SELECTED_LISTING_LIMIT, cache)
        known = {model_id.casefold(): listing for model_id, listing in cache.items()}
        for rank, entry in enumerate(chosen, 1):
            found = known.get(entry.model_id.casefold())
            if found is None and (problem := model_id_problem(entry.model_id)):
                reason = f"invalid model id: {problem}"
                candidates.append(_kept_out(entry, task=task, view=view, rank=rank, kind="invalid", reason=reason))
                continue
            if found is None:
                try:
                    found = hub.model_info(entry.model_id)
                except RepoNotFoundError as exc:
                    kind = "gated" if isinstance(exc, GatedRepoError) else "not_found"
                    reason = f"not on the Hub: {exc}"
                    candidates.append(_kept_out(entry, task=task, view=view, rank=rank, kind=kind, reason=reason))
                    continue
                cache.setdefault(found.id, found)
            candidates.append(Candidate.from_listing(found, task=task, view=view, rank=rank, note=entry.note, **judge))
    discovery = Discovery(date=date, task=task, view=view, candidates=candidates)
    logger.info("%s / %s: %d candidates, %d eligible", task, view, len(candidates), len(discovery.eligible))
    return discovery


def _kept_out(entry: Selection, *, task: str, view: str, rank: int, kind: str, reason: str) -> Candidate:
    """A selected entry the Hub has no listing for: kept out with why."""
    return Candidate(
        model_id=entry.model_id,
        task=task,
        view=view,
        rank=rank,
        sha=None,
        eligible=False,
        kind=kind,
        reason=reason,
        note=entry.note,
    )


def _fetch(hub: Hub, task: str, sort: HubSort, limit: int, cache: dict[str, ModelListing]) -> list[ModelListing]:
    """One ranking of the task, without repeats (a listing paged while rankings move can repeat a model: keep
    its best). A task ranked over several pipeline tags makes one listing per tag, merged by the sort's figure."""
    source = task_source(task)
    library = source.library if source.library_filter else None
    found: dict[str, ModelListing] = {}
    for tag in source.pipeline_tags:
        for listing in hub.list_models(task=tag, sort=sort, limit=limit, library=library):
            found.setdefault(listing.id, listing)
            cache.setdefault(listing.id, listing)
    ranked = list(found.values())
    if len(source.pipeline_tags) > 1:
        key = "downloads" if sort == "downloads" else "trending_score"
        ranked.sort(key=lambda listing: (-getattr(listing, key), listing.id))
    return ranked[:limit]


def discover_all(
    *,
    hub: Hub,
    limit: int,
    tasks: Sequence[str] = TASKS,
    views: Sequence[str] = VIEWS,
    selected: Sequence[Selection] | None = None,
    exclusions: Sequence[Exclusion] | None = None,
    today: dt.date | None = None,
    allow_gated: bool = False,
) -> list[Discovery]:
    """Every task x view; Selected reads its metadata from the same run's listings (ranked views run first).

    Args:
        hub: The Hub client.
        limit: Top models per ranked view (and the cap of Selected entries per task).
        tasks: Tasks to discover.
        views: Views to discover.
        selected: The Selected list; None reads ``dataset/selected.yaml`` when Selected is asked for.
        exclusions: Hand-kept exclusions; None reads ``dataset/exclusions.yaml``.
        today: Snapshot date; None for today (UTC).
        allow_gated: See :func:`discover`.

    Returns:
        One :class:`Discovery` per task and view, in ``tasks`` x ``views`` order.

    Raises:
        ConfigError: as :func:`discover`.
        HubError: as :func:`discover`.
    """
    exclusions = load_exclusions() if exclusions is None else list(exclusions)
    if "selected" in views and selected is None:
        selected = load_selected()
    found: dict[tuple[str, str], Discovery] = {}
    for task in tasks:
        cache: dict[str, ModelListing] = {}
        for view in sorted(views, key=lambda v: v == "selected"):
            found[(task, view)] = discover(
                hub=hub,
                task=task,
                view=view,
                limit=limit,
                selected=selected,
                exclusions=exclusions,
                today=today,
                listings=cache,
                allow_gated=allow_gated,
            )
    return [found[(task, view)] for task in tasks for view in views]


# -- what is written to the dataset repo ---------------------------------------------------------------
def snapshot_rows(discovery: Discovery) -> list[dict[str, Any]]:
    """Rows of the rankings snapshot: date, task, view, rank, model_id (valid ids only, best first).

    Args:
        discovery: One discovery.

    Returns:
        Rows; an id the Hub should never have returned is left out of published data (it stays in the
        discovery output with its reason).
    """
    date = discovery.date.isoformat()
    return [
        {"date": date, "task": discovery.task, "view": discovery.view, "rank": c.rank, "model_id": c.model_id}
        for c in discovery.candidates
        if model_id_problem(c.model_id) is None
    ]


def exclusion_rows(exclusions: Iterable[Exclusion], discoveries: Iterable[Discovery]) -> list[dict[str, Any]]:
    """Rows of ``data/exclusions.parquet``: the hand-kept exclusions plus the models discovery kept out.

    Args:
        exclusions: The hand-kept exclusions (their ``task`` may be None: every task).
        discoveries: This run's discoveries; their remote-code, gated, non-transformers, missing and
            invalid models are added with the discovery's task.

    Returns:
        Rows (model_id, task, reason, kind), unique per (model_id, task, kind), sorted.
    """
    kept_out = [c for d in discoveries for c in d.ineligible if c.kind in DISCOVERED_KINDS]
    found: list[Exclusion | Candidate] = [*exclusions, *(c for c in kept_out if model_id_problem(c.model_id) is None)]
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in found:
        row = {"model_id": e.model_id, "task": e.task, "reason": e.reason, "kind": e.kind}
        rows.setdefault((e.model_id, e.task or "", str(e.kind)), row)
    return [rows[key] for key in sorted(rows)]


def write_outputs(discoveries: Sequence[Discovery], exclusions: Sequence[Exclusion], out_dir: Path) -> list[Path]:
    """Write a discovery run into ``out_dir``: the candidates for the queue and the data for the dataset.

    ``out_dir/candidates/<task>-<view>.json`` (what the queue reads), one rankings snapshot per task and view
    and ``data/exclusions.parquet`` (a dataset folder overlay that publish adds to the dataset).

    Args:
        discoveries: This run's discoveries.
        exclusions: The hand-kept exclusions the run used.
        out_dir: The folder (created when missing).

    Returns:
        The files written.
    """
    written: list[Path] = []
    for discovery in discoveries:
        path = Path(out_dir) / "candidates" / f"{discovery.task}-{discovery.view}.json"
        fsatomic.write_text(path, json.dumps(discovery.to_dict(), indent=2) + "\n")
        written.append(path)
        rows = snapshot_rows(discovery)
        written.append(write_rankings(rows, out_dir, date=discovery.date, task=discovery.task, view=discovery.view))
    written.append(write_exclusions(exclusion_rows(exclusions, discoveries), out_dir))
    return written
