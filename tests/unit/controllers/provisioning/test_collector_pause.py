"""The planning step pauses Python's cycle collector and always restores it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from provisioner.controllers.provisioning.planner import _collector_paused


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("collector")
def test_the_collector_is_off_during_a_step_and_back_on_after_it_even_on_errors() -> None:
    gc.enable()
    with _collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError, match="bad pod"), _collector_paused():
        raise ValueError("bad pod")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with _collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
