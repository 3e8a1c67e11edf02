"""Neuron releases: the watch that notices a new one, and the diff of what it changed in the catalog.

- :mod:`~pipeline.release.manifest`: the Neuron SDK's release manifest (``n2-manifest.json``), parsed and checked;
- :mod:`~pipeline.release.watch`: a release newer than the runners' -> the bump's files (``runners/toolchain.yaml``,
  its ``apt:`` pins, the runner image tag, the vllm-neuron pin) and its pull request's description, every pin with
  where it came from (``trncat release-watch``);
- :mod:`~pipeline.release.docs`: the docs' tables the stage matrix uses (``runners/vllm-neuron-docs.yaml``), read
  again from vLLM Neuron's model recipes at their newest commits (``trncat release-watch --docs``);
- :mod:`~pipeline.release.diff`: the release diff, model by model, between the rows of two toolchains
  (``trncat diff --toolchain OLD NEW``), kept as ``data/releases/<old>--<new>.parquet`` by :mod:`pipeline.dataset`.

May import: the top-level modules (the types: the matrix's features), :mod:`pipeline.queue` (the pins and how a
row's version compares with one) and :mod:`pipeline.dataset` (the results a diff reads), :mod:`pipeline.records`
(whether two rows' figures differ: its spread). Imported by: the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.release.diff import ReleaseDiff, diff_dataset, diff_text, load_side, release_diff, rows_at
    from pipeline.release.docs import DOCS_FILE, Fetcher, parse_recipe, refresh_docs
    from pipeline.release.manifest import parse_manifest
    from pipeline.release.watch import TOOLCHAIN_FILE, current_release, plan_bump


lazy_face(__name__)
