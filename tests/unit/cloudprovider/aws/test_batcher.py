"""The batcher: idle and max windows on an injected clock, per-caller results, errors to all."""

from __future__ import annotations

import pytest

from cloudprovider.aws.batcher import Batcher


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _batcher(clock: Clock, calls: list[list[str]]) -> Batcher[str, str]:
    def execute(items: list[str]) -> list[str]:
        calls.append(list(items))
        return [item.upper() for item in items]

    return Batcher(executor=execute, hasher=lambda item: item[0], clock=clock)


def test_identical_items_within_the_idle_window_run_as_one_call():
    clock, calls = Clock(), list[list[str]]()
    batcher = _batcher(clock, calls)

    first = batcher.submit("a1")
    clock.now = 0.02
    second = batcher.submit("a2")
    other = batcher.submit("b1")
    clock.now = 0.05

    assert batcher.flush() == 0  # idle window restarted at 0.02
    clock.now = 0.06
    assert batcher.flush() == 2

    assert sorted(calls) == [["a1", "a2"], ["b1"]]
    assert (first.result(), second.result(), other.result()) == ("A1", "A2", "B1")


def test_the_max_window_bounds_a_busy_bucket():
    clock, calls = Clock(), list[list[str]]()
    batcher = _batcher(clock, calls)

    for step in range(40):
        clock.now = step * 0.03
        batcher.submit(f"a{step}")
        batcher.flush()

    assert len(calls) == 1
    assert len(calls[0]) == 35  # submitted up to 1.02 s, flushed once the 1 s window passed
    assert batcher.next_due() == pytest.approx(0.035)


def test_executor_errors_go_to_every_waiter():
    def explode(items: list[str]) -> list[str]:
        raise RuntimeError("boom")

    batcher: Batcher[str, str] = Batcher(executor=explode, hasher=lambda i: 0, clock=Clock())
    futures = [batcher.submit("a"), batcher.submit("b")]

    batcher.flush(force=True)

    for future in futures:
        with pytest.raises(RuntimeError):
            future.result()


def test_next_due_is_none_when_idle():
    assert _batcher(Clock(), []).next_due() is None
