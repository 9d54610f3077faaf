"""A pure function computed in a forked child: its answer, its errors, a late or dead child."""

import os
import select
import threading
import time
from collections.abc import Iterator

import pytest

from solver.forked import Forked, fork_allowed
from tests.freshfork import run_counting_forks


def _answer() -> dict[str, list[int]]:
    return {"squares": [n * n for n in range(1000)]}


def test_the_child_sends_back_what_the_function_returns() -> None:
    child = Forked.start(lambda: [_answer()])
    assert child is not None
    assert child.result(time.monotonic() + 60) == (True, _answer())


def test_what_the_child_sent_in_time_is_taken_after_the_deadline() -> None:
    # the search asks for the bound once its first polish is done, maybe past the time limit
    child = Forked.start(lambda: [_answer()])
    assert child is not None
    assert select.select([child._readable], [], [], 60)[0]  # sent
    assert child.result(time.monotonic() - 1) == (True, _answer())


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


def test_ready_says_without_waiting_whether_a_value_has_come() -> None:
    child = Forked.start(_first_then_slow)
    assert child is not None
    try:
        assert select.select([child._readable], [], [], 60)[0]  # "first" sent
        assert child.ready()
        assert child.next(time.monotonic() + 60) == (True, "first")
        started = time.monotonic()
        assert not child.ready()  # "second" is 30 s away
        assert time.monotonic() - started < 10
    finally:
        child.close()
    assert child.ready()  # closed: ``next`` answers at once


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
    # servers left by earlier tests may run threads here
    assert fork_allowed() == (threading.active_count() == 1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not fork_allowed()
    finally:
        stop.set()
        other.join()


def test_a_solve_forks_its_greedy_phase_in_a_process_without_threads() -> None:
    # a fresh interpreter, as `jointer plan`: the cost-aware plan and its bound come from a
    # forked child, and the plan keeps every rule
    program = """
from solver import cpsat
from solver.config import SolverConfig
from solver.greedy import cost_aware_ffd
from solver.validate import violations
from tests.freshfork import run_counting_forks
from tests.unit.solver.synthetic import diverse
problem = diverse(600)
plan = cpsat.solve(problem, SolverConfig(time_limit_seconds=20, num_workers=2))
assert violations(problem, plan) == [], "a rule broken"
assert plan.cost_micros <= cost_aware_ffd(problem).cost_micros, "dearer than greedy"
print(len(forks))
"""
    assert run_counting_forks(program) == ["1"]
