"""pipeline.hub.together: independent calls run at once, their values in order, a failure raised after all."""

from __future__ import annotations

import contextvars
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
