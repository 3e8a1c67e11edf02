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

The packing is deterministic (sorted members, zero times and owners, gzip without a time, :mod:`.deflate`'s block
edges), so a run that compiled the same graphs gives the same bytes, and the same sha256: what publish deduplicates
by. Reading is one pass over one open file (:func:`check_bundle`): the digest, every member's rule and its bytes, in
:data:`CHUNK_BYTES` pieces (a member is never held whole, but a JSON file of at most :data:`MAX_METADATA_BYTES`);
unpacking writes into a private folder beside its place, renamed in only once the digest and every member passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from pipeline.backends.neuron.deflate import LEVEL, GzipWriter
from pipeline.errors import BundleError

#: The bundle file beside its record: ``<record stem>.neff-cache.tar.gz``.
BUNDLE_SUFFIX = ".neff-cache.tar.gz"
#: The largest bundle published. 2 GiB downloads in about 20 s at 100 MB/s, far less than the minutes of the
#: compile it saves; past it a model's graphs would take a large share of the compiled-cache repo, one model at
#: a time. Over it: no bundle, and the record's ``compiled_cache_skipped`` says so.
MAX_BUNDLE_BYTES = 2 * 1024**3
#: The most a bundle may unpack to (a small archive of zeros must not fill a user's disk).
MAX_UNPACKED_BYTES = 4 * MAX_BUNDLE_BYTES
#: The most one member may be: a NEFF is one compiled graph, and a bundle is at most 2 GiB.
MAX_MEMBER_BYTES = MAX_BUNDLE_BYTES
#: The most a JSON metadata file may be (it is parsed whole; the cache's metadata is a few KB).
MAX_METADATA_BYTES = 16 << 20
#: The most an extended (pax or GNU long-name) header may be: tarfile reads one whole into memory.
MAX_HEADER_BYTES = 64 << 10
#: The piece a member is read and written in.
CHUNK_BYTES = 1 << 20
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
        "limits": {
            "files": MAX_FILES,
            "depth": MAX_DEPTH,
            "unpacked_bytes": MAX_UNPACKED_BYTES,
            "member_bytes": MAX_MEMBER_BYTES,
            "metadata_bytes": MAX_METADATA_BYTES,
            "header_bytes": MAX_HEADER_BYTES,
        },
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
    if size < 0 or size > MAX_MEMBER_BYTES:
        return f"{name!r} is {size} bytes, over the {MAX_MEMBER_BYTES} one file of a bundle may be"
    if name.endswith(METADATA_SUFFIX) and size > MAX_METADATA_BYTES:
        return f"{name!r} is {size} bytes, over the {MAX_METADATA_BYTES} a metadata file may be"
    return None


def content_problem(name: str, data: bytes, *, whole: bool = True) -> str | None:
    """Why a member's bytes may not be in a bundle (code or a serialized object; JSON that does not parse).

    ``data`` is the member (a JSON file always whole), or with ``whole=False`` its opening only."""
    if data.startswith(FORBIDDEN_OPENINGS):
        return f"{name!r} starts like a pickle, a zip or a script, not a NEFF cache file"
    if name.endswith(METADATA_SUFFIX) and whole:
        try:
            json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return f"{name!r} is not JSON"
    return None


#: The member types of a bundle: plain regular files (a sparse, contiguous or linked entry is none).
_REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE)
_EXTENDED = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
             tarfile.GNUTYPE_LONGLINK)  # fmt: skip


class _BoundedInfo(tarfile.TarInfo):
    """A member header that refuses an extended header over :data:`MAX_HEADER_BYTES` before tarfile reads it."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > MAX_HEADER_BYTES:
            raise tarfile.HeaderError(f"an extended header of {self.size} bytes, over {MAX_HEADER_BYTES}")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


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


class _Digesting:
    """The bundle file as it is written (its sha256 and size kept on the way: no second read) or as tarfile reads
    it (hashed on the way, so one read both checks its digest and unpacks it; past ``limit`` bytes, refused)."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.digest, self.size, self.limit = raw, hashlib.sha256(), 0, limit

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(CHUNK_BYTES if size < 0 else size)
        self.digest.update(data)
        self.size += len(data)
        if self.size > self.limit:
            raise BundleError(f"the bundle grew over {self.limit} bytes while it was read")
        return data

    def finish(self) -> str:
        """Hash the rest of the file (what follows the archive's end) and return the digest."""
        while self.read(CHUNK_BYTES):
            pass
        return self.digest.hexdigest()


def _add(tar: tarfile.TarFile, cache_dir: Path, name: str, path: Path) -> None:
    """One cache file into the bundle, in pieces (a JSON file, bounded, whole: it must parse)."""
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as source:
        size = os.fstat(source.fileno()).st_size
        problem = member_problem(name, is_file=True, size=size)
        head = source.read(size if name.endswith(METADATA_SUFFIX) else min(size, CHUNK_BYTES))
        problem = problem or content_problem(name, head, whole=name.endswith(METADATA_SUFFIX))
        if problem:
            raise BundleError(f"the NEFF cache {cache_dir} holds {problem}: no bundle")
        source.seek(0)
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = size, 0o644, 0
        tar.addfile(info, source)


def pack_cache(
    cache_dir: Path, out: Path, *, max_bytes: int = MAX_BUNDLE_BYTES, threads: int = 2, level: int = LEVEL
) -> BundleInfo:
    """Pack a NEFF cache folder into the bundle ``out`` (written whole or not at all), gzip'd at ``level`` on
    ``threads`` threads (:class:`~pipeline.backends.neuron.deflate.GzipWriter`: the same bytes whatever their
    number).

    Raises:
        BundleError: the folder is empty, holds a file of another kind (nothing is written), or the bundle is over
            ``max_bytes`` (it is removed).
    """
    files = _cache_files(cache_dir) if cache_dir.is_dir() else []
    if not files:
        raise BundleError(f"the NEFF cache {cache_dir} holds no file: no bundle")
    if len(files) > MAX_FILES:
        raise BundleError(f"the NEFF cache {cache_dir} holds {len(files)} files, over {MAX_FILES}: no bundle")
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    partial = Path(name)
    try:
        with open(handle, "wb") as raw:
            written = _Digesting(raw, max_bytes)
            with GzipWriter(written, threads=threads, level=level) as zipped:  # type: ignore[arg-type]
                with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                    tar.copybufsize = CHUNK_BYTES
                    for member, path in files:
                        _add(tar, cache_dir, member, path)
        if written.size > max_bytes:
            raise BundleError(f"the bundle is {written.size} bytes, over the {max_bytes}-byte cap: no bundle")
        os.chmod(partial, 0o644)
        os.replace(partial, out)
        return BundleInfo(sha256=written.digest.hexdigest(), bytes=written.size, files=len(files))
    finally:
        partial.unlink(missing_ok=True)


#: Opens the file a member goes to (by its name in the bundle), or None: check only.
Sink = Callable[[str], IO[bytes]]


def _members(reader: _Digesting, label: str, sink: Sink | None) -> int:
    """Check (and with ``sink``, write) every member in one pass; the number of files. Raises BundleError."""
    count, total, seen = 0, 0, set()
    with tarfile.open(fileobj=reader, mode="r|gz", bufsize=CHUNK_BYTES, tarinfo=_BoundedInfo) as tar:  # type: ignore[call-overload]
        for member in tar:
            if count >= MAX_FILES:
                raise BundleError(f"{label} holds more than {MAX_FILES} files")
            problem = member_problem(member.name, is_file=member.type in _REGULAR, size=member.size)
            if problem is None and member.name in seen:
                problem = f"{member.name!r} is in it twice"
            if problem:
                raise BundleError(f"{label} refused: {problem}")
            seen.add(member.name)
            count, total = count + 1, total + member.size
            if total > MAX_UNPACKED_BYTES:
                raise BundleError(f"{label} unpacks to more than {MAX_UNPACKED_BYTES} bytes")
            _copy(tar, member, label, sink)
    return count


def _copy(tar: tarfile.TarFile, member: tarfile.TarInfo, label: str, sink: Sink | None) -> None:
    handle = tar.extractfile(member)
    assert handle is not None  # a regular member always has a file
    metadata = member.name.endswith(METADATA_SUFFIX)
    first = handle.read(member.size if metadata else min(member.size, CHUNK_BYTES))
    if problem := content_problem(member.name, first, whole=metadata):
        raise BundleError(f"{label} refused: {problem}")
    if len(first) < min(member.size, CHUNK_BYTES):
        raise BundleError(f"{label} is cut short in {member.name!r}")
    with contextlib.nullcontext() if sink is None else sink(member.name) as out:
        piece, left = first, member.size - len(first)
        while piece:
            if out is not None:
                out.write(piece)
            piece = handle.read(min(CHUNK_BYTES, left)) if left > 0 else b""
            left -= len(piece)
    if left:
        raise BundleError(f"{label} is cut short in {member.name!r}")


def check_bundle(
    path: Path, *, sha256: str | None = None, max_bytes: int = MAX_BUNDLE_BYTES, sink: Sink | None = None
) -> BundleInfo:
    """Check a bundle in one read: its size, every member under the rule (with ``sink``, each written as it is
    read; without, nothing is written) and its digest (when given), from one open file, in :data:`CHUNK_BYTES`
    pieces.

    Raises:
        BundleError: over ``max_bytes``, a digest other than ``sha256``, no member, or a member the rule refuses.
    """
    try:
        with path.open("rb") as raw:
            size = os.fstat(raw.fileno()).st_size
            if size > max_bytes:
                raise BundleError(f"{path.name} is {size} bytes, over the {max_bytes}-byte cap")
            reader = _Digesting(raw, max_bytes)
            count = _members(reader, path.name, sink)
            digest = reader.finish()
    except (tarfile.TarError, OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BundleError(
            f"{path.name} is not a readable bundle (a gzip'd tar), or could not be unpacked: {exc}"
        ) from exc
    if sha256 is not None and digest != sha256:
        raise BundleError(f"{path.name}: sha256 {digest} is not the {sha256} its record names")
    if not count:
        raise BundleError(f"{path.name} holds no file")
    return BundleInfo(sha256=digest, bytes=reader.size, files=count)


def _create(root: Path, name: str) -> IO[bytes]:
    """A new file at ``name`` under the private folder ``root``: never an existing file, never through a link."""
    target = root.joinpath(*name.split("/"))
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb")


def unpack_bundle(path: Path, into: Path, *, sha256: str) -> BundleInfo:
    """Unpack a bundle into the new NEFF cache folder ``into`` (a folder of its own: never into one that exists).

    One read checks the digest and every member while it writes them into a private folder beside ``into``
    (``mkdtemp``: a fresh name, mode 0700); only when all passed is it renamed to ``into``, so a refused bundle
    leaves nothing, and a reader never sees half a cache.

    Raises:
        BundleError: what :func:`check_bundle` refuses; ``into`` exists already.
    """
    if into.exists() or into.is_symlink():
        raise BundleError(f"{into} exists: a bundle is unpacked into a folder of its own, never over one")
    into.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{into.name}.", suffix=".partial", dir=into.parent))
    try:
        info = check_bundle(path, sha256=sha256, sink=lambda name: _create(work, name))
        try:
            os.rename(work, into)  # refused when another unpack made it meanwhile (a folder that is not empty)
        except OSError as exc:
            raise BundleError(f"{into} exists: a bundle is unpacked into a folder of its own, never over one") from exc
        return info
    finally:
        shutil.rmtree(work, ignore_errors=True)
