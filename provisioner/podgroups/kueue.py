"""Kueue (``pod-groups.md`` §4, rows 5 and 6): pod groups, Workloads and admission."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups import keys
from provisioner.podgroups.condition import Condition, find_condition
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = [
    "KueueWorkload",
    "admission_reason",
    "detect_pod_group",
    "detect_workload",
    "pod_group_total_count",
    "pod_set_minimums",
    "workload_min_count",
]

API_GROUP: Final = "kueue.x-k8s.io"


class KueuePodSet(LenientModel):
    """One ``spec.podSets[]`` entry: ``count`` pods, at least ``minCount`` (partial admission)."""

    name: str = ""
    count: int = 0
    min_count: int | None = None


class KueueWorkloadSpec(LenientModel):
    """The part of a Workload spec Jointer reads."""

    pod_sets: tuple[KueuePodSet, ...] = ()
    queue_name: str = ""


class KueueWorkloadStatus(LenientModel):
    """Workload conditions (``QuotaReserved``, ``Admitted``, ``Evicted``, ...)."""

    conditions: tuple[Condition, ...] = ()


class KueueWorkload(LenientModel):
    """A ``kueue.x-k8s.io`` Workload."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KueueWorkloadSpec = Field(default_factory=KueueWorkloadSpec)
    status: KueueWorkloadStatus = Field(default_factory=KueueWorkloadStatus)


def detect_pod_group(pod: Pod) -> PodGroupRef | None:
    """Row 5: label ``kueue.x-k8s.io/pod-group-name``."""
    name = pod.metadata.labels.get(keys.KUEUE_POD_GROUP_NAME)
    if not name:
        return None
    return PodGroupRef(
        ecosystem=Ecosystem.KUEUE_POD_GROUP,
        namespace=pod.metadata.namespace or "default",
        name=name,
        sub_group=pod.metadata.labels.get(keys.KUEUE_PODSET) or None,
    )


def detect_workload(pod: Pod) -> PodGroupRef | None:
    """Row 6: annotation ``kueue.x-k8s.io/workload`` with label ``kueue.x-k8s.io/podset``."""
    name = pod.metadata.annotations.get(keys.KUEUE_WORKLOAD)
    pod_set = pod.metadata.labels.get(keys.KUEUE_PODSET)
    if not name or not pod_set:
        return None
    return PodGroupRef(
        ecosystem=Ecosystem.KUEUE_WORKLOAD,
        namespace=pod.metadata.namespace or "default",
        name=name,
        sub_group=pod_set,
    )


def pod_group_total_count(pod: Pod) -> int | None:
    """``kueue.x-k8s.io/pod-group-total-count`` of a pod-group member (``None`` if unusable)."""
    value = pod.metadata.annotations.get(keys.KUEUE_POD_GROUP_TOTAL_COUNT, "")
    try:
        count = int(value.strip())
    except ValueError:
        return None
    return count if count > 0 else None


def _pod_set_minimum(pod_set: KueuePodSet) -> int:
    return pod_set.min_count if pod_set.min_count is not None else pod_set.count


def workload_min_count(workload: KueueWorkload) -> int | None:
    """Sum over pod sets of ``minCount`` (``count`` when unset)."""
    total = sum(_pod_set_minimum(p) for p in workload.spec.pod_sets)
    return total or None


def pod_set_minimums(workload: KueueWorkload) -> dict[str, int]:
    """Each pod set's minimum."""
    return {p.name: _pod_set_minimum(p) for p in workload.spec.pod_sets if _pod_set_minimum(p)}


def admission_reason(group_key: str, workload: KueueWorkload) -> str | None:
    """Not admitted unless ``Admitted=True`` (or ``QuotaReserved=True`` without ``Admitted``)."""
    conditions = workload.status.conditions
    admitted = find_condition(conditions, "Admitted")
    reserved = find_condition(conditions, "QuotaReserved")
    if admitted is not None and admitted.status == "True":
        return None
    if admitted is None and reserved is not None and reserved.status == "True":
        return None
    shown = reserved if reserved is not None and reserved.status != "True" else admitted
    detail = "no QuotaReserved condition"
    if shown is not None:
        detail = f"{shown.type} {shown.status or 'Unknown'}"
        if shown.reason:
            detail += f": {shown.reason}"
    return (
        f"pod group {group_key} is not admitted by its queue "
        f"(Kueue Workload {workload.metadata.name}: {detail})"
    )
