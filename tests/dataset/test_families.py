"""data/families.parquet: each latest key's family row, kept by every build, written by a migration to layout 4."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from pipeline.dataset import (
    FAMILIES_FILE,
    LATEST_DIR,
    RESULTS_DIR,
    build,
    family_rows,
    family_view,
    migrate,
    needs_migration,
    read_families,
    read_latest,
)
from pipeline.records import LAYOUT_MARKERS
from pipeline.testing.records import sample_failure, sample_record

LLAMA = {"architecture": "LlamaForCausalLM", "model_type": "llama"}


def _at(day: int, **overrides: object) -> dict:
    stamp = f"2026-11-{day:02d}T09:00:00+00:00"
    return sample_record(run={"started_at": stamp, "finished_at": stamp}, **overrides)


def test_a_build_writes_the_family_row_of_every_latest_key(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build([_at(20, model_id="acme/a", **LLAMA), _at(20, model_id="acme/b", base_model=["acme/a"], **LLAMA)], out)
    rows = read_families(out)
    assert rows is not None and rows == family_rows(read_latest(out))
    by_id = {r["model_id"]: r for r in rows}
    assert by_id["acme/b"]["base_model"] == ["acme/a"] and by_id["acme/a"]["architecture"] == "LlamaForCausalLM"
    assert by_id["acme/a"]["status"] == "pass" and by_id["acme/a"]["neuronx_cc_version"] == "2.21.0"
    # A second build on the folder (no page: the partial path) folds its rows into the index.
    build([_at(21, model_id="acme/c", **LLAMA)], out, page=False)
    assert [r["model_id"] for r in read_families(out) or []] == ["acme/a", "acme/b", "acme/c"]
    assert read_families(out) == family_rows(read_latest(out))


def test_an_infrastructure_error_keeps_the_models_last_measurement(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build([_at(20, model_id="acme/a", **LLAMA)], out)
    error = sample_failure(model_id="acme/a", status="error", stage="timeout", code="timeout", message="no answer")
    error["run"] = {
        **error["run"],
        "started_at": "2026-11-22T09:00:00+00:00",
        "finished_at": "2026-11-22T09:00:00+00:00",
    }
    build([error], out, page=False)
    [latest] = read_latest(out)
    assert latest["status"] == "error"
    [row] = read_families(out) or []
    # The error tells nothing about the model: its newest pass stands (the family comes from the latest row).
    assert row["status"] == "pass" and row["finished_at"].day == 20


def _to_layout_3(path: Path) -> None:
    table = pq.read_table(path)
    later = table.column_names[table.column_names.index("agreement_grade") :]  # layout 5's graded-answer columns
    table = table.drop_columns(["architecture", "model_type", "base_model", *later])
    pq.write_table(table, path)


def test_a_layout_3_dataset_is_migrated_and_filled_where_the_files_say(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    # The same model and revision measured twice: the newer run knows its family, the older file is layout 3.
    build([_at(20, model_id="acme/a")], out)
    older = next((out / RESULTS_DIR).glob("*.parquet"))
    build([_at(21, model_id="acme/a", **LLAMA), _at(21, model_id="acme/b")], out)
    _to_layout_3(older)
    for path in (out / LATEST_DIR).glob("*.parquet"):
        _to_layout_3(path)
    (out / FAMILIES_FILE).unlink()
    assert LAYOUT_MARKERS[0][1] not in pq.read_schema(older).names
    assert needs_migration(out)
    rewritten = migrate(out)
    assert FAMILIES_FILE in rewritten and not needs_migration(out)
    [old_row] = pq.read_table(older).to_pylist()
    assert old_row["architecture"] == "LlamaForCausalLM" and old_row["model_type"] == "llama"  # from the newer run
    rows = {r["model_id"]: r for r in read_families(out) or []}
    assert rows["acme/a"]["architecture"] == "LlamaForCausalLM"
    assert rows["acme/b"]["architecture"] is None  # nothing in the files says: unknown, never guessed


def test_a_folder_without_the_index_is_read_from_its_latest_view(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build([_at(20, model_id="acme/a", **LLAMA)], out)
    (out / FAMILIES_FILE).unlink()
    assert read_families(out) is None and needs_migration(out)
    assert family_view(out) == family_rows(read_latest(out))
