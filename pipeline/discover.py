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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from pipeline import fsatomic
from pipeline.dataset import write_exclusions, write_rankings
from pipeline.errors import ConfigError, GatedRepoError, RepoNotFoundError
from pipeline.hub import Hub, HubSort, ModelListing
from pipeline.ids import is_revision, model_id_problem
from pipeline.selection import Exclusion, Selection, load_exclusions, load_selected
from pipeline.types import TASKS, VIEWS

__all__ = [
    "Candidate",
    "Discovery",
    "IneligibleKind",
    "discover",
    "discover_all",
    "exclusion_rows",
    "snapshot_rows",
    "write_outputs",
]

logger = logging.getLogger(__name__)

IneligibleKind = Literal[
    "remote_code", "not_transformers", "gated", "low_priority", "incompatible", "not_found", "invalid"
]
INELIGIBLE_KINDS: tuple[str, ...] = get_args(IneligibleKind)
#: Kinds discovery finds on the Hub (the hand-kept ones come from exclusions.yaml itself).
DISCOVERED_KINDS: frozenset[str] = frozenset({"remote_code", "not_transformers", "gated", "not_found", "invalid"})
#: Sort of each ranked view on the Hub.
VIEW_SORT: dict[str, HubSort] = {"trending": "trending_score", "downloads": "downloads"}
#: Size of the listing Selected reads its metadata from when no earlier listing is given (one call).
SELECTED_LISTING_LIMIT = 1000
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class Candidate:
    """One ranked model of a task and view, with what the queue and the catalog need to know about it.

    ``rank`` is 1-based within the view. ``params`` is the listing's safetensors total (None when the Hub
    has none). ``eligible`` is False with ``kind`` and ``reason`` for a model the queue must not take.
    """

    model_id: str
    task: str
    view: str
    rank: int
    sha: str | None
    params: int | None = None
    gated: bool = False
    tags: tuple[str, ...] = ()
    library_name: str | None = None
    pipeline_tag: str | None = None
    downloads: int = 0
    likes: int = 0
    trending_score: int = 0
    eligible: bool = True
    kind: str | None = None
    reason: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tags as a list)."""
        out = asdict(self)
        out["tags"] = list(self.tags)
        return out

    @classmethod
    def from_listing(
        cls,
        listing: ModelListing,
        *,
        task: str,
        view: str,
        rank: int,
        excluded: Mapping[tuple[str, str | None], Exclusion] | None = None,
        allow_gated: bool = False,
        note: str | None = None,
    ) -> Candidate:
        """A candidate from the Hub's listing, judged eligible or not (see :func:`_judge`).

        Args:
            listing: The Hub's listing of the model (untrusted: its id and sha are validated).
            task: The task it is discovered under.
            view: The view it is discovered in.
            rank: 1-based place in the view.
            excluded: Hand-kept exclusions by (casefolded model id, task or None).
            allow_gated: Gated models are eligible.
            note: Note of its selected.yaml entry.

        Returns:
            The candidate.
        """
        kind, reason = _judge(listing, task, excluded or {}, allow_gated)
        return cls(
            listing.id, task, view, rank, listing.sha, listing.params, bool(listing.gated), listing.tags,
            listing.library_name, listing.pipeline_tag, listing.downloads, listing.likes, listing.trending_score,
            eligible=kind is None, kind=kind, reason=reason, note=note,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        """Read back :meth:`to_dict` (e.g. a ``trncat discover --json`` file); the id is re-validated.

        Raises:
            ConfigError: a field is missing or of the wrong type.
        """
        try:
            values = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
            values["tags"] = tuple(str(t) for t in values.get("tags") or ())
            candidate = cls(**values)
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"not a discovery candidate: {exc}") from None
        if candidate.task not in TASKS:
            raise ConfigError(f"not a discovery candidate: unknown task {candidate.task!r}")
        if candidate.params is not None and (
            isinstance(candidate.params, bool) or not isinstance(candidate.params, int)
        ):
            raise ConfigError(f"not a discovery candidate: params must be an integer, got {candidate.params!r}")
        if candidate.eligible and (problem := _identity_problem(candidate.model_id, candidate.sha)):
            candidate = replace(candidate, eligible=False, kind="invalid", reason=problem)
        return candidate


@dataclass
class Discovery:
    """One discovery run: the candidates of one task and view on one date, best first."""

    date: dt.date
    task: str
    view: str
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def eligible(self) -> list[Candidate]:
        """The candidates the queue may take."""
        return [c for c in self.candidates if c.eligible]

    @property
    def ineligible(self) -> list[Candidate]:
        """The candidates kept out, each with its reason."""
        return [c for c in self.candidates if not c.eligible]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (what ``trncat discover --json`` prints)."""
        return {
            "date": self.date.isoformat(),
            "task": self.task,
            "view": self.view,
            "candidates": [c.to_dict() for c in self.candidates],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Discovery:
        """Read back :meth:`to_dict`.

        Raises:
            ConfigError: malformed input.
        """
        try:
            date = dt.date.fromisoformat(str(data["date"]))
            task, view = str(data["task"]), str(data["view"])
            candidates = [Candidate.from_dict(c) for c in data["candidates"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a discovery: {exc}") from None
        _check_task_view(task, view)
        return cls(date=date, task=task, view=view, candidates=candidates)


def _check_task_view(task: str, view: str) -> None:
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    if view not in VIEWS:
        raise ConfigError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")


def _identity_problem(model_id: object, sha: object) -> str | None:
    """Why the Hub's id or revision cannot be used (they are untrusted), or None."""
    if (problem := model_id_problem(model_id)) is not None:
        return f"the Hub returned an invalid model id: {problem}"
    if not is_revision(sha):
        return "the Hub returned no 40-hex commit sha for it"
    return None


def _exclusion_index(exclusions: Sequence[Exclusion]) -> dict[tuple[str, str | None], Exclusion]:
    # Hub ids resolve case-insensitively, so an exclusion written in another case still applies.
    return {(e.model_id.casefold(), e.task): e for e in exclusions}


def _judge(
    listing: ModelListing, task: str, excluded: Mapping[tuple[str, str | None], Exclusion], allow_gated: bool
) -> tuple[str | None, str | None]:
    """(kind, reason) that keeps ``listing`` out of the queue, or (None, None) when it is eligible.

    The first that applies wins: a bad identity, then the hand-kept exclusion (a reviewer's word), then what
    the Hub says about the model.
    """
    if problem := _identity_problem(listing.id, listing.sha):
        return "invalid", problem
    key = listing.id.casefold()
    if (entry := excluded.get((key, task)) or excluded.get((key, None))) is not None:
        return entry.kind, entry.reason
    if listing.custom_code:
        return "remote_code", "needs trust_remote_code (custom_code tag): trncat never runs remote code"
    if listing.library_name != "transformers":
        library = repr(listing.library_name) if listing.library_name else "not named"
        return "not_transformers", f"library is {library}, not transformers: trncat benchmarks transformers models"
    if listing.gated and not allow_gated:
        return "gated", f"gated ({listing.gated} approval): the benchmark runners have no access to it"
    return None, None


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
    _check_task_view(task, view)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    date = today or dt.datetime.now(dt.UTC).date()
    excluded = _exclusion_index(load_exclusions() if exclusions is None else exclusions)
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
                candidates.append(
                    Candidate(entry.model_id, task, view, rank, None, eligible=False, kind="invalid",
                              reason=f"invalid model id: {problem}", note=entry.note)
                )  # fmt: skip
                continue
            if found is None:
                try:
                    found = hub.model_info(entry.model_id)
                except RepoNotFoundError as exc:
                    kind = "gated" if isinstance(exc, GatedRepoError) else "not_found"
                    candidates.append(
                        Candidate(entry.model_id, task, view, rank, None, eligible=False, kind=kind,
                                  reason=f"not on the Hub: {exc}", note=entry.note)
                    )  # fmt: skip
                    continue
                cache.setdefault(found.id, found)
            candidates.append(Candidate.from_listing(found, task=task, view=view, rank=rank, note=entry.note, **judge))
    discovery = Discovery(date=date, task=task, view=view, candidates=candidates)
    logger.info("%s / %s: %d candidates, %d eligible", task, view, len(candidates), len(discovery.eligible))
    return discovery


def _fetch(hub: Hub, task: str, sort: HubSort, limit: int, cache: dict[str, ModelListing]) -> list[ModelListing]:
    """One listing, without repeats (a listing paged while rankings move can repeat a model: keep its best)."""
    found: dict[str, ModelListing] = {}
    for listing in hub.list_models(task=task, sort=sort, limit=limit):
        found.setdefault(listing.id, listing)
        cache.setdefault(listing.id, listing)
    return list(found.values())


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
                hub=hub, task=task, view=view, limit=limit, selected=selected, exclusions=exclusions,
                today=today, listings=cache, allow_gated=allow_gated,
            )  # fmt: skip
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
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for entry in exclusions:
        key: tuple[str, str, str] = (entry.model_id, entry.task or "", entry.kind)
        rows.setdefault(
            key, {"model_id": entry.model_id, "task": entry.task, "reason": entry.reason, "kind": entry.kind}
        )
    for discovery in discoveries:
        for c in discovery.ineligible:
            if c.kind in DISCOVERED_KINDS and model_id_problem(c.model_id) is None:
                key = (c.model_id, c.task, str(c.kind))
                rows.setdefault(key, {"model_id": c.model_id, "task": c.task, "reason": c.reason, "kind": c.kind})
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
