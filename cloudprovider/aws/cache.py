"""Every AWS-side cache lifetime, named, with why (karpenter-aws.md §12), and a tiny TTL cache.

Caches are built by the composition root and injected; each takes a ``timer`` callable
(monotonic seconds) so tests drive expiry without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Generic, TypeVar

__all__ = [
    "INSTANCES_DRIFT_TTL",
    "INSTANCES_TTL",
    "INSTANCE_TYPES_TTL",
    "INSTANCE_TYPE_OFFERINGS_TTL",
    "ON_DEMAND_PRICING_TTL",
    "RESOLVED_INSTANCE_TYPES_TTL",
    "SPOT_PRICING_TTL",
    "Timer",
    "TtlCache",
]

# EC2 adds instance types a few times a year and changes zone offerings rarely; Karpenter
# refreshes DescribeInstanceTypes and DescribeInstanceTypeOfferings every 12 hours.
INSTANCE_TYPES_TTL: Final = timedelta(hours=12)
INSTANCE_TYPE_OFFERINGS_TTL: Final = timedelta(hours=12)
# Instance types resolved for one nodeclass (capacity, overhead) are cheap to rebuild but used on
# every scheduling pass; 5 minutes bounds how long a nodeclass edit takes to show.
RESOLVED_INSTANCE_TYPES_TTL: Final = timedelta(minutes=5)
# On-demand prices change with AWS price announcements, a handful of times a year.
ON_DEMAND_PRICING_TTL: Final = timedelta(hours=12)
# Spot prices move slowly (hourly at most since the 2017 pricing model); Karpenter refreshes
# them every 12 hours as well.
SPOT_PRICING_TTL: Final = timedelta(hours=12)

# What DescribeInstances said of one instance (its subnet, security groups, image, state) answers
# a liveness question for a minute; deletes always ask EC2 afresh.
INSTANCES_TTL: Final = timedelta(minutes=1)
# Drift reads only the instance's image and subnet, which never change, and its security groups,
# and asks every 5 minutes per node: an instance seen within 3 minutes will do, so the list that
# garbage collection takes every 2 minutes answers every node's check without a call of its own.
INSTANCES_DRIFT_TTL: Final = timedelta(minutes=3)

Timer = Callable[[], float]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    expires_at: float


@dataclass(slots=True)
class TtlCache(Generic[K, V]):
    """A dictionary whose entries expire ``ttl`` after they were set.

    Attributes:
        ttl: lifetime of an entry.
        timer: monotonic clock in seconds (``time.monotonic`` unless injected).
    """

    ttl: timedelta
    timer: Timer = time.monotonic
    _entries: dict[K, _Entry[V]] = field(default_factory=dict)

    def get(self, key: K, *, within: timedelta | None = None) -> V | None:
        """The live value for ``key``, or None when absent or expired.

        ``within``: only a value set at most that long ago (shorter than ``ttl``) is live.
        """
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self.timer()
        if now >= entry.expires_at:
            del self._entries[key]
            return None
        if within is not None and now >= entry.expires_at - self.ttl.total_seconds() + (
            within.total_seconds()
        ):
            return None
        return entry.value

    def retain_only(self, keys: Collection[K]) -> None:
        """Forget every entry whose key is not in ``keys``."""
        for key in [k for k in self._entries if k not in keys]:
            del self._entries[key]

    def set(self, key: K, value: V) -> None:
        """Store ``value`` for ``key`` for one ``ttl``."""
        self._entries[key] = _Entry(value, self.timer() + self.ttl.total_seconds())

    def get_or_set(self, key: K, build: Callable[[], V]) -> V:
        """The live value for ``key``, building and storing it when absent or expired."""
        value = self.get(key)
        if value is None:
            value = build()
            self.set(key, value)
        return value

    def discard(self, key: K) -> None:
        """Forget ``key`` (absent is fine)."""
        self._entries.pop(key, None)

    def flush(self) -> None:
        """Forget every entry."""
        self._entries.clear()
