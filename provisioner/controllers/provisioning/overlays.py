"""NodeOverlays (``karpenter.sh/v1alpha1``) applied to instance types, as Karpenter applies them.

An overlay matches offerings by its requirements (evaluated against the instance type's labels
plus the offering's zone and capacity type and the NodePool name). For each offering, the
matching overlay with the highest weight that sets a price decides it (``price`` replaces,
``priceAdjustment`` shifts); for each extended resource, the highest-weight matching overlay
that sets it decides the capacity added. Ties in weight go to the overlay whose name sorts
first, so the result never depends on input order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal

from cloudprovider.instancetype import InstanceType, Offering
from provisioner.apis import labels as wk
from provisioner.apis.nodeoverlay import NodeOverlay
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements

__all__ = ["apply_overlays"]


def _requirements(overlay: NodeOverlay) -> Requirements:
    return Requirements.from_terms(
        [r.model_dump(by_alias=True, exclude_none=True) for r in overlay.spec.requirements]
    )


def apply_overlays(
    instance_types: Sequence[InstanceType], overlays: Sequence[NodeOverlay], *, pool: str
) -> tuple[InstanceType, ...]:
    """``instance_types`` of NodePool ``pool`` with prices and capacity adjusted by ``overlays``."""
    if not overlays:
        return tuple(instance_types)
    ordered = sorted(overlays, key=lambda o: (-o.weight, o.name))
    compiled = [(overlay, _requirements(overlay)) for overlay in ordered]
    return tuple(_apply(t, compiled, pool) for t in instance_types)


def _apply(
    instance_type: InstanceType,
    overlays: Sequence[tuple[NodeOverlay, Requirements]],
    pool: str,
) -> InstanceType:
    base = {
        **instance_type.labels,
        wk.LABEL_INSTANCE_TYPE: instance_type.name,
        wk.LABEL_NODEPOOL: pool,
    }
    offerings = tuple(_price(offering, base, overlays) for offering in instance_type.offerings)
    extra = _capacity(base, overlays)
    if not extra and offerings == instance_type.offerings:
        return instance_type
    capacity = {**instance_type.capacity, **extra}
    allocatable = {**instance_type.allocatable, **extra}
    return replace(instance_type, offerings=offerings, capacity=capacity, allocatable=allocatable)


def _price(
    offering: Offering,
    base: Mapping[str, str],
    overlays: Sequence[tuple[NodeOverlay, Requirements]],
) -> Offering:
    labels = {
        **base,
        wk.LABEL_ZONE: offering.zone,
        wk.LABEL_CAPACITY_TYPE: offering.capacity_type,
    }
    for overlay, requirements in overlays:
        if overlay.spec.price is None and overlay.spec.price_adjustment is None:
            continue
        if requirements.matches(labels):
            price = float(overlay.adjusted_price(Decimal(str(offering.price))))
            return replace(offering, price=price)
    return offering


def _capacity(
    labels: Mapping[str, str], overlays: Sequence[tuple[NodeOverlay, Requirements]]
) -> dict[str, int]:
    extra: dict[str, int] = {}
    for overlay, requirements in overlays:
        if not overlay.spec.capacity or not requirements.matches(labels):
            continue
        for name, value in overlay.spec.capacity.items():
            extra.setdefault(name, parse_quantity(str(value)))
    return extra
