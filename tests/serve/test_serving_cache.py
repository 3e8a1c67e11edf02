"""vLLM Neuron's compile cache as a serving bundle (pipeline/serve/cache.py): packed as data only under the
compiled-cache bundle's rule, unpacked into a fresh VLLM_CACHE_ROOT, refused whole when tampered with."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pipeline.errors import BundleError
from pipeline.serve.cache import (
    STRICT_VARIABLE,
    compile_cache_dir,
    pack_serving_cache,
    warm_cache_root,
    warm_environment,
)

NEFF = b"NEFF-bytes of a compiled bucket\n" + bytes(range(256)) * 4


def vllm_cache(root: Path, buckets: int = 3) -> dict[str, bytes]:
    """A local cache as the docs place it: ``$VLLM_CACHE_ROOT/neuron/compile_cache/<hash>/``, a NEFF and a JSON
    file per bucket (the files inside a hash folder are not documented: these are what the bundle rule admits)."""
    files = {}
    for bucket in range(buckets):
        folder = compile_cache_dir(root) / hashlib.sha256(str(bucket).encode()).hexdigest()[:32]
        folder.mkdir(parents=True)
        files[f"{folder.name}/model.neff"] = NEFF + bytes([bucket])
        files[f"{folder.name}/meta.json"] = b'{"bucket": %d}' % bucket
        for name, data in list(files.items())[-2:]:
            (compile_cache_dir(root) / name).write_bytes(data)
    return files


def unpacked(root: Path) -> dict[str, bytes]:
    base = compile_cache_dir(root)
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_a_cache_packs_and_starts_a_fresh_root_warm(tmp_path: Path) -> None:
    files = vllm_cache(tmp_path / "run")
    bundle = tmp_path / "out" / "record.neff-cache.tar.gz"
    assert pack_serving_cache(tmp_path / "run", bundle) is None
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    root = warm_cache_root(bundle, sha256=digest, parent=tmp_path)
    assert root != tmp_path / "run" and unpacked(root) == files
    assert warm_environment(root, strict=False) == {"VLLM_CACHE_ROOT": str(root)}
    assert warm_environment(root, strict=True)[STRICT_VARIABLE] == "1"
    again = tmp_path / "again.tar.gz"  # the same cache packs to the same bytes (publish dedupes by digest)
    assert pack_serving_cache(tmp_path / "run", again) is None and again.read_bytes() == bundle.read_bytes()


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("abc/model.so", b"\x7fELF", "model.so"),
        ("abc/loader.py", b"import os\n", "loader.py"),
        ("abc/graph.neff", b"\x80\x04\x95pickle", "pickle"),
        ("abc/meta.json", b"{not json", "meta.json"),
    ],
)
def test_a_cache_holding_anything_but_data_gives_no_bundle(tmp_path: Path, name: str, data: bytes, said: str) -> None:
    vllm_cache(tmp_path / "run", buckets=1)
    target = compile_cache_dir(tmp_path / "run") / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    bundle = tmp_path / "b.tar.gz"
    why = pack_serving_cache(tmp_path / "run", bundle)
    assert why is not None and why.startswith("vLLM Neuron's compile cache:") and said in why
    assert not bundle.exists() and not list(tmp_path.glob(".b.tar.gz.*"))


def test_a_link_in_the_cache_gives_no_bundle(tmp_path: Path) -> None:
    vllm_cache(tmp_path / "run", buckets=1)
    (tmp_path / "secret.json").write_text("{}")
    os.symlink(tmp_path / "secret.json", compile_cache_dir(tmp_path / "run") / "link.json")
    why = pack_serving_cache(tmp_path / "run", tmp_path / "b.tar.gz")
    assert why is not None and "link.json" in why


def test_no_cache_is_said(tmp_path: Path) -> None:
    why = pack_serving_cache(tmp_path / "never-started", tmp_path / "b.tar.gz")
    assert why is not None and "no file" in why


def test_a_tampered_bundle_leaves_no_root(tmp_path: Path) -> None:
    vllm_cache(tmp_path / "run")
    bundle = tmp_path / "b.tar.gz"
    assert pack_serving_cache(tmp_path / "run", bundle) is None
    roots = tmp_path / "roots"
    roots.mkdir()
    with pytest.raises(BundleError, match="sha256|digest"):
        warm_cache_root(bundle, sha256="0" * 64, parent=roots)
    assert list(roots.iterdir()) == []
