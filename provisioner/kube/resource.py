"""Resource descriptors: where each kind lives in the Kubernetes API.

A `Resource` names one collection of the API (group, version, plural) together with the kind
it holds, whether it is namespaced and whether it has a `status` subresource. The port and its
adapters address objects only through these descriptors, so they stay generic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Resource:
    """One API collection, e.g. `v1/pods` or `karpenter.sh/v1/nodeclaims`.

    Attributes:
        group: API group; `""` for the core group.
        version: API version inside the group, e.g. `v1`.
        plural: lower-case plural used in URLs, e.g. `nodeclaims`.
        kind: the `kind` of the objects, e.g. `NodeClaim`.
        namespaced: whether objects live in a namespace.
        has_status: whether the API serves a `status` subresource (then patches of the main
            resource ignore `status`, and status patches touch only `status`).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool = False

    @property
    def api_version(self) -> str:
        """The `apiVersion` of objects of this resource (`v1`, `karpenter.sh/v1`)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def is_custom(self) -> bool:
        """Whether this is a custom resource (a CRD rather than a built-in API)."""
        return self.group in CUSTOM_GROUPS

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """Build the URL path of the collection, an object or an object's subresource.

        Args:
            namespace: the namespace; ignored for cluster-scoped resources, and for namespaced
                ones `None` addresses all namespaces (lists and watches only).
            name: the object's name, or `None` for the collection.
            subresource: e.g. `status` or `eviction`; requires `name`.

        Returns:
            The absolute path, e.g. `/api/v1/namespaces/default/pods/p1/status`.
        """
        parts = ["/api", self.version] if not self.group else ["/apis", self.group, self.version]
        if self.namespaced and namespace is not None:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource is not None:
                parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.api_version}/{self.plural}"


CUSTOM_GROUPS: Final = frozenset({"karpenter.sh", "karpenter.k8s.aws"})

PODS: Final = Resource("", "v1", "pods", "Pod", namespaced=True, has_status=True)
NODES: Final = Resource("", "v1", "nodes", "Node", namespaced=False, has_status=True)
EVENTS: Final = Resource("", "v1", "events", "Event", namespaced=True)
NAMESPACES: Final = Resource("", "v1", "namespaces", "Namespace", namespaced=False, has_status=True)
PERSISTENT_VOLUME_CLAIMS: Final = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True, has_status=True
)
PERSISTENT_VOLUMES: Final = Resource(
    "", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, has_status=True
)
POD_TEMPLATES: Final = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
DAEMON_SETS: Final = Resource(
    "apps", "v1", "daemonsets", "DaemonSet", namespaced=True, has_status=True
)
REPLICA_SETS: Final = Resource(
    "apps", "v1", "replicasets", "ReplicaSet", namespaced=True, has_status=True
)
DEPLOYMENTS: Final = Resource(
    "apps", "v1", "deployments", "Deployment", namespaced=True, has_status=True
)
STATEFUL_SETS: Final = Resource(
    "apps", "v1", "statefulsets", "StatefulSet", namespaced=True, has_status=True
)
JOBS: Final = Resource("batch", "v1", "jobs", "Job", namespaced=True, has_status=True)
CAPACITY_BUFFERS: Final = Resource(
    "autoscaling.x-k8s.io",
    "v1beta1",
    "capacitybuffers",
    "CapacityBuffer",
    namespaced=True,
    has_status=True,
)
POD_DISRUPTION_BUDGETS: Final = Resource(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True, has_status=True
)
PRIORITY_CLASSES: Final = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
STORAGE_CLASSES: Final = Resource(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False
)
NODE_POOLS: Final = Resource(
    "karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False, has_status=True
)
NODE_CLAIMS: Final = Resource(
    "karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False, has_status=True
)
NODE_OVERLAYS: Final = Resource(
    "karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay", namespaced=False, has_status=True
)
EC2_NODE_CLASSES: Final = Resource(
    "karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", namespaced=False, has_status=True
)

PROVISIONING_REQUESTS: Final = Resource(
    "autoscaling.x-k8s.io",
    "v1",
    "provisioningrequests",
    "ProvisioningRequest",
    namespaced=True,
    has_status=True,
)
"""ProvisioningRequests (the status is written through ``patch_status``)."""

POD_GROUP_RESOURCES: Final[tuple[Resource, ...]] = (
    Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced=True),
    Resource("scheduling.run.ai", "v2", "queues", "Queue", namespaced=False),
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False),
    Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True),
    Resource("scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", namespaced=True),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", namespaced=True),
    Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", namespaced=True),
    Resource("scheduling.k8s.io", "v1alpha1", "workloads", "Workload", namespaced=True),
    Resource(
        "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", namespaced=True
    ),
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True),
    PROVISIONING_REQUESTS,
    Resource("llmaz.io", "v1alpha1", "openmodels", "OpenModel", namespaced=False),
)
"""Pod-group, queue and admission objects of the schedulers Jointer understands (optional CRDs:
a cluster serves the ones its schedulers installed)."""

ALL_RESOURCES: Final[tuple[Resource, ...]] = (
    PODS,
    NODES,
    EVENTS,
    NAMESPACES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    LEASES,
    POD_TEMPLATES,
    DAEMON_SETS,
    REPLICA_SETS,
    DEPLOYMENTS,
    STATEFUL_SETS,
    JOBS,
    CAPACITY_BUFFERS,
    POD_DISRUPTION_BUDGETS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
    NODE_POOLS,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    EC2_NODE_CLASSES,
    *POD_GROUP_RESOURCES,
)

_BY_API_VERSION_KIND: Final[dict[tuple[str, str], Resource]] = {
    (resource.api_version, resource.kind): resource for resource in ALL_RESOURCES
}


def resource_for(api_version: str, kind: str) -> Resource:
    """Find the resource of objects with this `apiVersion` and `kind`.

    Args:
        api_version: e.g. `v1` or `karpenter.sh/v1`.
        kind: e.g. `Pod` or `NodeClaim`.

    Returns:
        The matching descriptor.

    Raises:
        LookupError: the pair is not one Jointer knows.
    """
    try:
        return _BY_API_VERSION_KIND[api_version, kind]
    except KeyError:
        raise LookupError(
            f"unknown resource for apiVersion {api_version!r} kind {kind!r}"
        ) from None


def resource_of(obj: dict[str, object]) -> Resource:
    """Find the resource of a JSON object by its own `apiVersion` and `kind`."""
    return resource_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
