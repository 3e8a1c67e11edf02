"""``trncat check``: the catalog's answer on a model it may not have measured (a fine-tune, a quantization, an
adapter, last week's release), from the model itself, its base models and its architecture.

- :mod:`~pipeline.check.run`: the entry, :func:`check_model`, and the run.py to try (from the catalog's templates);
- :mod:`~pipeline.check.model`: the model's listing and small files (never weights, never code), its family,
  its base models and whether trncat would run it;
- :mod:`~pipeline.check.catalog`: the dataset's family index, from its merged main (a few requests, beside the
  model's) or a folder, asked only for the rows a verdict reads;
- :mod:`~pipeline.check.rules`: the verdict, in order (measured, base model, architecture, unknown);
- :mod:`~pipeline.check.neuron_cache`: optimum-neuron's precompiled configurations, when the answer is not "runs";
- :mod:`~pipeline.check.answer`: the JSON and the lines it prints;
- :mod:`~pipeline.check.warm`: a fine-tune's run.py starts warm from its base's compiled-cache bundle when the
  two share the cache's key (architecture, config shapes, dtype, workload, cores, toolchain), and says so.

May import: the top-level modules, :mod:`pipeline.hub` (typing, the caller passes the ``Hub``; its ``together``
sends independent requests at once),
:mod:`pipeline.models` (the gates, the family), :mod:`pipeline.plan` (the plan), :mod:`pipeline.records` (the one
rule for how a family fared), :mod:`pipeline.dataset` (the family rows), :mod:`pipeline.render` (run.py) and
:mod:`pipeline.discover` (the reasons a model is kept out, in discover's words) and :mod:`pipeline.backends` (the
compiled cache's key fields). Imported by: the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.check.answer import JSON_KEYS, NOT_FOUND_EXIT
    from pipeline.check.neuron_cache import CACHE_REPO, LOOKUP_COMMAND, registry_entry
    from pipeline.check.rules import VERDICTS, Base, decide
    from pipeline.check.run import check_model
    from pipeline.check.warm import base_bundle


lazy_face(__name__)
