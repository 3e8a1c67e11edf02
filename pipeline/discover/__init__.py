"""Discovery: the Hub's Trending and Downloads rankings per task, and the Selected list -> candidates.

- :mod:`~pipeline.discover.rankings`: one listing call per task and view, the Selected list's metadata, the
  rankings snapshot and the exclusions written through :mod:`pipeline.dataset`;
- :mod:`~pipeline.discover.candidates`: a :class:`Candidate` and whether it may run (:func:`judge`), ids and
  revisions from the Hub validated;
- :mod:`~pipeline.discover.selection`: the hand-kept ``dataset/selected.yaml`` and ``dataset/exclusions.yaml``.

May import: the top-level modules, :mod:`pipeline.hub`, :mod:`pipeline.records` (the schemas) and
:mod:`pipeline.dataset` (the snapshot's files). Imported by: :mod:`pipeline.queue` (the candidates),
:mod:`pipeline.check` (the reasons a model is kept out) and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.discover.candidates import (
        DISCOVERED_KINDS,
        REMOTE_CODE_REASON,
        Candidate,
        Discovery,
        IneligibleKind,
        check_task_view,
        exclusion_index,
        gated_reason,
        identity_problem,
        judge,
    )
    from pipeline.discover.rankings import (
        MAX_LIMIT,
        SELECTED_LISTING_LIMIT,
        discover,
        discover_all,
        exclusion_rows,
        snapshot_rows,
        write_outputs,
    )
    from pipeline.discover.selection import (
        DEFAULT_EXCLUSIONS,
        DEFAULT_SELECTED,
        Exclusion,
        ExclusionKind,
        Selection,
        load_exclusions,
        load_selected,
    )

__all__ = [
    "DEFAULT_EXCLUSIONS",
    "DEFAULT_SELECTED",
    "DISCOVERED_KINDS",
    "MAX_LIMIT",
    "REMOTE_CODE_REASON",
    "SELECTED_LISTING_LIMIT",
    "Candidate",
    "Discovery",
    "Exclusion",
    "ExclusionKind",
    "IneligibleKind",
    "Selection",
    "check_task_view",
    "discover",
    "discover_all",
    "exclusion_index",
    "exclusion_rows",
    "gated_reason",
    "identity_problem",
    "judge",
    "load_exclusions",
    "load_selected",
    "snapshot_rows",
    "write_outputs",
]

lazy_face(__name__)
