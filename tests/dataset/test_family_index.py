"""The family index as ``trncat check`` reads it (issue 36): which files hold it, and the rows a verdict asks for,
filtered as Arrow, the same rows (values, order, columns) as the whole list filtered in Python."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.dataset import (
    FAMILIES_FILE,
    SUMMARY_FILE,
    FamilyIndex,
    build,
    family_index_paths,
    folder_family_index,
    read_latest,
)
from pipeline.errors import DatasetError
from pipeline.records import family_stat, rows_of
from tests.support.families import family_rows
from tests.support.records import sample_failure, sample_record

LLAMA = {"architecture": "LlamaForCausalLM", "model_type": "llama"}
MISTRAL = {"architecture": "MistralForCausalLM", "model_type": "mistral"}


def test_the_index_paths_are_the_one_file_of_a_dataset_of_one_shard() -> None:
    listing = [SUMMARY_FILE, FAMILIES_FILE, "data/exclusions.parquet"]
    assert family_index_paths(listing) == [FAMILIES_FILE]
    assert family_index_paths(iter(listing), key="Acme/A") == [FAMILIES_FILE]
    assert family_index_paths([SUMMARY_FILE]) == [] and family_index_paths([], key="acme/a") == []  # an empty repo


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ds")
    records = [
        sample_record(model_id="acme/a", **LLAMA),
        sample_failure(model_id="acme/b", **LLAMA),
        sample_record(model_id="Acme/C", base_model=["acme/a"], **LLAMA),
        sample_record(model_id="acme/m", **MISTRAL),
        sample_record(model_id="acme/untyped", architecture="LlamaForCausalLM"),
    ]
    build(records, out, page=False)
    return out


@pytest.mark.parametrize(
    ("ids", "family"),
    [
        (["ACME/c"], None),  # an id in another case
        (["acme/m"], ("LlamaForCausalLM", "llama", "text-generation")),
        ([], ("LlamaForCausalLM", None, "text-generation")),  # a family without a model_type
        (["nobody/x"], ("LlamaForCausalLM", "llama", "sentence-embeddings")),  # nothing matches
        (["acme/a", "acme/m"], ("MistralForCausalLM", "mistral", "text-generation")),
    ],
)
def test_select_gives_what_the_whole_list_filtered_in_python_gives(dataset: Path, ids, family) -> None:
    whole = family_rows(read_latest(dataset))
    keys = {id(r) for m in ids for r in rows_of(whole, m)}
    if family is not None:
        architecture, model_type, task = family
        stat = [r for r in whole if (r.get("architecture"), r.get("model_type"), r.get("task")) == family]
        keys |= {id(r) for r in stat}
        assert family_stat(stat, architecture=architecture, model_type=model_type, task=task) == family_stat(
            folder_family_index(dataset).select(family=family), architecture=architecture, model_type=model_type,
            task=task,
        )  # fmt: skip
    expected = [r for r in whole if id(r) in keys]
    got = folder_family_index(dataset).select(model_ids=ids, family=family)
    assert got or ids == ["nobody/x"]  # every case but the last finds rows
    assert got == expected and all(list(g) == list(e) for g, e in zip(got, expected, strict=True))
    assert all(r["finished_at"].utcoffset() is not None for r in got)  # timezone-aware, as pyarrow gives them


def test_a_dataset_without_rows_has_an_empty_index() -> None:
    assert len(FamilyIndex.read(Path(), [])) == 0


def test_an_unreadable_index_is_a_dataset_error_and_a_folder_without_a_dataset_too(tmp_path: Path) -> None:
    (tmp_path / "bad" / FAMILIES_FILE).parent.mkdir(parents=True)
    (tmp_path / "bad" / FAMILIES_FILE).write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match="unreadable"):
        folder_family_index(tmp_path / "bad")
    with pytest.raises(DatasetError, match="no such dataset folder"):
        folder_family_index(tmp_path / "missing")
