"""KAI-Scheduler / Run:ai (``pod-groups.md`` §1, row 2): PodGroup, Queue, admission and priority."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import Field

from provisioner.apis.base import LenientModel
from provisioner.apis.core import ObjectMeta, Pod, QuantityValue
from provisioner.podgroups import keys
from provisioner.podgroups.model import Ecosystem, PodGroupRef
from provisioner.scheduling.quantity import QuantityError, parse_quantity

__all__ = [
    "KAI_DEFAULT_PRIORITIES",
    "NON_PREEMPTIBLE_PRIORITY",
    "KaiPodGroup",
    "KaiQueue",
    "condition_reason",
    "detect",
    "min_count",
    "non_preemptible_reason",
    "queue_name",
    "queue_reason",
    "sub_group_minimums",
]

API_GROUP: Final = "scheduling.run.ai"
NON_PREEMPTIBLE_PRIORITY: Final = 100
"""KAI treats priority >= 100 as non-preemptible."""
KAI_DEFAULT_PRIORITIES: Final[Mapping[str, int]] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}
"""The PriorityClasses KAI installs, used when the cluster's PriorityClass is not known."""
_FALLBACK_PRIORITY: Final = 50
_INFERENCE_OWNER_KINDS: Final = frozenset({"ReplicaSet", "Deployment"})
_UNLIMITED: Final = -1.0
_REASON_OVER_QUOTA: Final = "NonPreemptibleOverQuota"
_REASON_OVER_LIMIT: Final = "OverLimit"
_REASON_NO_QUEUE: Final = "QueueDoesNotExist"
_MESSAGE_OVER_QUOTA: Final = "Non-preemptible workload is over quota"
_MESSAGE_OVER_LIMIT: Final = "quota has reached the allowable limit"
_GPU_KEYS: Final = (keys.NVIDIA_GPU, "gpu")
_MILLI: Final = 1000


class KaiSubGroup(LenientModel):
    """One entry of ``spec.subGroups``."""

    name: str = ""
    min_member: int | None = None
    min_sub_group: int | None = None
    parent: str | None = None


class KaiPodGroupSpec(LenientModel):
    """The part of a KAI PodGroup spec Jointer reads."""

    min_member: int | None = None
    min_sub_group: int | None = None
    queue: str = ""
    priority_class_name: str = ""
    preemptibility: str = ""
    sub_groups: tuple[KaiSubGroup, ...] = ()


class KaiUnschedulableReason(LenientModel):
    """One ``schedulingConditions[].reasons[]`` entry."""

    reason: str = ""
    message: str = ""


class KaiSchedulingCondition(LenientModel):
    """One ``status.schedulingConditions[]`` entry."""

    type: str = ""
    status: str = ""
    node_pool: str = ""
    reason: str = ""
    message: str = ""
    reasons: tuple[KaiUnschedulableReason, ...] = ()


class KaiPodGroupStatus(LenientModel):
    """The part of a KAI PodGroup status Jointer reads."""

    scheduling_conditions: tuple[KaiSchedulingCondition, ...] = ()


class KaiPodGroup(LenientModel):
    """A ``scheduling.run.ai/v2alpha2`` PodGroup."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiPodGroupSpec = Field(default_factory=KaiPodGroupSpec)
    status: KaiPodGroupStatus = Field(default_factory=KaiPodGroupStatus)


class KaiQueueResource(LenientModel):
    """``quota`` / ``limit`` of one resource (GPU devices); ``-1`` unlimited."""

    quota: float | None = None
    limit: float | None = None
    over_quota_weight: float | None = None


class KaiQueueResources(LenientModel):
    """``spec.resources`` of a Queue."""

    gpu: KaiQueueResource = Field(default_factory=KaiQueueResource)
    cpu: KaiQueueResource = Field(default_factory=KaiQueueResource)
    memory: KaiQueueResource = Field(default_factory=KaiQueueResource)


class KaiQueueSpec(LenientModel):
    """The part of a Queue spec Jointer reads."""

    parent_queue: str = ""
    priority: int | None = None
    resources: KaiQueueResources = Field(default_factory=KaiQueueResources)


class KaiQueueStatus(LenientModel):
    """Allocated and allocated non-preemptible resources of a Queue."""

    allocated: dict[str, QuantityValue] = Field(default_factory=dict)
    allocated_non_preemptible: dict[str, QuantityValue] = Field(default_factory=dict)
    requested: dict[str, QuantityValue] = Field(default_factory=dict)


class KaiQueue(LenientModel):
    """A ``scheduling.run.ai/v2`` Queue (cluster-scoped)."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiQueueSpec = Field(default_factory=KaiQueueSpec)
    status: KaiQueueStatus = Field(default_factory=KaiQueueStatus)


def detect(pod: Pod) -> PodGroupRef | None:
    """Row 2: annotation ``pod-group-name`` or ``schedulerName: kai-scheduler``.

    Without the annotation the podgrouper has not run yet; the group is named as it will be,
    ``pg-<owner>-<ownerUID>`` from the controller owner (the pod itself for bare pods).
    """
    name = pod.metadata.annotations.get(keys.KAI_POD_GROUP_NAME)
    if not name:
        if pod.spec.scheduler_name != keys.KAI_SCHEDULER_NAME:
            return None
        owner = next((o for o in pod.metadata.owner_references if o.controller), None)
        name = (
            f"pg-{owner.name}-{owner.uid}"
            if owner is not None
            else f"pg-{pod.metadata.name}-{pod.metadata.uid}"
        )
    return PodGroupRef(
        ecosystem=Ecosystem.KAI,
        namespace=pod.metadata.namespace or "default",
        name=name,
        sub_group=pod.metadata.labels.get(keys.KAI_SUBGROUP_NAME) or None,
    )


def _sub_group_minimum(group: KaiPodGroup, parent: str | None, seen: frozenset[str]) -> int:
    children = [s for s in group.spec.sub_groups if (s.parent or None) == parent]
    minimums = sorted(
        s.min_member
        if s.min_member is not None
        else _sub_group_minimum(group, s.name, seen | {s.name})
        for s in children
        if s.name not in seen
    )
    node_min_sub = (
        group.spec.min_sub_group
        if parent is None
        else next((s.min_sub_group for s in group.spec.sub_groups if s.name == parent), None)
    )
    if node_min_sub is not None and node_min_sub > 0:
        minimums = minimums[:node_min_sub]
    return sum(minimums)


def min_count(group: KaiPodGroup) -> int | None:
    """The gang size: ``minMember``, else the sum over ``subGroups`` (``minSubGroup`` of them).

    ``None`` for an elastic group (``minMember`` nil/0 and no sub-groups).
    """
    if group.spec.min_member is not None and group.spec.min_member > 0:
        return group.spec.min_member
    if group.spec.sub_groups:
        total = _sub_group_minimum(group, None, frozenset())
        return total or None
    return None


def sub_group_minimums(group: KaiPodGroup) -> dict[str, int]:
    """Leaf sub-groups (no children) with a positive ``minMember``.

    Empty when any ``minSubGroup`` is set: then not every leaf has to reach its minimum.
    """
    if group.spec.min_sub_group or any(s.min_sub_group for s in group.spec.sub_groups):
        return {}
    parents = {s.parent for s in group.spec.sub_groups if s.parent}
    return {
        s.name: s.min_member
        for s in group.spec.sub_groups
        if s.name not in parents and s.min_member is not None and s.min_member > 0
    }


def queue_name(group: KaiPodGroup | None, pod: Pod) -> str:
    """The leaf queue: PodGroup ``spec.queue``, else the pod's queue labels, else the default."""
    if group is not None and group.spec.queue:
        return group.spec.queue
    labels = pod.metadata.labels
    for key in (keys.KAI_QUEUE, keys.KAI_QUEUE_LEGACY, keys.KAI_PROJECT):
        if labels.get(key):
            return labels[key]
    return keys.KAI_DEFAULT_QUEUE


def condition_reason(group_key: str, group: KaiPodGroup) -> str | None:
    """The quota reason KAI reported in ``status.schedulingConditions``, if any."""
    for condition in group.status.scheduling_conditions:
        if condition.status not in {"", "True"}:
            continue
        entries = (*condition.reasons, KaiUnschedulableReason(message=condition.message))
        for entry in entries:
            if entry.reason == _REASON_OVER_QUOTA or _MESSAGE_OVER_QUOTA in entry.message:
                return f"pod group {group_key} is over its queue quota"
            if entry.reason == _REASON_OVER_LIMIT or _MESSAGE_OVER_LIMIT in entry.message:
                return f"pod group {group_key} is over its queue quota limit"
            if entry.reason == _REASON_NO_QUEUE:
                return f"pod group {group_key}: queue {group.spec.queue or '?'} does not exist"
    return None


def _gpu_milli(resources: Mapping[str, QuantityValue]) -> int:
    for key in _GPU_KEYS:
        if key in resources:
            try:
                return parse_quantity(resources[key])
            except QuantityError:
                return 0
    return 0


def _to_milli(value: float) -> int:
    return round(value * _MILLI)


def _effective_limit(resource: KaiQueueResource) -> float | None:
    """``None`` = unlimited. ``limit`` -1 is none; 0/unset means nothing beyond the quota."""
    if resource.limit is not None and resource.limit == _UNLIMITED:
        return None
    if resource.limit is not None and resource.limit > 0:
        return resource.limit
    quota = resource.quota or 0.0
    return None if quota == _UNLIMITED else quota


def queue_reason(
    *,
    group_key: str,
    queue: str,
    queues: Mapping[str, KaiQueue],
    requested_gpu_milli: int,
    non_preemptible: bool,
) -> str | None:
    """Jointer's own check of the queue chain (leaf up to the root) against the group's GPUs.

    Non-preemptible work must fit ``quota >= allocatedNonPreemptible + requested``; all work must
    fit ``limit >= allocated + requested``. Only GPUs are checked (KAI's own over-quota reasons
    cover CPU and memory). ``queues`` empty means the cluster's queues are unknown: no check.
    """
    if not queues:
        return None
    if queue not in queues:
        return f"pod group {group_key}: queue {queue} does not exist"
    if requested_gpu_milli <= 0:
        return None
    name: str | None = queue
    seen: set[str] = set()
    while name is not None and name in queues and name not in seen:
        seen.add(name)
        current = queues[name]
        gpu = current.spec.resources.gpu
        quota = gpu.quota or 0.0
        allocated_np = _gpu_milli(current.status.allocated_non_preemptible)
        if (
            non_preemptible
            and quota != _UNLIMITED
            and _to_milli(quota) < allocated_np + requested_gpu_milli
        ):
            return f"pod group {group_key} is over its queue quota"
        limit = _effective_limit(gpu)
        allocated = _gpu_milli(current.status.allocated)
        if limit is not None and _to_milli(limit) < allocated + requested_gpu_milli:
            return f"pod group {group_key} is over its queue quota limit"
        name = current.spec.parent_queue or None
    return None


def _priority_of_class(name: str, priority_classes: Mapping[str, int]) -> int | None:
    if name in priority_classes:
        return priority_classes[name]
    return KAI_DEFAULT_PRIORITIES.get(name)


def _priority(
    pod: Pod, group: KaiPodGroup | None, priority_classes: Mapping[str, int]
) -> tuple[int, str]:
    """KAI's priority of the pod's workload and where it came from."""
    names = (
        pod.metadata.labels.get(keys.KAI_PRIORITY_CLASS_LABEL, ""),
        group.spec.priority_class_name if group is not None else "",
        pod.spec.priority_class_name,
    )
    for name in names:
        if name:
            value = _priority_of_class(name, priority_classes)
            if value is not None:
                return value, f"priority class {name}"
            if pod.spec.priority is not None:
                return pod.spec.priority, f"priority class {name}"
    if pod.spec.priority is not None and pod.spec.priority != 0:
        return pod.spec.priority, "pod priority"
    owners = {o.kind for o in pod.metadata.owner_references if o.controller}
    if owners & _INFERENCE_OWNER_KINDS:
        return KAI_DEFAULT_PRIORITIES["inference"], "default priority class inference"
    return _FALLBACK_PRIORITY, "default priority class train"


def non_preemptible_reason(
    pod: Pod,
    group_key: str,
    group: KaiPodGroup | None,
    priority_classes: Mapping[str, int],
) -> str | None:
    """KAI's order: ``spec.preemptibility``, the pod label, then priority (>= 100 protects)."""
    if group is not None and group.spec.preemptibility:
        if group.spec.preemptibility == "non-preemptible":
            return f"pod group {group_key} is non-preemptible (spec.preemptibility)"
        return None
    label = pod.metadata.labels.get(keys.KAI_PREEMPTIBILITY)
    if label:
        if label == "non-preemptible":
            return f"pod is non-preemptible (label {keys.KAI_PREEMPTIBILITY})"
        return None
    value, source = _priority(pod, group, priority_classes)
    if value >= NON_PREEMPTIBLE_PRIORITY:
        return f"pod is non-preemptible in KAI: priority {value} ({source}) is >= 100"
    return None
