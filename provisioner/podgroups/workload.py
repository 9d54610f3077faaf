"""Kubernetes Workload / PodGroup API (``pod-groups.md`` §5, row 1; KEP-4671)."""

from __future__ import annotations

from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod
from provisioner.podgroups.model import Ecosystem, PodGroupRef

__all__ = [
    "KubePodGroup",
    "KubeWorkload",
    "detect",
    "disruption_reason",
    "pod_group_min_count",
    "workload_min_count",
]

API_GROUP: Final = "scheduling.k8s.io"
_DISRUPT_ALL: Final = "All"


class GangPolicy(LenientModel):
    """``gang: {minCount}``."""

    min_count: int | None = None


class SchedulingPolicy(LenientModel):
    """``basic: {}`` or ``gang: {minCount}``."""

    basic: dict[str, object] | None = None
    gang: GangPolicy | None = None


class WorkloadPodGroup(LenientModel):
    """v1alpha1 ``spec.podGroups[]`` (``policy``) or v1alpha2 ``spec.podGroupTemplates[]``."""

    name: str = ""
    policy: SchedulingPolicy | None = None
    scheduling_policy: SchedulingPolicy | None = None


class KubeWorkloadSpec(LenientModel):
    """Workload pod groups (v1alpha1) or templates (v1alpha2)."""

    pod_groups: tuple[WorkloadPodGroup, ...] = ()
    pod_group_templates: tuple[WorkloadPodGroup, ...] = ()


class KubeWorkload(LenientModel):
    """A ``scheduling.k8s.io`` Workload."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KubeWorkloadSpec = Field(default_factory=KubeWorkloadSpec)


class KubePodGroupSpec(LenientModel):
    """v1alpha2 PodGroup: ``schedulingPolicy`` and ``disruptionMode`` (``Single`` | ``All``)."""

    scheduling_policy: SchedulingPolicy | None = None
    disruption_mode: str = ""


class KubePodGroup(LenientModel):
    """A ``scheduling.k8s.io`` PodGroup."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KubePodGroupSpec = Field(default_factory=KubePodGroupSpec)


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 1: ``spec.schedulingGroup.podGroupName`` (v1.36+) or ``spec.workloadRef`` (v1.35).

    A ``workloadRef`` gang is per (podGroup, replicaKey); its group is named
    ``<workload>-<podGroup>[-<replicaKey>]``.
    """
    namespace = pod.metadata.namespace or "default"
    group = pod.spec.scheduling_group
    if group is not None and group.pod_group_name:
        return PodGroupRef(
            ecosystem=Ecosystem.WORKLOAD_API, namespace=namespace, name=group.pod_group_name
        )
    ref = pod.spec.workload_ref
    if ref is not None and ref.name:
        parts = [ref.name, ref.pod_group, ref.pod_group_replica_key]
        return PodGroupRef(
            ecosystem=Ecosystem.WORKLOAD_API,
            namespace=namespace,
            name="-".join(p for p in parts if p),
        )
    return None


def _policy_min(policy: SchedulingPolicy | None) -> int | None:
    if policy is None or policy.gang is None:
        return None
    value = policy.gang.min_count
    return value if value is not None and value > 0 else None


def pod_group_min_count(group: KubePodGroup) -> int | None:
    """``spec.schedulingPolicy.gang.minCount``; ``None`` for ``basic``."""
    return _policy_min(group.spec.scheduling_policy)


def workload_min_count(workload: KubeWorkload, pod_group: str) -> int | None:
    """v1alpha1 ``spec.podGroups[name].policy.gang.minCount`` (or a v1alpha2 template's)."""
    for entry in (*workload.spec.pod_groups, *workload.spec.pod_group_templates):
        if entry.name == pod_group:
            return _policy_min(entry.policy) or _policy_min(entry.scheduling_policy)
    return None


def disruption_reason(group_key: str, group: KubePodGroup) -> str | None:
    """``disruptionMode: All``: the members are disrupted together, never one by one."""
    if group.spec.disruption_mode == _DISRUPT_ALL:
        return f"pod group {group_key} has disruptionMode All (its members go together)"
    return None
