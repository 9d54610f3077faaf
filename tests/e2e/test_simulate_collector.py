"""A replay runs with the cycle collector set up for a long run, as the controller does."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from provisioner.runtime.collector import LONG_RUN_THRESHOLDS
from tests.e2e.conftest import bundled, run, shortened

pytestmark = pytest.mark.usefixtures("test_catalog")


def test_the_replay_tunes_the_collector_and_puts_it_back() -> None:
    before = gc.get_threshold()
    seen: list[tuple[tuple[int, int, int], int]] = []

    def sample(_: Any) -> None:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    report, _ = run(
        shortened(bundled("deployment-0-to-200"), 180.0), progress=sample, progress_every=60.0
    )
    assert report["summary"]["podsScheduled"] > 0
    assert seen
    assert all(thresholds == LONG_RUN_THRESHOLDS and frozen > 0 for thresholds, frozen in seen)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
