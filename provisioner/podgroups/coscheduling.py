"""scheduler-plugins coscheduling (``pod-groups.md`` §3, row 4): PodGroup and ElasticQuota."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod, PodCondition, QuantityValue
from provisioner.podgroups import keys
from provisioner.podgroups.model import Ecosystem, PodGroupRef
from provisioner.scheduling.quantity import QuantityError, parse_quantity

__all__ = [
    "CoschedulingPodGroup",
    "ElasticQuota",
    "detect",
    "min_count",
    "quota_reason",
    "waiting_reason",
]

API_GROUPS: Final = frozenset({"scheduling.x-k8s.io", "scheduling.sigs.k8s.io"})
_WAITING_MESSAGES: Final = (
    "cannot find enough sibling pods",
    "gated pods in the same PodGroup",
    "failed recently",
)


class CoschedulingPodGroupSpec(LenientModel):
    """``minMember`` (>= 1)."""

    min_member: int | None = None


class CoschedulingPodGroup(LenientModel):
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CoschedulingPodGroupSpec = Field(default_factory=CoschedulingPodGroupSpec)


class ElasticQuotaSpec(LenientModel):
    """Guaranteed (``min``) and maximum (``max``) resources of a namespace."""

    min: dict[str, QuantityValue] = Field(default_factory=dict)
    max: dict[str, QuantityValue] = Field(default_factory=dict)


class ElasticQuotaStatus(LenientModel):
    """Resources in use."""

    used: dict[str, QuantityValue] = Field(default_factory=dict)


class ElasticQuota(LenientModel):
    """A ``scheduling.x-k8s.io/v1alpha1`` ElasticQuota (namespaced)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ElasticQuotaSpec = Field(default_factory=ElasticQuotaSpec)
    status: ElasticQuotaStatus = Field(default_factory=ElasticQuotaStatus)


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 4: label ``scheduling.x-k8s.io/pod-group`` (or the legacy sigs.k8s.io label)."""
    labels = pod.metadata.labels
    name = labels.get(keys.COSCHEDULING_POD_GROUP) or labels.get(keys.COSCHEDULING_POD_GROUP_LEGACY)
    if not name:
        return None
    return PodGroupRef(
        ecosystem=Ecosystem.COSCHEDULING, namespace=pod.metadata.namespace or "default", name=name
    )


def min_count(group: CoschedulingPodGroup) -> int | None:
    """``spec.minMember``."""
    value = group.spec.min_member
    return value if value is not None and value > 0 else None


def waiting_reason(group_key: str, conditions: Iterable[PodCondition]) -> str | None:
    """Coscheduling's rejection messages that mean "wait for siblings", not "add capacity"."""
    for condition in conditions:
        if condition.type != "PodScheduled":
            continue
        for needle in _WAITING_MESSAGES:
            if needle in condition.message:
                return f"pod group {group_key} is waiting for its members (coscheduling: {needle})"
    return None


def _milli(value: QuantityValue) -> int | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def quota_reason(
    *, group_key: str, quota: ElasticQuota, requested: Mapping[str, int], pod_count: int
) -> str | None:
    """Over quota when ``used + requested > max`` for a resource ``max`` names.

    ``requested`` is the milli-unit sum of the group's pending members; ``pods`` in ``max`` is
    compared with the number of pending members.
    """
    for name, raw_max in sorted(quota.spec.max.items()):
        limit = _milli(raw_max)
        if limit is None:
            continue
        used = _milli(quota.status.used.get(name, 0)) or 0
        asked = pod_count * 1000 if name == "pods" else requested.get(name, 0)
        if asked > 0 and used + asked > limit:
            return (
                f"pod group {group_key} is over its queue quota "
                f"(ElasticQuota {quota.metadata.namespace}/{quota.metadata.name} max {name})"
            )
    return None
