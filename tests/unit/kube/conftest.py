"""Fixtures for the in-memory API tests: a fake clock and an `InMemoryKube` on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from provisioner.kube.memory import InMemoryKube


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> InMemoryKube:
    return InMemoryKube(clock=clock)
