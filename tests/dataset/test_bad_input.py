"""Bad input to the dataset folder is one clear line, and nothing is written (issue 29.18)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.dataset import RESULTS_DIR, SUMMARY_FILE, build
from tests import FIXTURES
from tests.support.records import sample_record


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_truncated_results_file_given_to_queue_is_one_clear_line(tmp_path, capsys) -> None:
    dataset = tmp_path / "ds"
    build([sample_record()], dataset)
    (results,) = (dataset / RESULTS_DIR).glob("*.parquet")
    results.write_bytes(results.read_bytes()[: results.stat().st_size // 2])
    discovery = tmp_path / "c.json"
    discovery.write_text(json.dumps({"date": "2026-12-01", "task": "text-generation", "view": "trending",
                                     "candidates": []}))  # fmt: skip
    out = tmp_path / "matrix.json"
    capsys.readouterr()
    code = main(["queue", "--candidates", str(discovery), "--dataset", str(dataset), "--out", str(out)])
    assert code != 0 and not out.exists()
    assert f"{results.name}: unreadable Parquet file" in _one_line(capsys)


@pytest.mark.parametrize(
    "change",
    [
        {"total": "12"},
        {"counts": [["text-generation", "neuron", "pass"]]},
        {"shards": ["../../x"]},
        {"hardware": [3]},
        {"toolchains": {"a": 1}},
    ],  # fmt: skip
)
def test_a_summary_with_wrong_types_is_rebuilt_never_a_traceback(tmp_path, caplog, change) -> None:
    dataset = tmp_path / "ds"
    build([sample_record()], dataset)
    good = json.loads((dataset / SUMMARY_FILE).read_text())
    (dataset / SUMMARY_FILE).write_text(json.dumps(good | change))
    with caplog.at_level(logging.WARNING):
        build([sample_record(model_id="acme/other")], dataset)
    assert "it is rebuilt from the latest view" in caplog.text
    summary = json.loads((dataset / SUMMARY_FILE).read_text())
    assert summary["total"] == 2 and summary["shards"] == good["shards"]


def test_a_foreign_parquet_file_in_the_results_is_one_clear_line_and_nothing_is_written(tmp_path, capsys) -> None:
    dataset = tmp_path / "ds"
    build([sample_record()], dataset)
    foreign = dataset / RESULTS_DIR / "foreign.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"]}), foreign)
    before = _tree(dataset)
    capsys.readouterr()
    code = main(["build", str(FIXTURES / "valid" / "cpu_pass.json"), "--out", str(dataset)])
    assert code != 0 and _tree(dataset) == before
    assert "foreign.parquet: not a file of this dataset (no 'record_id' column)" in _one_line(capsys)


def test_a_data_latest_that_is_a_file_is_one_clear_line_and_nothing_is_written(tmp_path, capsys) -> None:
    dataset = tmp_path / "ds"
    (dataset / "data").mkdir(parents=True)
    (dataset / "data" / "latest").write_text("not a folder\n")
    before = _tree(dataset)
    capsys.readouterr()
    code = main(["build", str(FIXTURES / "valid" / "cpu_pass.json"), "--out", str(dataset)])
    assert code != 0 and _tree(dataset) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no stage left beside it
    line = _one_line(capsys)
    assert f"{dataset / 'data' / 'latest'}: a file where a folder must be; nothing was written" in line
