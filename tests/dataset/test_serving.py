"""Serving records in the dataset: kept whole in data/serving.json (never a results row), the latest per model,
hardware and workload, read back for the page."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from pipeline.dataset import SERVING_FILE, build, read_latest, read_serving
from pipeline.space import SiteNames, write_site
from tests.support.records import sample_record, sample_serving


def test_a_serving_record_is_kept_apart_from_the_batch_1_row(tmp_path: Path) -> None:
    batch = sample_record()
    serving = sample_serving(device="neuron")
    summary = build([batch, serving], tmp_path)
    assert summary.added == 1 and summary.serving == 1 and summary.changed
    latest = read_latest(tmp_path)
    assert [(r["model_id"], r["decode_tokens_per_s"]) for r in latest] == [(batch["model_id"], 77.1)]
    assert read_serving(tmp_path) == [serving]


def test_the_newest_serving_record_of_a_key_stands_and_emulated_ones_never_enter(tmp_path: Path) -> None:
    old = sample_serving(device="cuda")
    new = copy.deepcopy(old)
    new["run"]["finished_at"] = "2026-11-29T10:01:13+00:00"
    new["serving"]["stopped"] = "a newer run"
    emulated = sample_serving(device="neuron")
    emulated["hardware"]["emulated"] = True
    build([old], tmp_path)
    summary = build([new, emulated], tmp_path)
    assert summary.serving == 1 and summary.set_aside[0][1] == "hardware.emulated"
    assert [r["serving"]["stopped"] for r in read_serving(tmp_path)] == ["a newer run"]
    # only serving records: nothing in the results, the file alone changed
    assert read_latest(tmp_path) == []
    assert isinstance(json.loads((tmp_path / SERVING_FILE).read_text()), list)


def test_the_space_page_draws_the_dataset_serving_curves(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    build([sample_record(), sample_serving(device="neuron"), sample_serving(device="cuda")], dataset)
    site = tmp_path / "site"
    write_site(dataset, site, names=SiteNames(dataset_repo="trncat/results", space_repo="trncat/catalog"))
    html = (site / "index.html").read_text()
    assert html.count('class="serving-line"') == 2
    assert 'id="serving-compare"' in html
