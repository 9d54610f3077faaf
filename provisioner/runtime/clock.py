"""Clocks: the only way controllers learn the time.

Controllers never read the wall clock; they are handed a :class:`Clock`. Production wires a
:class:`SystemClock`; tests and `jointer simulate` wire a :class:`FakeClock` that moves only
when told to.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """A source of the current time."""

    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for durations)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


class FakeClock:
    """A clock that moves only when :meth:`step` or :meth:`set` is called (thread-safe)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._origin = self._now
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The fake current time."""
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        """Seconds since the clock was created."""
        with self._lock:
            return (self._now - self._origin).total_seconds()

    def step(self, delta: timedelta) -> datetime:
        """Move forward by ``delta`` and return the new time."""
        if delta < timedelta(0):
            raise ValueError("a clock cannot step backwards")
        with self._lock:
            self._now += delta
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (not before the current time)."""
        with self._lock:
            if when < self._now:
                raise ValueError("a clock cannot go backwards")
            self._now = when
