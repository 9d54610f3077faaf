"""The provisioning batch window: 1 s idle, 10 s max, uid de-duplication, on a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from provisioner.controllers.provisioning.batcher import Batcher

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_no_batch_is_open_without_triggers():
    batcher = Batcher()
    assert batcher.due() is None
    assert batcher.wait(T0) is None
    assert not batcher.ready(T0)


def test_batch_closes_after_idle_time():
    batcher = Batcher()
    batcher.trigger("a", s(0))
    assert batcher.due() == s(1)
    assert not batcher.ready(s(0.9))
    assert batcher.ready(s(1))


def test_new_triggers_extend_the_idle_window_up_to_max():
    batcher = Batcher()
    for i in range(20):
        batcher.trigger(f"p{i}", s(i * 0.9))
    assert batcher.due() == s(10)


def test_duplicate_uid_does_not_extend_the_window():
    batcher = Batcher()
    assert batcher.trigger("a", s(0))
    assert not batcher.trigger("a", s(0.5))
    assert batcher.due() == s(1)


def test_close_returns_uids_and_resets():
    batcher = Batcher(idle=timedelta(seconds=2), max=timedelta(seconds=5))
    batcher.trigger("a", s(0))
    batcher.trigger("b", s(1))
    assert batcher.wait(s(1)) == timedelta(seconds=2)
    assert batcher.close() == frozenset({"a", "b"})
    assert not batcher.is_open
    batcher.trigger("a", s(10))
    assert batcher.due() == s(12)
