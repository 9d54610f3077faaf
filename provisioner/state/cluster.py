"""The cluster state cache: what the controllers know about the cluster, indexed once.

Karpenter's ``state.Cluster`` in Python. The cache is fed only by watch events
(:meth:`ClusterState.apply`) and relists (:meth:`ClusterState.replace`); controllers read it and
act through the Kubernetes port, never by writing here (nominations aside, which are the
provisioner's own in-memory bookkeeping, as in Karpenter).

Memory is proportional to need: objects are kept as the typed models of ``provisioner.apis``
(``LenientModel`` reads only the fields Jointer uses), never as whole JSON documents; only
pod-group objects, which the pure ``provisioner.podgroups`` parses itself, are kept raw. The
parts replicas have in common are kept once (:class:`~provisioner.state.intern.Interner`).

Every map is keyed by the object's natural key and guarded by one lock; readers get
immutable snapshots, so iteration never holds the lock.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from provisioner.apis.base import parse_object
from provisioner.apis.conditions import NODECLAIM_CONDITION_CONSOLIDATABLE
from provisioner.apis.core import (
    DaemonSet,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    StorageClass,
)
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodeoverlay import NodeOverlay
from provisioner.apis.nodepool import NodePool
from provisioner.kube.bulk import collector_paused
from provisioner.kube.protocol import JsonObject, KubeClient, WatchEvent, WatchEventType
from provisioner.kube.resource import (
    DAEMON_SETS,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    STORAGE_CLASSES,
    Resource,
)
from provisioner.state.intern import Interner
from provisioner.state.statenode import StateNode, join_state_nodes

__all__ = [
    "BUFFER_KINDS",
    "GROUP_KINDS",
    "NODE_CLASS_KINDS",
    "NOMINATION_WINDOW",
    "TRACKED_RESOURCES",
    "ClusterState",
    "NodeOverlayEntry",
    "NodePoolEntry",
    "Nomination",
    "Snapshot",
]

TRACKED_RESOURCES: Final[tuple[Resource, ...]] = (
    PODS,
    NODES,
    NODE_CLAIMS,
    NODE_POOLS,
    DAEMON_SETS,
    POD_DISRUPTION_BUDGETS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    PRIORITY_CLASSES,
)
"""What the cache needs listed before it is synced."""

GROUP_KINDS: Final = frozenset(
    {
        "PodGroup",
        "Queue",
        "ElasticQuota",
        "Workload",
        "LeaderWorkerSet",
        "JobSet",
        "Job",
        "ProvisioningRequest",
        "OpenModel",
        "PodTemplate",
    }
)

BUFFER_KINDS: Final = frozenset(
    {"CapacityBuffer", "PodTemplate", "Deployment", "ReplicaSet", "StatefulSet"}
)
"""Kinds kept raw for CapacityBuffers (the buffers, and what their chunks are shaped by)."""
_WORKLOAD_KINDS: Final = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})

OVERLAY_KIND: Final = "NodeOverlay"
"""NodeOverlays are kept as entries (``overlays``)."""
NODE_CLASS_KINDS: Final = frozenset({"EC2NodeClass"})
"""Node classes are kept whole, status included, for the cloud provider (``node_class``)."""

_Key = tuple[str, str]


def _key(obj: Mapping[str, Any]) -> _Key:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _same_version(known: Any, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is the version already parsed (same uid and resourceVersion).

    A relist or a repeated event then costs no new validation.
    """
    metadata = obj.get("metadata") or {}
    version = metadata.get("resourceVersion")
    return bool(version) and (
        known.resource_version == version and known.uid == (metadata.get("uid") or "")
    )


def _placement_part(claim: NodeClaim) -> NodeClaim:
    """``claim`` without what no placement reads (``placement_generation``)."""
    status = claim.status
    if status is not None:
        status = status.model_copy(
            update={
                "last_pod_event_time": None,
                "conditions": tuple(
                    c for c in status.conditions if c.type != NODECLAIM_CONDITION_CONSOLIDATABLE
                ),
            }
        )
    metadata = claim.metadata.model_copy(update={"resource_version": ""})
    return claim.model_copy(update={"metadata": metadata, "status": status})


def _placed_alike(old: NodeClaim, new: NodeClaim) -> bool:
    """Whether two versions of a NodeClaim differ only in what no placement reads."""
    return _placement_part(old) == _placement_part(new)


def _pod_key(namespace: str, name: str) -> str:
    return f"{namespace or 'default'}/{name}"


@dataclass(frozen=True, slots=True)
class NodePoolEntry:
    """One NodePool as the cache holds it: the validated model, or why it does not validate.

    Attributes:
        name: ``metadata.name``.
        uid: ``metadata.uid``.
        generation: ``metadata.generation``.
        nodepool: the validated NodePool; None when malformed.
        error: the validation message naming the field; None when valid.
        conditions: ``status.conditions`` as stored (raw; kept for malformed pools too).
        deleting: whether ``metadata.deletionTimestamp`` is set.
        resources: ``status.resources`` as stored.
        nodes: ``status.nodes`` as stored.
    """

    name: str
    uid: str
    generation: int
    nodepool: NodePool | None
    error: str | None
    conditions: tuple[Mapping[str, Any], ...] = ()
    deleting: bool = False
    resources: Mapping[str, str] = field(default_factory=dict)
    nodes: int = 0


@dataclass(frozen=True, slots=True)
class NodeOverlayEntry:
    """One NodeOverlay as the cache holds it: the validated model, or why it does not validate.

    Attributes:
        name: ``metadata.name``.
        generation: ``metadata.generation``.
        overlay: the validated NodeOverlay; None when malformed.
        error: the validation message naming the field; None when valid.
        conditions: ``status.conditions`` as stored.
    """

    name: str
    generation: int
    overlay: NodeOverlay | None
    error: str | None
    conditions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Nomination:
    """A pending pod the provisioner decided should land on a NodeClaim (Karpenter's nomination).

    Attributes:
        pod: the pod key ``namespace/name``.
        pod_uid: the pod uid (a recreated pod is a new pod).
        node_claim: the NodeClaim name.
        until: when the nomination lapses (20 s after it was made).
    """

    pod: str
    pod_uid: str
    node_claim: str
    until: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """An immutable copy of the cache's indexes at one moment (cheap: models are shared).

    Attributes:
        pods: every pod by ``namespace/name``.
        nodes: nodes by name.
        node_claims: NodeClaims by name.
        nodepools: NodePools by name (valid or not).
        daemonsets: DaemonSets by ``namespace/name``.
        pdbs: PodDisruptionBudgets by ``namespace/name``.
        pvcs: PersistentVolumeClaims by ``namespace/name``.
        pvs: PersistentVolumes by name.
        storage_classes: StorageClasses by name.
        priority_classes: PriorityClass name to value.
        group_objects: raw pod-group objects (PodGroups, Queues, Workloads, ...).
        nominations: live nominations by pod key.
        overlays: valid NodeOverlays by name.
        state_nodes: Nodes and NodeClaims joined, with their pods and nominations, by
            :attr:`~provisioner.state.statenode.StateNode.key`.
        taken_at: when the snapshot was taken (None: unknown).
    """

    pods: Mapping[str, Pod]
    nodes: Mapping[str, Node]
    node_claims: Mapping[str, NodeClaim]
    nodepools: Mapping[str, NodePoolEntry]
    daemonsets: Mapping[str, DaemonSet]
    pdbs: Mapping[str, PodDisruptionBudget]
    pvcs: Mapping[str, PersistentVolumeClaim]
    pvs: Mapping[str, PersistentVolume]
    storage_classes: Mapping[str, StorageClass]
    priority_classes: Mapping[str, int]
    group_objects: tuple[JsonObject, ...]
    nominations: Mapping[str, Nomination]
    state_nodes: Mapping[str, StateNode]
    overlays: Mapping[str, NodeOverlay] = dataclasses.field(default_factory=dict)
    taken_at: datetime | None = None

    def with_changes(
        self,
        *,
        pods: Mapping[str, Pod] | None = None,
        nodes: Mapping[str, Node] | None = None,
        node_claims: Mapping[str, NodeClaim] | None = None,
    ) -> Snapshot:
        """This snapshot with some objects replaced, its state nodes joined again."""
        pods = self.pods if pods is None else pods
        nodes = self.nodes if nodes is None else nodes
        node_claims = self.node_claims if node_claims is None else node_claims
        nominations = {
            k: n for k, n in self.nominations.items() if n.node_claim in node_claims and k in pods
        }
        return dataclasses.replace(
            self,
            pods=pods,
            nodes=nodes,
            node_claims=node_claims,
            nominations=nominations,
            state_nodes=join_state_nodes(
                nodes.values(),
                node_claims.values(),
                pods.values(),
                {k: n.node_claim for k, n in nominations.items()},
            ),
        )


@dataclass(slots=True)
class _Indexes:
    pods: dict[str, Pod] = field(default_factory=dict)  # namespace/name -> pod
    nodes: dict[str, Node] = field(default_factory=dict)  # node name -> node
    node_claims: dict[str, NodeClaim] = field(default_factory=dict)  # claim name -> claim
    nodepools: dict[str, NodePoolEntry] = field(default_factory=dict)  # pool name -> entry
    daemonsets: dict[str, DaemonSet] = field(default_factory=dict)  # namespace/name -> ds
    pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)  # namespace/name -> pdb
    pvcs: dict[str, PersistentVolumeClaim] = field(default_factory=dict)  # namespace/name
    pvs: dict[str, PersistentVolume] = field(default_factory=dict)  # name -> pv
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)  # name -> class
    priority_classes: dict[str, int] = field(default_factory=dict)  # name -> value
    groups: dict[tuple[str, str, str, str], JsonObject] = field(
        default_factory=dict
    )  # (apiVersion, kind, namespace, name) -> raw pod-group object
    node_by_provider_id: dict[str, str] = field(default_factory=dict)  # providerID -> node
    claim_by_provider_id: dict[str, str] = field(default_factory=dict)  # providerID -> claim
    nominations: dict[str, Nomination] = field(default_factory=dict)  # pod key -> nomination
    overlays: dict[str, NodeOverlayEntry] = field(default_factory=dict)  # name -> entry
    node_classes: dict[tuple[str, str], JsonObject] = field(
        default_factory=dict
    )  # (kind, name) -> raw node class, as the API sent it


class ClusterState:
    """The controllers' view of the cluster, fed by watch events.

    Args:
        clock: the injected clock (nominations lapse on it; ``changed_at`` reads it).
    """

    def __init__(self, *, clock: Any) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._ix = _Indexes()
        self._interner = Interner()
        self._synced: set[Resource] = set()
        self._generation = 0
        self._placement_generation = 0
        self._joined: tuple[object, Mapping[str, StateNode]] | None = None
        self.changed_at: datetime = clock.now()
        """When the cache last changed (Karpenter's ``cluster.LastUpdated``)."""

    # -- the synced gate ----------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """Whether every tracked resource has been listed at least once."""
        with self._lock:
            return all(resource in self._synced for resource in TRACKED_RESOURCES)

    def mark_synced(self, resource: Resource) -> None:
        """Record that ``resource`` was listed (its informer's initial list is in)."""
        with self._lock:
            self._synced.add(resource)

    @property
    def generation(self) -> int:
        """A counter that moves on every change (cheap change detection for controllers)."""
        with self._lock:
            return self._generation

    @property
    def placement_generation(self) -> int:
        """A counter that moves on every change but those no placement reads.

        Those are a NodeClaim's ``Consolidatable`` condition and ``status.lastPodEventTime``
        (the disruption controllers' bookkeeping of when a node may be consolidated): what
        is planned on a snapshot, a disruption simulation's outcome, does not depend on them.
        """
        with self._lock:
            return self._placement_generation

    # -- feeding ------------------------------------------------------------------------------

    def resync(self, kube: KubeClient, resources: Iterable[Resource] = TRACKED_RESOURCES) -> None:
        """List ``resources`` and replace their contents (what an informer's relist does)."""
        for resource in resources:
            self.replace(resource, kube.list(resource).items)

    def replace(self, resource: Resource, items: Iterable[JsonObject]) -> None:
        """Replace everything known of ``resource`` with ``items`` and mark it synced."""
        with self._lock, collector_paused():
            kind = resource.kind
            existing = self._keys_of(kind)
            seen: set[_Key] = set()
            for obj in items:
                self._upsert_safely(kind, obj)
                seen.add(_key(obj))
            for key in existing - seen:
                self._remove(kind, {"metadata": {"namespace": key[0], "name": key[1]}})
            self._synced.add(resource)
            self._touch()  # a relist moves placement, whatever its objects were

    def apply(self, resource: Resource, event: WatchEvent) -> None:
        """Apply one watch event (``BOOKMARK``s and unknown kinds are ignored)."""
        if event.type == WatchEventType.BOOKMARK:
            return
        kind = str(event.object.get("kind") or resource.kind)
        with self._lock:
            if event.type == WatchEventType.DELETED:
                self._remove(kind, event.object)
                self._touch()
            else:
                self._touch(placement=self._upsert_safely(kind, event.object))

    def apply_object(self, obj: JsonObject, *, deleted: bool = False) -> None:
        """Apply one object of any kind (pod-group CRDs included) as added/updated or deleted."""
        with self._lock:
            kind = str(obj.get("kind") or "")
            if deleted:
                self._remove(kind, obj)
                self._touch()
            else:
                self._touch(placement=self._upsert_safely(kind, obj))

    def put_pod(self, pod: Pod) -> None:
        """Add or replace one pod already validated (``apply_object`` without parsing it again)."""
        with self._lock:
            self._ix.pods[_pod_key(pod.metadata.namespace, pod.metadata.name)] = pod
            self._touch()

    def _touch(self, *, placement: bool = True) -> None:
        """Record a change; ``placement=False`` when no placement reads what changed."""
        self._generation += 1
        if placement:
            self._placement_generation += 1
        self.changed_at = self._clock.now()

    def _keys_of(self, kind: str) -> set[_Key]:
        ix = self._ix
        simple: dict[str, Mapping[str, Any]] = {
            "Node": ix.nodes,
            "NodeClaim": ix.node_claims,
            "NodePool": ix.nodepools,
            "PersistentVolume": ix.pvs,
            "StorageClass": ix.storage_classes,
            "PriorityClass": ix.priority_classes,
            OVERLAY_KIND: ix.overlays,
        }
        if kind in simple:
            return {("", name) for name in simple[kind]}
        if kind in NODE_CLASS_KINDS:
            return {("", name) for known, name in ix.node_classes if known == kind}
        namespaced: dict[str, Mapping[str, Any]] = {
            "Pod": ix.pods,
            "DaemonSet": ix.daemonsets,
            "PodDisruptionBudget": ix.pdbs,
            "PersistentVolumeClaim": ix.pvcs,
        }
        if kind in namespaced:
            keys = set()
            for key in namespaced[kind]:
                namespace, _, name = key.partition("/")
                keys.add((namespace, name))
            return keys
        return {(k[2], k[3]) for k in ix.groups if k[1] == kind}

    def _upsert_safely(self, kind: str, obj: JsonObject) -> bool:
        """Add or replace ``obj``; whether what placement reads may have changed."""
        try:
            return self._upsert(kind, obj)
        except ApiValidationError:
            # Objects Jointer cannot read are dropped (the old state of that key with them):
            # the API server validated them, so this is a field Jointer reads too strictly.
            self._remove(kind, obj)
            return True

    def _upsert(self, kind: str, obj: JsonObject) -> bool:  # noqa: C901, PLR0912 - a dispatch table
        ix = self._ix
        namespace, name = _key(obj)
        if kind == "NodeClaim":
            return self._put_claim(obj)
        if kind == "Pod":
            self._put_pod(_pod_key(namespace, name), obj)
        elif kind == "Node":
            self._put_node_object(name, obj)
        elif kind == "NodePool":
            ix.nodepools[name] = _nodepool_entry(obj)
        elif kind == "DaemonSet":
            ix.daemonsets[_pod_key(namespace, name)] = parse_object(DaemonSet, obj, kind=kind)
        elif kind == "PodDisruptionBudget":
            ix.pdbs[_pod_key(namespace, name)] = parse_object(PodDisruptionBudget, obj, kind=kind)
        elif kind == "PersistentVolumeClaim":
            ix.pvcs[_pod_key(namespace, name)] = parse_object(PersistentVolumeClaim, obj, kind=kind)
        elif kind == "PersistentVolume":
            ix.pvs[name] = parse_object(PersistentVolume, obj, kind=kind)
        elif kind == "StorageClass":
            ix.storage_classes[name] = parse_object(StorageClass, obj, kind=kind)
        elif kind == "PriorityClass":
            ix.priority_classes[name] = int(obj.get("value") or 0)
        elif kind == OVERLAY_KIND:
            ix.overlays[name] = _overlay_entry(obj)
        elif kind in NODE_CLASS_KINDS:
            ix.node_classes[(kind, name)] = obj
        elif kind in GROUP_KINDS or kind in BUFFER_KINDS:
            ix.groups[(str(obj.get("apiVersion") or ""), kind, namespace, name)] = _trimmed(obj)
        return True

    def _put_pod(self, key: str, obj: JsonObject) -> None:
        known = self._ix.pods.get(key)
        if known is None or not _same_version(known.metadata, obj):
            self._ix.pods[key] = self._interner.share(parse_object(Pod, obj, kind="Pod"))

    def _put_node_object(self, name: str, obj: JsonObject) -> None:
        known = self._ix.nodes.get(name)
        if known is None or not _same_version(known.metadata, obj):
            self._put_node(self._interner.share(parse_object(Node, obj, kind="Node")))

    def _put_node(self, node: Node) -> None:
        ix = self._ix
        old = ix.nodes.get(node.metadata.name)
        if old is not None and old.spec.provider_id:
            ix.node_by_provider_id.pop(old.spec.provider_id, None)
        ix.nodes[node.metadata.name] = node
        if node.spec.provider_id:
            ix.node_by_provider_id[node.spec.provider_id] = node.metadata.name

    def _put_claim(self, obj: JsonObject) -> bool:
        """Add or replace one NodeClaim; False when only what no placement reads changed."""
        ix = self._ix
        try:
            claim = self._interner.share(parse_object(NodeClaim, obj, kind="NodeClaim"))
        except ApiValidationError:
            return True  # the API server validates NodeClaims; a bad one is not ours to manage
        old = ix.node_claims.get(claim.name)
        if old is not None and old.provider_id:
            ix.claim_by_provider_id.pop(old.provider_id, None)
        ix.node_claims[claim.name] = claim
        if claim.provider_id:
            ix.claim_by_provider_id[claim.provider_id] = claim.name
        return old is None or not _placed_alike(old, claim)

    def _remove(  # noqa: C901, PLR0912 - a dispatch table
        self, kind: str, obj: Mapping[str, Any]
    ) -> None:
        ix = self._ix
        namespace, name = _key(obj)
        if kind == "Pod":
            key = _pod_key(namespace, name)
            ix.pods.pop(key, None)
            ix.nominations.pop(key, None)
        elif kind == "Node":
            node = ix.nodes.pop(name, None)
            if node is not None and node.spec.provider_id:
                ix.node_by_provider_id.pop(node.spec.provider_id, None)
        elif kind == "NodeClaim":
            claim = ix.node_claims.pop(name, None)
            if claim is not None and claim.provider_id:
                ix.claim_by_provider_id.pop(claim.provider_id, None)
            for pod, nomination in list(ix.nominations.items()):
                if nomination.node_claim == name:
                    del ix.nominations[pod]
        elif kind == "NodePool":
            ix.nodepools.pop(name, None)
        elif kind in {"DaemonSet", "PodDisruptionBudget", "PersistentVolumeClaim"}:
            tables: dict[str, dict[str, Any]] = {
                "DaemonSet": ix.daemonsets,
                "PodDisruptionBudget": ix.pdbs,
                "PersistentVolumeClaim": ix.pvcs,
            }
            table = tables[kind]
            table.pop(_pod_key(namespace, name), None)
        elif kind == "PersistentVolume":
            ix.pvs.pop(name, None)
        elif kind == "StorageClass":
            ix.storage_classes.pop(name, None)
        elif kind == "PriorityClass":
            ix.priority_classes.pop(name, None)
        elif kind == OVERLAY_KIND:
            ix.overlays.pop(name, None)
        elif kind in NODE_CLASS_KINDS:
            ix.node_classes.pop((kind, name), None)
        elif kind in GROUP_KINDS or kind in BUFFER_KINDS:
            for group_key in [k for k in ix.groups if k[1:] == (kind, namespace, name)]:
                del ix.groups[group_key]

    # -- nominations --------------------------------------------------------------------------

    def nominate(self, pod: Pod, node_claim: str, *, until: datetime) -> None:
        """Remember that ``pod`` should land on ``node_claim`` until ``until``."""
        with self._lock:
            self._ix.nominations[pod.key] = Nomination(pod.key, pod.metadata.uid, node_claim, until)
            self._touch()

    def nominations(self, now: datetime) -> dict[str, Nomination]:
        """Live nominations (not lapsed, pod still pending with the same uid, claim alive)."""
        with self._lock:
            live: dict[str, Nomination] = {}
            for key, nomination in list(self._ix.nominations.items()):
                pod = self._ix.pods.get(key)
                claim = self._ix.node_claims.get(nomination.node_claim)
                if (
                    nomination.until <= now
                    or pod is None
                    or pod.metadata.uid != nomination.pod_uid
                    or pod.spec.node_name
                    or claim is None
                    or claim.metadata.deletion_timestamp is not None
                ):
                    del self._ix.nominations[key]
                    continue
                live[key] = nomination
            return live

    def is_nominated(self, node_claim: str, now: datetime) -> bool:
        """Whether a live nomination points at ``node_claim`` (it must not be disrupted)."""
        return any(n.node_claim == node_claim for n in self.nominations(now).values())

    # -- reads --------------------------------------------------------------------------------

    def snapshot(self, now: datetime | None = None) -> Snapshot:
        """An immutable copy of every index (the models are shared, not copied)."""
        at = now or self._clock.now()
        nominations = self.nominations(at)
        with self._lock:
            ix = self._ix
            return Snapshot(
                taken_at=at,
                state_nodes=self._state_nodes(nominations),
                pods=dict(ix.pods),
                nodes=dict(ix.nodes),
                node_claims=dict(ix.node_claims),
                nodepools=dict(ix.nodepools),
                daemonsets=dict(ix.daemonsets),
                pdbs=dict(ix.pdbs),
                pvcs=dict(ix.pvcs),
                pvs=dict(ix.pvs),
                storage_classes=dict(ix.storage_classes),
                priority_classes=dict(ix.priority_classes),
                group_objects=tuple(ix.groups.values()),
                nominations=nominations,
                overlays={
                    name: entry.overlay
                    for name, entry in sorted(ix.overlays.items())
                    if entry.overlay is not None
                },
            )

    def _state_nodes(self, nominations: Mapping[str, Nomination]) -> Mapping[str, StateNode]:
        """The joined state nodes, computed once per change of the cache and nominations."""
        key = (self._generation, tuple(sorted((k, n.node_claim) for k, n in nominations.items())))
        if self._joined is None or self._joined[0] != key:
            ix = self._ix
            joined = join_state_nodes(
                ix.nodes.values(),
                ix.node_claims.values(),
                ix.pods.values(),
                {k: n.node_claim for k, n in nominations.items()},
            )
            self._joined = (key, joined)
        return self._joined[1]

    def state_nodes(self, now: datetime | None = None) -> list[StateNode]:
        """Every state node (Nodes and NodeClaims joined), sorted by key (no snapshot copied)."""
        nominations = self.nominations(now or self._clock.now())
        with self._lock:
            return list(self._state_nodes(nominations).values())

    def pod(self, key: str) -> Pod | None:
        """The pod ``namespace/name``."""
        with self._lock:
            return self._ix.pods.get(key)

    def pods(self) -> list[Pod]:
        """Every pod."""
        with self._lock:
            return list(self._ix.pods.values())

    def node(self, name: str) -> Node | None:
        """The node called ``name``."""
        with self._lock:
            return self._ix.nodes.get(name)

    def nodes(self) -> list[Node]:
        """Every node."""
        with self._lock:
            return list(self._ix.nodes.values())

    def node_for_provider_id(self, provider_id: str) -> Node | None:
        """The node whose ``spec.providerID`` is ``provider_id``."""
        with self._lock:
            name = self._ix.node_by_provider_id.get(provider_id)
            return self._ix.nodes.get(name) if name is not None else None

    def node_claim(self, name: str) -> NodeClaim | None:
        """The NodeClaim called ``name``."""
        with self._lock:
            return self._ix.node_claims.get(name)

    def node_claims(self) -> list[NodeClaim]:
        """Every NodeClaim."""
        with self._lock:
            return list(self._ix.node_claims.values())

    def node_claim_for_provider_id(self, provider_id: str) -> NodeClaim | None:
        """The NodeClaim whose ``status.providerID`` is ``provider_id``."""
        with self._lock:
            name = self._ix.claim_by_provider_id.get(provider_id)
            return self._ix.node_claims.get(name) if name is not None else None

    def nodepool(self, name: str) -> NodePoolEntry | None:
        """The NodePool called ``name`` (valid or not)."""
        with self._lock:
            return self._ix.nodepools.get(name)

    def nodepools(self) -> list[NodePoolEntry]:
        """Every NodePool, by name."""
        with self._lock:
            return [self._ix.nodepools[name] for name in sorted(self._ix.nodepools)]

    def overlays(self) -> list[NodeOverlayEntry]:
        """Every NodeOverlay (valid or not), by name."""
        with self._lock:
            return [self._ix.overlays[name] for name in sorted(self._ix.overlays)]

    def overlay(self, name: str) -> NodeOverlayEntry | None:
        """The NodeOverlay called ``name`` (valid or not)."""
        with self._lock:
            return self._ix.overlays.get(name)

    def node_class(self, kind: str, name: str) -> JsonObject | None:
        """The node class (an ``EC2NodeClass``) as the API last sent it, status included.

        None when none was seen (not yet delivered, deleted, or a kind not kept). Read only:
        the object is the cache's own.
        """
        with self._lock:
            return self._ix.node_classes.get((kind, name))

    def group_objects(self) -> tuple[tuple[JsonObject, ...], dict[str, int]]:
        """The raw pod-group objects and the PriorityClass values (for admission verdicts)."""
        with self._lock:
            return tuple(self._ix.groups.values()), dict(self._ix.priority_classes)

    def has_kind(self, kind: str) -> bool:
        """Whether a raw object of ``kind`` (a pod-group or CapacityBuffer kind) is cached."""
        with self._lock:
            return any(key[1] == kind for key in self._ix.groups)

    def daemonsets(self) -> list[DaemonSet]:
        """Every DaemonSet."""
        with self._lock:
            return list(self._ix.daemonsets.values())

    def counts(self) -> dict[str, int]:
        """How many objects of each kind are cached (for metrics and memory tests)."""
        with self._lock:
            ix = self._ix
            return {
                "pods": len(ix.pods),
                "nodes": len(ix.nodes),
                "nodeclaims": len(ix.node_claims),
                "nodepools": len(ix.nodepools),
                "daemonsets": len(ix.daemonsets),
                "pdbs": len(ix.pdbs),
                "groups": len(ix.groups),
                "nominations": len(ix.nominations),
            }


def _trimmed(obj: JsonObject) -> JsonObject:
    """A workload as a CapacityBuffer reads it (its scale and pod template); others as they are."""
    if obj.get("kind") not in _WORKLOAD_KINDS:
        return obj
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "generation") if k in meta},
        "spec": {k: spec[k] for k in ("replicas", "template") if k in spec},
    }


def _nodepool_entry(obj: JsonObject) -> NodePoolEntry:
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    conditions = tuple(c for c in status.get("conditions") or () if isinstance(c, Mapping))
    name = str(metadata.get("name") or "")
    try:
        nodepool: NodePool | None = parse_object(NodePool, obj, kind="NodePool")
        error = None
    except ApiValidationError as exc:
        nodepool, error = None, str(exc)
    return NodePoolEntry(
        name=name,
        uid=str(metadata.get("uid") or ""),
        generation=int(metadata.get("generation") or 0),
        nodepool=nodepool,
        error=error,
        conditions=conditions,
        deleting=bool(metadata.get("deletionTimestamp")),
        resources={str(k): str(v) for k, v in (status.get("resources") or {}).items()},
        nodes=int(status.get("nodes") or 0),
    )


def _overlay_entry(obj: JsonObject) -> NodeOverlayEntry:
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    try:
        overlay: NodeOverlay | None = parse_object(NodeOverlay, obj, kind=OVERLAY_KIND)
        error = None
    except ApiValidationError as exc:
        overlay, error = None, str(exc)
    return NodeOverlayEntry(
        name=str(metadata.get("name") or ""),
        generation=int(metadata.get("generation") or 0),
        overlay=overlay,
        error=error,
        conditions=tuple(c for c in status.get("conditions") or () if isinstance(c, Mapping)),
    )


NOMINATION_WINDOW: Final = timedelta(seconds=20)
"""Karpenter's nomination window: ``max(2 x BATCH_MAX_DURATION, 10 s)`` = 20 s by default."""
