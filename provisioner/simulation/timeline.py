"""Virtual time: the clock every simulated component reads and the discrete-event queue.

The :class:`Timeline` owns a :class:`~provisioner.runtime.clock.FakeClock` and a heap of
timed actions. :meth:`Timeline.run_until` pops the earliest action, moves the clock to its time
and runs it; actions schedule more actions. Nothing sleeps: a two-hour scenario is as long as
its actions take to run. Ties are broken by scheduling order, so a run is deterministic.

An action may carry a key: scheduling a key that is already queued keeps the earlier of the two
times (a work queue's de-duplication), and keyed actions can be cancelled.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from provisioner.runtime.clock import FakeClock

__all__ = ["DEFAULT_START", "LivelockError", "Timeline"]

DEFAULT_START: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""Virtual time zero: scenario times are seconds after it."""
MAX_ACTIONS_PER_INSTANT: Final = 200_000
"""More actions than this at one virtual instant means something requeues itself forever."""
_RESOLUTION: Final = 6  # microseconds, the resolution of timedelta


class LivelockError(RuntimeError):
    """Actions kept scheduling each other at the same virtual instant."""


@dataclass(order=True, slots=True)
class _Entry:
    at: float
    sequence: int
    action: Callable[[], None] = field(compare=False)
    key: Hashable | None = field(default=None, compare=False)
    cancelled: bool = field(default=False, compare=False)


class Timeline:
    """A virtual clock and the actions queued on it.

    Args:
        start: the wall-clock-looking time of virtual second zero.
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self.clock = FakeClock(start)
        self.start = start
        self._heap: list[_Entry] = []
        self._keyed: dict[Hashable, _Entry] = {}
        self._sequence = itertools.count()
        self._instant = -1.0
        self._at_instant = 0
        self._seconds = 0.0
        self.actions_run = 0

    @property
    def now(self) -> float:
        """Virtual seconds since the start."""
        return self._seconds

    def timer(self) -> float:
        """Monotonic virtual seconds (for TTL caches; cheap: no lock, no datetime)."""
        return self._seconds

    def at_seconds(self, seconds: float) -> datetime:
        """The datetime of a virtual time."""
        return self.start + timedelta(seconds=seconds)

    def seconds_of(self, moment: datetime) -> float:
        """The virtual time of a datetime."""
        return round((moment - self.start).total_seconds(), _RESOLUTION)

    def schedule(
        self, at: float, action: Callable[[], None], *, key: Hashable | None = None
    ) -> None:
        """Run ``action`` at virtual time ``at`` (not before now).

        With a ``key`` already queued, the earlier of the two times wins and only one action
        runs (the one queued first if the times are equal).
        """
        when = round(max(at, self.now), _RESOLUTION)
        if key is not None:
            queued = self._keyed.get(key)
            if queued is not None and not queued.cancelled:
                if queued.at <= when:
                    return
                queued.cancelled = True
        entry = _Entry(when, next(self._sequence), action, key)
        if key is not None:
            self._keyed[key] = entry
        heapq.heappush(self._heap, entry)

    def after(
        self, delay: float, action: Callable[[], None], *, key: Hashable | None = None
    ) -> None:
        """Run ``action`` ``delay`` virtual seconds from now."""
        self.schedule(self.now + max(delay, 0.0), action, key=key)

    def is_queued(self, key: Hashable) -> bool:
        """Whether an action with ``key`` is waiting to run."""
        entry = self._keyed.get(key)
        return entry is not None and not entry.cancelled

    def cancel(self, predicate: Callable[[Hashable], bool]) -> int:
        """Cancel every queued keyed action whose key satisfies ``predicate``; return how many."""
        cancelled = 0
        for key, entry in list(self._keyed.items()):
            if not entry.cancelled and predicate(key):
                entry.cancelled = True
                del self._keyed[key]
                cancelled += 1
        return cancelled

    def next_time(self) -> float | None:
        """When the next action runs, or None when nothing is queued."""
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].at if self._heap else None

    def run_until(self, end: float, *, on_advance: Callable[[float], None] | None = None) -> None:
        """Run every action due up to ``end`` (inclusive), then move the clock to ``end``.

        ``on_advance(t)`` is called before the clock moves forward to ``t``.

        Raises:
            LivelockError: too many actions ran at one instant.
        """
        while True:
            upcoming = self.next_time()
            if upcoming is None or upcoming > end:
                break
            entry = heapq.heappop(self._heap)
            if entry.key is not None and self._keyed.get(entry.key) is entry:
                del self._keyed[entry.key]
            self._advance(entry.at, on_advance)
            self._count(entry.at)
            entry.action()
            self.actions_run += 1
        self._advance(end, on_advance)

    def _advance(self, when: float, on_advance: Callable[[float], None] | None) -> None:
        if when > self.now:
            if on_advance is not None:
                on_advance(when)
            self.clock.set(self.at_seconds(when))
            self._seconds = when

    def _count(self, when: float) -> None:
        if when != self._instant:
            self._instant, self._at_instant = when, 0
        self._at_instant += 1
        if self._at_instant > MAX_ACTIONS_PER_INSTANT:
            raise LivelockError(
                f"more than {MAX_ACTIONS_PER_INSTANT} actions at virtual time {when:.3f}s: "
                "something keeps rescheduling itself without time passing"
            )
