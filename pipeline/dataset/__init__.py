"""The dataset folder (a local copy or partial mirror of the Hub dataset repo): the only code that reads or
writes its layout (:mod:`pipeline.dataset.layout` names every file).

- :mod:`~pipeline.dataset.build`: append results, keep the latest view and each key's history, write scripts;
- :mod:`~pipeline.dataset.read`: the latest view, results columns, rankings, exclusions, scripts;
- :mod:`~pipeline.dataset.rankings`: discovery's snapshots and exclusions;
- :mod:`~pipeline.dataset.front`: the card and the catalog page, from the folder's data;
- :mod:`~pipeline.dataset.mirror`: which remote files a publish or a queue needs.
"""

from __future__ import annotations

from pipeline.dataset.build import BuildSummary, Change, build, latest_key, published_ids, shard_of
from pipeline.dataset.front import page_html, write_front_files
from pipeline.dataset.layout import (
    EXCLUSIONS_FILE,
    FRONT_FILES,
    LATEST_DIR,
    RANKINGS_DIR,
    RESULTS_DIR,
    SCRIPTS_DIR,
    results_file_time,
    results_files_since,
    run_name,
)
from pipeline.dataset.mirror import overlay_files, publish_paths, results_paths, tree_digests
from pipeline.dataset.rankings import overlay_problems, write_exclusions, write_rankings
from pipeline.dataset.read import HISTORY_COLUMN, earlier_runs, iter_results, read_latest

__all__ = [
    "overlay_problems",
    "EXCLUSIONS_FILE",
    "FRONT_FILES",
    "HISTORY_COLUMN",
    "LATEST_DIR",
    "RANKINGS_DIR",
    "RESULTS_DIR",
    "SCRIPTS_DIR",
    "BuildSummary",
    "Change",
    "build",
    "earlier_runs",
    "iter_results",
    "latest_key",
    "overlay_files",
    "page_html",
    "publish_paths",
    "published_ids",
    "read_latest",
    "results_file_time",
    "results_files_since",
    "results_paths",
    "run_name",
    "shard_of",
    "tree_digests",
    "write_exclusions",
    "write_front_files",
    "write_rankings",
]
