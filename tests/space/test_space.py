"""The catalog Space: built from the dataset's merged main only, committed only when a file changed.

The Space's feed, as a subscriber reads it after a publish, is checked in tests/dataset/test_subscriber.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.publish import publish
from pipeline.space import publish_space
from tests.dataset.test_subscriber import REPO, SPACE, _first_main, _new_runs
from tests.support.localhub_fixtures import repo_file


def test_the_space_is_built_only_from_main_and_commits_only_when_changed(localhub: Any, tmp_path: Path) -> None:
    localhub.store.create_repo(REPO, repo_type="dataset")
    localhub.store.commit_files(REPO, _first_main(tmp_path / "main"), message="first", repo_type="dataset")
    first = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert first.published
    readme = repo_file(localhub.store, SPACE, "README.md", repo_type="space").decode()
    assert "sdk: static" in readme and "app_file: index.html" in readme
    again = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert not again.published and again.changed == [] and again.deleted == []  # nothing new: no commit
    # An open PR changes nothing on the page: only main is shown.
    publish(_new_runs(), repo=REPO, hub=localhub.client, space=SPACE)
    pending = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert not pending.published
    page = repo_file(localhub.store, SPACE, "index.html", repo_type="space").decode()
    assert "acme/new-pass" not in page
    localhub.client.merge(REPO, 1, repo_type="dataset")
    merged = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert merged.published and "index.html" in merged.changed
    assert "acme/new-pass" in repo_file(localhub.store, SPACE, "index.html", repo_type="space").decode()


def test_the_feed_stays_well_formed_xml_whatever_the_stored_text_holds() -> None:
    """Issue 22.8: a control character in a stored version string (a dataset written before the pattern) made
    feed.xml unparseable for every reader. The feed drops every character XML 1.0 cannot hold."""
    import datetime as dt
    import xml.etree.ElementTree as ET

    from pipeline.space import SiteNames, feed_xml

    row = {"kind": "new_model", "model_id": "acme/m", "task": "text-generation", "hardware": "trn2.48xlarge",
           "device": "neuron", "status": "pass", "failure_stage": None, "failure_code": None,
           "toolchain": "torch-neuronx 2.14\x0b / neuronx-cc 2.28\x00\ud800", "previous_toolchain": None,
           "record_id": "r1", "finished_at": dt.datetime(2026, 11, 28, tzinfo=dt.UTC), "results_file": "x"}  # fmt: skip
    text = feed_xml([row], names=SiteNames(dataset_repo="acme/results", space_repo="acme/catalog"))
    root = ET.fromstring(text.encode("utf-8"))
    summary = root.find("{http://www.w3.org/2005/Atom}entry/{http://www.w3.org/2005/Atom}summary")
    assert summary is not None and "torch-neuronx 2.14 / neuronx-cc 2.28" in (summary.text or "")


def test_the_space_is_compared_by_its_listing_and_never_downloaded(localhub: Any, tmp_path: Path) -> None:
    """Issue 36: each rebuild downloaded the whole Space (at 100k models, 200,000 scripts) to compare it with the
    new tree. The Space's tree listing gives each file's git blob id (an LFS file's sha256): one listing, no
    download, and a changed file is still found (a model's new script)."""
    localhub.store.create_repo(REPO, repo_type="dataset")
    localhub.store.commit_files(REPO, _first_main(tmp_path / "main"), message="first", repo_type="dataset")
    assert publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE).published
    requests = localhub.server.requests
    before = len(requests)
    again = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert not again.published and again.changed == []
    asked = requests[before:]
    assert not [path for _, path in asked if f"spaces/{SPACE}/resolve/" in path], asked
    assert [path for _, path in asked if f"spaces/{SPACE}/tree/" in path]
    script = next(p for p in localhub.client.list_files(SPACE, repo_type="space") if p.endswith("/run.py"))
    localhub.store.commit_files(
        REPO, {script: b"# a new run.py\n"}, message="a model's new script", repo_type="dataset"
    )
    changed = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert changed.published and script in changed.changed  # (and the card, naming the new dataset commit)
    assert repo_file(localhub.store, SPACE, script, repo_type="space") == b"# a new run.py\n"


def test_a_listed_file_is_the_built_one_by_its_lfs_sha256_or_its_git_blob_id(tmp_path: Any) -> None:
    import hashlib

    from pipeline.hub import git_blob_id
    from pipeline.space.commit import _held

    built = tmp_path / "index.html"
    built.write_bytes(b"<p>page</p>\n")
    sha = hashlib.sha256(b"<p>page</p>\n").hexdigest()
    assert _held((sha, "pointer-blob-id"), built, sha)  # an LFS file: its content's sha256
    assert not _held(("0" * 64, "pointer-blob-id"), built, sha)
    assert _held((None, git_blob_id(b"<p>page</p>\n")), built, sha)  # a regular file: git's id of its bytes
    assert not _held((None, git_blob_id(b"<p>old</p>\n")), built, sha)
    assert not _held(None, built, sha)  # not in the Space


def test_a_large_catalogs_space_fetches_only_the_scripts_it_lacks(
    localhub: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    """Issue 36: each rebuild downloaded every script of the dataset (200,000 files at 100k models). A page with
    data files reads no script text, so only the scripts the Space does not hold as they are are fetched; the
    others are kept, never deleted, and one the Space changed in between is fetched and put right."""
    import functools

    from pipeline.page import render_site
    from pipeline.space import commit, tree

    monkeypatch.setattr(commit, "INLINE_ENTRIES", 0)  # this catalog counts as large: its page has data files
    monkeypatch.setattr(tree, "render_site", functools.partial(render_site, inline_entries=0))
    localhub.store.create_repo(REPO, repo_type="dataset")
    localhub.store.commit_files(REPO, _first_main(tmp_path / "main"), message="first", repo_type="dataset")
    server = localhub.server
    fetched = rf"^/datasets/{REPO}/resolve/[0-9a-f]+/scripts/"
    scripts = sorted(p for p in localhub.client.list_files(REPO, repo_type="dataset") if p.startswith("scripts/"))
    assert len(scripts) >= 4

    first = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert first.published and server.count_requests(fetched) == len(scripts)  # a new Space: every script
    assert set(scripts) <= set(localhub.client.list_files(SPACE, repo_type="space"))

    again = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert not again.published and again.deleted == [] and server.count_requests(fetched) == len(scripts)

    changed, *others = scripts
    localhub.store.commit_files(REPO, {changed: b"# new\n"}, message="a new script", repo_type="dataset")
    third = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert server.count_requests(fetched) == len(scripts) + 1  # that one script only
    assert changed in third.changed and third.deleted == []
    assert repo_file(localhub.store, SPACE, changed, repo_type="space") == b"# new\n"
    assert set(scripts) <= set(localhub.client.list_files(SPACE, repo_type="space"))

    # Another writer changes a kept script of the Space right before this build's commit: the commit is refused
    # (its parent moved), the next attempt sees the change in the new listing, fetches that script and restores it.
    victim = others[0]

    def tamper(srv: Any) -> None:
        srv.store.commit_files(SPACE, {victim: b"# tampered\n"}, message="elsewhere", repo_type="space")

    localhub.store.commit_files(REPO, {changed: b"# newer\n"}, message="again", repo_type="dataset")
    server.on_request(rf"^/api/spaces/{SPACE}/commit/", "POST", tamper, count=1)
    fourth = publish_space(hub=localhub.client, dataset_repo=REPO, space_repo=SPACE)
    assert fourth.published and victim in fourth.changed
    assert repo_file(localhub.store, SPACE, victim, repo_type="space") == (
        repo_file(localhub.store, REPO, victim, repo_type="dataset")
    )


def test_the_space_reads_the_datasets_matrix_into_its_page_and_feed(tmp_path: Path) -> None:
    """Issue 49, end to end: data/matrix.parquet as publish writes it reaches the Space's page (the matrix, the
    badge) and its feed (a "documented but fails" entry) through write_site, not only from rows handed in."""
    from pipeline.dataset import build, write_matrix
    from pipeline.space import SiteNames, write_site
    from tests.support.matrix_rows import model_rows
    from tests.support.records import sample_failure

    dataset = tmp_path / "ds"
    assert not build(
        [sample_failure(model_id="acme/documented-fails", code="ncc_evrf009")], dataset, page=False
    ).set_aside
    rows = [
        *model_rows("acme/documented-fails", "text-generation", {("trn2", "compile"): "failing"},
                    details={("trn2", "compile"): "ncc_evrf009"}),
        *model_rows("acme/new-model", "text-generation", documented="not_listed"),
    ]  # fmt: skip
    write_matrix(dataset, rows)
    site = tmp_path / "site"
    write_site(dataset, site, names=SiteNames(dataset_repo="acme/results", space_repo="acme/catalog"))
    html = (site / "index.html").read_text(encoding="utf-8")
    assert "acme/new-model" in html and "documented but fails" in html
    feed = (site / "feed.xml").read_text(encoding="utf-8")
    assert "Documented but fails: acme/documented-fails (text-generation, Trainium2)" in feed
    assert "acme/new-model" not in feed  # a model nothing has run is no change
