"""Publishing to the (local) Hub as one reviewed PR: idempotent, onto the open bot PR, robust to faults."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from pipeline import constants
from pipeline.cli import main
from pipeline.errors import HubServerError
from pipeline.publish import publish
from tests.support.localhub_fixtures import repo_file, repo_history
from tests.support.records import sample_community, sample_failure, sample_record

REPO = "trncat/results"


def _records() -> list[dict]:
    return [sample_record(), sample_failure(model_id="acme/broken")]


def _later(**overrides: object) -> dict:
    return sample_record(
        run={"started_at": "2026-11-29T09:00:00+00:00", "finished_at": "2026-11-29T09:05:00+00:00"}, **overrides
    )


def _tree(store, revision: str) -> dict[str, str]:
    repo = store.get(REPO, repo_type="dataset")
    return {path: entry.get("sha256") or entry.get("oid", "") for path, entry in repo.tree(revision).items()}


def _write_records(folder: Path, records: list[dict]) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    for index, record in enumerate(records):
        (folder / f"r{index}.json").write_text(json.dumps(record))
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.fixture
def dataset_repo(localhub):
    localhub.store.create_repo(REPO, repo_type="dataset")
    return localhub


def test_publish_opens_one_pr_and_is_idempotent(dataset_repo) -> None:
    hub, store = dataset_repo.client, dataset_repo.store
    main_before = _tree(store, "main")
    first = publish(_records(), repo=REPO, hub=hub)
    assert first.published and first.pr_num == 1
    pr_tree = _tree(store, "refs/pr/1")
    assert _tree(store, "main") == main_before, "main must only change when a maintainer merges"
    assert any(p.startswith("data/results/") for p in pr_tree)
    assert any(p.startswith("data/latest/") for p in pr_tree)
    assert "scripts/acme/broken/run.py" in pr_tree and "README.md" in pr_tree
    latest = pd.concat(
        pd.read_parquet(io.BytesIO(repo_file(store, REPO, p, revision="refs/pr/1", repo_type="dataset")))
        for p in pr_tree
        if p.startswith("data/latest/")
    )
    assert sorted(latest.model_id) == ["acme/broken", "trncat-demo/tiny-llama"]
    assert "### New models (2)" in first.description

    commits = len(repo_history(store, REPO, revision="refs/pr/1", repo_type="dataset"))
    again = publish(_records(), repo=REPO, hub=hub)
    assert not again.published and again.files == []
    assert len(repo_history(store, REPO, revision="refs/pr/1", repo_type="dataset")) == commits
    assert _tree(store, "refs/pr/1") == pr_tree

    update = publish([_later(metrics={"decode_tokens_per_s": 123.0})], repo=REPO, hub=hub)
    assert update.published and update.pr_num == 1, "an open bot PR gets the commit; no second PR"
    assert len(repo_history(store, REPO, revision="refs/pr/1", repo_type="dataset")) == commits + 1
    results = [p for p in _tree(store, "refs/pr/1") if p.startswith("data/results/")]
    assert len(results) == 2
    assert dataset_repo.server.count_requests(r"/discussions/1/comment", "POST") == 1


def test_a_closed_bot_pr_leads_to_a_new_one_and_regressions_are_named(dataset_repo) -> None:
    hub, store = dataset_repo.client, dataset_repo.store
    assert publish([sample_record()], repo=REPO, hub=hub).pr_num == 1
    regression = sample_failure(
        versions={"neuronx_cc": "2.22.0"},
        run={"started_at": "2026-11-29T09:00:00+00:00", "finished_at": "2026-11-29T09:05:00+00:00"},
    )
    result = publish([regression], repo=REPO, hub=hub)
    assert result.pr_num == 1
    assert "### Regressions (1)" in result.description
    assert (
        "passed with neuronx-cc 2.21.0" in result.description and "fails with neuronx-cc 2.22.0" in result.description
    )
    # once the maintainers close it, the next publish opens a new PR (from main, which never got those rows)
    store.set_discussion_status(REPO, 1, "closed", repo_type="dataset")
    assert publish([regression], repo=REPO, hub=hub).pr_num == 2


def test_dry_run_changes_nothing(dataset_repo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "results"
    _write_records(folder, _records())
    before = _tree(dataset_repo.store, "main")
    assert main(["publish", str(folder), "--repo", REPO, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: would commit" in out and "data/latest/" in out
    assert _tree(dataset_repo.store, "main") == before
    assert dataset_repo.server.count_requests(r"/commit/", "POST") == 0


def test_transient_429_and_500_are_retried(dataset_repo, tmp_path: Path) -> None:
    fault = dataset_repo.server.inject(r"/api/datasets/trncat/results/commit/", "POST", statuses=(429, 500))
    result = publish(_records(), repo=REPO, hub=dataset_repo.client)
    assert result.published and fault.hits == 2
    assert len(dataset_repo.sleeps) >= 2


def test_moved_parent_is_rebuilt_on_the_new_head(dataset_repo) -> None:
    hub, store, server = dataset_repo.client, dataset_repo.store, dataset_repo.server
    publish([sample_record()], repo=REPO, hub=hub)  # PR #1 exists; the next publish pushes onto it
    server.move_branch_before_commit(REPO, repo_type="dataset", branch="refs/pr/1", count=1)
    result = publish([_later()], repo=REPO, hub=hub)
    assert result.published and result.pr_num == 1
    tree = _tree(store, "refs/pr/1")
    assert len([p for p in tree if p.startswith("data/results/")]) == 2


def test_a_hub_that_stays_down_fails_with_one_line_and_local_results_are_intact(
    dataset_repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "results"
    before = _write_records(folder, _records())
    dataset_repo.server.inject(r"/commit/", "POST", statuses=(500,), forever=True)
    with pytest.raises(HubServerError):
        publish(_records(), repo=REPO, hub=dataset_repo.client)
    from pipeline import constants

    monkeypatch.setattr(constants, "HF_ENDPOINT", dataset_repo.url)
    monkeypatch.setattr(constants, "HF_TOKEN", "localhub-token")
    from pipeline.hub import Hub

    monkeypatch.setitem(Hub.__init__.__kwdefaults__, "sleep", lambda seconds: None)  # no real back-off waits
    code = main(["-q", "publish", str(folder), "--repo", REPO])
    assert code != 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    errors = [line for line in err if line.startswith("error: ")]
    assert len(errors) == 1 and "500" in errors[0], err
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()} == before
    assert not any(p.startswith("data/") for p in _tree(dataset_repo.store, "main"))


def test_publish_to_a_local_folder(tmp_path: Path) -> None:
    from pipeline.publish import publish_to_folder

    out = tmp_path / "ds"
    first = publish_to_folder(_records(), out=out)
    assert first.files and (out / "README.md").is_file()
    assert publish_to_folder(_records(), out=out).files == []


def test_a_pr_someone_else_titled_like_ours_is_never_reused(dataset_repo) -> None:
    from pipeline.publish import PR_TITLE_PREFIX

    store = dataset_repo.store
    repo = store.get(REPO, repo_type="dataset")
    impostor = store.open_pull_request(repo, title=f"{PR_TITLE_PREFIX} (not really)", author="mallory")
    result = publish(_records(), repo=REPO, hub=dataset_repo.client)
    assert result.published and result.pr_num != impostor
    assert not any(p.startswith("data/") for p in _tree(store, f"refs/pr/{impostor}"))


def _batch(n: int, day: int, *, offset: int = 0) -> list[dict]:
    stamp = f"2026-11-{day:02d}T09:00:00+00:00"
    run = {"started_at": stamp, "finished_at": stamp}
    return [sample_record(model_id=f"org/model-{offset + i:03d}", run=run) for i in range(n)]


def test_a_publish_reads_the_summary_and_the_touched_shards_only(dataset_repo, tmp_path: Path) -> None:
    """Few requests, few bytes: no card, page or whole latest view is downloaded; the card is the same."""
    from pipeline.dataset import build, read_summary

    hub, store, server = dataset_repo.client, dataset_repo.store, dataset_repo.server
    seeded = tmp_path / "seed"
    build(_batch(40, 20) + [sample_failure(model_id="acme/broken")], seeded)
    files = {p.relative_to(seeded).as_posix(): p for p in seeded.rglob("*") if p.is_file()}
    store.create_repo(REPO, repo_type="dataset", exist_ok=True)
    store.commit_files(REPO, files, message="seed", repo_type="dataset")
    hub.whoami()  # huggingface_hub's once-per-process requests are not the publish's
    mark, sent = len(server.requests), len(server.sent_bytes)
    result = publish(_batch(10, 29, offset=35), repo=REPO, hub=hub)
    requests = server.requests[mark:]
    assert result.published and result.summary.added == 10
    fetched = [p.split("/resolve/", 1)[1].split("/", 1)[1] for m, p in requests if "/resolve/" in p]
    # The family index is written from the latest shard, never downloaded.
    assert sorted(fetched) == ["data/latest/all.parquet", "data/summary.json"]
    assert not any(m == "HEAD" for m, _ in requests), "one GET per file, no metadata round trip"
    assert len([p for _, p in requests if "/paths-info/" in p]) == 1, "the scripts' ids in one request"
    # head, open PRs, summary, results listing, paths-info, one shard; the card's YAML checked (new models change
    # its counts; huggingface_hub asks before committing a README.md), preupload, LFS batch, four LFS files
    # (results, changes, the shard, its family rows) uploaded and verified, the commit, the open PRs again.
    assert len(requests) == 19, requests
    assert sum(server.sent_bytes[sent:]) < 200_000
    assert "index.html" not in result.files and "README.md" in result.files
    # Models 35-39 were there: their scripts come out the same and stay out of the commit; 40-44 are new.
    scripts = {p.rsplit("/", 2)[1] for p in result.files if p.startswith("scripts/")}
    assert scripts == {f"model-{i:03d}" for i in range(40, 45)}
    # The card the publish rendered from the summary is the card of the whole tree.
    tree = tmp_path / "pr"
    hub.snapshot(REPO, revision="refs/pr/1", repo_type="dataset", local_dir=tree)
    card = (tree / "README.md").read_text()
    from pipeline.dataset import CardNames, write_front_files

    write_front_files(tree, page=False, names=CardNames(repo=REPO, space=constants.TRNCAT_SPACE))
    assert (tree / "README.md").read_text() == card and "(46 models in the latest view)" in card
    summary = read_summary(tree)
    assert summary is not None and summary["total"] == 46 and summary["shards"] == ["all"]
    # The family index the partial build updated is the one the whole latest view gives.
    from pipeline.dataset import read_latest
    from tests.support.families import family_rows, read_families

    assert read_families(tree) == family_rows(read_latest(tree)) and "data/families/all.parquet" in result.files
    counts = summary["counts"]
    assert ["text-generation", "neuron", "pass", 45] in counts and ["text-generation", "neuron", "fail", 1] in counts


def test_a_script_or_card_the_repo_holds_unchanged_is_neither_written_nor_committed(
    dataset_repo, tmp_path: Path
) -> None:
    """A publish rewrites the card and the scripts of every model it touches; one the repo already holds byte
    for byte is left out (its git id, from paths-info, says so), and one that differs (a stale template) is
    replaced."""
    from pipeline.dataset import build

    hub, store = dataset_repo.client, dataset_repo.store
    seeded = tmp_path / "seed"
    build(_batch(3, 20), seeded)
    files = {p.relative_to(seeded).as_posix(): p for p in seeded.rglob("*") if p.is_file()}
    stale = "scripts/org/model-001/run.py"
    files[stale] = tmp_path / "stale.py"
    files[stale].write_text("print('an older template')\n")
    store.create_repo(REPO, repo_type="dataset", exist_ok=True)
    store.commit_files(REPO, files, message="seed", repo_type="dataset")
    result = publish(_batch(3, 29), repo=REPO, hub=hub)
    assert result.published
    assert [p for p in result.files if p.startswith("scripts/")] == [stale]
    assert f"{len(result.files)} file(s)" in result.description
    pr = _tree(store, "refs/pr/1")
    assert pr["scripts/org/model-000/run.py"] == _tree(store, "main")["scripts/org/model-000/run.py"]
    fresh = repo_file(store, REPO, stale, revision="refs/pr/1", repo_type="dataset")
    assert fresh == (seeded / stale).read_bytes(), "the stale script is replaced by the one rendered now"
    assert "README.md" in result.files, "the seed's card is a local folder's; the Hub's names the repo"
    hub.merge(REPO, 1, repo_type="dataset")
    again = publish(_batch(3, 30), repo=REPO, hub=hub)
    assert again.published and again.pr_num == 2
    assert not [p for p in again.files if p.startswith("scripts/") or p == "README.md"], again.files
    assert dataset_repo.server.count_requests("/api/validate-yaml") == 1, "no card, no YAML to validate"


def test_a_dataset_without_a_summary_is_mirrored_whole_once(
    dataset_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset whose data/summary.json is gone (or unreadable) is mirrored whole once, keeps its shards and gains
    one; the next publish reads only the summary and its models' shards."""
    from pipeline.dataset import SUMMARY_FILE, build

    monkeypatch.setattr("pipeline.dataset.shards.LATEST_SHARD_BYTES", 30_500)  # a shard of a few rows
    hub, store = dataset_repo.client, dataset_repo.store
    seeded = tmp_path / "seed"
    build(_batch(30, 20), seeded)
    (seeded / SUMMARY_FILE).unlink()
    shards = sorted(p.stem for p in (seeded / "data" / "latest").glob("*.parquet"))
    assert len(shards) > 1 and "all" not in shards
    files = {p.relative_to(seeded).as_posix(): p for p in seeded.rglob("*") if p.is_file()}
    store.create_repo(REPO, repo_type="dataset", exist_ok=True)
    store.commit_files(REPO, files, message="seed", repo_type="dataset")
    first = publish(_batch(5, 29, offset=100), repo=REPO, hub=hub)
    assert SUMMARY_FILE in first.files
    tree = _tree(store, "refs/pr/1")
    latest = sorted(p.rsplit("/", 1)[1].removesuffix(".parquet") for p in tree if p.startswith("data/latest/"))
    summary = json.loads(repo_file(store, REPO, SUMMARY_FILE, revision="refs/pr/1", repo_type="dataset"))
    assert summary["total"] == 35 and summary["shards"] == latest and "all" not in latest
    hub.merge(REPO, 1, repo_type="dataset")
    second = publish(_batch(1, 30, offset=200), repo=REPO, hub=hub)
    assert second.published and SUMMARY_FILE in second.files


def test_community_records_are_published_only_from_resultssample_community(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack (issue 11.8): the check watched results/community/ only while `trncat publish results/` took
    everything under results/: a community record elsewhere, or a "ci" record in results/community/."""
    results = tmp_path / "repo" / "results"
    _write_records(results / "community", [sample_community(model_id="acme/reviewed")])
    _write_records(results / "elsewhere", [sample_community(model_id="acme/unreviewed")])
    (results / "community" / "forged.json").write_text(json.dumps(sample_record(model_id="acme/forged-ci")))
    out = tmp_path / "ds"
    assert main(["publish", str(results), "--to-folder", str(out)]) == 1
    err = capsys.readouterr().err
    assert "elsewhere/r0.json: run.source: a community record is published only from results/community/" in err
    assert "forged.json: run.source: results/community/ holds community records only" in err
    published = pd.read_parquet(out / "data" / "results")
    assert published.model_id.tolist() == ["acme/reviewed"] and published.source.tolist() == ["community"]


def _overlay(tmp_path: Path) -> Path:
    from pipeline.dataset import write_exclusions, write_rankings

    overlay = tmp_path / "discovery"
    day = __import__("datetime").date(2026, 11, 29)
    rows = [{"date": "2026-11-29", "task": "text-generation", "view": "trending", "rank": 1, "model_id": "acme/a"}]
    write_rankings(rows, overlay, date=day, task="text-generation", view="trending")
    write_exclusions([{"model_id": "acme/b", "task": None, "reason": "gated", "kind": "gated"}], overlay)
    return overlay


def test_a_bad_overlay_row_or_file_is_set_aside_and_the_rest_published(tmp_path: Path) -> None:
    """Attack (issue 11.12): the overlay's rankings/exclusions Parquet were committed unvalidated. Issue 22.2: one
    bad row then refused the whole overlay, and the CI records with it. Now each bad row (or a file that is not
    a discovery output at all) is set aside with a message naming it; the rest, and the records, go out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.publish import publish_to_folder

    good = _overlay(tmp_path / "good")
    published = publish_to_folder([], out=tmp_path / "ok", overlay=good)
    assert "data/rankings/2026-11-29-text-generation-trending.parquet" in published.files and not published.set_aside
    schema = pa.schema([(name, pa.string()) for name in ("model_id", "task", "reason", "kind")])
    hostile = {
        "data/rankings/2026-11-29-text-generation-trending.parquet": (
            pa.table({"date": [pa.scalar(__import__("datetime").date(2026, 11, 29))] * 2,
                      "task": ["text-generation"] * 2, "view": ["trending"] * 2, "rank": [1, 2],
                      "model_id": ["<script>alert(1)</script>", "acme/kept"]}).cast(
                pq.read_schema(good / "data/rankings/2026-11-29-text-generation-trending.parquet")),
            "row 0: model_id",
        ),
        "data/rankings/2026-11-29-text-generation-selected.parquet": (pa.table({"html": ["<b>x</b>"]}), "columns"),
        "data/exclusions.parquet": (
            pa.table({"model_id": ["acme/b", "acme/c"], "task": [None, None], "reason": ["x\x1b[2J", "ok"],
                      "kind": ["gated", "gated"]}, schema=schema),
            "row 0: reason: holds a control character",
        ),
    }  # fmt: skip
    outs = {}
    for name, (table, expected) in hostile.items():
        overlay = _overlay(tmp_path / name.replace("/", "_"))
        pq.write_table(table, overlay / name)
        out = outs[name] = tmp_path / f"out-{len(outs)}"
        result = publish_to_folder([sample_record()], out=out, overlay=overlay)
        assert [p for p in result.set_aside if expected in p and name in p], (name, result.set_aside)
        assert pd.read_parquet(out / "data" / "results").model_id.tolist() == [sample_record()["model_id"]]
        text = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
        assert b"<script>alert" not in text and b"\x1b[2J" not in text and b"<b>x</b>" not in text
    trending = "data/rankings/2026-11-29-text-generation-trending.parquet"
    rankings = pd.read_parquet(outs[trending] / trending)
    assert rankings.model_id.tolist() == ["acme/kept"]  # the good row of a file with a bad one stays
    assert pd.read_parquet(out / "data/exclusions.parquet").model_id.tolist() == ["acme/c"]


def test_one_listed_model_with_a_huge_library_name_never_blocks_a_publish(localhub, tmp_path: Path) -> None:
    """Issue 22.2: a listed model's `library_name` of 1,200 characters made its exclusion reason longer than the
    overlay check allows, and the whole overlay, the CI records with it, was refused at every publish. The
    reason now quotes at most a bounded part of the Hub's text, and nothing is refused."""
    from pipeline.discover import discover, write_outputs
    from pipeline.publish import publish_to_folder

    meta = {"pipeline_tag": "text-generation", "safetensors": {"total": 1_000}}
    localhub.store.create_repo("acme/odd", metadata={**meta, "library_name": "x" * 1200 + "\x1b[2J"})
    localhub.store.create_repo("acme/fine", metadata={**meta, "library_name": "transformers"})
    found = discover(hub=localhub.client, task="text-generation", view="trending", limit=10, exclusions=[],
                     today=__import__("datetime").date(2026, 11, 30))  # fmt: skip
    overlay = tmp_path / "discovery"
    write_outputs([found], [], overlay)
    result = publish_to_folder([sample_record()], out=tmp_path / "ds", overlay=overlay)
    assert not result.set_aside and "data/exclusions.parquet" in result.files
    assert pd.read_parquet(tmp_path / "ds" / "data/exclusions.parquet").model_id.tolist() == ["acme/odd"]
    assert len(pd.read_parquet(tmp_path / "ds" / "data" / "results")) == 1
    from pipeline.dataset import MAX_REASON_CHARS

    odd = next(c for c in found.candidates if c.model_id == "acme/odd")
    assert odd.kind == "not_transformers" and len(odd.reason or "") <= MAX_REASON_CHARS
    assert "\x1b" not in (odd.reason or "") and "1204 characters" in (odd.reason or "")


def test_requests_that_need_no_answer_of_another_are_sent_together(dataset_repo, tmp_path: Path) -> None:
    """On the real Hub each request waits a round trip: the head and the token's user go together, then the
    summary, the results listing and the scripts' ids. Each hook below holds its request until the others of its
    group arrive; sent one after another, the first would wait alone and say so."""
    import threading

    from pipeline.dataset import build

    hub, store, server = dataset_repo.client, dataset_repo.store, dataset_repo.server
    seeded = tmp_path / "seed"
    build(_batch(5, 20), seeded)
    files = {p.relative_to(seeded).as_posix(): p for p in seeded.rglob("*") if p.is_file()}
    store.commit_files(REPO, files, message="seed", repo_type="dataset")
    alone: list[str] = []

    def group(*patterns: str) -> None:
        barrier = threading.Barrier(len(patterns), timeout=5)
        for pattern in patterns:

            def wait(_server: object, pattern: str = pattern) -> None:
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:
                    alone.append(pattern)

            server.on_request(pattern, "*", wait)

    group(rf"^/api/datasets/{REPO}/revision/main", r"^/api/whoami-v2")
    group(r"/resolve/[0-9a-f]{40}/data/summary\.json", rf"^/api/datasets/{REPO}/tree/", r"/paths-info/")
    result = publish(_batch(5, 29), repo=REPO, hub=hub)
    assert result.published and not alone, alone


def test_a_comment_the_hub_lost_after_the_commit_is_posted_by_the_next_run_once(dataset_repo) -> None:
    """Issue 48.6: the Hub went away right after an update's commit: its PR comment was never posted, and a re-run
    (everything already on the PR) did not post it either. The next run posts it, naming the commit; a run after
    that posts nothing more."""
    hub, server = dataset_repo.client, dataset_repo.server
    assert publish(_records(), repo=REPO, hub=hub).pr_num == 1
    update = [_later(metrics={"decode_tokens_per_s": 123.0})]
    server.inject(r"/discussions/1/comment", "POST", statuses=(503,), forever=True)
    with pytest.raises(HubServerError):
        publish(update, repo=REPO, hub=hub)
    server.clear_faults()
    sha = dataset_repo.store.get(REPO, repo_type="dataset").resolve("refs/pr/1")

    def comments() -> list[str]:
        events = hub._api.get_discussion_details(REPO, 1, repo_type="dataset").events
        return [e.content for e in events if getattr(e, "type", "") == "comment"][1:]  # after the description

    assert not [c for c in comments() if sha in c]
    again = publish(update, repo=REPO, hub=hub)
    assert not again.published
    owed = [c for c in comments() if sha in c]
    assert len(owed) == 1 and "could not be posted" in owed[0], owed
    publish(update, repo=REPO, hub=hub)
    assert len([c for c in comments() if sha in c]) == 1, "never twice"
