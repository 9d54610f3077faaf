"""Which offerings a launch request may use: shared by every provider (fake and AWS).

An offering is compatible with a request when the labels it would give the node (the instance
type's labels plus zone and capacity type) satisfy every requirement on a key they define, and
the type's allocatable fits the requests. Keys the offering does not define (``karpenter.sh/
nodepool``, custom labels) are the NodeClaim's own and do not restrict the offering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cloudprovider.instancetype import InstanceType, Offering
from provisioner.apis.labels import (
    LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_TYPE,
    LABEL_ZONE,
)
from provisioner.scheduling.requirements import Requirements

__all__ = ["Candidate", "compatible_candidates", "offering_labels"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One launchable (instance type, offering) pair."""

    instance_type: InstanceType
    offering: Offering


def offering_labels(instance_type: InstanceType, offering: Offering) -> dict[str, str]:
    """The labels a node launched from ``offering`` of ``instance_type`` carries."""
    labels = dict(instance_type.labels)
    labels[LABEL_ZONE] = offering.zone
    labels[LABEL_CAPACITY_TYPE] = offering.capacity_type
    if offering.reservation_id:
        labels[LABEL_CAPACITY_RESERVATION_ID] = offering.reservation_id
        labels[LABEL_CAPACITY_RESERVATION_TYPE] = offering.reservation_type or "default"
    return labels


def _satisfies(requirements: Requirements, labels: Mapping[str, str]) -> bool:
    return all(
        requirement.has(labels[key]) for key, requirement in requirements.items() if key in labels
    )


def compatible_candidates(
    instance_types: Iterable[InstanceType],
    requirements: Requirements,
    requests: Mapping[str, int],
    *,
    available_only: bool = True,
) -> list[Candidate]:
    """Every (type, offering) the request allows, cheapest first (ties by type, zone)."""
    candidates = [
        Candidate(instance_type, offering)
        for instance_type in instance_types
        if instance_type.fits(requests)
        for offering in instance_type.offerings
        if (offering.available or not available_only)
        and _satisfies(requirements, offering_labels(instance_type, offering))
    ]
    candidates.sort(
        key=lambda c: (
            c.offering.price,
            c.instance_type.name,
            c.offering.zone,
            c.offering.capacity_type,
        )
    )
    return candidates
