"""The page reads only :data:`pipeline.page.LATEST_READ` of a latest row (issue 36: a build at 100k rows reads those
columns, a batch at a time), so a page built from those columns is the page built from every column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.dataset import LatestBatches, build, iter_results, read_latest, read_latest_columns
from pipeline.page import HISTORY_READ, LATEST_READ, render_site
from pipeline.page.catalog import AT, catalog
from pipeline.page.families import grouped_family_table
from pipeline.page.rows import Gathered
from pipeline.records import COLUMN_NAMES, flatten
from tests.page.test_page import at, fixture_row
from tests.support.catalog_rows import catalog_rows
from tests.support.families import family_table
from tests.support.records import sample_failure, sample_record, sample_speech_record
from tests.warm_rows import with_bundle


class _Watched(dict[str, Any]):
    """A row that notes every key the page asks it for."""

    asked: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def _every_kind_of_row() -> list[dict[str, Any]]:
    """Rows of every task, device and outcome the page draws differently."""
    rows = catalog_rows(600)["latest"]  # four tasks; pass, fail and error; plans, costs, families
    rows += [
        flatten(sample_speech_record(model_id="acme/whisper")),
        flatten(sample_record(model_id="acme/gen", device="cuda", hardware={"name": "h100", "accelerator": "H100"})),
        flatten(sample_record(model_id="acme/gen")),
        flatten(with_bundle(sample_record(model_id="acme/warm"), "a" * 64)),
        flatten(
            sample_failure(
                model_id="acme/broken", status="error", stage="timeout", code="timeout", message="no answer in 900 s"
            )
        ),
        fixture_row("sentence_embeddings_cpu_pass.json", "acme/embed"),
        fixture_row("text_to_image_cpu_pass.json", "acme/paint", steps=4, image_size=1024, guidance_scale=0.0),
    ]
    return rows


def test_the_page_asks_a_latest_row_for_no_column_but_those_it_reads() -> None:
    names = {*COLUMN_NAMES, "history"}
    assert set(LATEST_READ) <= names, "LATEST_READ names a column no latest row has"
    _Watched.asked = set()
    rows = [_Watched(r) for r in _every_kind_of_row()]
    render_site(latest=rows, rankings=[], exclusions=[], scripts={}, inline_entries=None)
    render_site(latest=rows, rankings=[], exclusions=[], scripts={}, inline_entries=10, chunk=50)
    asked = _Watched.asked & names
    assert asked - set(LATEST_READ) == set(), "add these columns to LATEST_READ: the Space build would not read them"
    # and the list is no longer than it must be: every column in it is one the page asked for here
    assert set(LATEST_READ) - asked == set()


def _records() -> list[dict[str, Any]]:
    """A dataset's records: every task, a GPU row beside a Trainium2 one, a bundle, and a key whose latest run is an
    infrastructure error after a pass (its family row comes from the earlier run, read from ``history``)."""
    embed = json.loads((Path(__file__).parent.parent / "fixtures/valid/sentence_embeddings_cpu_pass.json").read_text())
    embed["model_id"] = "acme/embed"
    return [
        sample_record(model_id="acme/gen", run=at(1)),
        sample_record(model_id="acme/gen", device="cuda", hardware={"name": "h100", "accelerator": "H100"}, run=at(1)),
        sample_record(model_id="acme/flaky", run=at(1)),
        sample_failure(
            model_id="acme/flaky", status="error", stage="timeout", code="timeout", message="no answer", run=at(2)
        ),
        sample_failure(model_id="acme/broken", run=at(2)),
        sample_speech_record(model_id="acme/whisper", run=at(2)),
        with_bundle(sample_record(model_id="acme/warm", run=at(2)), "b" * 64),
        embed,
    ]


def test_a_page_from_the_columns_it_reads_is_the_page_from_every_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _records()
    build(records[:3], tmp_path)
    build(records[3:], tmp_path)  # the flaky key's error lands on its pass: the pass goes into its history
    full, some = read_latest(tmp_path), read_latest_columns(tmp_path, LATEST_READ)
    assert len(full) == len(some) == 7
    assert {len(row) for row in some} == {len(LATEST_READ)}
    [flaky] = [r for r in some if r["model_id"] == "acme/flaky"]
    assert flaky["status"] == "error" and [run["status"] for run in flaky["history"]] == ["pass"]
    assert {r["history"] is None for r in some if r["status"] in ("pass", "fail")} == {True}
    history = list(iter_results(tmp_path, HISTORY_READ))
    for inline in (None, 2):  # one file, and a page with data files
        args: dict[str, Any] = {"history": history, "rankings": [], "exclusions": [], "scripts": {}}
        want = render_site(latest=full, inline_entries=inline, chunk=2, **args)
        got = render_site(latest=some, inline_entries=inline, chunk=2, **args)
        assert got.html == want.html
        assert got.files == want.files
        # As a Space build reads it: the rows a batch at a time, one row to a batch here (the GPU row of acme/gen
        # comes in a batch after its Trainium2 row: an entry and a Compare pair need both), the history read as it
        # is packed, and each data file handed over as it is made.
        monkeypatch.setattr("pipeline.dataset.read.BATCH_ROWS", 1)
        emitted: list[tuple[str, str]] = []
        args["history"] = iter_results(tmp_path, HISTORY_READ)
        batched = render_site(
            latest=LatestBatches(tmp_path, LATEST_READ),
            inline_entries=inline,
            chunk=2,
            emit=lambda path, text, into=emitted: into.append((path, text)),
            **args,
        )
        assert batched.html == want.html
        assert batched.files == [] and emitted == want.files
        # and, read so, one entry per key: acme/gen's from its Trainium2 row, the one that stands for it
        data = catalog(latest=LatestBatches(tmp_path, LATEST_READ), history=history, rankings=[], exclusions=[])
        keys = [(e[AT["id"]], e[AT["task"]]) for e in data["entries"]]
        assert len(keys) == len(set(keys)) == 6  # acme/gen: one entry for its two rows
        assert {e[AT["device"]] for e in data["entries"] if e[AT["id"]] == "acme/gen"} == {"neuron"}
        monkeypatch.undo()
    assert "acme/flaky" in want.html and "Trainium2 ÷ GPU" in want.html
    assert LatestBatches(tmp_path, LATEST_READ).repeated_keys() == {("acme/gen", "text-generation")}


def test_the_family_table_from_gathered_rows_is_the_family_table_of_the_rows() -> None:
    """A build keeps of each latest row only the family columns the table counts (pipeline.page.rows.FAMILY_NAMES),
    and counts one family at a time: the table is the one every column gives."""
    rows = _every_kind_of_row() + catalog_rows(3000, seed=7)["latest"]
    known = next(r for r in rows if r.get("architecture") and r["status"] == "pass")
    # a model of a known family measured only on a GPU: counted "elsewhere"
    rows.append({**known, "model_id": "acme/gpu-only", "device": "cuda", "hardware": "h100", "accelerator": "H100"})
    gathered = Gathered()
    for row in rows:
        gathered.add(row, repeated=False)
    table = grouped_family_table(gathered.family_groups())
    assert table == family_table(rows)
    assert len(table) > 10 and any(f["fail"] for f in table) and any(f["else"] for f in table)
