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


_OFFERING_KEYS = frozenset(
    {
        LABEL_ZONE,
        LABEL_CAPACITY_TYPE,
        LABEL_CAPACITY_RESERVATION_ID,
        LABEL_CAPACITY_RESERVATION_TYPE,
    }
)
"""The label keys an offering sets over its instance type's labels (:func:`offering_labels`)."""


def _own_labels(offering: Offering) -> dict[str, str]:
    """The labels ``offering`` sets over its instance type's (as :func:`offering_labels`)."""
    own = {LABEL_ZONE: offering.zone, LABEL_CAPACITY_TYPE: offering.capacity_type}
    if offering.reservation_id:
        own[LABEL_CAPACITY_RESERVATION_ID] = offering.reservation_id
        own[LABEL_CAPACITY_RESERVATION_TYPE] = offering.reservation_type or "default"
    return own


def compatible_candidates(
    instance_types: Iterable[InstanceType],
    requirements: Requirements,
    requests: Mapping[str, int],
    *,
    available_only: bool = True,
) -> list[Candidate]:
    """Every (type, offering) the request allows, cheapest first (ties by type, zone).

    The requirements on keys an offering does not set are checked once per instance type;
    only those on zone, capacity type and reservation are checked per offering.
    """
    type_terms = [(k, r) for k, r in requirements.items() if k not in _OFFERING_KEYS]
    offering_terms = [(k, r) for k, r in requirements.items() if k in _OFFERING_KEYS]
    candidates: list[Candidate] = []
    for instance_type in instance_types:
        labels = instance_type.labels
        if not instance_type.fits(requests) or not all(
            requirement.has(labels[key]) for key, requirement in type_terms if key in labels
        ):
            continue
        for offering in instance_type.offerings:
            if available_only and not offering.available:
                continue
            if offering_terms:
                own = _own_labels(offering)
                values = ((r, own.get(k, labels.get(k))) for k, r in offering_terms)
                if not all(r.has(value) for r, value in values if value is not None):
                    continue
            candidates.append(Candidate(instance_type, offering))
    candidates.sort(
        key=lambda c: (
            c.offering.price,
            c.instance_type.name,
            c.offering.zone,
            c.offering.capacity_type,
        )
    )
    return candidates
