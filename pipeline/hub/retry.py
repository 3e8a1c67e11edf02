"""One retry budget per Hub call: how many more tries, how long to wait, on which clock.

The budget of the running call is held in a context variable, so that :mod:`pipeline.hub.transport` can
tell the requests huggingface_hub makes for a Hub call (retry policy ours) from any other (left alone).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: The longest ``Retry-After`` honoured; a Hub asking for more is treated as if it asked for this.
MAX_RETRY_AFTER_S = 600.0

_ACTIVE: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("trncat_hub_budget", default=None)


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
