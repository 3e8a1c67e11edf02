"""The compiled-cache bundle: one passing run's NEFF cache as a tar of data files, never code.

A benchmark compiles into an empty, run-private ``TORCH_NEURONX_NEFF_CACHE_DIR``; after a pass that folder is
packed into one gzip'd tar (:func:`pack_cache`), published beside its record, and a user's ``run.py`` unpacks it
into their own cache before the model loads, so their first call is served from it instead of compiling.

What a bundle may hold is the rule :func:`member_problem` states, checked when packing, when ``trncat collect``
accepts an artifact, when publishing and when unpacking (an attacker's bundle lands at the unpack): regular files
only (no link, device or folder entry), relative POSIX paths of plain names (no ``/`` at the start, no ``..``, no
hidden name) at most :data:`MAX_DEPTH` deep, each a NEFF (``.neff``) or a JSON metadata file (``.json``, which must
parse); no file may start like a pickle, a zip (``torch.save``) or a script. The docs name the cache's folder but
not its layout (docs/neuron-facts.md: ``ab/cd/<key>.neff`` is from torch-neuronx's source, not authoritative), so
a cache holding anything else gives no bundle, and the record says why.

The packing is deterministic (sorted members, zero times and owners, gzip without a time), so a run that compiled
the same graphs gives the same bytes, and the same sha256: what publish deduplicates by.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import BundleError

__all__ = [
    "BUNDLE_SUFFIX",
    "MAX_BUNDLE_BYTES",
    "MAX_UNPACKED_BYTES",
    "BundleInfo",
    "bundle_beside",
    "bundle_rule",
    "check_bundle",
    "member_problem",
    "pack_cache",
    "sha256_file",
    "unpack_bundle",
]

#: The bundle file beside its record: ``<record stem>.neff-cache.tar.gz``.
BUNDLE_SUFFIX = ".neff-cache.tar.gz"
#: The largest bundle published. 2 GiB downloads in about 20 s at 100 MB/s, far less than the minutes of the
#: compile it saves; past it a model's graphs would take a large share of the compiled-cache repo, one model at
#: a time. Over it: no bundle, and the record's ``compiled_cache_skipped`` says so.
MAX_BUNDLE_BYTES = 2 * 1024**3
#: The most a bundle may unpack to (a small archive of zeros must not fill a user's disk).
MAX_UNPACKED_BYTES = 4 * MAX_BUNDLE_BYTES
#: The most files a bundle may hold (one per compiled graph, and its metadata).
MAX_FILES = 10_000
#: How deep a member's path may go (the cache's ``ab/cd/<key>.neff`` is 3).
MAX_DEPTH = 8
#: The file kinds of the NEFF cache: compiled graphs and metadata, both data.
NEFF_SUFFIX, METADATA_SUFFIX = ".neff", ".json"
ALLOWED_SUFFIXES = (NEFF_SUFFIX, METADATA_SUFFIX)
#: One path component: plain characters, not hidden, at most 200 of them.
NAME_PATTERN = r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,199}"
_NAME = re.compile(NAME_PATTERN)
#: Openings of a file that is code or a serialized object, never a NEFF: a pickle (protocol 2 to 5), a zip (what
#: torch.save writes), a script.
FORBIDDEN_OPENINGS = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05", b"PK\x03\x04", b"#!")


@dataclasses.dataclass(frozen=True)
class BundleInfo:
    """A bundle's identity: its sha256 (hex), its size in bytes and how many files it holds."""

    sha256: str
    bytes: int
    files: int


def bundle_beside(record_path: Path) -> Path:
    """Where the bundle of the record at ``record_path`` goes: ``result.json`` -> ``result.neff-cache.tar.gz``."""
    return record_path.with_name(record_path.name.removesuffix(".json") + BUNDLE_SUFFIX)


def bundle_rule() -> dict[str, Any]:
    """The rule as plain values, for the generated run.py's own check of a bundle (it cannot import trncat)."""
    return {
        "name": NAME_PATTERN,
        "suffixes": list(ALLOWED_SUFFIXES),
        "forbidden": [opening.hex() for opening in FORBIDDEN_OPENINGS],
        "limits": {"files": MAX_FILES, "depth": MAX_DEPTH, "unpacked_bytes": MAX_UNPACKED_BYTES},
    }


def member_problem(name: str, *, is_file: bool, size: int) -> str | None:
    """Why a member (``name``, a path inside the bundle) may not be in a bundle, or None when it may.

    Args:
        name: The member's path as the archive (or the cache folder) names it.
        is_file: Whether it is a regular file (not a link, device, fifo or folder).
        size: Its size in bytes.
    """
    if not is_file:
        return f"{name!r} is not a regular file (a link, a device or a folder entry)"
    parts = name.split("/")
    if name.startswith("/") or len(parts) > MAX_DEPTH or not all(_NAME.fullmatch(p) for p in parts):
        return f"{name!r} is not a relative path of plain names inside the cache folder"
    if not name.endswith(ALLOWED_SUFFIXES):
        return f"{name!r} is not a file of the NEFF cache (only {', '.join(ALLOWED_SUFFIXES)})"
    if size < 0 or size > MAX_UNPACKED_BYTES:
        return f"{name!r} is {size} bytes, over the {MAX_UNPACKED_BYTES} a bundle may unpack to"
    return None


def content_problem(name: str, data: bytes) -> str | None:
    """Why a member's bytes may not be in a bundle (code or a serialized object; JSON that does not parse)."""
    if data.startswith(FORBIDDEN_OPENINGS):
        return f"{name!r} starts like a pickle, a zip or a script, not a NEFF cache file"
    if name.endswith(METADATA_SUFFIX):
        try:
            json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return f"{name!r} is not JSON"
    return None


def sha256_file(path: Path) -> str:
    """The sha256 (hex) of a file, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def _cache_files(cache_dir: Path) -> list[tuple[str, Path]]:
    out = []
    for path in sorted(cache_dir.rglob("*")):
        name = path.relative_to(cache_dir).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        problem = member_problem(name, is_file=path.is_file() and not path.is_symlink(), size=path.lstat().st_size)
        if problem:
            raise BundleError(f"the NEFF cache {cache_dir} holds {problem}: no bundle")
        out.append((name, path))
    return out


def pack_cache(cache_dir: Path, out: Path, *, max_bytes: int = MAX_BUNDLE_BYTES) -> BundleInfo:
    """Pack a NEFF cache folder into the bundle ``out`` (written whole or not at all).

    Raises:
        BundleError: the folder is empty, holds a file of another kind (nothing is written), or the bundle is over
            ``max_bytes`` (it is removed).
    """
    files = _cache_files(cache_dir) if cache_dir.is_dir() else []
    if not files:
        raise BundleError(f"the NEFF cache {cache_dir} holds no file: no bundle")
    if len(files) > MAX_FILES:
        raise BundleError(f"the NEFF cache {cache_dir} holds {len(files)} files, over {MAX_FILES}: no bundle")
    partial = out.with_name(f".{out.name}.partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with partial.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped:
            with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, path in files:
                    data = path.read_bytes()
                    problem = content_problem(name, data)
                    if problem:
                        raise BundleError(f"the NEFF cache {cache_dir} holds {problem}: no bundle")
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = len(data), 0o644, 0
                    tar.addfile(info, io.BytesIO(data))
        size = partial.stat().st_size
        if size > max_bytes:
            raise BundleError(f"the bundle is {size} bytes, over the {max_bytes}-byte cap: no bundle")
        info_out = BundleInfo(sha256=sha256_file(partial), bytes=size, files=len(files))
        os.replace(partial, out)
        return info_out
    finally:
        partial.unlink(missing_ok=True)


def _members(path: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo, bytes]]:
    """Each member of a bundle with its bytes, every rule checked first; raises BundleError on the first breach."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            seen: set[str] = set()
            total = 0
            for index, member in enumerate(tar):
                if index >= MAX_FILES:
                    raise BundleError(f"{path.name} holds more than {MAX_FILES} files")
                problem = member_problem(member.name, is_file=member.isreg(), size=member.size)
                if problem is None and member.name in seen:
                    problem = f"{member.name!r} is in it twice"
                if problem:
                    raise BundleError(f"{path.name} refused: {problem}")
                seen.add(member.name)
                total += member.size
                if total > MAX_UNPACKED_BYTES:
                    raise BundleError(f"{path.name} unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                handle = tar.extractfile(member)
                data = handle.read() if handle is not None else b""
                problem = content_problem(member.name, data)
                if problem:
                    raise BundleError(f"{path.name} refused: {problem}")
                yield tar, member, data
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise BundleError(f"{path.name} is not a readable bundle (a gzip'd tar): {exc}") from exc


def check_bundle(path: Path, *, sha256: str | None = None, max_bytes: int = MAX_BUNDLE_BYTES) -> BundleInfo:
    """Check a bundle file: its digest (when given), its size and every member; return its identity.

    Raises:
        BundleError: a digest other than ``sha256``, over ``max_bytes``, no member, or a member the rule refuses.
    """
    size = path.stat().st_size
    if size > max_bytes:
        raise BundleError(f"{path.name} is {size} bytes, over the {max_bytes}-byte cap")
    digest = sha256_file(path)
    if sha256 is not None and digest != sha256:
        raise BundleError(f"{path.name}: sha256 {digest} is not the {sha256} its record names")
    count = sum(1 for _ in _members(path))
    if not count:
        raise BundleError(f"{path.name} holds no file")
    return BundleInfo(sha256=digest, bytes=size, files=count)


def unpack_bundle(path: Path, into: Path, *, sha256: str) -> BundleInfo:
    """Unpack a bundle into a NEFF cache folder, after checking its digest and every member.

    Every member is checked before the first file is written, so a refused bundle leaves ``into`` as it was;
    each file is written beside its place and renamed in (a reader never sees half a NEFF).

    Raises:
        BundleError: what :func:`check_bundle` refuses.
    """
    info = check_bundle(path, sha256=sha256)
    into.mkdir(parents=True, exist_ok=True)
    for _, member, data in _members(path):
        target = into / member.name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
    return info
