"""What happened in a run, in virtual time: pods, NodeClaims, evictions and events.

:class:`Recorder` watches every change of the in-memory API and keeps one record per pod and per
NodeClaim that ever existed (when it was created, bound, launched, initialized, deleted and why),
every Event, and every eviction the controllers made: :class:`RecordingKube` is the Kubernetes
port the controllers get, the in-memory API with evictions noted on their way through.

A NodeClaim's deletion reason is its ``DisruptionReason`` condition when disruption deleted it,
``SpotInterrupted`` (or the interruption kind) when an interruption warning named its instance,
the launch error's kind when its launch failed, and otherwise the last Warning event about it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.kube.forwarding import ForwardingKube
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject, WatchEvent, WatchEventType
from provisioner.kube.resource import EVENTS, NODE_CLAIMS, PODS, Resource
from provisioner.podgroups import detect_group, is_gpu_reservation_pod
from provisioner.scheduling.quantity import MILLI
from provisioner.scheduling.resources import requests_of
from provisioner.simulation.objects import (
    condition,
    condition_true,
    is_deleting,
    labels_of,
    name_of,
    pod_key,
    uid_of,
)
from provisioner.simulation.timeline import Timeline

__all__ = [
    "EventRecord",
    "EvictionRecord",
    "NodeClaimRecord",
    "PodRecord",
    "Recorder",
    "RecordingKube",
]

LAUNCH_FAILURE_REASONS: Final[Mapping[str, str]] = {
    "InsufficientCapacityError": "InsufficientCapacity",
    "NodeClassNotReady": "NodeClassNotReady",
}
"""NodeClaim Warning events of failed launches, and the deletion reason they imply."""
SPOT_INTERRUPTED: Final = "SpotInterrupted"
_GIB: Final = 1024**3
_KAI_PREEMPTIBILITY: Final = "kai.scheduler/preemptibility"
_EVICTED_PREFIX: Final = "Evicted pod: "


@dataclass(slots=True, kw_only=True)
class PodRecord:
    """One pod's life."""

    name: str
    uid: str
    pod_group: str | None
    created_at: float
    scheduled_at: float | None = None
    node: str | None = None
    completed_at: float | None = None
    deleted_at: float | None = None
    evictions: int = 0
    cpu: float = 0.0
    """Requested vCPUs (the effective request, as the scheduler counts it)."""
    memory_gib: float = 0.0
    """Requested memory in GiB."""
    protected: bool = False
    """``karpenter.sh/do-not-disrupt``, a non-preemptible label or a GPU reservation pod."""


@dataclass(slots=True, kw_only=True)
class NodeClaimRecord:
    """One NodeClaim's life."""

    name: str
    uid: str
    node_pool: str | None
    created_at: float
    instance_type: str | None = None
    capacity_type: str | None = None
    zone: str | None = None
    provider_id: str | None = None
    node: str | None = None
    launched_at: float | None = None
    initialized_at: float | None = None
    deleted_at: float | None = None
    deletion_reason: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionRecord:
    """One eviction the controllers made."""

    at: float
    pod: str
    uid: str
    node: str | None
    reason: str
    protected: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord:
    """One Kubernetes Event."""

    at: float
    type: str
    reason: str
    object: str
    message: str


def _object_name(involved: Mapping[str, Any]) -> str:
    kind = involved.get("kind", "")
    namespace = involved.get("namespace")
    name = involved.get("name", "")
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


class Recorder:
    """Keeps the record of a run from the in-memory API's changes.

    Args:
        timeline: virtual time.
        kube: the in-memory API to follow.
    """

    def __init__(self, *, timeline: Timeline, kube: InMemoryKube) -> None:
        self._timeline = timeline
        self.pods: dict[str, PodRecord] = {}
        self.node_claims: dict[str, NodeClaimRecord] = {}
        self.evictions: list[EvictionRecord] = []
        self.events: list[EventRecord] = []
        self.interrupted: dict[str, str] = {}
        """Instance id -> interruption kind, for instances the scenario interrupted."""
        self.on_evicted: list[Callable[[EvictionRecord, Mapping[str, Any]], None]] = []
        """Called after each eviction the controllers made, with the pod as it was."""
        self._claim_of_node: dict[str, str] = {}
        self._unsubscribe = kube.subscribe(self.observe, frozen=True)

    def close(self) -> None:
        """Stop following the API."""
        self._unsubscribe()

    @property
    def now(self) -> float:
        """The current virtual time."""
        return self._timeline.now

    def observe(self, resource: Resource, event: WatchEvent) -> None:
        """Record one change."""
        if resource == PODS:
            self._pod(event)
        elif resource == NODE_CLAIMS:
            self._claim(event)
        elif resource == EVENTS and event.type == WatchEventType.ADDED:
            self._event(event.object)

    # -- pods --------------------------------------------------------------------------------

    def _pod(self, event: WatchEvent) -> None:
        obj = event.object
        uid = uid_of(obj)
        record = self.pods.get(uid)
        if record is None:
            record = self._new_pod(obj, uid)
            self.pods[uid] = record
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        node = spec.get("nodeName")
        if node and record.scheduled_at is None:
            record.scheduled_at, record.node = self.now, str(node)
        if status.get("phase") in {"Succeeded", "Failed"} and record.completed_at is None:
            record.completed_at = self.now
        if event.type == WatchEventType.DELETED and record.deleted_at is None:
            record.deleted_at = self.now

    def _new_pod(self, obj: JsonObject, uid: str) -> PodRecord:
        record = PodRecord(name=pod_key(obj), uid=uid, pod_group=None, created_at=self.now)
        try:
            pod = parse_object(Pod, obj, kind="Pod")
        except ApiValidationError:
            return record
        ref = detect_group(pod)
        record.pod_group = ref.key if ref is not None else None
        try:
            requests = requests_of(pod)
        except ValueError:
            requests = {}
        record.cpu = requests.get("cpu", 0) / MILLI
        record.memory_gib = requests.get("memory", 0) / MILLI / _GIB
        record.protected = (
            pod.metadata.annotations.get(wk.ANNOTATION_DO_NOT_DISRUPT, "").strip() == "true"
            or pod.metadata.labels.get(_KAI_PREEMPTIBILITY) == "non-preemptible"
            or is_gpu_reservation_pod(pod)
        )
        return record

    # -- NodeClaims --------------------------------------------------------------------------

    def _claim(self, event: WatchEvent) -> None:
        obj = event.object
        uid = uid_of(obj)
        record = self.node_claims.get(uid)
        labels = labels_of(obj)
        if record is None:
            record = NodeClaimRecord(
                name=name_of(obj),
                uid=uid,
                node_pool=labels.get(wk.LABEL_NODEPOOL),
                created_at=self.now,
            )
            self.node_claims[uid] = record
        record.instance_type = labels.get(wk.LABEL_INSTANCE_TYPE) or record.instance_type
        record.capacity_type = labels.get(wk.LABEL_CAPACITY_TYPE) or record.capacity_type
        record.zone = labels.get(wk.LABEL_ZONE) or record.zone
        record.node_pool = labels.get(wk.LABEL_NODEPOOL) or record.node_pool
        status = obj.get("status") or {}
        if status.get("providerID"):
            record.provider_id = str(status["providerID"])
        if status.get("nodeName"):
            record.node = str(status["nodeName"])
            self._claim_of_node[record.node] = uid
        if record.launched_at is None and (
            condition_true(obj, "Launched") or status.get("providerID")
        ):
            record.launched_at = self.now
        if record.initialized_at is None and condition_true(obj, "Initialized"):
            record.initialized_at = self.now
        deleted = event.type == WatchEventType.DELETED or is_deleting(obj)
        if deleted and record.deleted_at is None:
            record.deleted_at = self.now
            record.deletion_reason = self._deletion_reason(obj, record)

    def _deletion_reason(self, obj: JsonObject, record: NodeClaimRecord) -> str | None:
        disruption = condition(obj, "DisruptionReason")
        if disruption is not None and disruption.get("status") == "True":
            return str(disruption.get("reason") or "Disrupted")
        if record.provider_id:
            kind = self.interrupted.get(record.provider_id.rpartition("/")[2])
            if kind is not None:
                return kind
        for warning in reversed(record.warnings):
            if warning in LAUNCH_FAILURE_REASONS and record.launched_at is None:
                return LAUNCH_FAILURE_REASONS[warning]
        return record.warnings[-1] if record.warnings else None

    def claim_of_node(self, node: str) -> NodeClaimRecord | None:
        """The record of the NodeClaim whose node is ``node``."""
        uid = self._claim_of_node.get(node)
        return self.node_claims.get(uid) if uid is not None else None

    # -- events and evictions ----------------------------------------------------------------

    def _event(self, obj: JsonObject) -> None:
        involved = obj.get("involvedObject") or {}
        record = EventRecord(
            at=self.now,
            type=str(obj.get("type") or "Normal"),
            reason=str(obj.get("reason") or ""),
            object=_object_name(involved),
            message=str(obj.get("message") or ""),
        )
        self.events.append(record)
        if involved.get("kind") == "NodeClaim" and record.type == "Warning":
            claim = self.node_claims.get(str(involved.get("uid") or ""))
            if claim is None:
                claim = next(
                    (c for c in self.node_claims.values() if c.name == involved.get("name")),
                    None,
                )
            if claim is not None:
                claim.warnings.append(record.reason)
        if involved.get("kind") == "Pod" and record.reason == "Evicted":
            self._refine_eviction(str(involved.get("uid") or ""), record.message)

    def _refine_eviction(self, uid: str, message: str) -> None:
        if not message.startswith(_EVICTED_PREFIX):
            return
        reason = message.removeprefix(_EVICTED_PREFIX).strip()
        for index in range(len(self.evictions) - 1, -1, -1):
            eviction = self.evictions[index]
            if eviction.uid == uid:
                self.evictions[index] = EvictionRecord(
                    at=eviction.at,
                    pod=eviction.pod,
                    uid=uid,
                    node=eviction.node,
                    reason=reason,
                    protected=eviction.protected,
                )
                return

    def evicted(self, pod: Mapping[str, Any]) -> None:
        """Note that the controllers evicted ``pod`` (its last state before the eviction)."""
        uid = uid_of(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        reason = "Terminating"
        claim = self.claim_of_node(str(node)) if node else None
        if claim is not None:
            reason = claim.deletion_reason or reason
        record = self.pods.get(uid)
        self.evictions.append(
            EvictionRecord(
                at=self.now,
                pod=pod_key(pod),
                uid=uid,
                node=str(node) if node else None,
                reason=reason,
                protected=record is not None and record.protected,
            )
        )
        if record is not None:
            record.evictions += 1
        for listener in self.on_evicted:
            listener(self.evictions[-1], pod)


class RecordingKube(ForwardingKube):
    """The controllers' Kubernetes port: the in-memory API, with evictions recorded.

    Args:
        inner: the in-memory API.
        recorder: where evictions are noted.
    """

    def __init__(self, inner: InMemoryKube, recorder: Recorder) -> None:
        super().__init__(inner)
        self._recorder = recorder

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        """See `KubeClient.evict`; a successful eviction is recorded."""
        pod = self._inner.get(PODS, name, namespace=namespace)
        self._inner.evict(namespace, name, uid=uid)
        self._recorder.evicted(pod)

    def __getattr__(self, name: str) -> Any:
        # InMemoryKube extras (bind, subscribe, ...) stay reachable for callers that need them.
        return getattr(self._inner, name)
