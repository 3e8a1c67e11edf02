"""Which published bundles the second-machine warm check picks (`trncat warm-queue`), and why the others are left:
from rows, from a dataset folder, and from the embedded local hub's dataset main."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.dataset import add_warm_checks, build
from pipeline.queue import MAX_WARM_ENTRIES, warm_queue
from pipeline.queue.warm import runner_label
from pipeline.records import flatten, validate_record
from tests.support.records import sample_record, sample_warm_check
from tests.warm_rows import with_bundle

REV = "0123456789abcdef0123456789abcdef01234567"


def _pass(model_id: str, sha: str | None, **overrides: Any) -> dict[str, Any]:
    record = sample_record(model_id=model_id, **overrides)
    return with_bundle(record, sha) if sha else record


def _reasons(queue: Any) -> dict[str, str]:
    return {s["model_id"]: s["reason"] for s in queue.skipped}


def test_picks_unverified_ci_trainium2_bundles_and_says_why_it_skips_the_rest() -> None:
    rows = [
        flatten(_pass("acme/fresh", "a" * 64)),
        flatten(_pass("acme/verified", "b" * 64)),
        flatten(_pass("acme/emulated-only", "c" * 64)),
        flatten(_pass("acme/missed-before", "d" * 64)),
        flatten(_pass("acme/rebuilt", "e" * 64)),  # verified, but an older bundle of the row
        flatten(_pass("acme/no-bundle", None)),
        {**flatten(_pass("acme/failed", None)), "status": "fail"},
        {**flatten(_pass("acme/community", None)), "source": "community"},
        {**flatten(_pass("acme/on-cpu", None)), "device": "cpu"},
        {**flatten(_pass("acme/on-trn3", "1" * 64)), "hardware": "trn3.48xlarge", "accelerator": "Trainium3"},
        {**flatten(_pass("acme/emulated-row", "2" * 64)), "emulated": True},
    ]
    checks = [
        sample_warm_check(model_id="acme/verified", sha256="b" * 64),
        sample_warm_check(model_id="acme/emulated-only", sha256="c" * 64, emulated=True),
        sample_warm_check(model_id="acme/missed-before", sha256="d" * 64, status="missed", hits=1, misses=1),
        sample_warm_check(model_id="acme/rebuilt", sha256="0" * 64),
    ]
    queue = warm_queue(rows, checks)
    # Never checked first (an emulated check counts as none), then the one a real machine checked and missed.
    assert [e["model_id"] for e in queue.entries] == [
        "acme/emulated-only", "acme/fresh", "acme/rebuilt", "acme/missed-before"
    ]  # fmt: skip
    fresh = next(e for e in queue.entries if e["model_id"] == "acme/fresh")
    assert fresh == {"model_id": "acme/fresh", "revision": REV, "task": "text-generation", "sha256": "a" * 64,
                     "cores": 1, "runner": "trn2-1c", "dtype": "bfloat16", "mode": "warm", "made_by": "trn2-runner-1",
                     "made_on": "i-0123456789abcdef1",
                     "artifact": f"acme--fresh--text-generation--{'a' * 12}"}  # fmt: skip
    # Each entry's record is a valid record naming that bundle (what `trncat warm-check` renders run.py from).
    for entry in queue.entries:
        record = queue.records[entry["artifact"]]
        assert not validate_record(record) and record["compiled_cache"]["sha256"] == entry["sha256"]
    assert _reasons(queue) == {
        "acme/verified": "its bundle is already verified on a second machine",
        "acme/no-bundle": "no compiled-cache bundle",
        "acme/failed": "not a pass (fail)",
        "acme/community": "not a CI row (source community)",
        "acme/on-cpu": "not a Trainium2 row (device cpu)",
        "acme/on-trn3": "not a Trainium2 row (device trainium3)",
        "acme/emulated-row": "an emulated row: no Trainium2 result",
    }


def test_the_limit_and_the_runner_labels() -> None:
    rows = [flatten(_pass(f"acme/m{i}", f"{i:064x}")) for i in range(5)]
    queue = warm_queue(rows, [], limit=2)
    assert len(queue.entries) == 2 and len(queue.records) == 2
    assert sum("over this run's limit of 2" in s["reason"] for s in queue.skipped) == 3
    assert len(warm_queue(rows, [], limit=10_000).entries) == 5 and MAX_WARM_ENTRIES == 256
    assert [runner_label(c) for c in (1, 2, 3, 8, 9, 64)] == ["trn2-1c", "trn2-2c", "trn2-4c", "trn2-8c", "trn2-16c",
                                                             "trn2-64c"]  # fmt: skip


def test_a_row_whose_record_no_longer_validates_is_skipped_with_the_reason() -> None:
    row = {**flatten(_pass("acme/odd", "a" * 64)), "cores": 0}
    queue = warm_queue([row], [])
    assert not queue.entries and "its record does not validate" in _reasons(queue)["acme/odd"]


def _dataset(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    build([_pass("acme/fresh", "a" * 64), _pass("acme/verified", "b" * 64), _pass("acme/plain", None)], root)
    add_warm_checks(root, [sample_warm_check(model_id="acme/verified", sha256="b" * 64)])
    return root


def _written(out: Path) -> tuple[dict[str, Any], list[str]]:
    queue = json.loads((out / "warm-queue.json").read_text())
    return queue, sorted(p.name for p in (out / "records").glob("*.json"))


def test_warm_queue_command_from_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["warm-queue", "--dataset", str(_dataset(tmp_path)), "--out", str(out)]) == 0
    queue, records = _written(out)
    assert [e["model_id"] for e in queue["include"]] == ["acme/fresh"] and queue["count"] == 1
    assert records == [f"{queue['include'][0]['artifact']}.json"]
    assert "1 bundle(s) to check; 2 row(s) skipped" in capsys.readouterr().err
    assert main(["warm-queue", "--dataset", str(tmp_path / "none"), "--out", str(out)]) != 0
    assert main(["warm-queue", "--dataset", str(_dataset(tmp_path / "b")), "--out", str(out), "--limit", "0"]) != 0


def test_warm_queue_command_reads_the_dataset_main_of_the_local_hub(localhub, tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    localhub.store.create_repo("trncat/results", repo_type="dataset")
    files = {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}
    localhub.store.commit_files("trncat/results", files, message="dataset", repo_type="dataset")
    out = tmp_path / "out"
    assert main(["warm-queue", "--dataset-repo", "trncat/results", "--out", str(out)]) == 0
    queue, records = _written(out)
    assert [e["model_id"] for e in queue["include"]] == ["acme/fresh"] and len(records) == 1
    assert {s["model_id"]: s["reason"] for s in queue["skipped"]}["acme/verified"].startswith("its bundle is already")
