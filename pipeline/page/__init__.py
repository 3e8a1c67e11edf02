"""The catalog page: the dataset's rows -> ``index.html`` (inline CSS, JS and SVG), alone or with its data files.

- :mod:`~pipeline.page.html`: the page itself (the first view rendered on the server, the inline data, the CSP);
- :mod:`~pipeline.page.chunks`: the page's data as the script reads it: inline for a small catalog, else the first
  view inline and, per task, an index and the entries in files beside the page, fetched on demand;
- :mod:`~pipeline.page.catalog`: the page's data: one entry per model and task (a tuple of its columns), the ordered
  lists of each task and view, the history lines;
- :mod:`~pipeline.page.rows`: the latest rows a batch at a time (from Parquet, or a list), what the rest of the page
  gathers of each row as it passes, and the history kept packed;
- :mod:`~pipeline.page.cells`: each cell's text and HTML, made there only: an entry's row and a task's header (the
  first view shows them; the page's script places the same, and only sorts, filters and pages);
- :mod:`~pipeline.page.details`: a model's details (its failure, metrics, notes, command and history), likewise;
- :mod:`~pipeline.page.task_columns`: each task's tab label, metric columns, speed plot and answer check;
- :mod:`~pipeline.page.compare`: the Compare view, a model's Trainium2 row beside its GPU row (speed, memory, cost and
  their ratio), each as measured;
- :mod:`~pipeline.page.matrix`: the stage matrix (issue 49): per task and device class, each discovered model's stages
  and features, their states and what the docs promise, and the "documented but fails" models (the feed's too);
- :mod:`~pipeline.page.plots`: inline SVG plots, every label escaped;
- :mod:`~pipeline.page.families`: the table by architecture, and the family evidence the search box shows for a
  model with no row (the rule ``trncat check`` answers by);
- ``templates/``: the page's HTML, script and style sheet.

A pure function of rows: it reads no file and talks to no Hub (the rows it is given may be read as it asks for them:
:class:`pipeline.dataset.LatestBatches`; each data file may be handed over as it is made, to be written at once). A
row's cost is shown with the price it was built with (its cell's title names the price, option, region, source and
date). May import: the top-level modules,
:mod:`pipeline.records` (the representative row) and :mod:`pipeline.backends` (the install line a row shows).
Imported by: :mod:`pipeline.dataset` (the PR's preview page) and :mod:`pipeline.space` (the Space's page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.page.catalog import (
        HISTORY_READ,
        PAGE_SIZE,
        PAGE_VIEWS,
        RANKED_VIEWS,
        catalog,
        exclusion_text,
    )
    from pipeline.page.chunks import CHUNK_ENTRIES, DATA_DIR, INLINE_ENTRIES, index_columns
    from pipeline.page.html import LATEST_READ, Site, render_page, render_site, script_json
    from pipeline.page.matrix import DEVICE_CLASSES, documented_fails, fails_title
    from pipeline.page.releases import counted_apart, release_title
    from pipeline.page.task_columns import Metric, TaskView, table_metrics, task_view


lazy_face(__name__)
