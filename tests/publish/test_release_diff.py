"""`trncat publish --release-diff OLD NEW`: the release diff goes into the same pull request as the re-measured rows,
over the dataset's whole results history, and a retry changes nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipeline import constants
from pipeline.cli import main
from pipeline.dataset import read_release_diffs
from tests.support.localhub_fixtures import repo_file, repo_history
from tests.support.records import fake_revision, sample_failure, sample_record

REPO = "trncat/results"
RELEASE = "data/releases/2.33.0--2.34.0.parquet"
OLD = {"neuronx_cc": "1.0.0", "torch_neuronx": "1.0.0"}
NEW = {"neuronx_cc": "2.0.0", "torch_neuronx": "1.0.0"}


def _run(day: int) -> dict[str, str]:
    return {"started_at": f"2026-11-{day:02d}T10:00:00+00:00", "finished_at": f"2026-11-{day:02d}T10:05:00+00:00"}


def _pass(model: str, pins: dict[str, str], day: int, speed: float = 77.1) -> dict[str, Any]:
    return sample_record(model_id=model, revision=fake_revision(model), versions=pins, run=_run(day),
                         metrics={"decode_tokens_per_s": speed})  # fmt: skip


def _fail(model: str, pins: dict[str, str], day: int) -> dict[str, Any]:
    return sample_failure(model_id=model, revision=fake_revision(model), versions=pins, run=_run(day), code="ncc_x1")


def _folder(root: Path, name: str, records: list[dict[str, Any]]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for index, record in enumerate(records):
        (folder / f"r{index}.json").write_text(json.dumps(record))
    return folder


@pytest.fixture
def toolchains(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "before.yaml", tmp_path / "toolchain.yaml"
    old.write_text(
        '# (Neuron SDK 2.33.0)\nneuronx_cc: "1.0.0"\ntorch_neuronx: "1.0.0"\napt:\n  aws-neuronx-tools: "1*"\n'
    )
    new.write_text(
        '# (Neuron SDK 2.34.0)\nneuronx_cc: "2.0.0"\ntorch_neuronx: "1.0.0"\napt:\n  aws-neuronx-tools: "2*"\n'
    )
    return old, new


def _kinds(store: Any, revision: str) -> dict[str, str]:
    data = repo_file(store, REPO, RELEASE, revision=revision, repo_type="dataset")
    table = pd.read_parquet(io.BytesIO(data))
    assert set(table.old_toolchain) == {"2.33.0"} and set(table.new_toolchain) == {"2.34.0"}
    return dict(zip(table.model_id, table.kind, strict=True))


def test_the_release_diff_rides_in_the_re_measures_pr_and_a_retry_changes_nothing(
    localhub,
    tmp_path: Path,
    toolchains: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(constants, "HF_TOKEN", "localhub-token")
    store = localhub.store
    store.create_repo(REPO, repo_type="dataset")
    old, new = toolchains
    diff = ["--release-diff", str(old), str(new)]
    # main holds the catalog measured on 2.33 (an earlier publish, merged)
    before = _folder(tmp_path, "old", [_pass("org/a", OLD, 10), _pass("org/b", OLD, 10), _pass("org/f", OLD, 11)])
    assert main(["publish", str(before), "--repo", REPO, *diff]) == 0
    assert "no record of this publish was measured on 2.34.0's pins" in capsys.readouterr().out
    store.merge_pull_request(store.get(REPO, repo_type="dataset"), 1, author="maintainer")
    assert RELEASE not in store.get(REPO, repo_type="dataset").tree("main")

    # the re-measure after the bump: a faster, b now fails; f is not re-measured yet
    remeasured = _folder(tmp_path, "new", [_pass("org/a", NEW, 20, speed=96.375), _fail("org/b", NEW, 20)])
    assert main(["publish", str(remeasured), "--repo", REPO, *diff]) == 0
    out = capsys.readouterr().out
    assert "release diff 2.33.0 -> 2.34.0: data/releases/2.33.0--2.34.0.parquet" in out
    repo = store.get(REPO, repo_type="dataset")
    assert [d["num"] for d in repo.discussions if d["status"] == "open"] == [2], "one PR: rows and diff together"
    pr = "refs/pr/2"
    tree = repo.tree(pr)
    assert RELEASE in tree and sum(p.startswith("data/results/") for p in tree) == 2
    assert _kinds(store, pr) == {"org/b": "newly_failing", "org/a": "still_passing", "org/f": "old_only"}
    commits = len(repo_history(store, REPO, revision=pr, repo_type="dataset"))

    # a retry of the same publish: the same rows, the same diff bytes, no commit
    assert main(["publish", str(remeasured), "--repo", REPO, *diff]) == 0
    assert "nothing to publish" in capsys.readouterr().out
    assert len(repo_history(store, REPO, revision=pr, repo_type="dataset")) == commits

    # rows of the old toolchain only (a late one): the diff is not touched
    late = _folder(tmp_path, "late", [_pass("org/q", OLD, 12)])
    assert main(["publish", str(late), "--repo", REPO, *diff]) == 0
    assert "no release diff" in capsys.readouterr().out
    assert _kinds(store, pr) == {"org/b": "newly_failing", "org/a": "still_passing", "org/f": "old_only"}

    # the next day's re-measure lands on the same open PR and the diff follows it
    more = _folder(tmp_path, "more", [_pass("org/f", NEW, 21)])
    assert main(["publish", str(more), "--repo", REPO, *diff]) == 0
    assert "PR #2" in capsys.readouterr().out
    assert [d["num"] for d in store.get(REPO, repo_type="dataset").discussions if d["status"] == "open"] == [2]
    kinds = _kinds(store, pr)
    assert kinds["org/f"] == "still_passing" and kinds["org/q"] == "old_only"


def test_the_pr_description_names_the_diff_and_its_counts(localhub, toolchains: tuple[Path, Path]) -> None:
    from pipeline.cli.release import release_diff_derived
    from pipeline.publish import publish

    localhub.store.create_repo(REPO, repo_type="dataset")
    old, new = toolchains

    records = [_pass("org/a", OLD, 10), _pass("org/a", NEW, 20, speed=96.375), _fail("org/b", NEW, 20)]
    derived, said = release_diff_derived(old, new, records)
    assert derived is not None and said.endswith(RELEASE)
    result = publish(records, repo=REPO, hub=localhub.client, derived=derived)
    assert RELEASE in result.files
    assert f"### Release diff `{RELEASE}`" in result.description
    assert "2.33.0 -> 2.34.0: 2 model(s) and task(s), 1 compared:" in result.description
    assert "- Still passing: 1" in result.description and "- New on this toolchain: 1" in result.description


def test_the_same_release_or_pins_and_a_folder_target(tmp_path: Path, toolchains: tuple[Path, Path]) -> None:
    from pipeline.cli.release import release_diff_derived

    old, new = toolchains
    derived, said = release_diff_derived(old, old, [_pass("org/a", OLD, 10)])
    assert derived is None and "same release" in said
    # the folder target gets the same file, readable by the page
    out = tmp_path / "dataset"
    first = _folder(tmp_path, "first", [_pass("org/a", OLD, 10)])
    second = _folder(tmp_path, "second", [_pass("org/a", NEW, 20, speed=96.375)])
    assert main(["publish", str(first), "--to-folder", str(out), "--release-diff", str(old), str(new)]) == 0
    assert not (out / RELEASE).exists()
    assert main(["publish", str(second), "--to-folder", str(out), "--release-diff", str(old), str(new)]) == 0
    [diff] = read_release_diffs(out)
    assert [(e["model_id"], e["kind"], e["speed_pct"]) for e in diff["entries"]] == [("org/a", "still_passing", 25.0)]


def test_a_toolchain_name_that_cannot_name_a_file_is_refused_before_any_request(
    tmp_path: Path, toolchains: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    old, _ = toolchains
    evil = tmp_path / "x--y.yaml"  # no release in its header: named by its stem, which cannot be one side's name
    evil.write_text('neuronx_cc: "2.0.0"\ntorch_neuronx: "1.0.0"\n')
    records = _folder(tmp_path, "r", [_pass("org/a", NEW, 20)])
    code = main(["publish", str(records), "--repo", REPO, "--release-diff", str(old), str(evil)])
    assert code != 0 and "cannot name a release diff file" in capsys.readouterr().err
