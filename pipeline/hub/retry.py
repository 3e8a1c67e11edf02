"""One retry budget per Hub call: how many more tries, how long to wait, on which clock; and a deadline.

The budget of the running call is held in a context variable, so that :mod:`pipeline.hub.transport` can
tell the requests huggingface_hub makes for a Hub call (retry policy ours) from any other (left alone).

A deadline (:func:`deadline`, one per publish) bounds a whole sequence of Hub calls: no call starts, and no
retry waits, past it, and :mod:`pipeline.hub.transport` cuts each request's timeouts to what is left of it. It
is a context variable too, so the calls :mod:`pipeline.hub.together` sends from its threads keep it.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: The longest ``Retry-After`` honoured; a Hub asking for more is treated as if it asked for this.
MAX_RETRY_AFTER_S = 600.0

_ACTIVE: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("trncat_hub_budget", default=None)
#: The monotonic time (``time.monotonic``) by which the running sequence of Hub calls must be done, or None.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("trncat_hub_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Every Hub call inside the ``with`` block (this context, and the threads it hands its context to) ends within
    ``seconds`` from now; an enclosing deadline that ends sooner stays in force. Yields the monotonic end time."""
    end = time.monotonic() + max(seconds, 0.0)
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(outer, end))
    try:
        yield _DEADLINE.get() or end
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds left before the running deadline (0 once it passed), or None when no deadline runs."""
    end = _DEADLINE.get()
    return None if end is None else max(end - time.monotonic(), 0.0)


@dataclass
class Budget:
    """Retries left to one Hub call, with capped exponential backoff and an injectable clock.

    Args:
        sleep: Waits this many seconds (tests pass a fake that only records).
        max_retries: Tries after the first.
        base_delay: First backoff delay; doubles per retry up to ``max_delay``.
        max_delay: Cap of the backoff delay (a ``Retry-After`` is honoured up to :data:`MAX_RETRY_AFTER_S`).
    """

    sleep: Callable[[float], None]
    max_retries: int
    base_delay: float
    max_delay: float
    retries: int = 0
    waits: list[float] = field(default_factory=list)

    @property
    def spent(self) -> bool:
        return self.retries >= self.max_retries

    @property
    def attempts(self) -> int:
        return self.retries + 1

    def delay(self, retry_after: float | None) -> float:
        """Seconds to wait before the next try: the server's ``Retry-After``, else the backoff."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        return min(self.max_delay, self.base_delay * 2**self.retries)

    def backoff_total(self) -> float:
        """Seconds the whole budget waits when no answer names a ``Retry-After``: the sum of its backoffs."""
        return sum(min(self.max_delay, self.base_delay * 2**n) for n in range(self.max_retries))

    def wait(self, seconds: float) -> None:
        """Spend one retry and wait ``seconds``."""
        self.retries += 1
        self.waits.append(seconds)
        self.sleep(seconds)

    @contextlib.contextmanager
    def active(self) -> Iterator[Budget]:
        """Make this the budget of the requests made inside the ``with`` block (this thread and context)."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


def active_budget() -> Budget | None:
    """The budget of the Hub call running in this context, or None outside a Hub call."""
    return _ACTIVE.get()
