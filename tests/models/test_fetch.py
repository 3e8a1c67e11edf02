"""Which files a Hub model's download takes, and the bytes it may take (issue 22.11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.models import resolve_hub
from pipeline.models.select import DISK_RESERVE_BYTES, WEIGHT_SLACK, matches
from pipeline.testing import tiny

MiB = 1 << 20


def _seed(localhub, repo: str, folder: Path, extra: dict[str, bytes] | None = None) -> str:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    localhub.store.create_repo(repo, metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    return localhub.store.commit_files(repo, {**files, **(extra or {})}, message="upload")


def _fetched(resolved) -> set[str]:
    return {p.relative_to(resolved.path).as_posix() for p in resolved.path.rglob("*") if p.is_file()}


def test_nested_junk_is_never_downloaded(localhub, tmp_path: Path) -> None:
    """Issue 22.11: `*.json` and `*.safetensors` matched at any depth (fnmatch's `*` crosses `/`), so a repo with
    nested junk filled 24 MiB for a 0.5 MiB model. Files are chosen by exact path from the listing now."""
    folder = tiny.build_tiny_llama(tmp_path / "tiny")
    junk = {f"junk/{i}/deep/part-{i}.json": b"[" + b"0," * (2 * MiB) + b"0]" for i in range(3)}
    junk |= {"junk/weights.safetensors": b"\0" * (8 * MiB), "consolidated.safetensors": b"\0" * (4 * MiB),
             "scripts/evil.py": b"raise SystemExit"}  # fmt: skip
    sha = _seed(localhub, "acme/junk", folder, junk)
    resolved = resolve_hub("acme/junk", hub=localhub.client, revision=sha)
    assert resolved.error is None
    fetched = _fetched(resolved)
    assert {"config.json", "model.safetensors"} <= fetched, fetched
    assert not [p for p in fetched if p.startswith(("junk/", "scripts/")) or p == "consolidated.safetensors"]
    assert sum((resolved.path / p).stat().st_size for p in fetched) < 2 * MiB


def test_a_download_larger_than_the_plan_or_the_disk_is_refused_before_it_starts(localhub, tmp_path, monkeypatch):
    """The listing's sizes are compared with the plan's checkpoint bytes and with the free disk first."""
    folder = tiny.build_tiny_llama(tmp_path / "tiny")
    fat = folder / "model.safetensors"
    real = fat.read_bytes()
    sha = _seed(localhub, "acme/fat", folder, {"model.safetensors": real + b"\0" * (24 * MiB)})
    expected = len(real)
    refused = resolve_hub("acme/fat", hub=localhub.client, revision=sha, expected_bytes=expected)
    assert refused.error is not None and f"more than {WEIGHT_SLACK:g} times the {expected} bytes" in refused.error
    assert localhub.server.count_requests(r"/resolve/[^/]+/model\.safetensors$", "GET") == 0, "nothing downloaded"
    sha = _seed(localhub, "acme/slim", folder)
    monkeypatch.setattr(type(localhub.client), "cache_free_bytes", lambda self: DISK_RESERVE_BYTES)
    full = resolve_hub("acme/slim", hub=localhub.client, revision=sha, expected_bytes=expected)
    assert full.error is not None and "to keep free" in full.error


def test_a_sentence_transformers_model_gets_its_modules_and_an_index_its_shards(localhub, tmp_path) -> None:
    folder = tiny.build_tiny_sentence_bert(tmp_path / "st")
    sha = _seed(localhub, "acme/st", folder, {"old/1_Pooling/config.json": b"{}", "unused/model.safetensors": b"x"})
    fetched = _fetched(resolve_hub("acme/st", hub=localhub.client, revision=sha, task="sentence-embeddings"))
    assert {"modules.json", "1_Pooling/config.json", "model.safetensors"} <= fetched, fetched
    assert not [p for p in fetched if p.startswith(("old/", "unused/"))]


@pytest.mark.parametrize(
    ("path", "pattern", "hit"),
    [("a.json", "*.json", True), ("x/a.json", "*.json", False), ("unet/m.json", "unet/*.json", True),
     ("unet/x/m.json", "unet/*.json", False), ("[a].json", "[[]a].json", True)],
)  # fmt: skip
def test_patterns_never_cross_a_folder(path: str, pattern: str, hit: bool) -> None:
    assert matches(path, pattern) is hit
