"""The provisioning batch window, as a small state machine on the injected clock.

Karpenter's batcher (c/provisioning/batcher.go): a batch opens at the first trigger and closes
when ``idle`` passes without a new trigger or ``max`` has passed since it opened (1 s and 10 s
by default). Triggers are de-duplicated by uid. The batch decides only *when* to plan: the plan
takes every provisionable pod.

There are no threads: the driver asks :meth:`Batcher.due` when to run the provisioner next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

__all__ = ["DEFAULT_IDLE", "DEFAULT_MAX", "Batcher"]

DEFAULT_IDLE: Final = timedelta(seconds=1)
DEFAULT_MAX: Final = timedelta(seconds=10)


@dataclass(slots=True)
class Batcher:
    """Collects triggers into one batch.

    Attributes:
        idle: a batch closes after this long without a new trigger.
        max: a batch closes at the latest this long after it opened.
    """

    idle: timedelta = DEFAULT_IDLE
    max: timedelta = DEFAULT_MAX
    _opened: datetime | None = None
    _last: datetime | None = None
    _uids: set[str] = field(default_factory=set)

    def trigger(self, uid: str, now: datetime) -> bool:
        """Add a trigger; a uid already in the batch does not extend the idle window.

        Returns:
            Whether the trigger was new to this batch.
        """
        if uid in self._uids:
            return False
        self._uids.add(uid)
        if self._opened is None:
            self._opened = now
        self._last = now
        return True

    @property
    def is_open(self) -> bool:
        """Whether a batch has triggers waiting."""
        return self._opened is not None

    def due(self) -> datetime | None:
        """When the open batch closes (None when no batch is open)."""
        if self._opened is None or self._last is None:
            return None
        return min(self._last + self.idle, self._opened + self.max)

    def ready(self, now: datetime) -> bool:
        """Whether the open batch has closed by ``now``."""
        due = self.due()
        return due is not None and now >= due

    def wait(self, now: datetime) -> timedelta | None:
        """How long until the batch closes (zero when it has; None when none is open)."""
        due = self.due()
        return None if due is None else max(due - now, timedelta(0))

    def close(self) -> frozenset[str]:
        """End the batch and return its trigger uids."""
        uids = frozenset(self._uids)
        self._uids.clear()
        self._opened = self._last = None
        return uids
