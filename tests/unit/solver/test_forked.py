"""A pure function computed in a forked child: its answer, its errors, a late or dead child."""

import os
import threading
import time
from collections.abc import Iterator

import pytest

from solver.forked import Forked, fork_allowed


def _answer() -> dict[str, list[int]]:
    return {"squares": [n * n for n in range(1000)]}


def test_the_child_sends_back_what_the_function_returns() -> None:
    child = Forked.start(lambda: [_answer()])
    assert child is not None
    assert child.result(time.monotonic() + 60) == (True, _answer())


def _first_then_slow() -> Iterator[str]:
    yield "first"
    time.sleep(30)
    yield "second"


def test_each_value_comes_back_as_soon_as_the_child_has_it() -> None:
    child = Forked.start(_first_then_slow)
    assert child is not None
    started = time.monotonic()
    assert child.next(started + 60) == (True, "first")
    child.close()  # the second is not waited for
    assert time.monotonic() - started < 10
    assert child.next(started + 60) == (False, None)


class _RefusedError(Exception):
    pass


def _refuse() -> Iterator[int]:
    yield 1
    raise _RefusedError("no")


def test_an_exception_in_the_child_is_raised_here() -> None:
    child = Forked.start(_refuse)
    assert child is not None
    assert child.next(time.monotonic() + 60) == (True, 1)
    with pytest.raises(_RefusedError, match="no"):
        child.next(time.monotonic() + 60)


def _dies() -> list[int]:
    os._exit(3)


def _sleeps() -> list[int]:
    time.sleep(30)
    return [1]


def test_a_child_that_dies_or_is_late_gives_no_answer() -> None:
    dead = Forked.start(_dies)
    assert dead is not None
    assert dead.result(time.monotonic() + 60) == (False, None)
    late = Forked.start(_sleeps)
    assert late is not None
    started = time.monotonic()
    assert late.result(started + 0.2) == (False, None)
    # killed at the deadline, not waited for
    assert time.monotonic() - started < 10


def test_no_fork_while_another_thread_runs() -> None:
    assert fork_allowed()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not fork_allowed()
    finally:
        stop.set()
        other.join()
    assert fork_allowed()
