"""`trncat warm-publish`: only the checks a run's queue asked for, each validated, go into data/warm_checks.parquet
as one Hub PR on the local hub; hostile artifacts are set aside with the reason; a retry commits nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.cli import main
from pipeline.dataset import MATRIX_FILE, WARM_CHECKS_FILE, build, read_matrix, read_warm_checks
from pipeline.errors import RecordError
from pipeline.publish import collect_warm_checks
from pipeline.queue import warm_queue
from pipeline.records import flatten
from tests.support.localhub_fixtures import repo_file
from tests.support.records import sample_record, sample_warm_check
from tests.warm_rows import with_bundle

DATASET = "trncat/results"


def _queue(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    rows = [flatten(with_bundle(sample_record(model_id=f"acme/m{i}"), f"{i + 10:064x}")) for i in range(3)]
    queue = warm_queue(rows, [])
    path = tmp_path / "warm-queue.json"
    path.write_text(json.dumps(queue.to_dict()))
    return path, queue.entries


def _check(entry: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return sample_warm_check(**{"model_id": entry["model_id"], "revision": entry["revision"],
                                "sha256": entry["sha256"], **overrides})  # fmt: skip


def _artifact(downloaded: Path, artifact: str, check: Any, *, name: str | None = None) -> None:
    folder = downloaded / f"warm-{artifact}"
    folder.mkdir(parents=True)
    (folder / (name or f"{artifact}.json")).write_text(json.dumps(check) if not isinstance(check, str) else check)


def test_only_the_queued_valid_checks_are_accepted(tmp_path: Path) -> None:
    queue_file, (a, b, c) = _queue(tmp_path)
    downloaded = tmp_path / "downloaded"
    _artifact(downloaded, a["artifact"], _check(a))
    _artifact(downloaded, b["artifact"], _check(b, sha256="9" * 64))  # another bundle than the queue's
    _artifact(downloaded, c["artifact"], _check(c, misses=1))  # verified with a miss
    _artifact(downloaded, "acme--stranger--text-generation--000000000000", _check(a))
    collected = collect_warm_checks(downloaded, queue_file=queue_file)
    assert [x["model_id"] for x in collected.accepted] == [a["model_id"]]
    said = {(p.file, p.field) for p in collected.problems}
    assert (f"warm-{b['artifact']}", "sha256") in said and (f"warm-{c['artifact']}", "status") in said
    assert ("warm-acme--stranger--text-generation--000000000000", "(artifact)") in said


@pytest.mark.parametrize(
    ("content", "name", "reason"),
    [
        ("not json", None, "not JSON"),
        (None, "../evil.json", "not exactly"),
        ("x" * 20_000, None, "larger than"),
        ({"emulated": True}, None, "no Trainium2 evidence"),
        ({"machine": "i-0123456789abcdef1"}, None, "another machine than the bundle's"),
        ({"runner": None}, None, "must name its runner"),
        ({"model_id": "acme/<script>"}, None, "does not match"),
    ],
)
def test_hostile_artifacts_are_set_aside(tmp_path: Path, content: Any, name: str | None, reason: str) -> None:
    queue_file, (a, *_) = _queue(tmp_path)
    downloaded = tmp_path / "downloaded"
    check = _check(a, **content) if isinstance(content, dict) else content if content else _check(a)
    folder = downloaded / f"warm-{a['artifact']}"
    folder.mkdir(parents=True)
    if name:  # a file named to climb out of its folder is written inside it: it is still not the expected name
        (folder / "evil.json").write_text(json.dumps(check))
    else:
        (folder / f"{a['artifact']}.json").write_text(check if isinstance(check, str) else json.dumps(check))
    collected = collect_warm_checks(downloaded, queue_file=queue_file)
    assert not collected.accepted and any(reason in p.message for p in collected.problems), collected.problems


def test_a_symlinked_check_and_a_bad_queue_file(tmp_path: Path) -> None:
    queue_file, (a, *_) = _queue(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(_check(a)))
    folder = tmp_path / "downloaded" / f"warm-{a['artifact']}"
    folder.mkdir(parents=True)
    (folder / f"{a['artifact']}.json").symlink_to(elsewhere)
    collected = collect_warm_checks(tmp_path / "downloaded", queue_file=queue_file)
    assert not collected.accepted and collected.problems[0].message == "not a regular file"
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(RecordError, match="not a warm-queue.json"):
        collect_warm_checks(tmp_path / "downloaded", queue_file=tmp_path / "bad.json")


def test_warm_publish_opens_one_pr_and_a_retry_commits_nothing(
    localhub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_TOKEN", "localhub-token")
    root = tmp_path / "dataset"
    build([with_bundle(sample_record(model_id=f"acme/m{i}"), f"{i + 10:064x}") for i in range(3)], root)
    localhub.store.create_repo(DATASET, repo_type="dataset")
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    localhub.store.commit_files(DATASET, files, message="dataset", repo_type="dataset")
    queue_file, (a, b, _) = _queue(tmp_path)
    downloaded = tmp_path / "downloaded"
    _artifact(downloaded, a["artifact"], _check(a))
    _artifact(downloaded, b["artifact"], _check(b, status="missed", hits=3, misses=1))
    args = ["warm-publish", str(downloaded), "--queue", str(queue_file), "--repo", DATASET]
    assert main([*args, "--dry-run"]) == 0
    # the checks, the stage matrix, and the card and summary that name the matrix config (new to this dataset)
    assert "would commit 4 file(s)" in capsys.readouterr().out
    repo = localhub.store.get(DATASET, repo_type="dataset")
    assert not repo.discussions, "a dry run changes nothing"
    assert main(args) == 0
    (pr,) = repo.discussions
    tree = repo.tree(f"refs/pr/{pr['num']}")
    assert WARM_CHECKS_FILE in tree and WARM_CHECKS_FILE not in repo.tree("main")
    assert MATRIX_FILE in tree and MATRIX_FILE not in repo.tree("main")
    assert "published 4 file(s)" in capsys.readouterr().out
    assert main(args) == 0, "a retry of the same checks"
    assert "nothing to publish" in capsys.readouterr().out
    assert len(repo.discussions) == 1
    # What the PR holds reads back as the two checks.
    pulled = tmp_path / "pulled"
    (pulled / "data").mkdir(parents=True)
    data = repo_file(localhub.store, DATASET, WARM_CHECKS_FILE, revision=f"refs/pr/{pr['num']}", repo_type="dataset")
    (pulled / WARM_CHECKS_FILE).write_bytes(data)
    matrix = repo_file(localhub.store, DATASET, MATRIX_FILE, revision=f"refs/pr/{pr['num']}", repo_type="dataset")
    (pulled / MATRIX_FILE).write_bytes(matrix)
    warm = {r["model_id"]: (r["state"], r["detail"]) for r in read_matrix(pulled)
            if (r["item"], r["device_class"]) == ("warm_start", "trn2")}  # fmt: skip
    # the warm checks' stage reaches the matrix in the same PR (issue 49), not at the next publish
    assert warm == {"acme/m0": ("passing", None), "acme/m1": ("failing", "missed"), "acme/m2": ("untested", None)}
    assert {c["model_id"]: c["status"] for c in read_warm_checks(pulled)} == {
        "acme/m0": "verified",
        "acme/m1": "missed",
    }


def test_warm_publish_to_a_folder_reports_set_aside_checks_and_fails_on_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue_file, (a, b, _) = _queue(tmp_path)
    downloaded = tmp_path / "downloaded"
    _artifact(downloaded, a["artifact"], _check(a))
    _artifact(downloaded, b["artifact"], _check(b, hits=-2))
    out = tmp_path / "dataset"
    assert main(["warm-publish", str(downloaded), "--queue", str(queue_file), "--to-folder", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"set aside: warm-{b['artifact']}: hits:" in err
    assert [c["model_id"] for c in read_warm_checks(out)] == [a["model_id"]]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["warm-publish", str(empty), "--queue", str(queue_file), "--to-folder", str(out)]) == 1
    assert "no valid warm check to publish" in capsys.readouterr().err
