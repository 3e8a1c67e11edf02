"""The family index (data/families/): each latest key's family row, kept by every build."""

from __future__ import annotations

from pathlib import Path

from pipeline.dataset import build, read_latest
from tests.support.families import family_rows, read_families
from tests.support.records import sample_failure, sample_record

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
