"""Discovery: the Hub's Trending and Downloads rankings per task, and the Selected list -> candidates.

- :mod:`~pipeline.discover.rankings`: one listing call per task and view, the Selected list's metadata, the
  rankings snapshot and the exclusions written through :mod:`pipeline.dataset`;
- :mod:`~pipeline.discover.candidates`: a :class:`Candidate` and whether it may run (:func:`judge`), ids and
  revisions from the Hub validated;
- :mod:`~pipeline.discover.selection`: the hand-kept ``dataset/selected.yaml`` and ``dataset/exclusions.yaml``, and
  the model requests (issues) a maintainer accepted.

May import: the top-level modules, :mod:`pipeline.hub`, :mod:`pipeline.records` (the schemas) and
:mod:`pipeline.dataset` (the snapshot's files). Imported by: :mod:`pipeline.queue` (the candidates),
:mod:`pipeline.check` (the reasons a model is kept out) and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.discover.candidates import (
        REMOTE_CODE_REASON,
        Candidate,
        Discovery,
        check_task_view,
        gated_reason,
    )
    from pipeline.discover.rankings import discover, discover_all, exclusion_rows, snapshot_rows, write_outputs
    from pipeline.discover.selection import (
        Exclusion,
        ExclusionKind,
        Selection,
        load_exclusions,
        load_requests,
        load_selected,
    )


lazy_face(__name__)
