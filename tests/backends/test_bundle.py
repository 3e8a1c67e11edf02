"""The compiled-cache bundle (issue 25): a passing run's NEFF cache packed as data only, refused when it holds
anything else, when packing and when unpacking; the generated run.py applies the same rule to what it downloads."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.backends.neuron import BundleInfo, check_bundle, pack_cache, unpack_bundle
from pipeline.backends.neuron.bundle import MAX_MEMBER_BYTES, MAX_UNPACKED_BYTES
from pipeline.errors import BundleError
from tests.support import sha256_file

NEFF = b"EMULATED-NEFF trncat Neuron emulator\n" + b"\x00\x01" * 64


def neff_cache(root: Path) -> Path:
    """A cache folder laid out as TorchNeuron's (``ab/cd/<key>.neff``), with one JSON metadata file."""
    for key in ("ab12" + "0" * 60, "cd34" + "1" * 60):
        path = root / key[:2] / key[2:4] / f"{key}.neff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(NEFF + key.encode())
    (root / "ab" / "meta.json").write_text(json.dumps({"graphs": 2}))
    return root


def test_a_cache_packs_deterministically_and_unpacks_byte_for_byte(tmp_path: Path) -> None:
    cache = neff_cache(tmp_path / "cache")
    first = pack_cache(cache, tmp_path / "one.neff-cache.tar.gz")
    again = pack_cache(cache, tmp_path / "two.neff-cache.tar.gz")
    # The same graphs give the same bytes, so the same digest: what publish deduplicates by.
    assert first == again and first.files == 3 and first.bytes == (tmp_path / "one.neff-cache.tar.gz").stat().st_size
    assert first.sha256 == sha256_file(tmp_path / "one.neff-cache.tar.gz")
    into = tmp_path / "user-cache"
    assert unpack_bundle(tmp_path / "one.neff-cache.tar.gz", into, sha256=first.sha256) == first
    unpacked = {p.relative_to(into).as_posix(): p.read_bytes() for p in into.rglob("*") if p.is_file()}
    assert unpacked == {p.relative_to(cache).as_posix(): p.read_bytes() for p in cache.rglob("*") if p.is_file()}


def _add_code(cache: Path) -> None:
    (cache / "ab" / "hook.py").write_text("import os\n")


def _add_pickle(cache: Path) -> None:
    (cache / "ab" / "state.neff").write_bytes(pickle.dumps({"x": 1}))


def _add_link(cache: Path) -> None:
    (cache / "ab" / "link.neff").symlink_to("/etc/passwd")


def _add_hidden(cache: Path) -> None:
    (cache / ".lock.neff").write_bytes(NEFF)


def _add_bad_json(cache: Path) -> None:
    (cache / "ab" / "meta2.json").write_text("{not json")


@pytest.mark.parametrize("plant", [_add_code, _add_pickle, _add_link, _add_hidden, _add_bad_json])
def test_packing_refuses_a_cache_holding_another_kind_of_file(plant: Callable[[Path], None], tmp_path: Path) -> None:
    cache = neff_cache(tmp_path / "cache")
    plant(cache)
    out = tmp_path / "b.neff-cache.tar.gz"
    with pytest.raises(BundleError, match="no bundle"):
        pack_cache(cache, out)
    assert not out.exists() and not list(tmp_path.glob(".*partial"))  # nothing half-written


def test_packing_over_the_cap_writes_nothing(tmp_path: Path) -> None:
    cache = neff_cache(tmp_path / "cache")
    with pytest.raises(BundleError, match="cap"):
        pack_cache(cache, tmp_path / "b.neff-cache.tar.gz", max_bytes=10)
    assert not list(tmp_path.glob("*.gz"))
    with pytest.raises(BundleError, match="holds no file"):
        pack_cache(tmp_path / "empty", tmp_path / "b.neff-cache.tar.gz")


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return raw.getvalue()


def _file(name: str, data: bytes = NEFF) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _entry(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


#: Bundles an attacker could publish or swap in: each must be refused before anything is written.
HOSTILE: dict[str, list[tuple[tarfile.TarInfo, bytes]]] = {
    "python file": [_file("ab/cd/ok.neff"), _file("ab/cd/run.py", b"print('hi')\n")],
    "pickle named .neff": [_file("ab/cd/x.neff", pickle.dumps([1, 2]))],
    "torch.save zip": [_file("ab/cd/x.neff", b"PK\x03\x04" + b"\x00" * 20)],
    "absolute path": [_file("/tmp/evil.neff")],
    "dot-dot path": [_file("ab/../../evil.neff")],
    "symlink": [_entry("ab/cd/x.neff", tarfile.SYMTYPE, "/etc/passwd")],
    "hard link": [_file("ab/cd/a.neff"), _entry("ab/cd/b.neff", tarfile.LNKTYPE, "ab/cd/a.neff")],
    "device file": [_entry("ab/cd/x.neff", tarfile.CHRTYPE)],
    "folder entry": [_entry("ab", tarfile.DIRTYPE), _file("ab/x.neff")],
    "duplicate member": [_file("ab/x.neff"), _file("ab/x.neff", NEFF + b"other")],
    "not json": [_file("ab/meta.json", b"{")],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_unpacking_refuses_a_hostile_bundle_and_writes_nothing(kind: str, tmp_path: Path) -> None:
    bundle = tmp_path / "x.neff-cache.tar.gz"
    bundle.write_bytes(_tar(HOSTILE[kind]))
    into = tmp_path / "cache"
    with pytest.raises(BundleError, match="refused"):
        unpack_bundle(bundle, into, sha256=sha256_file(bundle))
    assert not into.exists()
    assert not (tmp_path / "evil.neff").exists()


def test_unpacking_refuses_a_digest_other_than_the_record_names(tmp_path: Path) -> None:
    info = pack_cache(neff_cache(tmp_path / "cache"), tmp_path / "b.neff-cache.tar.gz")
    with pytest.raises(BundleError, match="sha256"):
        unpack_bundle(tmp_path / "b.neff-cache.tar.gz", tmp_path / "into", sha256="0" * 64)
    assert not (tmp_path / "into").exists() and info.files == 3


def test_a_bundle_that_is_not_a_gzip_tar_or_unpacks_too_large_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.neff-cache.tar.gz"
    junk.write_bytes(b"not a tar at all")
    with pytest.raises(BundleError, match="not a readable bundle"):
        check_bundle(junk)
    big = tarfile.TarInfo("ab/big.neff")
    big.size = MAX_UNPACKED_BYTES + 1
    header = big.tobuf(tarfile.PAX_FORMAT)  # a header claiming more than a bundle may unpack to
    bomb = tmp_path / "bomb.neff-cache.tar.gz"
    bomb.write_bytes(gzip.compress(header + b"\x00" * 1024, mtime=0))
    with pytest.raises(BundleError, match="refused"):
        check_bundle(bomb)


def _run_py(**names: object) -> dict[str, Any]:
    """The generated run.py's functions (it defines only), with ``names`` replaced."""
    from pipeline.render import run_script
    from tests.support.records import sample_record

    namespace: dict[str, Any] = {"__name__": "run"}
    exec(compile(run_script(sample_record()), "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
    namespace.update(names)
    return namespace


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_run_py_applies_the_same_rule_to_a_downloaded_bundle(kind: str, tmp_path: Path) -> None:
    """The generated run.py cannot import trncat: its own copy of the rule refuses what the bundle module does,
    and a refused bundle leaves nothing in the cache folder."""
    run = _run_py()
    bundle = tmp_path / "x.neff-cache.tar.gz"
    bundle.write_bytes(_tar(HOSTILE[kind]))
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises((ValueError, OSError, tarfile.TarError)):
            run["unpack_bundle"](str(bundle), sha256_file(bundle), fd, "x")
        assert list(root.iterdir()) == []
        assert not (tmp_path / "evil.neff").exists()
        good = tmp_path / "good.neff-cache.tar.gz"
        info = pack_cache(neff_cache(tmp_path / "cache"), good)
        assert run["unpack_bundle"](str(good), info.sha256, fd, "good") == 3
        assert _files(root / "good") == _files(tmp_path / "cache")
    finally:
        os.close(fd)


def _warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **names: object) -> tuple[dict[str, Any], BundleInfo]:
    """run.py with a row naming a bundle packed here, its download served from this folder."""
    import huggingface_hub

    bundle = tmp_path / "row.neff-cache.tar.gz"
    info = pack_cache(neff_cache(tmp_path / "ci-cache"), bundle)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda *a, **k: str(bundle))
    cache = {"repo_id": "trncat/trncat-compiled", "revision": "c" * 40, "path": "x/row.neff-cache.tar.gz",
             "sha256": info.sha256, "bytes": info.bytes, "files": info.files}  # fmt: skip
    run = _run_py(COMPILED_CACHE=cache, COMPILED_WITH={"torch-neuronx": None, "neuronx-cc": None}, **names)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "users-own"))  # restored after the test
    return run, info


def test_run_py_never_writes_into_a_shared_cache_or_through_a_planted_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29.2 and 29.4: the NEFF cache it was pointed at (TorchNeuron's shared default, /tmp/neff_cache) holds
    another user's links and the user's own entries; the bundle goes into a folder of the row's own in the user's
    cache, keyed by its digest, and `--cold` never uses it."""
    run, info = _warm(tmp_path, monkeypatch)
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    victim.mkdir()
    (shared / "cd" / "34").mkdir(parents=True)
    (shared / "ab").symlink_to(victim)  # planted by another user: a write through it lands in the victim's files
    own = shared / "cd" / "34" / f"cd34{'1' * 60}.neff"
    own.write_bytes(b"the user's own NEFF")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(shared))
    assert run["start_warm"](False) is True
    assert list(victim.iterdir()) == [] and own.read_bytes() == b"the user's own NEFF"
    folder = tmp_path / "xdg" / "trncat" / "compiled-cache" / info.sha256
    assert os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] == str(folder)
    assert _files(folder) == _files(tmp_path / "ci-cache") and "started warm: 3 file(s)" in capsys.readouterr().out
    # The next run finds it unpacked (nothing downloaded, nothing replaced); --cold leaves the user's cache alone.
    (folder / "ab" / "later.neff").write_bytes(b"compiled later by TorchNeuron")
    assert run["start_warm"](False) is True and (folder / "ab" / "later.neff").is_file()
    assert "unpacked before" in capsys.readouterr().out
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(shared))
    assert run["start_warm"](True) is False and os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] == str(shared)


def test_run_py_refuses_a_cache_folder_that_is_not_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29.2: a cache folder others may write to, a planted link in its place or another owner's: refused,
    the run compiles, nothing is written."""
    run, _ = _warm(tmp_path, monkeypatch)
    trncat = tmp_path / "xdg" / "trncat"
    trncat.mkdir(parents=True, mode=0o700)
    (trncat / "compiled-cache").mkdir()
    os.chmod(trncat / "compiled-cache", 0o777)
    assert run["start_warm"](False) is False and "refused the cache folder" in capsys.readouterr().out
    assert list((trncat / "compiled-cache").iterdir()) == []
    (trncat / "compiled-cache").rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (trncat / "compiled-cache").symlink_to(elsewhere)
    assert run["start_warm"](False) is False and "refused the cache folder" in capsys.readouterr().out
    assert list(elsewhere.iterdir()) == []
    if os.getuid() == 0:  # root can make a folder another user's
        (trncat / "compiled-cache").unlink()
        (trncat / "compiled-cache").mkdir(mode=0o700)
        os.chown(trncat / "compiled-cache", 4242, 4242)
        assert run["start_warm"](False) is False and "refused the cache folder" in capsys.readouterr().out


def test_run_py_checks_and_unpacks_the_bundle_from_one_open_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29.3: the file hashed is the file unpacked (it was opened three times: a swap between them went
    unchecked)."""
    import builtins

    run, _ = _warm(tmp_path, monkeypatch)
    real, opened = builtins.open, []

    def counting(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file).endswith(".neff-cache.tar.gz"):
            opened.append(file)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    assert run["start_warm"](False) is True
    assert len(opened) == 1


def test_a_member_is_streamed_in_bounded_pieces_and_bounded_in_size(tmp_path: Path) -> None:
    """Issue 29.5: a 24 MiB NEFF is never held whole (by trncat's check and unpack, nor by run.py), and a member
    over the bound is refused from its header."""
    import tracemalloc

    cache = tmp_path / "cache" / "ab" / "cd"
    cache.mkdir(parents=True)
    (cache / "big.neff").write_bytes(NEFF + os.urandom(24 << 20))
    bundle = tmp_path / "big.neff-cache.tar.gz"
    info = pack_cache(tmp_path / "cache", bundle)
    run = _run_py()
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for label, read in (
            ("check", lambda: check_bundle(bundle, sha256=info.sha256)),
            ("unpack", lambda: unpack_bundle(bundle, tmp_path / "into", sha256=info.sha256)),
            ("run.py", lambda: run["unpack_bundle"](str(bundle), info.sha256, fd, "row")),
        ):
            tracemalloc.start()
            try:
                read()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 12 << 20, f"{label} held {peak} bytes at once"
    finally:
        os.close(fd)
    assert (root / "row" / "ab" / "cd" / "big.neff").stat().st_size == (cache / "big.neff").stat().st_size
    big = tarfile.TarInfo("ab/big.neff")
    big.size = MAX_MEMBER_BYTES + 1
    over = tmp_path / "over.neff-cache.tar.gz"
    over.write_bytes(gzip.compress(big.tobuf(tarfile.PAX_FORMAT) + b"\x00" * 1024, mtime=0))
    with pytest.raises(BundleError, match="one file of a bundle may be"):
        check_bundle(over)


def test_an_extended_header_too_large_to_hold_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A pax header claiming gigabytes (tarfile reads one whole) is refused from its size, by trncat and run.py."""
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 1 << 30
    bomb = tmp_path / "pax.neff-cache.tar.gz"
    bomb.write_bytes(gzip.compress(header.tobuf(tarfile.USTAR_FORMAT) + b"\x00" * 4096, mtime=0))
    with pytest.raises(BundleError, match="extended header"):
        check_bundle(bomb)
    run = _run_py()
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(tarfile.TarError, match="extended header"):
            run["unpack_bundle"](str(bomb), sha256_file(bomb), fd, "row")
    finally:
        os.close(fd)
    assert list(root.iterdir()) == []


def test_unpacking_never_replaces_a_folder_that_exists(tmp_path: Path) -> None:
    """Issue 29.4: trncat's own unpack goes into a new folder; one that exists is refused and left as it was."""
    info = pack_cache(neff_cache(tmp_path / "cache"), tmp_path / "b.neff-cache.tar.gz")
    into = tmp_path / "into"
    (into / "ab").mkdir(parents=True)
    (into / "ab" / "meta.json").write_text('{"mine": true}')
    with pytest.raises(BundleError, match="never over one"):
        unpack_bundle(tmp_path / "b.neff-cache.tar.gz", into, sha256=info.sha256)
    assert _files(into) == {"ab/meta.json": b'{"mine": true}'}
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_packing_gives_the_same_bytes_on_any_number_of_threads_and_any_gzip_reads_it(tmp_path: Path) -> None:
    """Issue 36: the block-parallel gzip writer is one ordinary gzip stream, the same whatever the threads."""
    from pipeline.backends.neuron.deflate import BLOCK_BYTES

    cache = neff_cache(tmp_path / "cache")
    (cache / "ab" / "12" / "big.neff").write_bytes(NEFF + os.urandom(BLOCK_BYTES) + bytes(range(256)) * 20_000)
    one = pack_cache(cache, tmp_path / "one.neff-cache.tar.gz", threads=1)
    four = pack_cache(cache, tmp_path / "four.neff-cache.tar.gz", threads=4)
    assert one == four
    with tarfile.open(tmp_path / "one.neff-cache.tar.gz", mode="r:gz") as tar:  # the standard reader
        assert sorted(tar.getnames()) == sorted(_files(cache))
        assert tar.extractfile("ab/12/big.neff").read() == (cache / "ab" / "12" / "big.neff").read_bytes()  # type: ignore[union-attr]
