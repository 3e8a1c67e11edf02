"""Publishing into a dataset whose latest view outgrew one shard: the one shard splits in one PR, a later
publish reads and rewrites only its models' shards (counted in requests and files, never timed), and every
config still loads in ``datasets``, pandas, DuckDB and Polars."""

from __future__ import annotations

import importlib
import io
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from pipeline.dataset import FAMILIES_DIR, LATEST_DIR, build, family_index_paths, read_summary
from pipeline.publish import publish
from tests.support.localhub_fixtures import repo_file
from tests.support.records import sample_failure, sample_record

REPO = "trncat/results"
shards = importlib.import_module("pipeline.dataset.shards")


def _batch(n: int, day: int, *, offset: int = 0) -> list[dict]:
    stamp = f"2026-11-{day:02d}T09:00:00+00:00"
    return [sample_record(model_id=f"org/model-{offset + i:03d}", run={"started_at": stamp, "finished_at": stamp})
            for i in range(n)]  # fmt: skip


def _tree(store: Any, revision: str) -> dict[str, str]:
    repo = store.get(REPO, repo_type="dataset")
    return {path: entry.get("sha256") or entry.get("oid", "") for path, entry in repo.tree(revision).items()}


@pytest.fixture
def one_file_dataset(localhub: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The local hub's main holds a dataset of one shard (latest and families ``all.parquet``) of 41 models, and a shard
    now splits at a quarter of that file's size."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", localhub.url)
    monkeypatch.setattr(
        datasets.config, "HUB_DATASETS_URL", localhub.url + "/datasets/{repo_id}/resolve/{revision}/{path}"
    )
    seeded = tmp_path / "seed"
    build(_batch(40, 20) + [sample_failure(model_id="acme/broken")], seeded)
    assert (seeded / FAMILIES_DIR / "all.parquet").is_file() and (seeded / LATEST_DIR / "all.parquet").is_file()
    files = {p.relative_to(seeded).as_posix(): p for p in seeded.rglob("*") if p.is_file()}
    localhub.store.create_repo(REPO, repo_type="dataset")
    localhub.store.commit_files(REPO, files, message="one file", repo_type="dataset")
    monkeypatch.setattr(shards, "LATEST_SHARD_BYTES", (seeded / LATEST_DIR / "all.parquet").stat().st_size // 4)
    localhub.client.whoami()  # huggingface_hub's once-per-process requests are not the publish's
    return {"hub": localhub}


def test_the_one_shard_splits_in_one_pr_and_every_reader_loads_it(
    one_file_dataset: dict[str, Any], tmp_path: Path
) -> None:
    import datasets
    from huggingface_hub import snapshot_download

    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    polars = pytest.importorskip("polars", reason="Polars is not installed in this environment")
    localhub = one_file_dataset["hub"]
    store = localhub.store
    result = publish(_batch(1, 29, offset=100), repo=REPO, hub=localhub.client)
    assert result.published and result.pr_num == 1
    assert f"{LATEST_DIR}/all.parquet" in result.files and f"{FAMILIES_DIR}/all.parquet" in result.files  # deleted
    pr = _tree(store, "refs/pr/1")
    assert f"{LATEST_DIR}/all.parquet" not in pr and f"{FAMILIES_DIR}/all.parquet" not in pr
    latest = sorted(p for p in pr if p.startswith(f"{LATEST_DIR}/"))
    families = sorted(p for p in pr if p.startswith(f"{FAMILIES_DIR}/"))
    assert len(latest) >= 16 and [p.rsplit("/", 1)[1] for p in latest] == [p.rsplit("/", 1)[1] for p in families]
    localhub.client.merge(REPO, 1, repo_type="dataset")

    folder = Path(snapshot_download(REPO, repo_type="dataset", cache_dir=tmp_path / "snap"))
    card = yaml.safe_load((folder / "README.md").read_text(encoding="utf-8").split("---")[1])
    configs = {c["config_name"]: c["data_files"] for c in card["configs"]}
    assert configs["latest"] == f"{LATEST_DIR}/*.parquet" and configs["families"] == f"{FAMILIES_DIR}/*.parquet"
    for name in ("latest", "families"):
        loaded = datasets.load_dataset(REPO, name, split="train", cache_dir=str(tmp_path / "ds-cache"))
        assert loaded.num_rows == 42, name
        glob = f"{folder}/{configs[name]}"
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}')").fetchall() == [(42,)]
        assert polars.scan_parquet(glob).select(polars.len()).collect().item() == 42
    frame = pd.read_parquet(f"hf://datasets/{REPO}/{LATEST_DIR}/", dtype_backend="pyarrow")
    assert len(frame) == 42 and "org/model-100" in set(frame.model_id)
    summary = read_summary(folder)
    assert summary is not None and "all" not in summary["shards"]


def test_a_publish_of_one_model_reads_and_rewrites_its_shards_only(one_file_dataset: dict[str, Any]) -> None:
    localhub = one_file_dataset["hub"]
    hub, store, server = localhub.client, localhub.store, localhub.server
    assert publish(_batch(1, 29, offset=100), repo=REPO, hub=hub).pr_num == 1  # the split
    hub.merge(REPO, 1, repo_type="dataset")
    before = _tree(store, "main")
    listing = list(before)
    model = "org/model-007"
    [family_shard] = family_index_paths(listing, model)
    shard = family_shard.rsplit("/", 1)[1]

    mark, sent = len(server.requests), len(server.sent_bytes)
    stamp = "2026-11-30T09:00:00+00:00"
    result = publish([sample_failure(model_id=model, run={"started_at": stamp, "finished_at": stamp})],
                     repo=REPO, hub=hub)  # fmt: skip
    requests = server.requests[mark:]
    assert result.published and result.pr_num == 2
    fetched = sorted(p.split("/resolve/", 1)[1].split("/", 1)[1] for _, p in requests if "/resolve/" in p)
    assert fetched == [f"{LATEST_DIR}/{shard}", "data/summary.json"], "its model's shard only; no family file"
    after = _tree(store, "refs/pr/2")
    changed = sorted(p for p in after if before.get(p) != after[p])
    data = [p for p in changed if p.startswith((f"{LATEST_DIR}/", f"{FAMILIES_DIR}/"))]
    assert data == [family_shard, f"{LATEST_DIR}/{shard}"], changed
    assert len([p for p in changed if p.startswith("data/results/")]) == 1 and set(before) <= set(after)
    # head, open PRs, summary, results listing, paths-info, the shard; the card's YAML (a pass became a
    # failure: its counts changed), preupload, LFS batch, four LFS files (results, changes, the shard, its
    # family rows) uploaded and verified, the commit, the open PRs again: the same as with one shard.
    assert len(requests) == 19, requests
    assert sum(server.sent_bytes[sent:]) < 60_000
    rows = pd.read_parquet(io.BytesIO(repo_file(store, REPO, family_shard, revision="refs/pr/2",
                                                                    repo_type="dataset")))  # fmt: skip
    assert rows[rows.model_id == model].status.tolist() == ["fail"]


def test_a_split_dataset_that_lost_its_summary_keeps_its_shards_by_model(one_file_dataset: dict[str, Any]) -> None:
    """Without data/summary.json a publish mirrors the whole latest view; the family shards beside it say the
    shards are named by model, so no model's rows go to a shard named by another rule (two rows of one key)."""
    from pipeline.hub import file_deletions

    localhub = one_file_dataset["hub"]
    hub, store = localhub.client, localhub.store
    assert publish(_batch(1, 29, offset=100), repo=REPO, hub=hub).pr_num == 1  # the split
    hub.merge(REPO, 1, repo_type="dataset")
    hub.commit(REPO, operations_factory=lambda parent: file_deletions(["data/summary.json"]), message="lost",
               repo_type="dataset", parent=hub.head_sha(REPO, repo_type="dataset"))  # fmt: skip
    before = sorted(p for p in _tree(store, "main") if p.startswith(f"{LATEST_DIR}/"))
    stamp = "2026-11-30T09:00:00+00:00"
    result = publish([sample_failure(model_id="org/model-007", run={"started_at": stamp, "finished_at": stamp})],
                     repo=REPO, hub=hub)  # fmt: skip
    assert result.published and "data/summary.json" in result.files
    revision = f"refs/pr/{result.pr_num}"
    tree = _tree(store, revision)
    assert sorted(p for p in tree if p.startswith(f"{LATEST_DIR}/")) == before
    frame = pd.concat(pd.read_parquet(io.BytesIO(repo_file(store, REPO, p, revision=revision, repo_type="dataset")))
                      for p in before)  # fmt: skip
    assert len(frame) == 42 and frame[frame.model_id == "org/model-007"].status.tolist() == ["fail"]


def test_a_publish_of_one_model_refreshes_its_matrix_rows_from_its_shard_only(one_file_dataset: dict[str, Any]) -> None:
    """The stage matrix is incremental (issue 49): a publish of one model's record fetches that model's latest shard
    and data/matrix.parquet (never the whole latest view), rewrites that model's rows and keeps another model's rows
    byte for byte."""
    from pipeline.cli.matrix import matrix_derived
    from pipeline.dataset import MATRIX_FILE, MATRIX_SCHEMA
    from pipeline.queue import matrix_inputs

    localhub = one_file_dataset["hub"]
    hub, store, server = localhub.client, localhub.store, localhub.server
    assert publish(_batch(1, 29, offset=100), repo=REPO, hub=hub, derived=matrix_derived(None)).pr_num == 1
    hub.merge(REPO, 1, repo_type="dataset")
    listing = list(_tree(store, "main"))
    model, other = "org/model-007", "org/model-020"
    shard = family_index_paths(listing, model)[0].rsplit("/", 1)[1]
    assert family_index_paths(listing, other)[0].rsplit("/", 1)[1] != shard

    def rows(revision: str, model_id: str) -> pd.DataFrame:
        data = repo_file(store, REPO, MATRIX_FILE, revision=revision, repo_type="dataset")
        frame = pd.read_parquet(io.BytesIO(data), dtype_backend="pyarrow")
        assert list(frame.columns) == MATRIX_SCHEMA.names and frame.model_id.nunique() == 42
        return frame[frame.model_id == model_id].reset_index(drop=True)

    before = rows("main", model)
    trn2 = (before.item == "compile") & (before.device_class == "trn2")
    assert before[trn2].state.tolist() == ["passing"]  # its passing Trainium2 run
    mark = len(server.requests)
    stamp = "2026-11-30T09:00:00+00:00"
    record = sample_failure(model_id=model, run={"started_at": stamp, "finished_at": stamp})
    result = publish([record], repo=REPO, hub=hub, derived=matrix_derived(None))
    assert result.published and result.pr_num == 2 and MATRIX_FILE in result.files
    fetched = sorted(p.split("/resolve/", 1)[1].split("/", 1)[1] for _, p in server.requests[mark:] if "/resolve/" in p)
    # its shard, the summary and the matrix's one-file inputs (asked for whether or not the repo holds them)
    assert fetched == sorted([f"{LATEST_DIR}/{shard}", "data/summary.json", *matrix_inputs()]), fetched
    assert MATRIX_FILE in matrix_inputs()
    after = rows("refs/pr/2", model)
    failed = after[(after.item == "compile") & (after.device_class == "trn2")]
    assert failed.state.tolist() == ["failing"] and failed.detail.tolist() == [record["failure"]["code"]]
    assert not after.equals(before)
    assert rows("refs/pr/2", other).equals(rows("main", other))


def test_a_warm_publish_refreshes_the_checked_models_matrix_rows_from_their_shards_only(
    one_file_dataset: dict[str, Any],
) -> None:
    """A warm publish has no records, yet its checks' models are refreshed in the matrix in the same PR (issue 49):
    their latest shards are mirrored (the Derived's models), no other, and another model's rows stay as they were."""
    from pipeline.cli.matrix import matrix_derived
    from pipeline.dataset import MATRIX_FILE, WARM_CHECKS_FILE
    from pipeline.publish import warm_derived
    from pipeline.queue import matrix_inputs
    from tests.support.localhub_fixtures import repo_file
    from tests.support.records import sample_warm_check

    localhub = one_file_dataset["hub"]
    hub, store, server = localhub.client, localhub.store, localhub.server
    assert publish(_batch(1, 29, offset=100), repo=REPO, hub=hub, derived=matrix_derived(None)).pr_num == 1
    hub.merge(REPO, 1, repo_type="dataset")
    model, other = "org/model-007", "org/model-020"
    shard = family_index_paths(list(_tree(store, "main")), model)[0].rsplit("/", 1)[1]

    def rows(revision: str, model_id: str) -> pd.DataFrame:
        frame = pd.read_parquet(io.BytesIO(repo_file(store, REPO, MATRIX_FILE, revision=revision, repo_type="dataset")))
        return frame[frame.model_id == model_id].reset_index(drop=True)

    mark = len(server.requests)
    check = sample_warm_check(model_id=model, checked_at="2026-11-30T09:00:00+00:00")
    result = publish([], repo=REPO, hub=hub, derived=matrix_derived(None, also=warm_derived([check])))
    assert result.pr_num == 2 and {MATRIX_FILE, WARM_CHECKS_FILE} <= set(result.files)
    fetched = sorted(p.split("/resolve/", 1)[1].split("/", 1)[1] for _, p in server.requests[mark:] if "/resolve/" in p)
    assert fetched == sorted({f"{LATEST_DIR}/{shard}", "data/summary.json", *matrix_inputs()}), fetched
    after = rows("refs/pr/2", model)
    assert after[(after.item == "warm_start") & (after.device_class == "trn2")].state.tolist() == ["passing"]
    assert rows("main", model)[(after.item == "warm_start") & (after.device_class == "trn2")].state.tolist() == [
        "untested"
    ]
    assert rows("refs/pr/2", other).equals(rows("main", other))
