"""Which pending pods Jointer provisions for: Karpenter's rules plus the pod-group rules.

``provisionable_verdict`` applies, in order:

1. Karpenter's ``IsProvisionable`` (``karpenter-behaviour.md`` §2): unbound, not DaemonSet- or
   Node-owned, no ``nominatedNodeName``, not scheduling-gated, ``PodScheduled`` reason
   ``Unschedulable``. A pod without a ``status`` (or whose status has no conditions yet) is
   treated as unschedulable, as ``jointer plan`` does.
2. The admission and quota rules of the pod's group (``pod-groups.md`` §8).
3. What the pod itself says: coscheduling's "wait for siblings" messages; a consumed
   ProvisioningRequest that is missing, failed or expired (never served ad hoc).
4. Gang completeness: fewer live, ungated members than the group's minimum (per sub-group too)
   means its scheduler waits for the rest, except LWS and JobSet whose size the first pod tells.

A group object that is absent from the context is not held against the pod: only evidence that
is present (pod fields, objects, queue states) keeps a pod back. ProvisioningRequests are the
exception (a consumer of a missing request is ignored), as are queues when the context knows the
ecosystem's queues but not the one named.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from provisioner.apis.core import Pod
from provisioner.podgroups import (
    coscheduling,
    fractions,
    jobset,
    kai,
    keys,
    kueue,
    provreq,
    volcano,
)
from provisioner.podgroups.context import ProvisioningContext
from provisioner.podgroups.groups import group_info, kueue_workload_key
from provisioner.podgroups.model import Ecosystem, GroupId, PodGroupInfo, PodGroupRef, Verdict
from provisioner.scheduling.resources import ResourceListError, requests_of

__all__ = ["karpenter_ignore_reason", "provisionable_verdict", "provisionable_verdicts"]

_UNSCHEDULABLE: Final = "Unschedulable"
_SCHEDULABLE: Final = "Schedulable"
_POD_SCHEDULED: Final = "PodScheduled"


def karpenter_ignore_reason(pod: Pod) -> str | None:  # noqa: PLR0911 - one return per rule
    """Why Karpenter's ``IsProvisionable`` skips the pod, or ``None`` when it does not."""
    if pod.spec.node_name:
        return f"pod is bound to node {pod.spec.node_name}"
    for owner in pod.metadata.owner_references:
        if owner.kind == "DaemonSet" and owner.api_version.startswith("apps/"):
            return f"pod is owned by DaemonSet {owner.name}"
        if owner.kind == "Node" and owner.api_version in {"v1", ""}:
            return f"pod is a mirror pod (owned by Node {owner.name})"
    status = pod.status
    if status is not None and status.nominated_node_name:
        return f"pod is nominated to node {status.nominated_node_name} (preempting)"
    if pod.spec.scheduling_gates:
        gates = ", ".join(g.name for g in pod.spec.scheduling_gates)
        return f"pod is scheduling-gated ({gates})"
    if status is None or not status.conditions:
        return None
    condition = next((c for c in status.conditions if c.type == _POD_SCHEDULED), None)
    if condition is None:
        return "pod has no PodScheduled condition"
    if condition.reason == _UNSCHEDULABLE:
        return None
    if condition.reason == _SCHEDULABLE:
        return "pod is already placed by its scheduler (PodScheduled reason Schedulable)"
    return f"pod is not unschedulable (PodScheduled reason {condition.reason or 'empty'})"


def _pending(members: Sequence[Pod]) -> list[Pod]:
    return [p for p in members if not p.spec.node_name]


def _requests(pod: Pod) -> dict[str, int]:
    try:
        return requests_of(pod)
    except ResourceListError:
        # A malformed quantity is reported by the planner's own validation; count nothing here.
        return {}


def _gpu_milli(pod: Pod) -> int:
    whole = _requests(pod).get(keys.NVIDIA_GPU, 0)
    try:
        fraction = fractions.gpu_fraction_milli(pod, None)
    except fractions.FractionError:
        fraction = None
    if fraction is not None:
        milli, devices = fraction
        whole += milli * devices
    return whole


def _kai_reason(
    pod: Pod, ref: PodGroupRef, members: Sequence[Pod], ctx: ProvisioningContext
) -> str | None:
    group = ctx.kai_pod_groups.get(ref.key)
    if group is not None:
        reason = kai.condition_reason(ref.key, group)
        if reason is not None:
            return reason
    pending = _pending(members)
    return kai.queue_reason(
        group_key=ref.key,
        queue=kai.queue_name(group, pod),
        queues=ctx.kai_queues,
        requested_gpu_milli=sum(_gpu_milli(p) for p in pending),
        non_preemptible=kai.non_preemptible_reason(pod, ref.key, group, ctx.priority_classes)
        is not None,
    )


def _volcano_reason(ref: PodGroupRef, ctx: ProvisioningContext) -> str | None:
    group = ctx.volcano_pod_groups.get(ref.key)
    if group is None:
        return None
    return volcano.admission_reason(ref.key, group, ctx.volcano_queues)


def _coscheduling_reason(
    ref: PodGroupRef, members: Sequence[Pod], ctx: ProvisioningContext
) -> str | None:
    pending = _pending(members)
    requested: dict[str, int] = {}
    for member in pending:
        for name, value in _requests(member).items():
            requested[name] = requested.get(name, 0) + value
    for quota in sorted(ctx.elastic_quotas.values(), key=lambda q: q.metadata.name):
        if (quota.metadata.namespace or "default") != ref.namespace:
            continue
        reason = coscheduling.quota_reason(
            group_key=ref.key, quota=quota, requested=requested, pod_count=len(pending)
        )
        if reason is not None:
            return reason
    return None


def _kueue_reason(pod: Pod, ref: PodGroupRef, ctx: ProvisioningContext) -> str | None:
    key = kueue_workload_key(ref, [pod]) if ref.ecosystem == Ecosystem.KUEUE_POD_GROUP else ref.key
    found = ctx.kueue_workloads.get(key)
    return kueue.admission_reason(ref.key, found) if found is not None else None


def _jobset_reason(pod: Pod, ctx: ProvisioningContext) -> str | None:
    key = jobset.jobset_key(pod)
    if key is None:
        return None
    return jobset.suspended_reason(key, ctx.jobsets.get(key))


def _group_reason(
    pod: Pod, ref: PodGroupRef, members: Sequence[Pod], ctx: ProvisioningContext
) -> str | None:
    """The group's admission/quota reason; ``pod`` stands for the group where a pod is read."""
    match ref.ecosystem:
        case Ecosystem.KAI:
            return _kai_reason(pod, ref, members, ctx)
        case Ecosystem.VOLCANO:
            return _volcano_reason(ref, ctx)
        case Ecosystem.COSCHEDULING:
            return _coscheduling_reason(ref, members, ctx)
        case Ecosystem.KUEUE_POD_GROUP | Ecosystem.KUEUE_WORKLOAD:
            return _kueue_reason(pod, ref, ctx)
        case Ecosystem.JOBSET:
            return _jobset_reason(pod, ctx)
        case _:
            # Workload API has no quota; LWS is admitted through rows 3/5; ProvisioningRequest
            # consumers are judged below for every row.
            return None


def _provisioning_request_reason(pod: Pod, ctx: ProvisioningContext) -> str | None:
    name = provreq.consumed_request(pod)
    if name is None:
        return None
    key = f"{pod.metadata.namespace or 'default'}/{name}"
    return provreq.admission_reason(key, ctx.provisioning_requests.get(key))


def _completeness_reason(info: PodGroupInfo) -> str | None:
    if info.size_from_first_pod:
        return None
    if info.is_gang and info.missing_count > 0:
        gated = len(info.gated_members)
        suffix = f" ({gated} gated)" if gated else ""
        return (
            f"pod group {info.key} is incomplete: "
            f"{info.ready_count} of {info.min_count} members exist{suffix}"
        )
    for sub in info.sub_groups:
        if len(sub.members) < sub.min_count:
            return (
                f"pod group {info.key} is incomplete: sub-group {sub.name} has "
                f"{len(sub.members)} of {sub.min_count} members"
            )
    return None


def _pod_reason(pod: Pod, ref: PodGroupRef, context: ProvisioningContext) -> str | None:
    """Reasons read from the pod: coscheduling's waiting messages, its ProvisioningRequest."""
    if ref.ecosystem == Ecosystem.COSCHEDULING and pod.status is not None:
        reason = coscheduling.waiting_reason(ref.key, pod.status.conditions)
        if reason is not None:
            return reason
    return _provisioning_request_reason(pod, context)


@dataclass(slots=True)
class _GroupVerdict:
    info: PodGroupInfo
    reason: str | None


def _judge_group(
    pod: Pod, ref: PodGroupRef, context: ProvisioningContext, extra: Sequence[Pod]
) -> _GroupVerdict:
    info = group_info(ref, context, pods=extra)
    found = {p.key: p for p in context.members.get(ref.group_id, ())}
    for member in extra:
        found.setdefault(member.key, member)
    members = [found[k] for k in sorted(found)]
    return _GroupVerdict(info, _group_reason(pod, ref, members, context))


_PROVISIONABLE: Final = Verdict.ok()
"""The verdict of a provisionable pod in no group (frozen, so one object serves every pod)."""


def _verdict(
    pod: Pod,
    ref: PodGroupRef | None,
    group: _GroupVerdict | None,
    ctx: ProvisioningContext,
    ignore: str | None,
) -> Verdict:
    """The verdict of ``pod``; ``ignore`` is its ``karpenter_ignore_reason``."""
    if ignore is not None:
        return Verdict.ignored(ignore, ref)
    if ref is None or group is None:
        return _PROVISIONABLE
    reason = group.reason or _pod_reason(pod, ref, ctx) or _completeness_reason(group.info)
    if reason is not None:
        return Verdict.ignored(reason, ref)
    return Verdict.ok(ref)


def provisionable_verdict(pod: Pod, context: ProvisioningContext) -> Verdict:
    """Decide whether the pending ``pod`` is work for the planner.

    Args:
        pod: a pod (usually pending; bound pods are reported as bound).
        context: the cluster objects (``build_context``); the pod need not be among its pods.

    Returns:
        ``Verdict.ok(group)`` or ``Verdict.ignored(reason, group)`` with a reason in the style of
        ``plan``'s ``ignored`` list (``pod group team-b/job is over its queue quota``).
    """
    ref = context.group_of(pod)
    ignore = karpenter_ignore_reason(pod)
    group = None
    if ref is not None and ignore is None:
        group = _judge_group(pod, ref, context, [pod])
    return _verdict(pod, ref, group, context, ignore)


def provisionable_verdicts(pods: Iterable[Pod], context: ProvisioningContext) -> dict[str, Verdict]:
    """``provisionable_verdict`` for many pods, judging each group once; keyed by pod key.

    Pods of a group that are not in ``context.pods`` are counted as members.
    """
    batch = list(pods)
    keys = [pod.key for pod in batch]
    refs = [context.group_of(pod) for pod in batch]
    if len(set(keys)) < len(keys):  # a repeated key takes the group of its last pod
        last = dict(zip(keys, refs, strict=True))
        refs = [last[key] for key in keys]
    extra: dict[GroupId, list[Pod]] = {}
    for pod, ref in zip(batch, refs, strict=True):
        if ref is not None and _is_live(pod):
            extra.setdefault(ref.group_id, []).append(pod)
    groups: dict[GroupId, _GroupVerdict] = {}
    verdicts: dict[str, Verdict] = {}
    for pod, key, ref in zip(batch, keys, refs, strict=True):
        ignore = karpenter_ignore_reason(pod)
        group = None
        if ref is not None and ignore is None:
            group = groups.get(ref.group_id)
            if group is None:
                group = _judge_group(pod, ref, context, extra.get(ref.group_id, []))
                groups[ref.group_id] = group
        verdicts[key] = _verdict(pod, ref, group, context, ignore)
    return verdicts


def _is_live(pod: Pod) -> bool:
    return pod.status is None or pod.status.phase not in {"Succeeded", "Failed"}
