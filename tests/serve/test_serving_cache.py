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


def _neuron_serving(cache: dict | None) -> dict:
    from tests.support.records import sample_serving

    record = sample_serving(device="neuron")
    engine = record["serving"]["engine"]
    engine["command"] = ("NEURON_LOGICAL_NC_CONFIG=2 VLLM_CACHE_ROOT=/runner/_work/serving/vllm-cache "
                         "/opt/venv/bin/vllm serve /runner/model --port 8123 --max-num-seqs 256")  # fmt: skip
    if cache:
        record["compiled_cache"] = cache
    return record


def _block(script: str) -> str:
    lines = script.splitlines()
    start = lines.index("python - \"$CACHE_ROOT\" <<'BUNDLE'")
    return "\n".join(lines[start + 1 : lines.index("BUNDLE", start)])


def test_serve_sh_starts_warm_from_the_row_s_published_bundle(tmp_path: Path, localhub) -> None:
    # the bundle is published as publish does it (a file of the compiled-cache repo at a commit); serve.sh's fetch
    # block, run as written, checks its digest and unpacks it where vLLM Neuron looks; the runner's own cache
    # folder never reaches the script
    import subprocess
    import sys

    from pipeline.serve import serve_script

    files = vllm_cache(tmp_path / "run")
    bundle = tmp_path / "b.tar.gz"
    assert pack_serving_cache(tmp_path / "run", bundle) is None
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    localhub.store.create_repo("trncat/trncat-compiled")
    path = f"neuronx-cc-2.21.0/acme/tiny/{'a' * 40}/serving/{digest[:16]}.neff-cache.tar.gz"
    revision = localhub.store.commit_files("trncat/trncat-compiled", {path: bundle.read_bytes()})
    cache = {"repo_id": "trncat/trncat-compiled", "revision": revision, "path": path, "sha256": digest,
             "bytes": bundle.stat().st_size, "files": len(files)}  # fmt: skip
    script = serve_script(_neuron_serving(cache))
    assert "/runner/_work" not in script and 'VLLM_CACHE_ROOT="$CACHE_ROOT"' in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    root = tmp_path / "user-cache"
    root.mkdir()
    env = {**os.environ, "HF_ENDPOINT": localhub.url, "HF_HUB_CACHE": str(tmp_path / "user-hf"),
           "HF_HUB_DISABLE_XET": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-", str(root)], input=_block(script), text=True, env=env,
                          capture_output=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert unpacked(root) == files
    # another digest than the row's: refused before anything is unpacked
    tampered = _block(serve_script(_neuron_serving({**cache, "sha256": "0" * 64})))
    other = tmp_path / "other-cache"
    other.mkdir()
    done = subprocess.run([sys.executable, "-", str(other)], input=tampered, text=True, env=env, capture_output=True)
    assert done.returncode != 0 and "not unpacked" in done.stderr and list(other.iterdir()) == []


def test_serve_sh_without_a_bundle_uses_the_user_s_cache_root() -> None:
    from pipeline.serve import serve_script

    script = serve_script(_neuron_serving(None))
    assert 'CACHE_ROOT="${VLLM_CACHE_ROOT:-$HOME/.cache/vllm}"' in script and "BUNDLE" not in script
    assert "/runner/_work" not in script


def test_a_passing_neuron_sweep_packs_its_engine_s_cache_beside_its_record(tmp_path: Path) -> None:
    from pipeline.backends.neuron import bundle_beside
    from pipeline.serve.engine import vllm_serve
    from pipeline.serve.local import _bundle, _with_cache

    files = vllm_cache(tmp_path / "run")
    out = tmp_path / "results" / "acme--tiny.serving.json"
    record = _neuron_serving(None)
    _bundle(record, tmp_path / "run", out, warm_from=None, strict=False)
    assert bundle_beside(out).is_file() and "compiled_cache_skipped" not in record
    root = warm_cache_root(bundle_beside(out), sha256=hashlib.sha256(bundle_beside(out).read_bytes()).hexdigest())
    assert unpacked(root) == files
    # a failed sweep packs nothing; an empty cache says why in the record
    failed = {**_neuron_serving(None), "status": "fail"}
    _bundle(failed, tmp_path / "run", tmp_path / "f.json", warm_from=None, strict=False)
    assert not bundle_beside(tmp_path / "f.json").exists()
    empty = _neuron_serving(None)
    _bundle(empty, tmp_path / "nothing", tmp_path / "e.json", warm_from=None, strict=False)
    assert "no file" in empty["compiled_cache_skipped"]
    # a warm start packs nothing and says which bundle it started from, and how strictly
    warm = _neuron_serving(None)
    _bundle(warm, root, tmp_path / "w.json", warm_from=(bundle_beside(out), "ab" * 32), strict=True)
    assert not bundle_beside(tmp_path / "w.json").exists()
    assert any("serving bundle abababababababab (a cache miss is fatal)" in n for n in warm["notes"])
    spec = _with_cache(vllm_serve("m", port=1, neuron=True), root, strict=True)
    assert spec.env["VLLM_CACHE_ROOT"] == str(root) and spec.env[STRICT_VARIABLE] == "1"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--warm-from", "b.tar.gz"], "go together"),
        (["--sha256", "ab" * 32], "go together"),
        (["--require-warm"], "needs --warm-from"),
        (["--warm-from", "b.tar.gz", "--sha256", "ab" * 32], "needs --device neuron"),
    ],
)
def test_trncat_serve_refuses_a_warm_start_it_cannot_make(
    tmp_path: Path, argv: list[str], said: str, capsys, monkeypatch
) -> None:
    from pipeline.cli import main
    from pipeline.testing import build_tiny_llama

    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.tar.gz").write_bytes(b"")  # a file: the parser checks that --warm-from names one

    model = build_tiny_llama(tmp_path / "tiny")
    code = main(["serve", str(model), "--out", str(tmp_path / "s.json"), *argv])
    assert code != 0 and said in capsys.readouterr().err
    assert not (tmp_path / "s.json").exists()


def test_a_sha256_that_is_not_one_is_refused_by_the_parser(tmp_path: Path) -> None:
    from pipeline.cli import main

    assert main(["serve", str(tmp_path), "--warm-from", "b", "--sha256", "../../etc"]) == 2


def test_a_serving_bundle_goes_through_publish_and_serve_sh_starts_warm_from_it(tmp_path: Path, localhub) -> None:
    # the whole chain: trncat serve's bundle beside a CI Trainium2 serving record -> publish uploads it and names it
    # (in the folder of the engine's options) -> the record still validates -> its serve.sh fetches and unpacks it
    import json
    import subprocess
    import sys

    from pipeline.backends.neuron import bundle_beside
    from pipeline.publish import publish_bundles
    from pipeline.records import bundle_folder, validate_record
    from pipeline.serve import serve_script
    from pipeline.serve.local import _bundle

    files = vllm_cache(tmp_path / "run")
    record = _neuron_serving(None)
    assert record["run"]["source"] == "ci" and record["status"] == "pass"
    path = tmp_path / "records" / "acme--tiny.serving.json"
    path.parent.mkdir()
    path.write_text(json.dumps(record))
    _bundle(record, tmp_path / "run", path, warm_from=None, strict=False)
    assert bundle_beside(path).is_file()
    published = publish_bundles([(str(path), record)], hub=localhub.client, repo="trncat/trncat-compiled")
    assert len(published.uploaded) == 1 and published.set_aside == []
    named = record["compiled_cache"]
    assert named["path"].startswith(bundle_folder(record) + "/") and named["files"] == len(files)
    assert validate_record(record) == []
    block = _block(serve_script(record))
    root = tmp_path / "user-cache"
    root.mkdir()
    env = {**os.environ, "HF_ENDPOINT": localhub.url, "HF_HUB_CACHE": str(tmp_path / "user-hf"),
           "HF_HUB_DISABLE_XET": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-", str(root)], input=block, text=True, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert unpacked(root) == files
