"""What discovery hands the queue: candidates (a ranked model with its metadata) and whether each may run.

A candidate the queue must not take carries ``eligible=False`` with a ``kind`` and a one-line ``reason``
(:func:`judge`). Ids and revisions from the Hub are untrusted: they are validated here, and again when a
discovery file is read back.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pipeline.dataset import MAX_REASON_CHARS
from pipeline.discover.selection import Exclusion
from pipeline.errors import ConfigError
from pipeline.hub import ModelListing
from pipeline.ids import architecture_name, base_model_ids, is_revision, model_id_problem, model_type_name
from pipeline.taskspec import check_task, task_source
from pipeline.types import TASKS, VIEWS

#: Kinds discovery finds on the Hub (the hand-kept ones come from exclusions.yaml itself).
DISCOVERED_KINDS: frozenset[str] = frozenset({"remote_code", "not_transformers", "gated", "not_found", "invalid"})
#: The fields a candidate takes from its listing as they are (a listing's attribute of the same name).
_FROM_LISTING = ("sha", "params", "tags", "library_name", "pipeline_tag", "downloads", "likes", "trending_score",
                 "architecture", "model_type", "base_model")  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """One ranked model of a task and view, with what the queue and the catalog need to know about it.

    ``rank`` is 1-based within the view. ``params`` is the listing's safetensors total (None when the Hub
    has none). ``eligible`` is False with ``kind`` and ``reason`` for a model the queue must not take.
    ``architecture``, ``model_type`` and ``base_model`` are the model's family as the listing tells it (its
    config summary and card metadata; validated by :mod:`pipeline.hub`).
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
    architecture: str | None = None
    model_type: str | None = None
    base_model: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tags and base_model as lists)."""
        out = asdict(self)
        out["tags"] = list(self.tags)
        out["base_model"] = list(self.base_model)
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
        """A candidate from the Hub's listing, judged eligible or not (see :func:`judge`).

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
        kind, reason = judge(listing, task, excluded or {}, allow_gated)
        reason = reason[:MAX_REASON_CHARS] if reason is not None else None  # never longer than an exclusion's
        fields = {name: getattr(listing, name) for name in _FROM_LISTING}
        return cls(listing.id, task, view, rank, gated=bool(listing.gated), eligible=kind is None, kind=kind,
                   reason=reason, note=note, **fields)  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Candidate:
        """Read back :meth:`to_dict` (e.g. a ``trncat discover --json`` file); the id is re-validated.

        Raises:
            ConfigError: a field is missing or of the wrong type.
        """
        try:
            values = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
            values["tags"] = tuple(str(t) for t in values.get("tags") or ())
            # A discovery file is read back as untrusted as the Hub's answer it came from.
            values["architecture"] = architecture_name(values.get("architecture"))
            values["model_type"] = model_type_name(values.get("model_type"))
            values["base_model"] = base_model_ids(values.get("base_model"))
            candidate = cls(**values)
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"not a discovery candidate: {exc}") from None
        if candidate.task not in TASKS:
            raise ConfigError(f"not a discovery candidate: unknown task {candidate.task!r}")
        if candidate.params is not None and (
            isinstance(candidate.params, bool) or not isinstance(candidate.params, int)
        ):
            raise ConfigError(f"not a discovery candidate: params must be an integer, got {candidate.params!r}")
        if candidate.eligible and (problem := identity_problem(candidate.model_id, candidate.sha)):
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
        check_task_view(task, view)
        return cls(date=date, task=task, view=view, candidates=candidates)


def check_task_view(task: str, view: str) -> None:
    check_task(task)
    if view not in VIEWS:
        raise ConfigError(f"unknown view {view!r}; choose from {', '.join(VIEWS)}")


def identity_problem(model_id: object, sha: object) -> str | None:
    """Why the Hub's id or revision cannot be used (they are untrusted), or None."""
    if (problem := model_id_problem(model_id)) is not None:
        return f"the Hub returned an invalid model id: {problem}"
    if not is_revision(sha):
        return "the Hub returned no 40-hex commit sha for it"
    return None


#: The most of one Hub text (a library name, a pipeline tag) a reason quotes. Both are short slugs on the Hub
#: ("sentence-transformers", the longest library trncat benchmarks, has 21 characters); the rest is cut, so no
#: listing can make a reason longer than the exclusions allow (:data:`pipeline.dataset.MAX_REASON_CHARS`).
HUB_TEXT_CHARS = 80


def quoted(value: str) -> str:
    """Hub text as a reason shows it: ``repr`` (control characters escaped), cut to :data:`HUB_TEXT_CHARS`."""
    if len(value) <= HUB_TEXT_CHARS:
        return repr(value)
    return f"{repr(value[:HUB_TEXT_CHARS])[:-1]}...' ({len(value)} characters)"


def exclusion_index(exclusions: Sequence[Exclusion]) -> dict[tuple[str, str | None], Exclusion]:
    # Hub ids resolve case-insensitively, so an exclusion written in another case still applies.
    return {(e.model_id.casefold(), e.task): e for e in exclusions}


def judge(
    listing: ModelListing, task: str, excluded: Mapping[tuple[str, str | None], Exclusion], allow_gated: bool
) -> tuple[str | None, str | None]:
    """(kind, reason) that keeps ``listing`` out of the queue, or (None, None) when it is eligible.

    The first that applies wins: a bad identity, then the hand-kept exclusion (a reviewer's word), then what
    the Hub says about the model: remote code, then the task's library (``not_transformers`` names any model
    not of the task's library, e.g. a transformers model under ``sentence-embeddings``), then, for a task
    ranked by library, its pipeline tag (a sentence-transformers cross-encoder is no sentence-embeddings
    model), then gating. Hub text in a reason is quoted with a bound (:func:`quoted`), and
    :meth:`Candidate.from_listing` cuts a reason to :data:`pipeline.dataset.MAX_REASON_CHARS`.
    """
    if problem := identity_problem(listing.id, listing.sha):
        return "invalid", problem
    key = listing.id.casefold()
    if (entry := excluded.get((key, task)) or excluded.get((key, None))) is not None:
        return entry.kind, entry.reason
    if listing.custom_code:
        return "remote_code", REMOTE_CODE_REASON
    source = task_source(task)
    if listing.library_name != source.library:
        library = quoted(listing.library_name) if listing.library_name else "not named"
        why = f"trncat benchmarks {task} models of {source.library}"
        return "not_transformers", f"library is {library}, not {source.library}: {why}"
    if source.library_filter and listing.pipeline_tag not in source.pipeline_tags:
        tag = quoted(listing.pipeline_tag) if listing.pipeline_tag else "not named"
        return "incompatible", f"pipeline tag is {tag}, not {' or '.join(source.pipeline_tags)}: not a {task} model"
    if listing.gated and not allow_gated:
        return "gated", gated_reason(listing)
    return None, None


#: Why a model tagged ``custom_code`` is kept out (and what ``trncat check`` answers for it).
REMOTE_CODE_REASON = "needs trust_remote_code (custom_code tag): trncat never runs remote code"


def gated_reason(listing: ModelListing) -> str:
    """Why a gated model is kept out (and what ``trncat check`` says of one it cannot read)."""
    return f"gated ({listing.gated} approval): the benchmark runners have no access to it"
