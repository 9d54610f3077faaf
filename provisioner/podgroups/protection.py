"""What consolidation must not disrupt: non-preemptible work, GPU reservations, do-not-disrupt.

``is_non_preemptible`` checks, in order (the first reason found is returned):

1. Kubernetes Workload API: the group's PodGroup ``spec.disruptionMode: All`` (the whole group);
2. KAI (``pod-groups.md`` §1): PodGroup ``spec.preemptibility``, then the pod label
   ``kai.scheduler/preemptibility``, then priority (>= 100 is non-preemptible) from the label
   ``priorityClassName``, the PodGroup's and the pod's ``priorityClassName`` (resolved through the
   cluster's PriorityClasses, then KAI's defaults), ``spec.priority``, then the kind default;
3. Volcano: ``volcano.sh/preemptable: "false"`` on the pod or its PodGroup;
4. the PriorityClasses the operator lists as non-preemptible.
"""

from __future__ import annotations

from datetime import datetime

from provisioner.apis.core import Pod
from provisioner.apis.duration import DurationError, parse_go_duration
from provisioner.podgroups import kai, keys, volcano
from provisioner.podgroups import workload as kube_workload
from provisioner.podgroups.context import ProvisioningContext
from provisioner.podgroups.model import Ecosystem

__all__ = ["has_active_do_not_disrupt", "is_gpu_reservation_pod", "is_non_preemptible"]


def is_non_preemptible(
    pod: Pod,
    context: ProvisioningContext,
    non_preemptible_priority_classes: frozenset[str],
) -> str | None:
    """Return why the pod must not be disrupted for consolidation, or ``None``.

    A reason that names a pod group applies to every member: disrupting one breaks the group.
    """
    ref = context.group_of(pod)
    if ref is not None and ref.ecosystem == Ecosystem.WORKLOAD_API:
        group = context.kube_pod_groups.get(ref.key)
        reason = kube_workload.disruption_reason(ref.key, group) if group is not None else None
        if reason is not None:
            return reason
    if ref is not None and ref.ecosystem == Ecosystem.KAI:
        reason = kai.non_preemptible_reason(
            pod, ref.key, context.kai_pod_groups.get(ref.key), context.priority_classes
        )
        if reason is not None:
            return reason
    is_volcano = ref is not None and ref.ecosystem == Ecosystem.VOLCANO
    reason = volcano.non_preemptible_reason(
        pod,
        ref.key if ref is not None else pod.key,
        context.volcano_pod_groups.get(ref.key) if is_volcano and ref is not None else None,
    )
    if reason is not None:
        return reason
    name = pod.spec.priority_class_name
    if name and name in non_preemptible_priority_classes:
        return f"pod priority class {name} is configured as non-preemptible"
    return None


def is_gpu_reservation_pod(pod: Pod) -> bool:
    """KAI/Run:ai GPU reservation pods: immovable, they pin the GPU node hosting fractions."""
    return (
        pod.metadata.namespace in keys.KAI_RESERVATION_NAMESPACES
        or pod.metadata.labels.get(keys.APP) == keys.KAI_RESERVATION_APP
    )


def has_active_do_not_disrupt(pod: Pod, now: datetime) -> bool:
    """Karpenter's pod ``karpenter.sh/do-not-disrupt`` semantics at ``now``.

    ``"true"`` protects the pod; a positive Go duration (``"2h"``) protects it until
    ``status.startTime + duration`` (a pod that has not started yet is protected). Anything else,
    including ``"false"``, zero or negative durations and malformed values, protects nothing
    (Karpenter ignores them with an event).
    """
    value = pod.metadata.annotations.get(keys.DO_NOT_DISRUPT)
    if value is None:
        return False
    if value.strip() == "true":
        return True
    try:
        duration = parse_go_duration(value)
    except DurationError:
        return False
    if duration.total_seconds() <= 0:
        return False
    start = pod.status.start_time if pod.status is not None else None
    if start is None:
        return True
    return now < start + duration
