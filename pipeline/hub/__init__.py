"""The only package of trncat that talks to the Hub (``huggingface_hub``).

- :mod:`~pipeline.hub.client`: :class:`Hub`, the API trncat uses (listings, downloads, commits, PRs);
- :mod:`~pipeline.hub.files`: the Hub's calls that read a repo's files (downloads, listings, partial mirrors);
- :mod:`~pipeline.hub.prs`: pull requests and comments (the bot's open PRs, commenting, closing, merging), each
  non-idempotent call with a marker its retry looks for first;
- :mod:`~pipeline.hub.operations`: commit operations, and the git id that tells a file the repo holds;
- :mod:`~pipeline.hub.retry`: one retry budget per call, on an injectable clock, and a deadline over many calls;
- :mod:`~pipeline.hub.together`: independent calls sent at once (each waits a round trip to the Hub);
- :mod:`~pipeline.hub.translate`: huggingface_hub's errors -> :mod:`pipeline.errors` (the only place);
- :mod:`~pipeline.hub.transport`: the adapter that keeps huggingface_hub's own backoff out of a Hub call and gives
  every request its timeouts;
- :mod:`~pipeline.hub.endpoint`: pointing huggingface_hub (and transformers) at another endpoint;
- :mod:`~pipeline.hub.card`: a model card's YAML front matter (the Hub's ``cardData``).

Collaborators build one :class:`Hub` at the edge (the CLI, the demo, a test) and pass it in.

May import: the top-level modules only. Imported by: every package that reads or writes the Hub (the
local hub (its pytest plugin, the cards it answers), models, plan, discover, queue, bench, check, publish, space,
the CLI).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.hub import together
    from pipeline.hub.card import front_matter
    from pipeline.hub.client import Hub
    from pipeline.hub.endpoint import point_client_at, quiet_progress_bars
    from pipeline.hub.listing import CommitResult, HubSort, ModelListing
    from pipeline.hub.operations import file_additions, file_deletions, git_blob_id
    from pipeline.hub.retry import deadline


lazy_face(__name__)
