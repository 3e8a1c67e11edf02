"""All-or-nothing updates of a folder: stage a copy, change the copy, swap it in with one rename.

A build killed at any moment leaves the target folder exactly as it was before or as it is after, never in
between. The staged copy hard-links the unchanged files (no data copied), so every write in the stage must
replace a file (:func:`write_bytes`), never modify one in place, or it would change the live folder too.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import DatasetError

logger = logging.getLogger(__name__)

#: Folders being built only to be read once and thrown away (a publish's mirror), as absolute path strings
#: ending in a separator: see :func:`scratch`.
_SCRATCH: set[str] = set()
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_STAGE_PREFIX = ".trncat-stage-"


@contextlib.contextmanager
def scratch(root: Path) -> Iterator[None]:
    """Within the block, ``root`` is a scratch folder: writes under it skip ``fsync`` and a staged build of
    it changes it in place. For a folder that is thrown away when the work fails (a publish's mirror, which
    a killed publish never reuses), durability and atomicity buy nothing and cost a disk flush per file and
    a copy of the tree per build."""
    prefix = os.path.join(os.path.abspath(root), "")
    _SCRATCH.add(prefix)
    try:
        yield
    finally:
        _SCRATCH.discard(prefix)


def _in_scratch(path: Path) -> bool:
    if not _SCRATCH:
        return False
    where = os.path.join(os.path.abspath(path), "")
    return any(where.startswith(prefix) for prefix in _SCRATCH)


class InTheWay(DatasetError):
    """A file stands where a folder must be (``data/latest`` a file), or a folder where a file must be."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}; nothing was written")
        self.path, self.what = path, what


def _file_above(path: Path) -> Path:
    """The nearest existing path above ``path`` that is no folder (what stopped a ``mkdir``)."""
    for parent in [path, *path.parents]:
        if parent.exists() and not parent.is_dir():
            return parent
    return path


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (temp file + rename; never writes through an existing inode).

    Raises:
        InTheWay: a file stands where a folder above ``path`` must be, or ``path`` is a folder.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InTheWay(_file_above(path.parent), "a file where a folder must be") from None
    if path.is_dir():
        raise InTheWay(path, "a folder where a file must be")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if not _in_scratch(path):
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk leaves no partial temp file behind
        tmp.unlink(missing_ok=True)
        raise


def link_files(source: Path, target: Path, files: list[str]) -> None:
    """Make each of ``files`` (regular files under ``source``, as relative paths) the same file under ``target``: a
    hard link (no data copied, nothing to flush), or a copy where a link cannot be made (another filesystem). Each
    source must be only ever replaced, never written through, as every file written here is; ``target`` (a fresh
    stage) holds none of them yet. Each folder is made once: at 100,000 models' scripts, a ``mkdir`` per file took
    most of the time.

    Raises:
        InTheWay: a file stands where a folder must be, or a folder where a file must be.
    """
    made: set[str] = set()
    for relative in files:
        path = os.path.join(target, relative)
        parent = os.path.dirname(path)
        if parent not in made:
            try:
                try:
                    os.mkdir(parent)  # its own parent is there already, mostly: one call, not makedirs' walk
                except FileNotFoundError:
                    os.makedirs(parent, exist_ok=True)
                except FileExistsError:
                    if not os.path.isdir(parent):
                        raise
            except (FileExistsError, NotADirectoryError):
                raise InTheWay(_file_above(Path(parent)), "a file where a folder must be") from None
            made.add(parent)
        try:
            os.link(os.path.join(source, relative), path, follow_symlinks=False)
        except FileExistsError:
            if os.path.isdir(path):
                raise InTheWay(Path(path), "a folder where a file must be") from None
            os.unlink(path)
            os.link(os.path.join(source, relative), path, follow_symlinks=False)
        except OSError:  # another filesystem, or no hard links here
            write_bytes(Path(path), (source / relative).read_bytes())


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False when the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def _link_copy(source: Path, target: Path) -> None:
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link, symlinks=True)


def clean_stale_stages(target: Path) -> None:
    """Remove stages left behind by builds that were killed."""
    parent = target.resolve().parent
    if not parent.is_dir():
        return
    for stale in parent.glob(f"{_STAGE_PREFIX}{target.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """Yield a staged copy of ``target`` to change; on success it replaces ``target`` in one atomic step.

    An exception inside the block discards the stage and leaves ``target`` untouched. A :func:`scratch`
    folder is its own stage.
    """
    target = Path(target)
    if _in_scratch(target):
        target.mkdir(parents=True, exist_ok=True)
        yield target
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_stages(target)
    stage = target.resolve().parent / f"{_STAGE_PREFIX}{target.name}-{uuid.uuid4().hex[:12]}"
    if target.exists():
        _link_copy(target, stage)
    else:
        stage.mkdir()
    try:
        yield stage
    except InTheWay as exc:  # named in the target, not in the stage that is thrown away
        shutil.rmtree(stage, ignore_errors=True)
        where = exc.path.resolve()
        inside = where.is_relative_to(stage) if where != stage else False
        raise InTheWay(target / where.relative_to(stage) if inside else exc.path, exc.what) from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    if not target.exists():
        os.rename(stage, target)
        return
    if not _exchange(stage, target):
        # No atomic exchange on this filesystem: two renames, with a brief window where target is absent.
        logger.warning("atomic folder exchange unsupported here; falling back to two renames")
        old = stage.with_name(stage.name + "-old")
        os.rename(target, old)
        os.rename(stage, target)
        stage = old
    shutil.rmtree(stage, ignore_errors=True)
