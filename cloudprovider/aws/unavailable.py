"""The insufficient-capacity (ICE) cache: offerings EC2 recently could not fill.

Karpenter's ``pkg/cache/unavailableofferings.go``: an offering is keyed
``"<capacityType>:<instanceType>:<zone>"`` and stays unavailable for
:data:`UNAVAILABLE_OFFERINGS_TTL`; marking it again resets the TTL. A whole capacity type can be
marked too (spot service-linked role missing). Each instance type has a sequence number that
grows whenever one of its offerings is marked, so cached instance-type views can tell they are
stale. Thread-safe; the timer is injected.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Final

from cloudprovider.aws.cache import Timer
from cloudprovider.instancetype import InstanceType

__all__ = ["UNAVAILABLE_OFFERINGS_TTL", "UnavailableOfferings", "offering_key"]

# Karpenter's UnavailableOfferingsTTL: long enough for a re-plan to pick other offerings, short
# enough that capacity that came back is used again soon (PR #7477 raised it from 45 s).
UNAVAILABLE_OFFERINGS_TTL: Final = timedelta(minutes=3)


def offering_key(capacity_type: str, instance_type: str, zone: str) -> str:
    """The cache key of one offering (``spot:m5.large:us-west-2a``)."""
    return f"{capacity_type}:{instance_type}:{zone}"


@dataclass(slots=True)
class UnavailableOfferings:
    """Offerings (and capacity types) that must not be launched for a while.

    Attributes:
        ttl: how long a mark lasts.
        timer: monotonic seconds.
    """

    ttl: timedelta = UNAVAILABLE_OFFERINGS_TTL
    timer: Timer = time.monotonic
    _offerings: dict[str, float] = field(default_factory=dict)
    _capacity_types: dict[str, float] = field(default_factory=dict)
    _sequence: dict[str, int] = field(default_factory=dict)
    _global_sequence: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> None:
        """Mark one offering unavailable for one TTL (from now)."""
        with self._lock:
            key = offering_key(capacity_type, instance_type, zone)
            self._offerings[key] = self.timer() + self.ttl.total_seconds()
            self._sequence[instance_type] = self._sequence.get(instance_type, 0) + 1

    def mark_capacity_type_unavailable(self, capacity_type: str) -> None:
        """Mark every offering of a capacity type unavailable for one TTL."""
        with self._lock:
            self._capacity_types[capacity_type] = self.timer() + self.ttl.total_seconds()
            self._global_sequence += 1

    def is_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        """Whether the offering (or its whole capacity type) is marked and not expired."""
        now = self.timer()
        with self._lock:
            expiry = self._capacity_types.get(capacity_type)
            if expiry is not None and now < expiry:
                return True
            expiry = self._offerings.get(offering_key(capacity_type, instance_type, zone))
            return expiry is not None and now < expiry

    def sequence_number(self, instance_type: str) -> int:
        """Grows whenever an offering of ``instance_type`` (or a capacity type) is marked."""
        with self._lock:
            return self._sequence.get(instance_type, 0) + self._global_sequence

    def delete(self, capacity_type: str, instance_type: str, zone: str) -> None:
        """Forget one mark (capacity came back)."""
        with self._lock:
            self._offerings.pop(offering_key(capacity_type, instance_type, zone), None)

    def cleanup(self) -> None:
        """Drop expired marks (Karpenter runs this every 10 s; lookups ignore them anyway)."""
        now = self.timer()
        with self._lock:
            for table in (self._offerings, self._capacity_types):
                for key in [k for k, expiry in table.items() if now >= expiry]:
                    del table[key]

    def flush(self) -> None:
        """Forget every mark."""
        with self._lock:
            self._offerings.clear()
            self._capacity_types.clear()

    def apply(self, instance_types: Iterable[InstanceType]) -> list[InstanceType]:
        """``instance_types`` with marked offerings set ``available=False``.

        A type none of whose offerings is marked is returned as it is (types are immutable).
        """
        now = self.timer()
        with self._lock:
            capacity_types = {k for k, expiry in self._capacity_types.items() if now < expiry}
            marked = {k for k, expiry in self._offerings.items() if now < expiry}
        if not capacity_types and not marked:
            return list(instance_types)
        result = []
        for instance_type in instance_types:
            changed = False
            offerings = []
            for offering in instance_type.offerings:
                if offering.available and (
                    offering.capacity_type in capacity_types
                    or offering_key(offering.capacity_type, instance_type.name, offering.zone)
                    in marked
                ):
                    offering = offering.with_available(available=False)  # noqa: PLW2901
                    changed = True
                offerings.append(offering)
            result.append(
                replace(instance_type, offerings=tuple(offerings)) if changed else instance_type
            )
        return result
