"""The Reconciler protocol: level-based controllers that say when they want to run again.

A reconciler reads the cached state, acts through its ports and returns a :class:`Result`.
The real driver runs reconcilers on watch events and timers in a worker pool; the simulation
driver runs the same reconcilers from a discrete-event queue in virtual time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

__all__ = ["Reconciler", "Request", "Result", "min_result"]


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """What to reconcile: a namespaced name, or ``""`` for singleton controllers."""

    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """When the reconciler wants to run again for the same request (None: only on change)."""

    requeue_after: timedelta | None = None

    @staticmethod
    def after(delay: timedelta) -> Result:
        """Run again after ``delay``."""
        return Result(max(delay, timedelta(0)))

    @staticmethod
    def done() -> Result:
        """Nothing more to do until something changes."""
        return Result(None)


def min_result(results: Iterable[Result]) -> Result:
    """The earliest requeue among ``results`` (sub-reconcilers of one object merge this way)."""
    delays = [r.requeue_after for r in results if r.requeue_after is not None]
    return Result(min(delays)) if delays else Result(None)


class Reconciler(Protocol):
    """A level-based controller."""

    @property
    def name(self) -> str:
        """Karpenter's dotted controller name (``nodeclaim.lifecycle``), for logs and metrics."""
        ...

    def reconcile(self, request: Request) -> Result:
        """Bring the world one step closer to the desired state for ``request``."""
        ...
