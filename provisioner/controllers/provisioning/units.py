"""Conversion between Kubernetes milli-units and the solver's integer units.

The solver works in small integers: cpu in millicores, memory and storage in MiB, every other
resource in whole units. Demands round up and capacities round down, so a plan the solver
finds valid is valid in exact Kubernetes arithmetic too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from provisioner.scheduling.resources import is_binary_resource

__all__ = ["PRICE_MICROS", "capacity_units", "demand_units", "to_micros"]

PRICE_MICROS: Final = 1_000_000
_MILLI: Final = 1000
_MIB: Final = 2**20


def _divisor(name: str) -> int:
    if name == "cpu":
        return 1
    if is_binary_resource(name):
        return _MILLI * _MIB
    return _MILLI


def demand_units(
    resources: Mapping[str, int], names: Iterable[str] | None = None
) -> dict[str, int]:
    """Requests in solver units, rounded up."""
    keys = resources.keys() if names is None else names
    return {name: -(-resources.get(name, 0) // _divisor(name)) for name in keys}


def capacity_units(resources: Mapping[str, int], names: Iterable[str]) -> dict[str, int]:
    """Capacity in solver units, rounded down, for the resource ``names`` only."""
    return {name: max(resources.get(name, 0), 0) // _divisor(name) for name in names}


def to_micros(price: float) -> int:
    """US dollars per hour to micro-dollars per hour."""
    return round(price * PRICE_MICROS)
