"""Capacity reservations (ODCRs and Capacity Blocks for ML) selected by an EC2NodeClass.

Karpenter's ``pkg/providers/capacityreservation``: each ``capacityReservationSelectorTerms``
entry is one ``DescribeCapacityReservations`` call (``CapacityReservationIds`` for ``id``, else
tag, ``owner-id`` and ``instance-match-criteria`` filters), always with ``state=active``; results
are merged by id. Each reservation becomes one ``reserved`` offering of its instance type in its
zone (:func:`reserved_offering`), priced like Karpenter's (the on-demand price / 10,000,000, so
it sorts before every other offering; zero for a paid-up Capacity Block).

Availability is what EC2 reported (``AvailableInstanceCount``) minus what this process launched
into the reservation since (:meth:`CapacityReservationProvider.mark_launched`); a
``ReservationCapacityExceeded`` launch error marks the reservation full
(:meth:`CapacityReservationProvider.mark_unavailable`) for the ICE cache's TTL (3 minutes), as
Karpenter keys its ICE cache by the reservation id for reserved offerings.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.nodeclass import CapacityReservationSelectorTerm
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.selector import Filter, tag_filters
from cloudprovider.aws.unavailable import UNAVAILABLE_OFFERINGS_TTL
from cloudprovider.instancetype import CAPACITY_TYPE_RESERVED, Offering

__all__ = [
    "CAPACITY_RESERVATIONS_TTL",
    "EXPIRY_LEAD_TIME",
    "RESERVATION_PRICE_DIVISOR",
    "RESERVATION_TYPE_BLOCK",
    "RESERVATION_TYPE_DEFAULT",
    "CapacityReservation",
    "CapacityReservationProvider",
    "describe_filters",
    "reservations_by_type",
    "reserved_offering",
]

# Reservations are re-described every minute: availability changes with every launch.
CAPACITY_RESERVATIONS_TTL: Final = timedelta(minutes=1)
# Karpenter: a Capacity Block is ``expiring`` 40 minutes before its end (EC2 starts reclaiming
# the instances 30 minutes before); its nodes are drained from then on.
EXPIRY_LEAD_TIME: Final = timedelta(minutes=40)
# Karpenter prices reserved offerings at the on-demand price / 10,000,000: already paid for,
# so they sort before spot and on-demand, and among reservations the cheaper type first.
RESERVATION_PRICE_DIVISOR: Final = 10_000_000
RESERVATION_TYPE_DEFAULT: Final = "default"
RESERVATION_TYPE_BLOCK: Final = "capacity-block"
_BLOCK_API_TYPE: Final = "capacity-block"


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityReservation:
    """An active capacity reservation as EC2 describes it.

    Attributes:
        id: ``cr-...``.
        instance_type: the reserved type.
        zone: its availability zone.
        owner_id: the owning account.
        instance_match_criteria: ``open`` or ``targeted``.
        reservation_type: ``default`` (ODCR) or ``capacity-block``.
        total: ``TotalInstanceCount``.
        available: ``AvailableInstanceCount`` when described.
        end_time: when the reservation ends (Capacity Blocks always have one).
        interruptible: an interruptible ODCR.
    """

    id: str
    instance_type: str
    zone: str
    owner_id: str = ""
    instance_match_criteria: str = "open"
    reservation_type: str = RESERVATION_TYPE_DEFAULT
    total: int = 0
    available: int = 0
    end_time: datetime | None = None
    interruptible: bool = False

    @property
    def is_block(self) -> bool:
        """Whether this is a Capacity Block for ML."""
        return self.reservation_type == RESERVATION_TYPE_BLOCK

    def expiring(self, now: datetime) -> bool:
        """Whether it ends within :data:`EXPIRY_LEAD_TIME` of ``now`` (Karpenter's ``expiring``)."""
        if self.end_time is None:
            return False
        return self.end_time - now <= EXPIRY_LEAD_TIME


def describe_filters(term: CapacityReservationSelectorTerm) -> dict[str, Any]:
    """The DescribeCapacityReservations parameters of one selector term."""
    filters: list[Filter] = [{"Name": "state", "Values": ["active"]}]
    if term.id is not None:
        return {"CapacityReservationIds": [term.id], "Filters": filters}
    filters.extend(tag_filters(term.tags))
    if term.owner_id is not None:
        filters.append({"Name": "owner-id", "Values": [term.owner_id]})
    if term.instance_match_criteria is not None:
        filters.append(
            {"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]}
        )
    return {"Filters": filters}


def _terms_key(terms: Sequence[CapacityReservationSelectorTerm]) -> str:
    raw = json.dumps([t.model_dump(mode="json") for t in terms], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


def _parse(raw: Mapping[str, Any]) -> CapacityReservation:
    end = raw.get("EndDate")
    if isinstance(end, datetime) and end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    kind = raw.get("ReservationType")
    return CapacityReservation(
        id=str(raw.get("CapacityReservationId", "")),
        instance_type=str(raw.get("InstanceType", "")),
        zone=str(raw.get("AvailabilityZone", "")),
        owner_id=str(raw.get("OwnerId", "")),
        instance_match_criteria=str(raw.get("InstanceMatchCriteria", "open")),
        reservation_type=RESERVATION_TYPE_BLOCK
        if kind == _BLOCK_API_TYPE
        else RESERVATION_TYPE_DEFAULT,
        total=int(raw.get("TotalInstanceCount", 0)),
        available=int(raw.get("AvailableInstanceCount", 0)),
        end_time=end if isinstance(end, datetime) else None,
        interruptible=bool(raw.get("Interruptible", False)),
    )


def _pages(caller: Caller, ec2: Ec2Api, **kwargs: Any) -> Iterator[Mapping[str, Any]]:
    token: str | None = None
    while True:
        extra = {"NextToken": token} if token else {}
        page = caller.call(
            "describing capacity reservations",
            ec2.describe_capacity_reservations,
            **kwargs,
            **extra,
        )
        yield from page.get("CapacityReservations", [])
        token = page.get("NextToken")
        if not token:
            return


@dataclass(slots=True, kw_only=True)
class CapacityReservationProvider:
    """Resolves reservation selector terms and tracks how much of each reservation is left.

    ``now`` (the injected wall clock) lets a Capacity Block within :data:`EXPIRY_LEAD_TIME` of
    its end count as full: its nodes are being drained, nothing new is launched into it.
    """

    ec2: Ec2Api
    caller: Caller
    now: Callable[[], datetime] | None = None
    cache: TtlCache[str, tuple[CapacityReservation, ...]] = field(
        default_factory=lambda: TtlCache(ttl=CAPACITY_RESERVATIONS_TTL)
    )
    exhausted: TtlCache[str, bool] = field(
        default_factory=lambda: TtlCache(ttl=UNAVAILABLE_OFFERINGS_TTL)
    )
    _launched: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(
        self, terms: Sequence[CapacityReservationSelectorTerm] | None
    ) -> tuple[CapacityReservation, ...]:
        """Every active reservation matching any term, sorted by id (none without terms)."""
        if not terms:
            return ()
        key = _terms_key(terms)
        with self._lock:
            cached = self.cache.get(key)
        if cached is not None:
            return cached
        found: dict[str, CapacityReservation] = {}
        for term in terms:
            for raw in _pages(self.caller, self.ec2, **describe_filters(term)):
                reservation = _parse(raw)
                found[reservation.id] = reservation
        result = tuple(sorted(found.values(), key=lambda r: r.id))
        with self._lock:
            self.cache.set(key, result)
            for reservation in result:  # EC2's count now includes what was launched before
                self._launched.pop(reservation.id, None)
        return result

    def available(self, reservation: CapacityReservation) -> int:
        """Instances the reservation still takes: EC2's count minus launches since."""
        if reservation.is_block and self.now is not None and reservation.expiring(self.now()):
            return 0
        with self._lock:
            if self.exhausted.get(reservation.id):
                return 0
            return max(reservation.available - self._launched.get(reservation.id, 0), 0)

    def mark_launched(self, reservation_id: str, count: int = 1) -> None:
        """Note ``count`` instances launched into the reservation (in-flight until re-described)."""
        with self._lock:
            self._launched[reservation_id] = self._launched.get(reservation_id, 0) + count

    def mark_unavailable(self, reservation_id: str) -> None:
        """Treat the reservation as full (``ReservationCapacityExceeded``) for the ICE TTL."""
        with self._lock:
            self.exhausted.set(reservation_id, True)  # noqa: FBT003 - the value stored

    def flush(self) -> None:
        """Forget cached resolutions (the next call asks EC2)."""
        with self._lock:
            self.cache.flush()


def reserved_offering(
    reservation: CapacityReservation,
    on_demand_price: float,
    available: int,
    zone_id: str | None = None,
) -> Offering:
    """The ``reserved`` offering of one reservation (Karpenter's pricing, see module doc)."""
    price = 0.0 if reservation.is_block else on_demand_price / RESERVATION_PRICE_DIVISOR
    return Offering(
        zone=reservation.zone,
        capacity_type=CAPACITY_TYPE_RESERVED,
        price=price,
        available=available > 0,
        zone_id=zone_id,
        reservation_id=reservation.id,
        reservation_type=reservation.reservation_type,
        reservation_capacity=available,
    )


def reservations_by_type(
    reservations: Iterable[CapacityReservation],
) -> dict[str, list[CapacityReservation]]:
    """Reservations grouped by instance type."""
    grouped: dict[str, list[CapacityReservation]] = {}
    for reservation in reservations:
        grouped.setdefault(reservation.instance_type, []).append(reservation)
    return grouped
