"""data/warm_checks.parquet: the newest check per bundle, read back by pandas and DuckDB, a retry adds nothing, an
emulated check never replaces a real machine's, and an old or damaged file is read safely."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.dataset import WARM_CHECKS_FILE, add_warm_checks, read_warm_checks, warm_key, warm_queue_paths
from pipeline.errors import DatasetError
from pipeline.records import WARM_FIELDS
from tests.support.records import sample_warm_check


def test_round_trip_with_pandas_and_duckdb(tmp_path: Path) -> None:
    checks = [
        sample_warm_check(),
        sample_warm_check(model_id="acme/other", sha256="a" * 64, status="missed", hits=1, misses=2),
        sample_warm_check(model_id="acme/refused", sha256="b" * 64, status="refused", hits=None, misses=None,
                          first_call_s=None, runner=None, message="the key differs in config_shapes"),
    ]  # fmt: skip
    assert add_warm_checks(tmp_path, checks) == 3
    assert read_warm_checks(tmp_path) == sorted(checks, key=warm_key)
    import pandas as pd

    frame = pd.read_parquet(tmp_path / WARM_CHECKS_FILE)
    assert list(frame.columns) == list(WARM_FIELDS) and len(frame) == 3
    assert frame.set_index("model_id").loc["acme/other", "misses"] == 2
    assert str(frame["hits"].dtype) in ("Int64", "float64", "int64")
    duckdb = pytest.importorskip("duckdb")
    path = str(tmp_path / WARM_CHECKS_FILE)
    verified = duckdb.sql(f"select model_id, hits from read_parquet('{path}') where status = 'verified'").fetchall()
    assert verified == [("trncat-demo/tiny-llama", 2)]


def test_newest_wins_a_retry_adds_nothing_and_the_bytes_stay(tmp_path: Path) -> None:
    first = sample_warm_check(status="missed", hits=1, misses=1, checked_at="2026-11-29T08:00:00+00:00")
    assert add_warm_checks(tmp_path, [first]) == 1
    before = (tmp_path / WARM_CHECKS_FILE).read_bytes()
    assert add_warm_checks(tmp_path, [first]) == 0, "a retried publish of the same check"
    assert (tmp_path / WARM_CHECKS_FILE).read_bytes() == before
    newer = sample_warm_check(checked_at="2026-11-29T10:00:00+01:00")  # 09:00 UTC: newer
    older = sample_warm_check(checked_at="2026-11-28T08:00:00Z")
    assert add_warm_checks(tmp_path, [newer, older]) == 1
    (kept,) = read_warm_checks(tmp_path)
    assert kept == newer
    assert add_warm_checks(tmp_path, [newer, newer]) == 0
    # The same time, another verdict: the less flattering one, whatever the order.
    tie = sample_warm_check(checked_at=newer["checked_at"], status="error", hits=None, misses=None)
    assert add_warm_checks(tmp_path, [tie]) == 1 and read_warm_checks(tmp_path)[0]["status"] == "error"
    assert add_warm_checks(tmp_path, [newer]) == 0


def test_an_emulated_check_is_a_key_of_its_own(tmp_path: Path) -> None:
    real = sample_warm_check()
    emulated = sample_warm_check(emulated=True, checked_at="2026-11-30T08:00:00+00:00", status="missed", misses=2)
    assert add_warm_checks(tmp_path, [real, emulated]) == 2
    assert {c["emulated"]: c["status"] for c in read_warm_checks(tmp_path)} == {False: "verified", True: "missed"}
    # The model id's case does not make another key (Hub ids are case-insensitive).
    assert add_warm_checks(tmp_path, [sample_warm_check(model_id="TRNCAT-demo/Tiny-Llama")]) == 0


def test_an_invalid_check_never_reaches_the_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="invalid warm check"):
        add_warm_checks(tmp_path, [sample_warm_check(misses=3)])
    assert not (tmp_path / WARM_CHECKS_FILE).exists()


def test_old_and_damaged_files_are_read_safely(tmp_path: Path) -> None:
    path = tmp_path / WARM_CHECKS_FILE
    path.parent.mkdir(parents=True)
    good, bad = sample_warm_check(), sample_warm_check(model_id="acme/x", misses=-1)
    # An older file: no `first_call_s` column, an extra column, and one row that is no valid check.
    rows = [{k: v for k, v in c.items() if k != "first_call_s"} | {"note": "old"} for c in (good, bad)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert read_warm_checks(tmp_path) == [good | {"first_call_s": None}]
    # Adding to it rewrites it in the current columns, the bad row left out.
    assert add_warm_checks(tmp_path, [sample_warm_check(model_id="acme/new")]) == 1
    assert [c["model_id"] for c in read_warm_checks(tmp_path)] == ["acme/new", "trncat-demo/tiny-llama"]
    assert pq.read_schema(path).names == list(WARM_FIELDS)
    path.write_bytes(b"PAR1 not parquet")
    with pytest.raises(DatasetError, match="unreadable"):
        read_warm_checks(tmp_path)
    assert read_warm_checks(tmp_path / "nowhere") == []


def test_what_the_warm_queue_reads_of_a_listing() -> None:
    listing = ["README.md", "data/latest/00.parquet", "data/results/x.parquet", WARM_CHECKS_FILE, "scripts/a/b/run.py"]
    assert warm_queue_paths(listing) == ["data/latest/00.parquet", WARM_CHECKS_FILE]
