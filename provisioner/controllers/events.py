"""The EventRecorder port: Kubernetes Events with Karpenter's reasons and messages, deduplicated.

Controllers publish :class:`Event` values built by the constructors below (one per Karpenter
event, `karpenter-behaviour.md` §12); the recorder writes them through
``KubeClient.create_event`` unless an identical event (same object, reason and message) was
written within the event's dedupe window, measured on the injected clock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from provisioner.apis.core import Pod
from provisioner.kube.errors import KubeApiError
from provisioner.kube.protocol import EventType, JsonObject, KubeClient
from provisioner.runtime.clock import Clock

__all__ = [
    "DEFAULT_DEDUPE",
    "Event",
    "EventRecorder",
    "failed_scheduling",
    "insufficient_capacity",
    "nodeclass_not_ready",
    "nodepool_invalid",
    "nodepool_not_ready",
    "nominated",
    "object_ref",
    "pod_ref",
]

DEFAULT_DEDUPE: Final = timedelta(minutes=2)
"""Identical events are written at most once per window (Jointer's default)."""
FAILED_SCHEDULING_DEDUPE: Final = timedelta(minutes=5)
"""Karpenter dedupes ``FailedScheduling`` for 5 minutes."""
NOMINATED_DEDUPE: Final = timedelta(seconds=20)
"""An identical nomination is re-announced at most once per nomination window."""
_MAX_REMEMBERED: Final = 100_000


@dataclass(frozen=True, slots=True)
class Event:
    """One event to record.

    Attributes:
        involved: the object the event is about, in wire shape (at least apiVersion, kind,
            metadata.name, and metadata.namespace/uid when it has them).
        type: ``Normal`` or ``Warning``.
        reason: CamelCase reason (``Nominated``).
        message: the message.
        dedupe: the window within which an identical event is not written again.
    """

    involved: Mapping[str, Any]
    type: EventType
    reason: str
    message: str
    dedupe: timedelta = DEFAULT_DEDUPE

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What makes two events identical."""
        metadata = self.involved.get("metadata", {})
        return (
            str(self.involved.get("kind", "")),
            str(metadata.get("namespace") or ""),
            str(metadata.get("uid") or metadata.get("name") or ""),
            self.reason,
            self.message,
        )


def object_ref(
    kind: str, name: str, *, api_version: str, namespace: str = "", uid: str = ""
) -> JsonObject:
    """The minimal wire shape of an object for ``Event.involved``."""
    metadata: JsonObject = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def pod_ref(pod: Pod) -> JsonObject:
    """``Event.involved`` for a pod."""
    return object_ref(
        "Pod",
        pod.metadata.name,
        api_version="v1",
        namespace=pod.metadata.namespace or "default",
        uid=pod.metadata.uid,
    )


def nominated(pod: Pod, node_claim: str, node: str = "") -> Event:
    """Pod ``Normal Nominated``: ``Pod should schedule on: nodeclaim/<nc>[, node/<node>]``."""
    target = f"nodeclaim/{node_claim}" + (f", node/{node}" if node else "")
    return Event(
        pod_ref(pod), "Normal", "Nominated", f"Pod should schedule on: {target}", NOMINATED_DEDUPE
    )


def failed_scheduling(pod: Pod, reason: str) -> Event:
    """Pod ``Warning FailedScheduling``: ``Failed to schedule pod, <reason>`` (5 min dedupe)."""
    return Event(
        pod_ref(pod),
        "Warning",
        "FailedScheduling",
        f"Failed to schedule pod, {reason}",
        FAILED_SCHEDULING_DEDUPE,
    )


def insufficient_capacity(claim: Mapping[str, Any], error: str) -> Event:
    """NodeClaim ``Warning InsufficientCapacityError``."""
    return Event(
        claim,
        "Warning",
        "InsufficientCapacityError",
        f"NodeClaim {claim.get('metadata', {}).get('name', '')} event: {error}",
    )


def nodeclass_not_ready(claim: Mapping[str, Any], error: str) -> Event:
    """NodeClaim ``Warning NodeClassNotReady``."""
    return Event(
        claim,
        "Warning",
        "NodeClassNotReady",
        f"NodeClaim {claim.get('metadata', {}).get('name', '')} event: {error}",
    )


def nodepool_not_ready(nodepool: Mapping[str, Any], cause: str) -> Event:
    """NodePool ``Warning NodeClassNotReady`` when it becomes not ready (Karpenter's reason).

    ``cause`` is the condition, e.g. ``NodeClassReady=False: EC2NodeClass "x" not found``.
    """
    name = (nodepool.get("metadata") or {}).get("name", "")
    return Event(nodepool, "Warning", "NodeClassNotReady", f'NodePool "{name}" not ready: {cause}')


def nodepool_invalid(nodepool: Mapping[str, Any], message: str) -> Event:
    """NodePool ``Warning FailedValidation`` naming the field (Jointer's; Karpenter has none)."""
    return Event(nodepool, "Warning", "FailedValidation", message)


@dataclass(slots=True)
class EventRecorder:
    """Writes events through the Kubernetes port, dropping duplicates within their window.

    Attributes:
        kube: the Kubernetes port.
        clock: the injected clock.
        component: the event source (``karpenter``, as Karpenter's chart reports).
        published: every event written (tests read it).
    """

    kube: KubeClient
    clock: Clock
    component: str = "karpenter"
    published: list[Event] = field(default_factory=list)
    _last: dict[tuple[str, str, str, str, str], datetime] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, event: Event) -> bool:
        """Write ``event`` unless an identical one was written within its window.

        Failures to write an event are swallowed (an event is never worth failing a
        reconcile for).

        Returns:
            Whether the event was written.
        """
        now = self.clock.now()
        with self._lock:
            last = self._last.get(event.key)
            if last is not None and now - last < event.dedupe:
                return False
            if len(self._last) >= _MAX_REMEMBERED:
                self._forget(now)
            self._last[event.key] = now
            self.published.append(event)
        try:
            self.kube.create_event(
                event.involved,
                reason=event.reason,
                message=event.message,
                type=event.type,
                component=self.component,
            )
        except KubeApiError:
            return False
        return True

    def _forget(self, now: datetime) -> None:
        horizon = now - FAILED_SCHEDULING_DEDUPE
        for key in [k for k, when in self._last.items() if when < horizon]:
            del self._last[key]
        if len(self._last) >= _MAX_REMEMBERED:
            self._last.clear()
