"""The compiled-cache bundle (issue 25): a passing run's NEFF cache packed as data only, refused when it holds
anything else, when packing and when unpacking; the generated run.py applies the same rule to what it downloads."""

from __future__ import annotations

import gzip
import io
import json
import pickle
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.backends.neuron import check_bundle, pack_cache, unpack_bundle
from pipeline.backends.neuron.bundle import MAX_UNPACKED_BYTES, sha256_file
from pipeline.errors import BundleError

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


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_run_py_applies_the_same_rule_to_a_downloaded_bundle(kind: str, tmp_path: Path) -> None:
    """The generated run.py cannot import trncat: its own copy of the rule refuses what the bundle module does."""
    from pipeline.render import run_script
    from pipeline.testing.records import sample_record

    script = run_script(sample_record())
    namespace: dict[str, object] = {"__name__": "run"}
    exec(compile(script, "run.py", "exec"), namespace)  # noqa: S102 - the generated script, defining only
    members = namespace["bundle_members"]
    assert callable(members)
    bundle = tmp_path / "x.neff-cache.tar.gz"
    bundle.write_bytes(_tar(HOSTILE[kind]))
    with pytest.raises(ValueError):
        list(members(str(bundle)))
    good = tmp_path / "good.neff-cache.tar.gz"
    pack_cache(neff_cache(tmp_path / "cache"), good)
    assert len(list(members(str(good)))) == 3
