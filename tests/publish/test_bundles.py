"""Publishing compiled-cache bundles (issue 25): a CI neuron pass's bundle goes to the compiled-cache model repo once
(deduplicated by sha256), its record names the commit that holds it; over the cap, or from a community record, it
never goes up; a community record naming a bundle is refused by publish."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.backends.neuron import bundle_beside, pack_cache
from pipeline.cli import main
from pipeline.errors import StoreError
from pipeline.publish import publish_bundles
from pipeline.records import validate_record
from tests.support import sha256_file
from tests.support.localhub_fixtures import repo_file
from tests.support.records import sample_community, sample_record

COMPILED = "trncat/trncat-compiled"
DATASET = "trncat/results"


def _cache(root: Path, salt: str = "") -> Path:
    for key in ("ab" + "0" * 62, "cd" + "1" * 62):
        path = root / key[:2] / key[2:4] / f"{key}.neff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"EMULATED-NEFF " + key.encode() + salt.encode())
    return root


def _with_bundle(folder: Path, name: str, record: dict[str, Any], *, salt: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(record))
    pack_cache(_cache(folder / f"cache-{name}", salt), bundle_beside(path))
    return path


def _read(paths: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    return [(str(p), json.loads(p.read_text())) for p in paths]


def test_a_bundle_goes_up_once_and_its_record_names_the_commit_that_holds_it(localhub, tmp_path: Path) -> None:
    paths = [_with_bundle(tmp_path / "records", "a", sample_record())]
    records = _read(paths)
    first = publish_bundles(records, hub=localhub.client, repo=COMPILED)
    assert len(first.uploaded) == 1 and first.reused == [] and first.set_aside == []
    named = records[0][1]["compiled_cache"]
    assert named["repo_id"] == COMPILED and named["revision"] == first.commit and named["files"] == 2
    assert named["sha256"] == sha256_file(bundle_beside(paths[0])) and validate_record(records[0][1]) == []
    # What run.py downloads: exactly that file at that commit, with the digest the record names.
    from huggingface_hub import hf_hub_download

    local = hf_hub_download(COMPILED, named["path"], revision=named["revision"], cache_dir=tmp_path / "dl")
    assert sha256_file(Path(local)) == named["sha256"]

    # A re-run that compiled the same graphs: nothing uploaded, the same commit named (the record is identical).
    localhub.store.commit_files(COMPILED, {"README.md": b"moved on\n"}, message="unrelated", repo_type="model")
    again = _read(paths)
    second = publish_bundles(again, hub=localhub.client, repo=COMPILED)
    assert second.uploaded == [] and second.reused == first.uploaded and second.commit is None
    assert again[0][1] == records[0][1]


def test_a_dry_run_uploads_and_names_nothing(localhub, tmp_path: Path) -> None:
    records = _read([_with_bundle(tmp_path, "a", sample_record())])
    done = publish_bundles(records, hub=localhub.client, repo=COMPILED, dry_run=True)
    assert len(done.uploaded) == 1 and done.commit is None and "compiled_cache" not in records[0][1]
    with pytest.raises(StoreError):
        localhub.store.get(COMPILED, repo_type="model")  # not even created


def test_over_the_cap_no_bundle_and_the_record_says_why(localhub, tmp_path: Path) -> None:
    records = _read([_with_bundle(tmp_path, "a", sample_record())])
    done = publish_bundles(records, hub=localhub.client, repo=COMPILED, max_bytes=10)
    record = records[0][1]
    assert done.uploaded == [] and "compiled_cache" not in record
    assert "cap" in record["compiled_cache_skipped"] and validate_record(record) == []
    assert len(done.set_aside) == 1


def test_a_community_records_bundle_never_goes_up(localhub, tmp_path: Path) -> None:
    records = _read([_with_bundle(tmp_path, "c", sample_community())])
    done = publish_bundles(records, hub=localhub.client, repo=COMPILED)
    assert done.uploaded == [] and "never published" in done.set_aside[0]
    assert "compiled_cache" not in records[0][1]


def test_trncat_publish_uploads_the_bundle_and_refuses_a_community_record_naming_one(
    localhub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_ENDPOINT", localhub.url)
    monkeypatch.setattr(constants, "HF_TOKEN", "localhub-token")
    localhub.store.create_repo(DATASET, repo_type="dataset")
    folder = tmp_path / "results"
    _with_bundle(folder, "ci", sample_record())
    forged = sample_community()
    forged["compiled_cache"] = {"repo_id": COMPILED, "revision": "a" * 40, "path": "x", "sha256": "b" * 64,
                                "bytes": 1, "files": 1}  # fmt: skip
    (folder / "community").mkdir()
    (folder / "community" / "forged.json").write_text(json.dumps(forged))
    code = main(["-q", "publish", str(folder), "--repo", DATASET, "--compiled-repo", COMPILED])
    out = capsys.readouterr()
    assert code == 1  # the forged record was set aside; the rest was published
    assert "forged.json" in out.err and "compiled_cache" in out.err
    assert "compiled caches: uploaded 1" in out.out
    store = localhub.store.get(COMPILED, repo_type="model")
    (bundle,) = [p for p in store.tree("main") if p.endswith(".neff-cache.tar.gz")]
    # The PR's row names it, and the row's run.py downloads exactly it (its path, digest and commit).
    (pr,) = localhub.store.get(DATASET, repo_type="dataset").discussions
    path = f"scripts/{sample_record()['model_id']}/run.py"
    text = repo_file(localhub.store, DATASET, path, revision=f"refs/pr/{pr['num']}", repo_type="dataset").decode()
    assert bundle in text and store.resolve("main") in text and sha256_file(bundle_beside(folder / "ci.json")) in text


def test_a_publish_to_a_folder_says_it_leaves_the_bundles_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "results"
    _with_bundle(folder, "ci", sample_record())
    assert main(["-q", "publish", str(folder), "--to-folder", str(tmp_path / "dataset")]) == 0
    assert "1 compiled-cache bundle(s) left out" in capsys.readouterr().err
    assert not list((tmp_path / "dataset").rglob("*.neff-cache.tar.gz"))


def test_a_bundle_stored_as_a_regular_git_file_is_still_found_again(
    localhub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repo whose .gitattributes has no ``*.gz`` rule keeps a small bundle as a regular file (no LFS sha256):
    it is told by its git blob id, and not uploaded twice."""
    import pipeline.localhub.storage as storage
    import pipeline.localhub.writes as writes

    for module in (storage, writes):  # the hub's choice of LFS or regular, as such a .gitattributes makes it
        monkeypatch.setattr(module, "is_lfs_path", lambda path, size: False)
    paths = [_with_bundle(tmp_path, "a", sample_record())]
    first = publish_bundles(_read(paths), hub=localhub.client, repo=COMPILED)
    (entry,) = [e for p, e in localhub.store.get(COMPILED).tree("main").items() if p.endswith(".tar.gz")]
    assert not entry["lfs"] and len(first.uploaded) == 1
    again = publish_bundles(_read(paths), hub=localhub.client, repo=COMPILED)
    assert again.uploaded == [] and again.reused == first.uploaded


def test_publish_names_only_a_bundle_it_uploaded_or_verified_in_its_own_repo(localhub, tmp_path: Path) -> None:
    """Issue 29.1: a CI record that arrives naming another repo's bundle loses it; one with its bundle beside it is
    named in the repo publish was given, at the commit that holds the file it uploaded."""
    from pipeline.records import bundle_path

    forged = sample_record()
    forged["compiled_cache"] = {"repo_id": "evil/neffs", "revision": "a" * 40, "sha256": "b" * 64, "bytes": 1,
                                "files": 1, "path": bundle_path(forged, "b" * 64)}  # fmt: skip
    assert validate_record(forged) == []  # valid: only its origin tells it apart
    (tmp_path / "f.json").write_text(json.dumps(forged))
    paths = [tmp_path / "f.json", _with_bundle(tmp_path / "b", "b", sample_record(model_id="acme/other"))]
    records = _read(paths)
    records[1][1]["compiled_cache"] = {
        **forged["compiled_cache"],
        "path": bundle_path(records[1][1], "b" * 64),
    }  # replaced by what publish itself uploads
    done = publish_bundles(records, hub=localhub.client, repo=COMPILED)
    assert "compiled_cache" not in records[0][1] and "dropped" in done.set_aside[0]
    named = records[1][1]["compiled_cache"]
    assert named["repo_id"] == COMPILED and named["revision"] == done.commit and named["path"] in done.uploaded


def test_the_pr_description_lists_every_bundle_a_publish_names(
    localhub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29.1: the reviewer sees each bundle the PR's rows point run.py at: repo, commit, path, sha256."""
    monkeypatch.setattr(constants, "HF_ENDPOINT", localhub.url)
    monkeypatch.setattr(constants, "HF_TOKEN", "localhub-token")
    localhub.store.create_repo(DATASET, repo_type="dataset")
    folder = tmp_path / "results"
    _with_bundle(folder, "ci", sample_record())
    assert main(["-q", "publish", str(folder), "--repo", DATASET, "--compiled-repo", COMPILED]) == 0
    (pr,) = localhub.store.get(DATASET, repo_type="dataset").discussions
    text = json.dumps(pr)
    store = localhub.store.get(COMPILED, repo_type="model")
    (bundle,) = [p for p in store.tree("main") if p.endswith(".neff-cache.tar.gz")]
    assert "Compiled-cache bundles named (1)" in text and bundle in text and store.resolve("main") in text
    assert sha256_file(bundle_beside(folder / "ci.json")) in text


def test_the_compiled_repos_lookups_go_together_and_an_existing_repo_is_not_created_again(
    localhub, tmp_path: Path
) -> None:
    """Issue 36: the compiled-cache repo was created (a POST), then asked what it holds, then its head, one after
    another. Now what it holds and its head go together (each hook below waits for the other), and a repo that is
    there is never created again: a re-run that compiled the same graphs costs those two requests only."""
    import threading

    paths = [_with_bundle(tmp_path, "a", sample_record())]
    first = publish_bundles(_read(paths), hub=localhub.client, repo=COMPILED)  # creates the repo, uploads
    assert len(first.uploaded) == 1
    server = localhub.server
    barrier, alone = threading.Barrier(2, timeout=5), []

    def wait(_server: object, pattern: str) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            alone.append(pattern)

    for pattern in (rf"^/api/models/{COMPILED}/paths-info/", rf"^/api/models/{COMPILED}/revision/main"):
        server.on_request(pattern, "*", lambda s, pattern=pattern: wait(s, pattern))
    mark = len(server.requests)
    again = publish_bundles(_read(paths), hub=localhub.client, repo=COMPILED)
    requests = server.requests[mark:]
    assert again.uploaded == [] and again.reused == first.uploaded and not alone, alone
    assert len(requests) == 2 and not [p for _, p in requests if "/repos/create" in p], requests
