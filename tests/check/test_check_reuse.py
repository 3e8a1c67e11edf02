"""What a process that checks several models at one commit of the dataset reuses: the family index it read (once
per process for the same files) and the small files the download cache holds (no download call)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.dataset import FamilyIndex
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
