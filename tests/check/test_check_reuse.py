"""What a process that checks several models at one commit of the dataset reuses: the family index it read (once
per process for the same files) and the small files the download cache holds (no download call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.dataset import FAMILIES_FILE, FamilyIndex
from tests.check.test_check import _check, catalog  # noqa: F401 (the fixture)


def test_the_index_of_one_commit_is_read_once_per_process(catalog: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    reads: list[Any] = []
    read = FamilyIndex.read.__func__  # type: ignore[attr-defined]

    def counted(cls: type[FamilyIndex], *args: Any) -> Any:
        reads.append(args)
        return read(cls, *args)

    monkeypatch.setattr(FamilyIndex, "read", classmethod(counted))
    first = _check(catalog, "acme/other-llama")
    again = _check(catalog, "acme/ft")
    assert len(reads) == 1  # the second check found the same files, at the same commit
    assert (first.verdict, again.verdict) == ("likely-runs", "likely-runs")
    assert first.catalog == again.catalog


def test_a_check_takes_the_cached_small_files_without_a_download_call(catalog: Any, monkeypatch) -> None:  # noqa: F811
    first = _check(catalog, "acme/other-llama")
    calls: list[str] = []
    download = type(catalog.client).download

    def counted(self: Any, repo_id: str, filename: str, **kwargs: Any) -> Any:
        calls.append(f"{repo_id}/{filename}")
        return download(self, repo_id, filename, **kwargs)

    monkeypatch.setattr(type(catalog.client), "download", counted)
    again = _check(catalog, "acme/other-llama")
    assert [c for c in calls if c.startswith("acme/")] == []
    assert again.to_dict() == first.to_dict()


def test_a_check_at_the_same_head_asks_the_head_only_and_a_new_commit_is_read_anew(catalog: Any) -> None:  # noqa: F811
    from pipeline.dataset import build
    from tests.check.test_check import DATASET, _record

    first = _check(catalog, "acme/other-llama")
    mark = len(catalog.server.requests)
    again = _check(catalog, "acme/other-llama")
    dataset = [p for _, p in catalog.server.requests[mark:] if "/datasets/" in p]
    assert len(dataset) == 1 and "/revision/main" in dataset[0], dataset
    assert again.to_dict() == first.to_dict() and again.catalog == first.catalog
    # A new commit on main (a fifth Llama, failing): listed and read anew, and counted.
    folder = Path(catalog.cache_dir).parent / "moved"
    build([_record(m) for m in ("acme/base-llama", "acme/llama-a", "acme/llama-b")]
          + [_record("acme/llama-c", fail=True), _record("acme/llama-d", fail=True)], folder)  # fmt: skip
    catalog.store.commit_files(DATASET, {FAMILIES_FILE: folder / FAMILIES_FILE},
                               repo_type="dataset")  # fmt: skip
    mark = len(catalog.server.requests)
    moved = _check(catalog, "acme/other-llama")
    assert moved.catalog != first.catalog and "3 of 5 pass" in moved.reason
    assert len([p for _, p in catalog.server.requests[mark:] if "/tree/" in p]) == 1  # data/families/
