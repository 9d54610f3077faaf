"""Provider-neutral instance types and offerings: what the planner knows it can launch.

An :class:`InstanceType` is a machine shape (labels, capacity, the overhead the node keeps for
itself, and what is left for pods); an :class:`Offering` is one way to buy it (zone x capacity
type) with an hourly price and whether it can be launched now. Resource lists are
``Mapping[str, int]`` of milli-units (``provisioner.scheduling.quantity``).

The collection helpers mirror Karpenter's ``cloudprovider.InstanceType``/``Offerings`` methods
(``Available()``, ``Cheapest()``, ``Compatible(...)``) with Python names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Final

__all__ = [
    "CAPACITY_TYPE_ON_DEMAND",
    "CAPACITY_TYPE_RESERVED",
    "CAPACITY_TYPE_SPOT",
    "InstanceType",
    "Offering",
    "Overhead",
    "cheapest_offering",
    "order_by_price",
]

CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_RESERVED: Final = "reserved"


def _freeze(resources: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(resources))


@dataclass(frozen=True, slots=True, kw_only=True)
class Offering:
    """One way to buy an instance type: a zone and a capacity type, with a price.

    Attributes:
        zone: the availability zone (``us-east-1a``).
        capacity_type: ``on-demand``, ``spot`` or ``reserved``.
        price: US dollars per hour.
        available: whether it can be launched now (priced, offered in the zone, not marked
            insufficient-capacity).
        price_estimated: the price is an estimate, not a published or observed price (for
            example a spot price derived from the on-demand price when no spot history exists).
        zone_id: the availability zone id (``use1-az1``) when known.
        reservation_id: for ``reserved`` offerings, the capacity reservation (``cr-...``).
        reservation_type: for ``reserved`` offerings, ``default`` (an ODCR) or
            ``capacity-block``.
        reservation_capacity: for ``reserved`` offerings, how many more instances the
            reservation takes now (Karpenter's ``ReservationCapacity``); None: unbounded.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    price_estimated: bool = False
    zone_id: str | None = None
    reservation_id: str | None = None
    reservation_type: str | None = None
    reservation_capacity: int | None = None

    def with_available(self, available: bool) -> Offering:
        """Return a copy marked available or not (for example after insufficient capacity)."""
        return replace(self, available=available)

    @property
    def key(self) -> str:
        """``zone/capacity-type`` (plus ``/reservation-id`` for reserved offerings)."""
        base = f"{self.zone}/{self.capacity_type}"
        return f"{base}/{self.reservation_id}" if self.reservation_id else base


@dataclass(frozen=True, slots=True, kw_only=True)
class Overhead:
    """What the node keeps for itself, subtracted from capacity to get allocatable.

    Attributes:
        kube_reserved: reserved for the kubelet and container runtime.
        system_reserved: reserved for the operating system daemons.
        eviction_threshold: the hard eviction thresholds (memory, ephemeral storage).
    """

    kube_reserved: Mapping[str, int] = field(default_factory=dict)
    system_reserved: Mapping[str, int] = field(default_factory=dict)
    eviction_threshold: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kube_reserved", _freeze(self.kube_reserved))
        object.__setattr__(self, "system_reserved", _freeze(self.system_reserved))
        object.__setattr__(self, "eviction_threshold", _freeze(self.eviction_threshold))

    def total(self) -> dict[str, int]:
        """Sum of the three parts per resource, in milli-units."""
        result: dict[str, int] = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for name, amount in part.items():
                result[name] = result.get(name, 0) + amount
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceType:
    """A machine shape with its offerings.

    Attributes:
        name: the instance type name (``m5.large``).
        labels: well-known labels the node will carry (``karpenter.k8s.aws/instance-family``,
            ``kubernetes.io/arch``, ...), single-valued.
        capacity: node capacity in milli-units (``cpu``, ``memory``, ``pods``,
            ``ephemeral-storage``, extended resources).
        overhead: the reserved parts subtracted from capacity.
        allocatable: capacity minus overhead, never negative, in milli-units.
        offerings: every zone x capacity type, available or not, cheapest first is not implied.
    """

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    offerings: tuple[Offering, ...] = ()
    overhead: Overhead = field(default_factory=Overhead)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "capacity", _freeze(self.capacity))
        object.__setattr__(self, "allocatable", _freeze(self.allocatable))
        object.__setattr__(self, "offerings", tuple(self.offerings))

    def available_offerings(self) -> tuple[Offering, ...]:
        """The offerings that can be launched now."""
        return tuple(offering for offering in self.offerings if offering.available)

    def offerings_where(self, predicate: Callable[[Offering], bool]) -> tuple[Offering, ...]:
        """The offerings (available or not) satisfying ``predicate``."""
        return tuple(offering for offering in self.offerings if predicate(offering))

    def has_available_offering(self) -> bool:
        """Whether at least one offering can be launched now."""
        return any(offering.available for offering in self.offerings)

    def zones(self, *, available_only: bool = True) -> frozenset[str]:
        """The zones this type is offered in (by default only where it can be launched now)."""
        return frozenset(
            offering.zone for offering in self.offerings if offering.available or not available_only
        )

    def capacity_types(self, *, available_only: bool = True) -> frozenset[str]:
        """The capacity types this type is offered as (by default only launchable ones)."""
        return frozenset(
            offering.capacity_type
            for offering in self.offerings
            if offering.available or not available_only
        )

    def cheapest(
        self,
        capacity_type: str | None = None,
        zone: str | None = None,
    ) -> Offering | None:
        """The cheapest available offering, optionally restricted to a capacity type and zone."""
        return cheapest_offering(
            offering
            for offering in self.offerings
            if offering.available
            and (capacity_type is None or offering.capacity_type == capacity_type)
            and (zone is None or offering.zone == zone)
        )

    def fits(self, requests: Mapping[str, int]) -> bool:
        """Whether ``requests`` (milli-units) fit in the allocatable of one empty node."""
        return all(amount <= self.allocatable.get(name, 0) for name, amount in requests.items())


def cheapest_offering(offerings: Iterable[Offering]) -> Offering | None:
    """The lowest-priced offering (ties broken by zone, then capacity type), or None."""
    return min(
        offerings,
        key=lambda offering: (offering.price, offering.zone, offering.capacity_type),
        default=None,
    )


def order_by_price(
    instance_types: Iterable[InstanceType],
    capacity_type: str | None = None,
) -> list[InstanceType]:
    """Instance types ordered by their cheapest available offering; unlaunchable ones last."""

    def key(instance_type: InstanceType) -> tuple[float, str]:
        offering = instance_type.cheapest(capacity_type)
        return (offering.price if offering else float("inf"), instance_type.name)

    return sorted(instance_types, key=key)
