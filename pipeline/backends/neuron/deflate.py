"""The bundle's gzip stream, written on every core: one ordinary gzip file (RFC 1952) that any gzip reader reads.

``gzip.GzipFile`` compresses on one core at its default level 9 (6.2 MB/s packing a synthetic NEFF cache, issue
36). :class:`GzipWriter` cuts the uncompressed stream into :data:`BLOCK_BYTES` blocks and deflates them in threads
(zlib releases the GIL), each primed with the 32 KiB before it and ended with a sync flush, so their concatenation
is one deflate stream, as pigz writes it. A block whose first :data:`SAMPLE_BYTES` do not shrink at level 1
(random bytes) is stored, not searched for matches. Block edges, levels and priming depend on the bytes alone, so
the same input gives the same file whatever the number of threads (the bundle's digest is its identity).
"""

from __future__ import annotations

import struct
import zlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

#: The deflate level, chosen by measurement (``benchmarks/compiled_cache.py --levels 1,6,9``, docs/methodology.md):
#: on the synthetic cache levels 6 and 9 took 10-20 % more CPU for a bundle 0.2 % of the cache smaller.
LEVEL = 1
#: The uncompressed bytes of one block (one thread's piece of work).
BLOCK_BYTES = 1 << 20
#: The opening of a block compressed at level 1 to tell whether the block compresses at all.
SAMPLE_BYTES = 64 << 10
#: Stored when the sample shrinks by less than this fraction.
STORE_ABOVE = 0.97
_WINDOW = 32 << 10
#: gzip's header: magic, deflate, no flags, mtime 0, no extra flags, OS unknown (255).
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _deflate(block: bytes, primer: bytes, level: int, last: bool) -> bytes:
    if level and len(block) > SAMPLE_BYTES:
        sample = block[:SAMPLE_BYTES]
        if len(zlib.compress(sample, 1)) > STORE_ABOVE * len(sample):
            level = 0
    primed: dict[str, Any] = {"zdict": primer} if primer and level else {}
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15, 9, **primed)
    return compressor.compress(block) + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


class GzipWriter:
    """A binary writer that gzips into ``raw`` (an open file) on ``threads`` threads; :meth:`close` ends the
    stream (and leaves ``raw`` open). At most ``2 x threads`` blocks are in memory at once."""

    def __init__(self, raw: BinaryIO, *, level: int = LEVEL, threads: int = 2) -> None:
        self._raw, self._level = raw, level
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="trncat-deflate")
        self._limit = 2 * max(1, threads)
        self._pending = bytearray()
        self._primer = b""
        self._flying: deque[Future[bytes]] = deque()
        self._crc, self._size, self._closed = 0, 0, False
        raw.write(HEADER)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        data = bytes(data)
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._pending += data
        while len(self._pending) > BLOCK_BYTES:  # the last block waits for close: it ends the stream
            self._submit(bytes(self._pending[:BLOCK_BYTES]), last=False)
            del self._pending[:BLOCK_BYTES]
        return len(data)

    def _submit(self, block: bytes, *, last: bool) -> None:
        self._flying.append(self._pool.submit(_deflate, block, self._primer, self._level, last))
        self._primer = block[-_WINDOW:]
        while len(self._flying) > self._limit:
            self._raw.write(self._flying.popleft().result())

    def tell(self) -> int:
        """The uncompressed bytes written so far (where tarfile is in its archive)."""
        return self._size

    def flush(self) -> None:
        """Nothing to do until :meth:`close` (a block is written whole)."""

    def close(self) -> None:
        """Deflate what is left, write the trailer (CRC-32 and size), and stop the threads."""
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(bytes(self._pending), last=True)
            while self._flying:
                self._raw.write(self._flying.popleft().result())
            self._raw.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> GzipWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._closed = True
            self._pool.shutdown(wait=True, cancel_futures=True)
