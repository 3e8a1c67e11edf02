"""``trncat publish``: new records (and discovery's overlay) into the Hub dataset as one PR a maintainer reviews.

- :mod:`~pipeline.publish.prepare`: a partial mirror of the dataset repo (the summary, the touched latest shards,
  the results files that could hold the records), the records and the overlay built into it, a derived file (the
  release diff, which the CLI hands in as a :class:`~pipeline.publish.prepare.Derived`) written after them, what
  changed;
- :mod:`~pipeline.publish.description`: the PR description, in the feed's change kinds;
- :mod:`~pipeline.publish.bundles`: the compiled-cache bundles beside CI neuron passes, uploaded (deduplicated by
  sha256, under the size cap) to the compiled-cache model repo and named in their records before the PR;
- :mod:`~pipeline.publish.warmcheck`: the second-machine check of a published bundle (the row's run.py
  ``--require-warm`` with empty caches on a runner that did not make it: hits, misses, the warm start's seconds);
- :mod:`~pipeline.publish.warm`: the warm checks a warm-check run's queue asked for, validated and merged into
  ``data/warm_checks.parquet`` as one PR;
- :mod:`~pipeline.publish.pr`: the publish itself (onto the bot's open PR if there is one, rebuilt when the
  branch moves) and its offline twin into a local folder.

May import: the top-level modules, :mod:`pipeline.hub`, :mod:`pipeline.records`, :mod:`pipeline.dataset` (the
build), :mod:`pipeline.render` (the description's cells) and :mod:`pipeline.backends` (the compiled-cache bundle's
rule, which the Neuron backend owns, checked again before an upload). Imported by: the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.publish.bundles import drop_named_bundles, publish_bundles
    from pipeline.publish.pr import PR_TITLE_PREFIX, publish, publish_to_folder
    from pipeline.publish.prepare import Derived, provenance_problems
    from pipeline.publish.warm import collect_warm_checks, warm_derived
    from pipeline.publish.warmcheck import WarmCheck, parse_run_output, warm_check


lazy_face(__name__)
