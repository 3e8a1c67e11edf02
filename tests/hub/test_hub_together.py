"""pipeline.hub.together: independent calls run at once, their values in order, a failure raised after all."""

from __future__ import annotations

import contextvars
import os
import threading
import time

import pytest

from pipeline.hub import together

WHO = contextvars.ContextVar("who", default="nobody")


def test_calls_run_at_once_and_their_values_come_in_order() -> None:
    # Three calls that each wait for the other two: run one after another, the barrier would break.
    barrier = threading.Barrier(3, timeout=10)

    def call(value: int) -> int:
        barrier.wait()
        return value

    assert together.results(lambda: call(1), lambda: call(2), lambda: call(3)) == [1, 2, 3]


def test_a_failure_is_raised_once_every_call_has_finished() -> None:
    finished: list[str] = []

    def fails() -> None:
        raise ValueError("the first failure")

    def slow() -> str:
        time.sleep(0.2)
        finished.append("slow")
        return "done"

    with pytest.raises(ValueError, match="the first failure"):
        together.results(fails, slow, lambda: 1 / 0)
    assert finished == ["slow"]
    first, second = together.at_once(fails, slow)
    assert isinstance(first.exception(), ValueError) and second.result() == "done"


def test_each_call_sees_the_callers_context_and_one_call_runs_here() -> None:
    WHO.set("caller")
    here = threading.get_ident()
    assert together.results(WHO.get, WHO.get) == ["caller", "caller"]
    assert together.results(threading.get_ident) == [here]
    (alone,) = together.at_once(lambda: 1 / 0)
    assert isinstance(alone.exception(), ZeroDivisionError)
    assert together.results() == []


def test_the_threads_are_kept_between_calls_and_nested_calls_never_wait_on_their_own_pool() -> None:
    def name() -> str:
        time.sleep(0.05)
        return threading.current_thread().name

    first = together.results(name, name)

    def pools() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("trncat-hub")}

    threads = pools()
    again = together.results(name, name)
    assert pools() == threads  # no thread started for the second round
    assert all(n.startswith("trncat-hub-0") for n in first + again) and len(set(again)) == 2

    # Each level's calls fill every thread a pool may hold and wait on the next level's: no level waits on itself.
    def nest(depth: int) -> int:
        if depth == together.LEVELS + 1:
            return 1
        return sum(together.results(*(lambda: nest(depth + 1) for _ in range(2))))

    assert nest(0) == 2 ** (together.LEVELS + 1)
    barrier = threading.Barrier(together.MAX_TOGETHER, timeout=10)
    assert together.results(*(barrier.wait for _ in range(together.MAX_TOGETHER))) is not None
    assert len(together.results(*(lambda: 1 for _ in range(together.MAX_TOGETHER + 3)))) == together.MAX_TOGETHER + 3


def test_a_forked_child_makes_its_pools_anew() -> None:
    together.results(int, int)  # the parent's pools hold threads
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are not here, a round must still run
        code = 0 if together.results(lambda: 1, lambda: 2) == [1, 2] else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
