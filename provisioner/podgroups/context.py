"""The cluster objects pod-group decisions read, indexed by key, and how to build them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pydantic

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod, PriorityClass, is_terminal
from provisioner.podgroups import coscheduling, jobset, kai, kueue, lws, provreq, volcano, workload
from provisioner.podgroups.detect import detect_group
from provisioner.podgroups.model import GroupId, PodGroupRef

__all__ = ["ProvisioningContext", "build_context"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProvisioningContext:
    """Everything pod-group decisions read; namespaced objects keyed ``namespace/name``.

    Cluster-scoped objects (queues, PriorityClasses) are keyed by name. ``members`` is derived
    from ``pods`` when first read: the live (not Succeeded/Failed) pods of each group.
    """

    pods: tuple[Pod, ...] = ()
    """Every pod known (pending and bound): gang membership is counted over them."""
    kai_pod_groups: Mapping[str, kai.KaiPodGroup] = field(default_factory=dict)
    """``scheduling.run.ai`` PodGroups."""
    kai_queues: Mapping[str, kai.KaiQueue] = field(default_factory=dict)
    """``scheduling.run.ai`` Queues by name; empty = unknown (no queue checks)."""
    volcano_pod_groups: Mapping[str, volcano.VolcanoPodGroup] = field(default_factory=dict)
    """``scheduling.volcano.sh`` PodGroups."""
    volcano_queues: Mapping[str, volcano.VolcanoQueue] = field(default_factory=dict)
    """``scheduling.volcano.sh`` Queues by name; empty = unknown (no queue checks)."""
    coscheduling_pod_groups: Mapping[str, coscheduling.CoschedulingPodGroup] = field(
        default_factory=dict
    )
    """``scheduling.x-k8s.io`` PodGroups."""
    elastic_quotas: Mapping[str, coscheduling.ElasticQuota] = field(default_factory=dict)
    """``scheduling.x-k8s.io`` ElasticQuotas."""
    kueue_workloads: Mapping[str, kueue.KueueWorkload] = field(default_factory=dict)
    """``kueue.x-k8s.io`` Workloads."""
    kube_workloads: Mapping[str, workload.KubeWorkload] = field(default_factory=dict)
    """``scheduling.k8s.io`` Workloads."""
    kube_pod_groups: Mapping[str, workload.KubePodGroup] = field(default_factory=dict)
    """``scheduling.k8s.io`` PodGroups."""
    leader_worker_sets: Mapping[str, lws.LeaderWorkerSet] = field(default_factory=dict)
    """LeaderWorkerSets."""
    jobsets: Mapping[str, jobset.JobSet] = field(default_factory=dict)
    """JobSets."""
    jobs: Mapping[str, jobset.Job] = field(default_factory=dict)
    """``batch/v1`` Jobs (JobSet parallelism)."""
    provisioning_requests: Mapping[str, provreq.ProvisioningRequest] = field(default_factory=dict)
    """ProvisioningRequests."""
    pod_templates: Mapping[str, provreq.PodTemplate] = field(default_factory=dict)
    """``v1`` PodTemplates (of ProvisioningRequests' pod sets)."""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass name to value."""
    detector: Callable[[Pod], PodGroupRef | None] | None = field(
        default=None, repr=False, compare=False
    )
    """``detect_group`` or a memo of it (a caller planning many times over the same pods)."""
    _members: dict[GroupId, tuple[Pod, ...]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def members(self) -> Mapping[GroupId, tuple[Pod, ...]]:
        """Live pods per group, derived from ``pods`` when first read.

        A view whose pods are in no group, or that no group decision reads, never pays for it.
        """
        if self._members is None:
            index: dict[GroupId, dict[str, Pod]] = {}
            for pod in self.pods:
                if is_terminal(pod):
                    continue
                ref = self.group_of(pod)
                if ref is not None:
                    index.setdefault(ref.group_id, {})[pod.key] = pod
            members = {gid: tuple(pods[k] for k in sorted(pods)) for gid, pods in index.items()}
            object.__setattr__(self, "_members", members)
            return members
        return self._members

    def group_of(self, pod: Pod) -> PodGroupRef | None:
        """The pod's group (``detect_group``, through ``detector`` when there is one)."""
        return detect_group(pod) if self.detector is None else self.detector(pod)


def _key(metadata: Mapping[str, Any], *, namespaced: bool) -> str:
    name = str(metadata.get("name") or "")
    if not namespaced:
        return name
    return f"{metadata.get('namespace') or 'default'}/{name}"


_Model = type[pydantic.BaseModel]
# (api group, kind) -> (context field, model, namespaced)
_KINDS: Final[Mapping[tuple[str, str], tuple[str, _Model, bool]]] = {
    (kai.API_GROUP, "PodGroup"): ("kai_pod_groups", kai.KaiPodGroup, True),
    (kai.API_GROUP, "Queue"): ("kai_queues", kai.KaiQueue, False),
    (volcano.API_GROUP, "PodGroup"): ("volcano_pod_groups", volcano.VolcanoPodGroup, True),
    (volcano.API_GROUP, "Queue"): ("volcano_queues", volcano.VolcanoQueue, False),
    **{
        (group, "PodGroup"): (
            "coscheduling_pod_groups",
            coscheduling.CoschedulingPodGroup,
            True,
        )
        for group in coscheduling.API_GROUPS
    },
    **{
        (group, "ElasticQuota"): ("elastic_quotas", coscheduling.ElasticQuota, True)
        for group in coscheduling.API_GROUPS
    },
    (kueue.API_GROUP, "Workload"): ("kueue_workloads", kueue.KueueWorkload, True),
    (workload.API_GROUP, "Workload"): ("kube_workloads", workload.KubeWorkload, True),
    (workload.API_GROUP, "PodGroup"): ("kube_pod_groups", workload.KubePodGroup, True),
    (lws.API_GROUP, "LeaderWorkerSet"): ("leader_worker_sets", lws.LeaderWorkerSet, True),
    (jobset.API_GROUP, "JobSet"): ("jobsets", jobset.JobSet, True),
    ("batch", "Job"): ("jobs", jobset.Job, True),
    (provreq.API_GROUP, "ProvisioningRequest"): (
        "provisioning_requests",
        provreq.ProvisioningRequest,
        True,
    ),
    ("", "PodTemplate"): ("pod_templates", provreq.PodTemplate, True),
}


def _api_group(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def build_context(objects: Iterable[Mapping[str, Any]]) -> ProvisioningContext:
    """Index raw objects (decoded JSON/YAML) by kind; kinds not read here are skipped.

    Pods (``v1``) and PriorityClasses (``scheduling.k8s.io/v1``) are read too. Later objects
    with the same key replace earlier ones.

    Raises:
        ApiValidationError: an object of a known kind whose fields Jointer reads are malformed
            (names the kind, the object and the field path).
    """
    tables: dict[str, Any] = {name: {} for name, _, _ in _KINDS.values()}
    pods: dict[str, Pod] = {}
    priority_classes: dict[str, int] = {}
    parsers: dict[tuple[str, str], Callable[[Mapping[str, Any]], None]] = {}

    def add_pod(obj: Mapping[str, Any]) -> None:
        pod = parse_object(Pod, obj, kind="Pod")
        pods[pod.key] = pod

    def add_priority_class(obj: Mapping[str, Any]) -> None:
        pc = parse_object(PriorityClass, obj, kind="PriorityClass")
        priority_classes[pc.metadata.name] = pc.value

    parsers[("", "Pod")] = add_pod
    parsers[("scheduling.k8s.io", "PriorityClass")] = add_priority_class

    for obj in objects:
        kind = str(obj.get("kind") or "")
        group = _api_group(obj)
        parser = parsers.get((group, kind))
        if parser is not None:
            parser(obj)
            continue
        entry = _KINDS.get((group, kind))
        if entry is None:
            continue
        table, model, namespaced = entry
        metadata = obj.get("metadata")
        key = _key(metadata if isinstance(metadata, Mapping) else {}, namespaced=namespaced)
        tables[table][key] = parse_object(model, obj, kind=kind)
    return ProvisioningContext(
        pods=tuple(pods.values()), priority_classes=priority_classes, **tables
    )
