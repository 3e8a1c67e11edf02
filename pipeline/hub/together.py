"""Independent Hub requests sent together.

A request to the Hub waits a round trip (100-300 ms), so a publish that asks for several things that do not
need each other's answers (the head and the token's user; the summary, the results listing and the scripts'
ids; the latest shards) sends them at once instead of one after another. Each call runs in its own thread,
in a copy of the caller's context, and keeps its own retry budget (:meth:`pipeline.hub.Hub._call`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

#: Requests in flight at once at most (huggingface_hub's own parallel downloads use 8).
MAX_TOGETHER = 8


def at_once(*calls: Callable[[], Any], max_workers: int = MAX_TOGETHER) -> list[Future[Any]]:
    """Run ``calls`` concurrently and wait for all of them.

    Returns:
        One finished future per call, in order: ``result()`` gives its value or raises its error.
    """
    if len(calls) <= 1:  # nothing to overlap: no thread
        return [_run_here(call) for call in calls]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls)), thread_name_prefix="trncat-hub") as pool:
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
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
