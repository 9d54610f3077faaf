"""The state-memory bench: the informer path it measures fills the cache, whole or chunked."""

from __future__ import annotations

import pytest

from bench.state_memory import measure_informer


@pytest.mark.parametrize("paged", [True, False])
def test_the_informer_path_fills_the_cache(paged: bool) -> None:
    result = measure_informer(4, 1100, trace=True, paged=paged)
    assert result["pods"] == 1100
    assert 0 < result["held_mib"] <= result["peak_mib"]
