"""The kinds the simulated cluster understands, and the API collection of each.

Built-in and Karpenter kinds come from :mod:`provisioner.kube.resource`; the pod-group kinds
(KAI, Volcano, coscheduling, Kueue, the Workload API, LeaderWorkerSet, JobSet,
ProvisioningRequest) and llmaz's OpenModel are served at whatever version a manifest names, as
a cluster with those CRDs installed would; CapacityBuffers at ``autoscaling.x-k8s.io/v1beta1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from provisioner.kube.resource import ALL_RESOURCES, Resource, resource_for
from provisioner.state.cluster import BUFFER_KINDS

__all__ = [
    "POD_GROUP_KINDS",
    "is_deletable_kind",
    "is_known_kind",
    "pod_group_resources",
    "resource_for_kind",
    "resources_by_kind",
]

# (api group, kind) -> (plural, namespaced)
POD_GROUP_KINDS: Final[Mapping[tuple[str, str], tuple[str, bool]]] = {
    ("scheduling.run.ai", "PodGroup"): ("podgroups", True),
    ("scheduling.run.ai", "Queue"): ("queues", False),
    ("scheduling.volcano.sh", "PodGroup"): ("podgroups", True),
    ("scheduling.volcano.sh", "Queue"): ("queues", False),
    ("scheduling.x-k8s.io", "PodGroup"): ("podgroups", True),
    ("scheduling.x-k8s.io", "ElasticQuota"): ("elasticquotas", True),
    ("scheduling.sigs.k8s.io", "PodGroup"): ("podgroups", True),
    ("scheduling.sigs.k8s.io", "ElasticQuota"): ("elasticquotas", True),
    ("kueue.x-k8s.io", "Workload"): ("workloads", True),
    ("scheduling.k8s.io", "Workload"): ("workloads", True),
    ("scheduling.k8s.io", "PodGroup"): ("podgroups", True),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): ("leaderworkersets", True),
    ("jobset.x-k8s.io", "JobSet"): ("jobsets", True),
    ("autoscaling.x-k8s.io", "ProvisioningRequest"): ("provisioningrequests", True),
    ("llmaz.io", "OpenModel"): ("openmodels", False),
}
"""Pod-group kinds (``pod-groups.md``), served at any version."""

_UNSERVED: Final = frozenset({"Event", "Lease"})


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def resource_for_kind(api_version: str, kind: str) -> Resource:
    """The collection objects of this ``apiVersion`` and ``kind`` live in.

    Raises:
        LookupError: a kind the simulated cluster does not serve.
    """
    try:
        return resource_for(api_version, kind)
    except LookupError:
        group, version = _split(api_version)
        found = POD_GROUP_KINDS.get((group, kind))
        if found is None or not version:
            raise
        plural, namespaced = found
        return Resource(group, version, plural, kind, namespaced=namespaced, has_status=True)


def is_known_kind(api_version: str, kind: str) -> bool:
    """Whether a scenario may apply objects of this ``apiVersion`` and ``kind``."""
    if kind in _UNSERVED:
        return False
    try:
        resource_for_kind(api_version, kind)
    except LookupError:
        return False
    return True


def is_deletable_kind(kind: str, api_version: str | None = None) -> bool:
    """Whether a scenario may delete objects of ``kind`` (optionally of one ``apiVersion``)."""
    if api_version is not None:
        return is_known_kind(api_version, kind)
    if kind in _UNSERVED:
        return False
    return bool(resources_by_kind(kind)) or any(k == kind for _, k in POD_GROUP_KINDS)


def resources_by_kind(kind: str, api_version: str | None = None) -> list[Resource]:
    """The built-in collections holding ``kind`` (optionally of one ``apiVersion``)."""
    return [
        r
        for r in ALL_RESOURCES
        if r.kind == kind and (api_version is None or r.api_version == api_version)
    ]


def pod_group_resources(seen: frozenset[Resource]) -> list[Resource]:
    """The pod-group and CapacityBuffer collections among ``seen`` (objects were applied to).

    The controllers' cache lists neither itself: a (re)start is given their objects.
    """
    return sorted(
        (r for r in seen if (r.group, r.kind) in POD_GROUP_KINDS or r.kind in BUFFER_KINDS),
        key=lambda r: (r.group, r.version, r.kind),
    )
