"""Pod-group summaries: gang size, members present, sub-groups and the zone opt-out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from provisioner.apis.core import ObjectMeta, Pod, is_terminal
from provisioner.podgroups import coscheduling, jobset, kai, keys, kueue, lws, provreq, volcano
from provisioner.podgroups import workload as kube_workload
from provisioner.podgroups.context import ProvisioningContext
from provisioner.podgroups.detect import detect_group
from provisioner.podgroups.model import Ecosystem, PodGroupInfo, PodGroupRef, SubGroupInfo

__all__ = ["group_info", "is_gated", "kueue_workload_key", "pod_groups"]


@dataclass(frozen=True, slots=True)
class _Shape:
    metadata: ObjectMeta | None = None
    min_count: int | None = None
    sub_group_minimums: Mapping[str, int] | None = None
    size_from_first_pod: bool = False


def is_gated(pod: Pod) -> bool:
    """Whether the pod still has a scheduling gate."""
    return bool(pod.spec.scheduling_gates)


def _is_live(pod: Pod) -> bool:
    return not is_terminal(pod)


def _workload_api(ref: PodGroupRef, members: tuple[Pod, ...], ctx: ProvisioningContext) -> _Shape:
    group = ctx.kube_pod_groups.get(ref.key)
    if group is not None:
        return _Shape(group.metadata, kube_workload.pod_group_min_count(group))
    for pod in members:
        wref = pod.spec.workload_ref
        if wref is None:
            continue
        found = ctx.kube_workloads.get(f"{ref.namespace}/{wref.name}")
        if found is not None:
            return _Shape(found.metadata, kube_workload.workload_min_count(found, wref.pod_group))
    return _Shape()


def _kai(ref: PodGroupRef, ctx: ProvisioningContext) -> _Shape:
    group = ctx.kai_pod_groups.get(ref.key)
    if group is None:
        return _Shape()
    return _Shape(group.metadata, kai.min_count(group), kai.sub_group_minimums(group))


def _volcano(ref: PodGroupRef, ctx: ProvisioningContext) -> _Shape:
    group = ctx.volcano_pod_groups.get(ref.key)
    if group is None:
        return _Shape()
    tasks = {k: v for k, v in group.spec.min_task_member.items() if v > 0}
    return _Shape(group.metadata, volcano.min_count(group), tasks)


def _coscheduling(ref: PodGroupRef, ctx: ProvisioningContext) -> _Shape:
    group = ctx.coscheduling_pod_groups.get(ref.key)
    if group is None:
        return _Shape()
    return _Shape(group.metadata, coscheduling.min_count(group))


def kueue_workload_key(ref: PodGroupRef, members: Iterable[Pod]) -> str:
    """The Workload of a Kueue group: the pods' ``kueue.x-k8s.io/workload``, else the group name."""
    for pod in members:
        name = pod.metadata.annotations.get(keys.KUEUE_WORKLOAD)
        if name:
            return f"{ref.namespace}/{name}"
    return ref.key


def _kueue_pod_group(
    ref: PodGroupRef, members: tuple[Pod, ...], ctx: ProvisioningContext
) -> _Shape:
    found = ctx.kueue_workloads.get(kueue_workload_key(ref, members))
    count = next((c for p in members if (c := kueue.pod_group_total_count(p)) is not None), None)
    return _Shape(found.metadata if found is not None else None, count)


def _kueue_workload(ref: PodGroupRef, ctx: ProvisioningContext) -> _Shape:
    found = ctx.kueue_workloads.get(ref.key)
    if found is None:
        return _Shape()
    return _Shape(found.metadata, kueue.workload_min_count(found), kueue.pod_set_minimums(found))


def _provreq(ref: PodGroupRef, ctx: ProvisioningContext) -> _Shape:
    found = ctx.provisioning_requests.get(ref.key)
    if found is None:
        return _Shape()
    return _Shape(found.metadata, provreq.min_count(found))


def _lws(ref: PodGroupRef, members: tuple[Pod, ...], ctx: ProvisioningContext) -> _Shape:
    size: int | None = None
    found: lws.LeaderWorkerSet | None = None
    for pod in members:
        found = ctx.leader_worker_sets.get(
            f"{ref.namespace}/{pod.metadata.labels.get(keys.LWS_NAME, '')}"
        )
        size = lws.size(pod, found)
        if size is not None:
            break
    return _Shape(found.metadata if found else None, size, size_from_first_pod=True)


def _jobset(members: tuple[Pod, ...], ctx: ProvisioningContext) -> _Shape:
    for pod in members:
        key = jobset.jobset_key(pod)
        found = ctx.jobsets.get(key) if key else None
        size = jobset.size(pod, found, ctx.jobs)
        return _Shape(found.metadata if found else None, size, size_from_first_pod=True)
    return _Shape(size_from_first_pod=True)


def _shape(  # noqa: PLR0911 - one return per row of the table
    ref: PodGroupRef, members: tuple[Pod, ...], ctx: ProvisioningContext
) -> _Shape:
    match ref.ecosystem:
        case Ecosystem.WORKLOAD_API:
            return _workload_api(ref, members, ctx)
        case Ecosystem.KAI:
            return _kai(ref, ctx)
        case Ecosystem.VOLCANO:
            return _volcano(ref, ctx)
        case Ecosystem.COSCHEDULING:
            return _coscheduling(ref, ctx)
        case Ecosystem.KUEUE_POD_GROUP:
            return _kueue_pod_group(ref, members, ctx)
        case Ecosystem.KUEUE_WORKLOAD:
            return _kueue_workload(ref, ctx)
        case Ecosystem.PROVISIONING_REQUEST:
            return _provreq(ref, ctx)
        case Ecosystem.LEADER_WORKER_SET:
            return _lws(ref, members, ctx)
        case Ecosystem.JOBSET:
            return _jobset(members, ctx)


def _opts_out(metadata: ObjectMeta | None, members: Iterable[Pod]) -> bool:
    sources = [m.metadata.annotations for m in members]
    if metadata is not None:
        sources.append(metadata.annotations)
    return any(a.get(keys.GANG_TOPOLOGY) == keys.GANG_TOPOLOGY_NONE for a in sources)


def _sub_groups(minimums: Mapping[str, int], members: Iterable[Pod]) -> tuple[SubGroupInfo, ...]:
    by_sub: dict[str, list[str]] = {}
    for pod in members:
        ref = detect_group(pod)
        if ref is not None and ref.sub_group is not None and not is_gated(pod):
            by_sub.setdefault(ref.sub_group, []).append(pod.key)
    return tuple(
        SubGroupInfo(name=name, min_count=minimum, members=tuple(sorted(by_sub.get(name, ()))))
        for name, minimum in sorted(minimums.items())
    )


def group_info(
    ref: PodGroupRef, context: ProvisioningContext, *, pods: Iterable[Pod] = ()
) -> PodGroupInfo:
    """Summarise the group ``ref`` names from the context's pods and objects.

    Args:
        ref: the group (from ``detect_group``).
        context: the cluster objects.
        pods: members to count even if the context's pods do not include them.
    """
    found = {p.key: p for p in context.members.get(ref.group_id, ())}
    for pod in pods:
        if _is_live(pod):
            found.setdefault(pod.key, pod)
    members = tuple(found[k] for k in sorted(found))
    shape = _shape(ref, members, context)
    return PodGroupInfo(
        key=ref.key,
        ecosystem=ref.ecosystem,
        namespace=ref.namespace,
        name=ref.name,
        min_count=shape.min_count,
        members=tuple(p.key for p in members),
        gated_members=tuple(p.key for p in members if is_gated(p)),
        sub_groups=_sub_groups(shape.sub_group_minimums or {}, members),
        same_zone=not _opts_out(shape.metadata, members),
        size_from_first_pod=shape.size_from_first_pod,
        object_found=shape.metadata is not None,
    )


def pod_groups(context: ProvisioningContext) -> tuple[PodGroupInfo, ...]:
    """Every group with at least one live pod in the context, sorted by ecosystem and key."""
    infos = []
    for ecosystem, namespace, name in sorted(context.members):
        ref = PodGroupRef(ecosystem=ecosystem, namespace=namespace, name=name)
        infos.append(group_info(ref, context))
    return tuple(infos)
