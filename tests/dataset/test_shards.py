"""The latest view and the family index in shards by a prefix of the model's hash, split once a shard passes its
size: what a build writes, which shard a model is in, and the sharded folder read back by pandas and DuckDB."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pipeline.dataset import (
    FAMILIES_DIR,
    LATEST_DIR,
    SUMMARY_FILE,
    build,
    family_index_paths,
    read_latest,
    read_summary,
)
from pipeline.errors import DatasetError
from tests.support.families import family_rows, read_families
from tests.support.records import sample_failure, sample_record

shards = importlib.import_module("pipeline.dataset.shards")


def _batch(n: int, day: int, *, offset: int = 0) -> list[dict]:
    stamp = f"2026-11-{day:02d}T09:00:00+00:00"
    return [sample_record(model_id=f"org/model-{offset + i:03d}", run={"started_at": stamp, "finished_at": stamp})
            for i in range(n)]  # fmt: skip


def _hash(model_id: str) -> str:
    return hashlib.sha256(model_id.lower().encode()).hexdigest()


def _key(row: dict) -> tuple[str, str, str]:
    return (row["model_id"], row["task"], row["hardware"])


def test_family_index_paths_names_every_shard_or_the_shard_of_a_model() -> None:
    assert family_index_paths(["README.md", "data/latest/all.parquet"]) == []
    one = ["data/families/all.parquet", "data/latest/all.parquet"]
    assert family_index_paths(one) == family_index_paths(one, "org/any") == ["data/families/all.parquet"]
    digest = _hash("Org/Model")
    # A split of "all", then a split of one child: names of two depths, prefix-free.
    names = [d for d in "0123456789abcdef" if d != digest[0]] + [digest[0] + d for d in "0123456789abcdef"]
    listing = [f"{FAMILIES_DIR}/{n}.parquet" for n in names] + ["data/families/notes.txt", "data/families/x.parquet"]
    assert len(family_index_paths(listing)) == 31  # every shard, nothing else
    assert family_index_paths(listing, "org/model") == [f"{FAMILIES_DIR}/{digest[:2]}.parquet"]  # without case
    # A child the split left empty has no file: the model has no family row.
    missing = [p for p in listing if p != f"{FAMILIES_DIR}/{digest[:2]}.parquet"]
    assert family_index_paths(missing, "org/model") == []
    stranger = ("0" if digest[0] != "0" else "1") + "1"  # of no split the model's hash goes through
    with pytest.raises(DatasetError, match="incomplete"):
        family_index_paths([f"{FAMILIES_DIR}/{stranger}.parquet"], "org/model")


def test_a_shard_past_its_size_is_split_in_sixteen_and_reads_as_one_shard_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, split = tmp_path / "one", tmp_path / "split"
    first = _batch(60, 20) + [sample_failure(model_id="acme/broken")]
    build(first, one)
    assert sorted(p.name for p in (one / LATEST_DIR).iterdir()) == ["all.parquet"]
    size = (one / LATEST_DIR / "all.parquet").stat().st_size
    monkeypatch.setattr(shards, "LATEST_SHARD_BYTES", size // 4)
    build(first, split)
    names = sorted(p.stem for p in (split / LATEST_DIR).glob("*.parquet"))
    assert len(names) >= 16 and "all" not in names and not (split / FAMILIES_DIR / "all.parquet").exists()
    assert all(not b.startswith(a) for a, b in zip(names, names[1:], strict=False)), "prefix-free"
    assert sorted(p.stem for p in (split / FAMILIES_DIR).glob("*.parquet")) == names
    # Every row of a model is in the shard its hash names, and its family rows beside it.
    for name in names:
        for row in pd.read_parquet(split / LATEST_DIR / f"{name}.parquet").itertuples():
            assert _hash(row.model_id).startswith(name)
        fam = pd.read_parquet(split / FAMILIES_DIR / f"{name}.parquet")
        assert all(_hash(m).startswith(name) for m in fam.model_id)
    assert sorted(read_latest(split), key=_key) == sorted(read_latest(one), key=_key)
    families = read_families(split)
    assert families is not None and sorted(families, key=_key) == family_rows(read_latest(one))
    summary = read_summary(split)
    assert summary is not None and summary["shards"] == names
    card = yaml.safe_load((split / "README.md").read_text().split("---")[1])
    configs = {c["config_name"]: c["data_files"] for c in card["configs"]}
    assert configs["latest"] == "data/latest/*.parquet" and configs["families"] == "data/families/*.parquet"

    # A later build of two models rewrites their shards only; the others stay byte for byte.
    before = {p.name: p.read_bytes() for p in (split / LATEST_DIR).glob("*.parquet")}
    result = build(_batch(2, 21, offset=5), split, page=False)
    touched = {shards.model_shard(f"org/model-{i:03d}", names) for i in (5, 6)}
    assert {Path(p).stem for p in result.latest_files} == touched
    assert sorted(result.written) == sorted(
        [f"{LATEST_DIR}/{n}.parquet" for n in touched] + [f"{FAMILIES_DIR}/{n}.parquet" for n in touched]
    )
    after = {p.name: p.read_bytes() for p in (split / LATEST_DIR).glob("*.parquet")}
    assert {n for n in after if after[n] != before[n]} == {f"{n}.parquet" for n in touched}
    families = read_families(split)
    assert families is not None and sorted(families, key=_key) == family_rows(read_latest(split))


def test_a_sharded_folder_reads_back_in_pandas_and_duckdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    monkeypatch.setattr(shards, "LATEST_SHARD_BYTES", 10_000)
    out = tmp_path / "ds"
    build(_batch(40, 20) + [sample_failure(model_id="acme/broken")], out)
    assert len(list((out / FAMILIES_DIR).glob("*.parquet"))) > 1
    latest = pd.read_parquet(out / LATEST_DIR, dtype_backend="pyarrow")
    families = pd.read_parquet(out / FAMILIES_DIR, dtype_backend="pyarrow")
    assert len(latest) == len(families) == 41 and set(latest.model_id) == set(families.model_id)
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/{LATEST_DIR}/*.parquet')").fetchall() == [(41,)]
    status = duckdb.sql(
        f"SELECT status FROM read_parquet('{out}/{FAMILIES_DIR}/*.parquet') WHERE model_id = 'acme/broken'"
    ).fetchall()
    assert status == [("fail",)]
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["total"] == 41 and summary["shards"] == sorted(p.stem for p in (out / LATEST_DIR).glob("*.parquet"))
