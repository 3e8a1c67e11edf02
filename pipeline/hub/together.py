"""Independent Hub requests sent together.

A request to the Hub waits a round trip (100-300 ms), so a publish that asks for several things that do not
need each other's answers (the head and the token's user; the summary, the results listing and the scripts'
ids; the latest shards) sends them at once instead of one after another. Each call runs in its own thread,
in a copy of the caller's context, and keeps its own retry budget (:meth:`pipeline.hub.Hub._call`).

The threads are kept between calls, in one pool per nesting level (a call made from a pool's thread goes to the
next level's pool, so no pool's thread ever waits on its own pool: no deadlock), up to :data:`LEVELS` levels;
deeper calls, and calls of more than ``max_workers``, get threads of their own. Starting a thread waits for the
interpreter's lock, which a running thread holds for up to 5 ms at a time: a ``trncat check`` sends three rounds
of requests together, and starting their threads anew each time took a third of a check that asks a near Hub
(``benchmarks/check_scale.py``). A forked child makes its pools anew.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

#: Requests in flight at once at most (huggingface_hub's own parallel downloads use 8).
MAX_TOGETHER = 8
#: Nesting levels served by kept pools (a check sends a round from inside another: two).
LEVELS = 3
#: Threads a kept pool may hold (several callers' rounds at once; started only when none is idle).
POOL_THREADS = 4 * MAX_TOGETHER

_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()
_where = threading.local()


def _forget_pools() -> None:
    """In a forked child: the parent's pools' threads do not exist there."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)


def _mark(level: int) -> None:
    _where.level = level


def _pool(level: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(level)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix=f"trncat-hub-{level}",
                                      initializer=_mark, initargs=(level,))  # fmt: skip
            _pools[level] = pool
        return pool


def at_once(*calls: Callable[[], Any], max_workers: int = MAX_TOGETHER) -> list[Future[Any]]:
    """Run ``calls`` concurrently and wait for all of them.

    Returns:
        One finished future per call, in order: ``result()`` gives its value or raises its error.
    """
    if len(calls) <= 1:  # nothing to overlap: no thread
        return [_run_here(call) for call in calls]
    level = getattr(_where, "level", -1) + 1
    if level < LEVELS and len(calls) <= max_workers:
        pool = _pool(level)
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
        wait(futures)
        return futures
    # Threads of its own, marked past the last level: a call made from one gets threads of its own too.
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls)), thread_name_prefix="trncat-hub",
                            initializer=_mark, initargs=(LEVELS,)) as own:  # fmt: skip
        futures = [own.submit(contextvars.copy_context().run, call) for call in calls]
    return futures


def results(*calls: Callable[[], Any], max_workers: int = MAX_TOGETHER) -> list[Any]:
    """The values of ``calls`` run concurrently, in order; when any failed, the first failure (in order) is raised
    once every call has finished."""
    return [future.result() for future in at_once(*calls, max_workers=max_workers)]


def _run_here(call: Callable[[], Any]) -> Future[Any]:
    future: Future[Any] = Future()
    try:
        future.set_result(call())
    except Exception as exc:  # handed to the caller by result(), as a pool's future would
        future.set_exception(exc)
    return future
