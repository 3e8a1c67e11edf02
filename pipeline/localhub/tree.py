"""A repo's file tree at one commit, as a persistent sorted map: path -> entry.

The paths are kept sorted in chunks of about :data:`CHUNK` paths. A commit's tree is its parent's with its
changes applied (:meth:`Tree.changed`): the chunks the changes fall in are rebuilt and every other chunk is shared
with the parent, so a commit costs what it changes (plus one pointer per chunk), not the repo's size. The sorted
order is the listing's index: :meth:`Tree.walk` lists a folder from a cursor in time linear in what it lists.
"""

from __future__ import annotations

import bisect
import json
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import Any

from pipeline.errors import StoreError

#: Paths per chunk: a commit rebuilds the chunks it touches (up to twice this each) and copies one pointer per
#: chunk; 256 keeps both small from one file to a million.
CHUNK = 256

Entry = dict[str, Any]


class Tree(Mapping[str, Entry]):
    """An immutable path -> entry map whose updates share every chunk they do not change."""

    __slots__ = ("_firsts", "_keys", "_len", "_values")

    def __init__(self, items: Mapping[str, Entry] | Iterable[tuple[str, Entry]] = ()) -> None:
        pairs = sorted(dict(items).items())
        parts = [pairs[i : i + CHUNK] for i in range(0, len(pairs), CHUNK)]
        self._set([tuple(k for k, _ in p) for p in parts], [tuple(v for _, v in p) for p in parts], len(pairs))

    def _set(self, keys: list[tuple[str, ...]], values: list[tuple[Entry, ...]], size: int) -> None:
        self._keys: tuple[tuple[str, ...], ...] = tuple(keys)
        self._values: tuple[tuple[Entry, ...], ...] = tuple(values)
        self._firsts: tuple[str, ...] = tuple(k[0] for k in keys)
        self._len = size

    # -- the Mapping ---------------------------------------------------------------------------------
    def __getitem__(self, path: str) -> Entry:
        i = bisect.bisect_right(self._firsts, path) - 1
        if i >= 0:
            keys = self._keys[i]
            j = bisect.bisect_left(keys, path)
            if j < len(keys) and keys[j] == path:
                return self._values[i][j]
        raise KeyError(path)

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(self._keys)

    def __len__(self) -> int:
        return self._len

    def pairs(self) -> Iterator[tuple[str, Entry]]:
        """(path, entry) in path order, without a lookup per path."""
        return chain.from_iterable(zip(k, v, strict=True) for k, v in zip(self._keys, self._values, strict=True))

    # -- positions in the sorted index ---------------------------------------------------------------
    def _position(self, path: str) -> tuple[int, int]:
        """(chunk, index) of the first path >= ``path``."""
        if not self._keys:
            return 0, 0
        i = max(0, bisect.bisect_right(self._firsts, path) - 1)
        j = bisect.bisect_left(self._keys[i], path)
        return (i + 1, 0) if j == len(self._keys[i]) else (i, j)

    def _pairs_from(self, path: str) -> Iterator[tuple[str, Entry]]:
        """(path, entry) of the paths >= ``path``, in order."""
        i, j = self._position(path)
        if i < len(self._keys):
            yield from zip(self._keys[i][j:], self._values[i][j:], strict=True)
            for k, v in zip(self._keys[i + 1 :], self._values[i + 1 :], strict=True):
                yield from zip(k, v, strict=True)

    def _before(self, path: str) -> str | None:
        """The greatest path < ``path``, if any."""
        i, j = self._position(path)
        if j > 0:
            return self._keys[i][j - 1]
        return self._keys[i - 1][-1] if i > 0 else None

    def under(self, prefix: str) -> Iterator[str]:
        """The paths starting with ``prefix``, in order (they sit together in the index)."""
        for path, _ in self._pairs_from(prefix):
            if not path.startswith(prefix):
                return
            yield path

    # -- a commit ------------------------------------------------------------------------------------
    def changed(self, changes: Mapping[str, Entry | None]) -> Tree:
        """This tree with ``changes`` applied (an entry adds or replaces its path, None removes it): the chunks
        the changes fall in are rebuilt, every other one is shared."""
        if not changes:
            return self
        touched: dict[int, dict[str, Entry | None]] = {}
        for path, entry in changes.items():
            touched.setdefault(max(0, bisect.bisect_right(self._firsts, path) - 1), {})[path] = entry
        keys: list[tuple[str, ...]] = []
        values: list[tuple[Entry, ...]] = []
        for i, (k, v) in enumerate(zip(self._keys or ((),), self._values or ((),), strict=True)):
            if i not in touched:
                keys.append(k)
                values.append(v)
                continue
            rows = dict(zip(k, v, strict=True))
            for path, entry in touched[i].items():
                if entry is None:
                    rows.pop(path, None)
                else:
                    rows[path] = entry
            ordered = sorted(rows.items())
            # A chunk that grew past twice the size is split, so that every chunk stays small.
            step = CHUNK if len(ordered) > 2 * CHUNK else len(ordered) or 1
            for n in range(0, len(ordered), step):
                keys.append(tuple(p for p, _ in ordered[n : n + step]))
                values.append(tuple(e for _, e in ordered[n : n + step]))
        out = Tree.__new__(Tree)
        out._set(keys, values, sum(map(len, keys)))
        return out

    # -- the listing ---------------------------------------------------------------------------------
    def walk(
        self, prefix: str, *, recursive: bool, cursor: str | None = None
    ) -> Iterator[tuple[Entry, tuple[str, int]]]:
        """The entries of folder ``prefix`` (``""`` or ``a/b/``) from ``cursor``, each with where a listing resumes
        after it (:func:`cursor` makes the text of one). Each folder comes just before what it holds; without
        ``recursive`` a folder is listed and not entered. Costs what it lists (plus a lookup in the index).

        Raises:
            StoreError: 400 on a cursor no listing of this folder made.
        """
        start, skip = read_cursor(cursor) if cursor else (prefix, 0)
        if not start.startswith(prefix):
            raise StoreError("Bad cursor", status=400)
        before = self._before(start)
        shown = _folders(before, prefix) if before is not None and before.startswith(prefix) else []
        pairs = self._pairs_from(start)
        while (pair := next(pairs, None)) is not None and pair[0].startswith(prefix):
            path, stored = pair
            rest = path[len(prefix) :]
            if not recursive and "/" in rest:
                folder = prefix + rest.split("/", 1)[0]
                yield _folder(folder), (folder + "0", 0)  # "/" sorts just before "0": past the folder
                pairs = self._pairs_from(folder + "0")
                continue
            if recursive:
                folders = _folders(path, prefix)
                common = 0
                while common < min(len(folders), len(shown)) and folders[common] == shown[common]:
                    common += 1
                for n, folder in enumerate(folders[common:][skip:], start=common + skip + 1):
                    yield _folder(folder), (path, n - common)
                shown = folders
            skip = 0
            yield {"type": "file", "path": path} | stored, (path + "\0", 0)


def _folders(path: str, prefix: str) -> list[str]:
    """The folders between ``prefix`` and ``path``, outermost first."""
    parts = path[len(prefix) :].split("/")[:-1]
    return [prefix + "/".join(parts[: n + 1]) for n in range(len(parts))]


def _folder(path: str) -> Entry:
    return {"type": "directory", "oid": "0" * 40, "size": 0, "path": path}


def cursor(resume: tuple[str, int]) -> str:
    """The text of a listing's cursor: resume at a path, so many of its new folders already listed."""
    path, folders_shown = resume
    return urlsafe_b64encode(json.dumps([path, folders_shown]).encode()).decode().rstrip("=")


def read_cursor(text: str) -> tuple[str, int]:
    """The resume point a :func:`cursor` text names.

    Raises:
        StoreError: 400 on text no cursor made.
    """
    try:
        path, shown = json.loads(urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, TypeError):
        raise StoreError("Bad cursor", status=400) from None
    if not isinstance(path, str) or not isinstance(shown, int) or isinstance(shown, bool) or shown < 0:
        raise StoreError("Bad cursor", status=400)
    return path, shown
