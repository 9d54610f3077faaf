"""The cycle collector set up for a long run, and put back afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from provisioner.runtime.collector import LONG_RUN_THRESHOLDS, collector_for_long_runs


@pytest.fixture(autouse=True)
def clean_collector() -> Iterator[None]:
    """Each test starts from the interpreter's defaults and leaves them so."""
    before = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_a_long_run_raises_the_thresholds_and_freezes_what_exists() -> None:
    alive = ["made before the run"]
    with collector_for_long_runs():
        assert gc.get_threshold() == LONG_RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
        # frozen objects are out of every generation: full passes skip them
        assert not any(o is alive for o in gc.get_objects())
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    assert any(o is alive for o in gc.get_objects())


def test_the_collector_is_put_back_when_the_run_fails() -> None:
    with pytest.raises(RuntimeError), collector_for_long_runs():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_an_earlier_freeze_is_left_alone() -> None:
    alive = ["frozen before the run"]
    gc.freeze()
    with collector_for_long_runs((5_000, 5, 5)):
        assert gc.get_threshold() == (5_000, 5, 5)
    # the earlier freeze still holds (its count may shrink as frozen objects are freed)
    assert gc.get_freeze_count() > 0
    assert not any(o is alive for o in gc.get_objects())
    assert gc.get_threshold() == (700, 10, 10)


def test_cyclic_garbage_made_during_the_run_is_still_collected() -> None:
    class Node:
        other: object = None

    with collector_for_long_runs():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2
