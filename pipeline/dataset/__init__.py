"""The dataset folder (a local copy or partial mirror of the Hub dataset repo): the only code that reads or
writes its layout (:mod:`pipeline.dataset.layout` names every file).

- :mod:`~pipeline.dataset.layout`: every file's name and format (the one dataset layout, ``layout_version`` 1);
- :mod:`~pipeline.dataset.build`: append results, keep the latest view and each key's history, write scripts;
- :mod:`~pipeline.dataset.shards`: which latest shard holds a model (the only code that knows the shard names), the
  row that stands for a key, a shard read, merged and written with its family rows (what ``trncat check`` reads);
- :mod:`~pipeline.dataset.read`: the latest view, results columns, rankings, exclusions, scripts;
- :mod:`~pipeline.dataset.rankings`: discovery's snapshots and exclusions;
- :mod:`~pipeline.dataset.front`: the card, the catalog page and ``data/summary.json`` (the card's counts and the
  shard names);
- :mod:`~pipeline.dataset.mirror`: which remote files a publish or a queue needs;
- :mod:`~pipeline.dataset.changes`: what each publish changed (``data/changes/``, the feed's source);
- :mod:`~pipeline.dataset.family_index`: the rows a check asks for, read as Arrow and filtered without a Python
  object per row (:class:`FamilyIndex`), and a family counted over its columns;
- :mod:`~pipeline.dataset.releases`: ``data/releases/<old>--<new>.parquet``, the release diffs (``trncat diff``).
- :mod:`~pipeline.dataset.serving`: ``data/serving.json``, the latest serving record per model, hardware and
  workload (the page's serving curves), and its points as two Parquet configs: ``serving`` (one row per point)
  and ``inferencex`` (InferenceX's aggregated result keys);
- :mod:`~pipeline.dataset.warm`: ``data/warm_checks.parquet``, the newest second-machine warm check per bundle
  (the queue of checks, the page's "warm start verified");
- :mod:`~pipeline.dataset.matrix`: ``data/matrix.parquet``, the stage matrix (the ``matrix`` config, issue 49).

May import: the top-level modules, :mod:`pipeline.records` (the rows), :mod:`pipeline.render` (scripts and
card) and :mod:`pipeline.page` (the PR's preview page). Imported by: discover (the snapshot), queue (what was
measured), check (the family rows), release (the release diffs), publish, space and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.dataset.build import BuildSummary, build, refresh_card, refresh_new_views
    from pipeline.dataset.changes import CHANGE_KINDS, Change, change_kinds, read_changes
    from pipeline.dataset.family_index import FamilyIndex, folder_family_index
    from pipeline.dataset.front import CardNames, page_html, read_summary, write_front_files
    from pipeline.dataset.layout import (
        EXCLUSIONS_FILE,
        FAMILIES_DIR,
        FAMILIES_FILE,
        HISTORY_COLUMN,
        INFERENCEX_FILE,
        LATEST_DIR,
        MATRIX_FILE,
        RESULTS_DIR,
        SCRIPTS_DIR,
        SERVING_FILE,
        SERVING_POINTS_FILE,
        SUMMARY_FILE,
        WARM_CHECKS_FILE,
        earlier_runs,
        run_name,
    )
    from pipeline.dataset.matrix import MATRIX_SCHEMA, read_matrix, write_matrix
    from pipeline.dataset.mirror import (
        held_paths,
        overlay_files,
        publish_paths,
        results_paths,
        summary_paths,
        tree_digests,
    )
    from pipeline.dataset.rankings import MAX_REASON_CHARS, clean_overlay, write_exclusions, write_rankings
    from pipeline.dataset.read import (
        LatestBatches,
        ScriptTexts,
        iter_results,
        read_exclusions,
        read_latest,
        read_latest_columns,
        read_rankings,
        require_dataset,
        script_files,
    )
    from pipeline.dataset.releases import read_release_diffs, release_path, write_release_diff
    from pipeline.dataset.serving import inferencex_rows, point_rows, read_serving
    from pipeline.dataset.shards import family_index_paths, is_family_path, model_shard
    from pipeline.dataset.warm import add_warm_checks, read_warm_checks, warm_key, warm_queue_paths


lazy_face(__name__)
