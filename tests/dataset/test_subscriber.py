"""The published dataset as a subscriber meets it, through the local hub and the real clients.

The dataset's main holds a folder written by two earlier builds (with a rankings snapshot and an exclusion), then
new runs are published as a PR, which is merged. Every config must then load with ``datasets``, ``pandas`` over
``hf://``, ``snapshot_download`` and DuckDB, with one set of column types; the card's examples run as pasted; the
Space's feed is valid Atom and says what the PR description said.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.dataset import build, refresh_card, write_exclusions, write_rankings
from pipeline.publish import publish
from pipeline.records import COLUMN_NAMES, LAYOUT_VERSION, arrow_schema
from pipeline.space import ATOM, FEED_FILE, publish_space
from tests.support.localhub_fixtures import repo_file
from tests.support.records import sample_failure, sample_record, sample_serving

REPO, SPACE = "trncat/results", "trncat/catalog"
#: The configs a published card declares.
CONFIGS = {"latest", "results", "rankings", "exclusions", "changes", "families", "serving", "inferencex"}


def _first_main(folder: Path) -> dict[str, Path]:
    """The files of the dataset's main before the PR: two builds (a fail, and a pass passing again with a newer
    toolchain), a rankings snapshot and an exclusion."""
    fail = sample_failure(model_id="acme/old-fail", cores=2)
    fail["attempts"] = [{"cores": 1, "status": "fail", "stage": "compile", "code": "ncc_evrf001"}]
    build([fail, sample_record(model_id="acme/old-pass")], folder, page=False)
    later = {"started_at": "2026-11-29T10:00:00+00:00", "finished_at": "2026-11-29T10:01:13+00:00"}
    build([sample_record(model_id="acme/old-pass", run=later, versions={"neuronx_cc": "2.22.0"})], folder, page=False)
    snapshot = [
        {
            "date": dt.date(2026, 11, 28),
            "task": "text-generation",
            "view": "trending",
            "rank": 1,
            "model_id": "acme/old-pass",
        }
    ]
    write_rankings(snapshot, folder, date=dt.date(2026, 11, 28), task="text-generation", view="trending")
    gated = {"model_id": "acme/old-gated", "task": "text-generation", "reason": "gated: accept the conditions"}
    write_exclusions([{**gated, "kind": "gated"}], folder)
    refresh_card(folder)  # as a publish of discovery's files does
    return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}


def _new_runs() -> list[dict[str, Any]]:
    """A new model, and a regression of the dataset's passing model with a newer toolchain."""
    late = {"started_at": "2026-11-30T10:00:00+00:00", "finished_at": "2026-11-30T10:01:00+00:00"}
    new = sample_record(model_id="acme/new-pass", run=late)
    new["attempts"] = [{"cores": 1, "status": "fail", "stage": "oom", "code": "oom"}]
    new["cores"], new["threads"] = 2, 2
    regressed = sample_failure(model_id="acme/old-pass", run=late, versions={"neuronx_cc": "2.23.0"})
    return [new, regressed, sample_serving(device="neuron")]


@pytest.fixture
def published(localhub: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The dataset after the two publishes (PR merged) and the Space rebuilt from its main."""
    import datasets

    # datasets reads HF_ENDPOINT once, at import (a reader's fresh process gets it from the environment).
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", localhub.url)
    monkeypatch.setattr(
        datasets.config, "HUB_DATASETS_URL", localhub.url + "/datasets/{repo_id}/resolve/{revision}/{path}"
    )
    localhub.store.create_repo(REPO, repo_type="dataset")
    files = _first_main(tmp_path / "main")
    localhub.store.commit_files(REPO, files, message="the first publishes", repo_type="dataset")
    result = publish(_new_runs(), repo=REPO, hub=localhub.client, space=SPACE)
    assert result.pr_num == 1
    localhub.client.merge(REPO, 1, repo_type="dataset")
    space = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert space.published and "feed.xml" in space.changed
    return {"result": result, "space": space}


def _configs(card: str) -> dict[str, str]:
    meta = yaml.safe_load(card.split("---")[1])
    return {c["config_name"]: c["data_files"] for c in meta["configs"]}


def test_every_config_loads_with_one_column_set_across_publishes(
    published: dict[str, Any], localhub: Any, tmp_path: Path
) -> None:
    import datasets
    import pandas as pd
    from huggingface_hub import snapshot_download

    folder = Path(snapshot_download(REPO, repo_type="dataset", cache_dir=tmp_path / "snap"))
    configs = _configs((folder / "README.md").read_text(encoding="utf-8"))
    assert set(configs) == CONFIGS
    for path in sorted((folder / "data/results").glob("*.parquet")):
        assert pq.read_schema(path).remove_metadata() == arrow_schema(), path.name
    assert len(list((folder / "data/results").glob("*.parquet"))) == 3  # two before, one new: none lost

    loaded = {
        name: datasets.load_dataset(REPO, name, split="train", cache_dir=str(tmp_path / "ds-cache")) for name in configs
    }
    results, latest = loaded["results"], loaded["latest"]
    assert results.column_names == list(COLUMN_NAMES)
    assert latest.column_names == [*COLUMN_NAMES, "history"]  # latest adds only the history
    assert results.num_rows == 5 and set(results["layout_version"]) == {LAYOUT_VERSION}
    attempts = results.features["attempts"]
    assert isinstance(attempts, datasets.List) and set(attempts.feature) == {"cores", "status", "stage", "code"}
    assert latest.features["history"].feature["finished_at"] == datasets.Value("timestamp[us, tz=UTC]")
    assert loaded["rankings"].features["date"] == datasets.Value("date32")
    assert set(loaded["changes"]["kind"]) == {"new_model", "new_pass", "new_failure", "regression"}
    old = [r for r in latest if r["model_id"] == "acme/old-fail"][0]
    assert old["attempts"] == [{"cores": 1, "status": "fail", "stage": "compile", "code": "ncc_evrf001"}]

    frame = pd.read_parquet(f"hf://datasets/{REPO}/data/latest/", dtype_backend="pyarrow")
    assert str(frame["cores"].dtype) == "int64[pyarrow]" and str(frame["threads"].dtype) == "int64[pyarrow]"
    regressed = frame[frame.model_id == "acme/old-pass"].iloc[0]
    history = regressed["history"]
    assert [h["neuronx_cc_version"] for h in history] == ["2.22.0", "2.21.0"]
    assert loaded["serving"].num_rows == 4 and loaded["inferencex"].num_rows == 4  # one row per point
    assert loaded["inferencex"].features["median_intvty"] == datasets.Value("float64")
    serving = pd.read_parquet(f"hf://datasets/{REPO}/data/serving_points.parquet", dtype_backend="pyarrow")
    assert list(serving["concurrency"]) == [1, 2, 4, 8] and set(serving["tool"]) == {"guidellm"}
    inferencex = pd.read_parquet(f"hf://datasets/{REPO}/data/inferencex.parquet")
    assert set(inferencex["hw"]) == {"trn2"} and list(inferencex["conc"]) == [1, 2, 4, 8]
    rankings = pd.read_parquet(f"hf://datasets/{REPO}/data/rankings/")
    assert rankings["date"].iloc[0] == dt.date(2026, 11, 28)


def test_duckdb_reads_the_nested_columns(published: dict[str, Any], tmp_path: Path) -> None:
    from huggingface_hub import snapshot_download

    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    folder = Path(snapshot_download(REPO, repo_type="dataset", cache_dir=tmp_path / "snap"))
    rows = duckdb.sql(
        f"SELECT model_id, h.status FROM read_parquet('{folder}/data/latest/*.parquet'), UNNEST(history) AS t(h)"
    ).fetchall()
    assert ("acme/old-pass", "pass") in rows
    points = duckdb.sql(
        f"SELECT hw, conc, median_intvty FROM read_parquet('{folder}/data/inferencex.parquet') ORDER BY conc"
    ).fetchall()
    assert [(hw, conc) for hw, conc, _ in points] == [("trn2", c) for c in (1, 2, 4, 8)]


def test_the_card_examples_run_when_pasted(published: dict[str, Any], localhub: Any) -> None:
    card = repo_file(localhub.store, REPO, "README.md", repo_type="dataset").decode()
    assert f"This is the dataset `{REPO}`" in card and f"https://huggingface.co/spaces/{SPACE}" in card
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert len(blocks) == 3  # the latest view, the results' nested column, the serving points in InferenceX's keys
    printed: list[str] = []
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "<card>", "exec"), {})  # noqa: S102 - our own card, as a reader pastes it
        assert out.getvalue().strip()
        printed.append(out.getvalue())
    assert "acme/new-pass" in printed[0] and "List(" in printed[1] and "trn2" in printed[2]


def test_the_card_sql_runs_in_duckdb(published: dict[str, Any], localhub: Any, tmp_path: Path) -> None:
    from huggingface_hub import snapshot_download

    card = repo_file(localhub.store, REPO, "README.md", repo_type="dataset").decode()
    [sql] = re.findall(r"```sql\n(.*?)```", card, flags=re.S)
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    # DuckDB reads hf:// through its httpfs extension, which it downloads on first use (no network here): the
    # card's query runs as pasted on a local copy of the repo instead.
    prefix = f"hf://datasets/{REPO}/"
    assert prefix in sql
    folder = Path(snapshot_download(REPO, repo_type="dataset", cache_dir=tmp_path / "snap"))
    rows = duckdb.sql(sql.replace(prefix, f"{folder}/").strip().rstrip(";")).fetchall()
    assert rows and all(len(r) == 4 for r in rows)


def _atom(text: str) -> ET.Element:
    """Parse the feed and check what RFC 4287 requires of a feed and of each entry (section 4.1)."""
    root = ET.fromstring(text)
    ns = {"a": ATOM}
    assert root.tag == f"{{{ATOM}}}feed"
    for tag in ("id", "title", "updated"):
        assert len(root.findall(f"a:{tag}", ns)) == 1, tag
    assert root.find("a:author/a:name", ns) is not None
    assert root.find("a:link[@rel='self']", ns) is not None
    for entry in root.findall("a:entry", ns):
        for tag in ("id", "title", "updated"):
            assert len(entry.findall(f"a:{tag}", ns)) == 1, tag
        dt.datetime.fromisoformat(entry.findtext("a:updated", namespaces=ns).replace("Z", "+00:00"))
        assert entry.find("a:link[@rel='alternate']", ns).get("href")
    return root


def test_the_feed_is_atom_and_says_what_the_pr_said(published: dict[str, Any], localhub: Any) -> None:
    feed = _atom(repo_file(localhub.store, SPACE, FEED_FILE, repo_type="space").decode())
    ns = {"a": ATOM}
    entries = {
        (e.find("a:category", ns).get("term"), e.findtext("a:title", namespaces=ns).split(": ", 1)[1].split(" (")[0])
        for e in feed.findall("a:entry", ns)
    }
    description = published["result"].description
    sections = dict(re.findall(r"### (.+?) \(\d+\)\n((?:- .*\n?)*)", description))
    said = {
        (kind, model)
        for kind, title in (("new_model", "New models"), ("new_pass", "New passes"), ("new_failure", "New failures"))
        + (("regression", "Regressions"),)
        for model in re.findall(r"- `(.+?)`", sections[title].replace("\\", ""))
    }
    assert said == {("new_model", "acme/new-pass"), ("new_pass", "acme/new-pass"), ("regression", "acme/old-pass")}
    first = {("new_model", "acme/old-fail"), ("new_failure", "acme/old-fail")}
    first |= {("new_model", "acme/old-pass"), ("new_pass", "acme/old-pass")}
    assert entries == said | first  # the PR's changes, and those of the builds before it
    regression = next(e for e in feed.findall("a:entry", ns) if e.find("a:category", ns).get("term") == "regression")
    summary = regression.findtext("a:summary", namespaces=ns)
    assert "neuronx-cc 2.23.0" in summary and "passed with" in summary and "neuronx-cc 2.22.0" in summary
    link = regression.find("a:link", ns).get("href")
    assert link.startswith(f"https://huggingface.co/spaces/{SPACE}#") and "m=acme%2Fold-pass" in link


def _rerun(model_id: str, minute: int) -> dict[str, Any]:
    """A new pass of a model that already passes: a new results row that changes nothing."""
    run = {"started_at": f"2026-12-01T10:{minute:02d}:00+00:00", "finished_at": f"2026-12-01T10:{minute:02d}:30+00:00"}
    record = sample_record(model_id=model_id, run=run)
    record["cores"], record["threads"] = 2, 2
    return record


def test_every_config_loads_in_every_reader_after_publishes_that_change_nothing(
    published: dict[str, Any], localhub: Any, tmp_path: Path
) -> None:
    """Issue 37: a publish that changes no key's kind once wrote a 0-row changes file, which ``datasets`` refuses
    (``ArrowInvalid: BatchSize must be greater than 0``). Two such publishes, then every config of the card in
    datasets, pandas, DuckDB and Polars."""
    import datasets
    import pandas as pd
    from huggingface_hub import snapshot_download

    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not installed in this environment")
    polars = pytest.importorskip("polars", reason="Polars is not installed in this environment")
    for pr, minute in ((2, 10), (3, 20)):
        result = publish([_rerun("acme/new-pass", minute)], repo=REPO, hub=localhub.client, space=SPACE)
        assert result.pr_num == pr
        localhub.client.merge(REPO, pr, repo_type="dataset")
    folder = Path(snapshot_download(REPO, repo_type="dataset", cache_dir=tmp_path / "snap"))
    assert len(list((folder / "data/results").glob("*.parquet"))) == 5  # each publish added its results file
    changes = sorted((folder / "data/changes").glob("*.parquet"))
    # the first build's and the PR's, none for the second build (a no-op), and one per rerun: a pass measured again
    # on the same stack is a change of kind reproduced (issue 50's repeat-to-verify); never a 0-row file (issue 37)
    assert len(changes) == 4 and all(pq.read_metadata(p).num_rows > 0 for p in changes)
    assert {str(k) for k in pq.read_table(changes[-1]).column("kind").to_pylist()} == {"reproduced"}
    configs = _configs((folder / "README.md").read_text(encoding="utf-8"))
    assert set(configs) == CONFIGS
    for name, pattern in configs.items():
        ds = datasets.load_dataset(REPO, name, split="train", cache_dir=str(tmp_path / "ds-cache"))
        files = sorted(folder.glob(pattern))
        assert files, name
        frames = [pd.read_parquet(p, dtype_backend="pyarrow") for p in files]
        total = sum(len(f) for f in frames)
        assert ds.num_rows == total > 0, name
        glob = f"{folder}/{pattern}"
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', union_by_name=true)").fetchall() == [(total,)]
        assert polars.scan_parquet(glob).select(polars.len()).collect().item() == total, name
    families = polars.read_parquet(folder / "data/families/all.parquet")
    assert "acme/new-pass" in families["model_id"].to_list()
