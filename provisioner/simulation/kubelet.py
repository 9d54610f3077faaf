"""The simulated kubelet (and the bits of the cloud controller manager and pod GC it needs).

Node lifecycle, driven by what EC2 (moto) holds:

1. When CreateFleet returns an instance, the kubelet is scheduled to *register* it
   ``0.75 x nodeStartup`` later: it reads the instance back from moto through boto3 (state,
   type, zone, private DNS name, the ``karpenter.sh/nodeclaim`` tag) and creates the Node its
   user data describes: ``providerID``, the instance type's labels, the NodeClaim's labels,
   taints and startup taints, ``karpenter.sh/unregistered:NoExecute`` and
   ``node.kubernetes.io/not-ready:NoSchedule``, capacity, and allocatable without extended
   resources (device plugins have not started), ``Ready=False``.
2. At ``nodeStartup`` it becomes *Ready*: the not-ready taint and the startup taints go (the
   agents that own them are up), extended resources (``nvidia.com/gpu``) are advertised.
3. When an instance is terminated, its Node goes (the cloud controller manager deletes Nodes
   whose instance is gone); when a Node is deleted, the pods bound to it are deleted (pod GC).
4. When an instance is stopped, its kubelet goes silent. :data:`NODE_MONITOR_GRACE` later the
   node lifecycle controller marks the Node ``Ready=Unknown``, taints it
   ``node.kubernetes.io/unreachable`` (``NoSchedule`` and ``NoExecute``) and marks its pods not
   Ready; the taint manager then deletes each pod once its toleration of the ``NoExecute`` taint
   runs out (:data:`DEFAULT_TOLERATION_SECONDS` for a pod without one, the toleration the
   ``DefaultTolerationSeconds`` admission plugin adds; never for a pod tolerating it without
   ``tolerationSeconds``, such as a DaemonSet's). A real pod deleted there stays Terminating
   until its Node goes (Karpenter's drain stops waiting for it after a minute); here it goes at
   once, as every pod deletion in the simulation does.

Pod lifecycle: a pod bound to a Ready node starts *Running*; a pod annotated
``sim.jointer.dev/runtime: 30m`` *Succeeds* that long after it started.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from cloudprovider.aws.catalog import Catalog
from cloudprovider.aws.tags import TAG_NODECLASS, TAG_NODEPOOL
from provisioner.apis import labels as wk
from provisioner.apis.core import Taint, is_terminal
from provisioner.apis.duration import DurationError, parse_go_duration
from provisioner.kube.errors import AlreadyExistsError, ConflictError, NotFoundError
from provisioner.kube.event import format_time
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject, WatchEvent, WatchEventType
from provisioner.kube.resource import NODE_CLAIMS, NODES, PODS, Resource
from provisioner.scheduling.resources import format_resource_list
from provisioner.scheduling.taints import TaintError, Toleration, tolerates
from provisioner.simulation.cloud import Launch, MotoCloud, capacity_type_of
from provisioner.simulation.objects import (
    condition_true,
    is_deleting,
    name_of,
    namespace_of,
    set_condition,
    uid_of,
)
from provisioner.simulation.timeline import Timeline

__all__ = [
    "ANNOTATION_RUNTIME",
    "DEFAULT_TOLERATION_SECONDS",
    "NODE_MONITOR_GRACE",
    "REGISTRATION_FRACTION",
    "Kubelet",
    "provider_id",
]

ANNOTATION_RUNTIME: Final = "sim.jointer.dev/runtime"
"""How long a pod runs before it Succeeds (simulation only)."""
REGISTRATION_FRACTION: Final = 0.75
"""When the Node registers, as a fraction of ``nodeStartup`` (it is Ready at the end)."""
NODE_MONITOR_GRACE: Final = 40.0
"""Seconds without a heartbeat before a Node is ``Ready=Unknown``
(kube-controller-manager's ``--node-monitor-grace-period``)."""
DEFAULT_TOLERATION_SECONDS: Final = 300
"""How long a pod without its own toleration stays on an unreachable Node
(the ``DefaultTolerationSeconds`` admission plugin's ``tolerationSeconds``)."""
_UNREACHABLE_NO_EXECUTE: Final = Taint.model_construct(
    key=wk.TAINT_UNREACHABLE, value="", effect=wk.TAINT_EFFECT_NO_EXECUTE
)
_LIVE_STATES: Final = frozenset({"pending", "running"})
_CONFLICT_RETRIES: Final = 5


def provider_id(zone: str, instance_id: str) -> str:
    """``aws:///<zone>/<instance-id>``."""
    return f"aws:///{zone}/{instance_id}"


def _is_extended(resource: str) -> bool:
    return "/" in resource


def _taint_key(taint: Mapping[str, Any]) -> tuple[str, str]:
    return (str(taint.get("key")), str(taint.get("effect")))


class Kubelet:
    """Turns EC2 instances into Nodes and runs the pods bound to them.

    Args:
        timeline: virtual time and the action queue.
        kube: the in-memory API.
        cloud: the simulated account (instances are read from it).
        catalog: instance type labels and capacity (when the NodeClaim has none).
        node_startup: seconds from launch to a Ready node.
        region: the AWS region (node label).
    """

    def __init__(
        self,
        *,
        timeline: Timeline,
        kube: InMemoryKube,
        cloud: MotoCloud,
        catalog: Catalog,
        node_startup: float,
        region: str,
    ) -> None:
        self._timeline = timeline
        self._kube = kube
        self._cloud = cloud
        self._catalog = catalog
        self._startup = node_startup
        self._region = region
        self._node_of_instance: dict[str, str] = {}
        self.never_join: set[str] = set()
        """Instances whose kubelet never registers a Node (a bad AMI, a broken bootstrap)."""
        self._silent: set[str] = set()
        """Nodes whose instance stopped: their kubelet starts and completes nothing."""
        cloud.on_launch.append(self.on_launch)
        cloud.on_stop.append(self.instance_stopped)

    # -- nodes -------------------------------------------------------------------------------

    def on_launch(self, launch: Launch) -> None:
        """Schedule registration and readiness of a launched instance."""
        instance_id = launch.instance_id
        self._timeline.schedule(
            launch.at + REGISTRATION_FRACTION * self._startup,
            lambda: self.register(instance_id),
            key=("kubelet-register", instance_id),
        )
        self._timeline.schedule(
            launch.at + self._startup,
            lambda: self.ready(instance_id),
            key=("kubelet-ready", instance_id),
        )

    def register(self, instance_id: str) -> None:
        """Create the Node of an instance (if it still runs and is meant to join)."""
        if instance_id in self.never_join:
            return
        found = self._cloud.describe([instance_id])
        if not found or found[0].get("State", {}).get("Name") not in _LIVE_STATES:
            return
        instance = found[0]
        node = self._node_body(instance)
        try:
            self._kube.create(NODES, node)
        except AlreadyExistsError:
            return
        self._node_of_instance[instance_id] = name_of(node)

    def ready_node(self, instance_id: str) -> JsonObject:
        """The Node of a running instance as this kubelet leaves it once Ready (not created).

        The body :meth:`register` creates, then what :meth:`ready` changes: the not-ready and
        startup taints gone, extended resources allocatable, ``Ready=True``. For nodes seeded as
        already up (see :meth:`adopt`).

        Raises:
            NotFoundError: the instance is unknown.
        """
        found = self._cloud.describe([instance_id])
        if not found:
            raise NotFoundError(f"instance {instance_id} not found")
        node = self._node_body(found[0])
        startup = self._startup_taints(node)
        node["spec"]["taints"] = [
            t
            for t in node["spec"]["taints"]
            if t.get("key") != wk.TAINT_NOT_READY and _taint_key(t) not in startup
        ]
        status = node["status"]
        status["allocatable"] = self._full_allocatable(node)
        status["conditions"] = set_condition(
            None,
            "Ready",
            "True",
            now=self._timeline.clock.now(),
            reason="KubeletReady",
            message="kubelet is posting ready status",
        )
        return node

    def adopt(self, instance_id: str, node: str) -> None:
        """Run ``node`` (created Ready by someone else) as the Node of ``instance_id``."""
        self._node_of_instance[instance_id] = node

    def _claim(self, name: str) -> JsonObject | None:
        if not name:
            return None
        try:
            return self._kube.get(NODE_CLAIMS, name)
        except NotFoundError:
            return None

    def _node_body(self, instance: Mapping[str, Any]) -> JsonObject:
        tags = {t.get("Key", ""): t.get("Value", "") for t in instance.get("Tags", [])}
        instance_type = str(instance.get("InstanceType", ""))
        zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
        name = str(instance.get("PrivateDnsName") or instance.get("InstanceId"))
        claim = self._claim(self._cloud.nodeclaim_of(instance))
        known = self._catalog.get(instance_type)
        labels: dict[str, str] = dict(known.labels) if known is not None else {}
        labels.update(
            {
                wk.LABEL_INSTANCE_TYPE: instance_type,
                wk.LABEL_ZONE: zone,
                wk.LABEL_REGION: self._region,
                wk.LABEL_HOSTNAME: name,
                wk.LABEL_CAPACITY_TYPE: capacity_type_of(instance),
                wk.LABEL_OS: labels.get(wk.LABEL_OS, wk.OS_LINUX),
            }
        )
        if tags.get(TAG_NODEPOOL):
            labels[wk.LABEL_NODEPOOL] = tags[TAG_NODEPOOL]
        if tags.get(TAG_NODECLASS):
            labels[TAG_NODECLASS] = tags[TAG_NODECLASS]
        taints: list[JsonObject] = []
        capacity: Mapping[str, Any] = {}
        allocatable: Mapping[str, Any] = {}
        if claim is not None:
            labels.update((claim.get("metadata") or {}).get("labels") or {})
            spec = claim.get("spec") or {}
            taints = [
                dict(t) for t in (spec.get("taints") or []) + (spec.get("startupTaints") or [])
            ]
            status = claim.get("status") or {}
            capacity = status.get("capacity") or {}
            allocatable = status.get("allocatable") or {}
        if not capacity and known is not None:
            capacity = format_resource_list(known.capacity)
            allocatable = format_resource_list(known.allocatable)
        taints += [
            {"key": wk.TAINT_UNREGISTERED, "effect": wk.TAINT_EFFECT_NO_EXECUTE},
            {"key": wk.TAINT_NOT_READY, "effect": wk.TAINT_EFFECT_NO_SCHEDULE},
        ]
        now = self._timeline.clock.now()
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "providerID": provider_id(zone, str(instance.get("InstanceId"))),
                "taints": taints,
            },
            "status": {
                "capacity": dict(capacity),
                "allocatable": {k: v for k, v in allocatable.items() if not _is_extended(k)},
                "conditions": set_condition(
                    None,
                    "Ready",
                    "False",
                    now=now,
                    reason="KubeletNotReady",
                    message="container runtime network not ready",
                ),
                "addresses": [
                    {"type": "InternalIP", "address": str(instance.get("PrivateIpAddress", ""))},
                    {"type": "Hostname", "address": name},
                    {"type": "InternalDNS", "address": name},
                ],
                "nodeInfo": {"kubeletVersion": "v1.32.0", "operatingSystem": "linux"},
            },
        }

    def ready(self, instance_id: str) -> None:
        """Make the instance's Node Ready (registering it first if it was late)."""
        name = self._node_of_instance.get(instance_id)
        if name is None:
            self.register(instance_id)
            name = self._node_of_instance.get(instance_id)
            if name is None:
                return
        node = self._untaint(name)
        if node is None:
            return
        status = node.get("status") or {}
        now = self._timeline.clock.now()
        self._kube.patch_status(
            NODES,
            name,
            {
                "status": {
                    "allocatable": self._full_allocatable(node),
                    "conditions": set_condition(
                        status.get("conditions"),
                        "Ready",
                        "True",
                        now=now,
                        reason="KubeletReady",
                        message="kubelet is posting ready status",
                    ),
                }
            },
        )
        self._start_pods_on(name)

    def _untaint(self, name: str) -> JsonObject | None:
        """Drop the not-ready and startup taints; the Node as it was, None if gone."""

        def ready(node: JsonObject, taints: list[JsonObject]) -> list[JsonObject] | None:
            if is_deleting(node):
                return None
            startup = self._startup_taints(node)
            return [
                t
                for t in taints
                if t.get("key") != wk.TAINT_NOT_READY and _taint_key(t) not in startup
            ]

        return self._patch_taints(name, ready)

    def _patch_taints(
        self,
        name: str,
        edit: Callable[[JsonObject, list[JsonObject]], list[JsonObject] | None],
    ) -> JsonObject | None:
        """Replace a Node's taints with ``edit(node, taints)`` under its resourceVersion.

        Retried on conflicts; the Node as it was before the patch, or None when it is gone,
        ``edit`` declines (returns None) or the conflicts do not stop.
        """
        for _ in range(_CONFLICT_RETRIES):
            try:
                node = self._kube.get(NODES, name)
            except NotFoundError:
                return None
            taints = edit(node, list((node.get("spec") or {}).get("taints") or []))
            if taints is None:
                return None
            try:
                self._kube.merge_patch(
                    NODES,
                    name,
                    {"spec": {"taints": taints}},
                    resource_version=node["metadata"]["resourceVersion"],
                )
            except ConflictError:
                continue
            return node
        return None

    def _startup_taints(self, node: Mapping[str, Any]) -> set[tuple[str, str]]:
        provider = (node.get("spec") or {}).get("providerID", "")
        for claim in self._kube.view(NODE_CLAIMS):
            if (claim.get("status") or {}).get("providerID") == provider:
                return {_taint_key(t) for t in (claim.get("spec") or {}).get("startupTaints") or []}
        return set()

    def _full_allocatable(self, node: Mapping[str, Any]) -> dict[str, Any]:
        status = node.get("status") or {}
        extended = {
            resource: value
            for resource, value in (status.get("capacity") or {}).items()
            if _is_extended(resource)
        }
        return {**(status.get("allocatable") or {}), **extended}

    def instance_stopped(self, instance_id: str) -> None:
        """The instance stopped: its kubelet goes silent; the node lifecycle controller notices."""
        self._timeline.cancel(
            lambda key: key in {("kubelet-register", instance_id), ("kubelet-ready", instance_id)}
        )
        name = self._node_of_instance.get(instance_id)
        if name is None:
            return
        self._silent.add(name)
        self._timeline.after(
            NODE_MONITOR_GRACE,
            lambda: self._unreachable(name),
            key=("node-lifecycle", instance_id),
        )

    def _unreachable(self, name: str) -> None:
        """Mark a silent Node ``Ready=Unknown`` and unreachable; its pods not Ready, then gone."""
        now = self._timeline.clock.now()
        added = format_time(now)

        def unreachable(_: JsonObject, taints: list[JsonObject]) -> list[JsonObject]:
            return [t for t in taints if t.get("key") != wk.TAINT_UNREACHABLE] + [
                {"key": wk.TAINT_UNREACHABLE, "effect": effect, "timeAdded": added}
                for effect in (wk.TAINT_EFFECT_NO_SCHEDULE, wk.TAINT_EFFECT_NO_EXECUTE)
            ]

        node = self._patch_taints(name, unreachable)
        if node is None:
            return
        conditions = (node.get("status") or {}).get("conditions")
        self._kube.patch_status(
            NODES,
            name,
            {
                "status": {
                    "conditions": set_condition(
                        conditions,
                        "Ready",
                        "Unknown",
                        now=now,
                        reason="NodeStatusUnknown",
                        message="Kubelet stopped posting node status.",
                    )
                }
            },
        )
        for pod in self._pods_on(name):
            if is_deleting(pod):
                continue
            status = pod.get("status") or {}
            self._kube.patch_status(
                PODS,
                name_of(pod),
                {
                    "status": {
                        "conditions": set_condition(
                            status.get("conditions"), "Ready", "False", now=now
                        )
                    }
                },
                namespace=namespace_of(pod),
            )
            seconds = _toleration_seconds(pod)
            if seconds is not None:
                uid = uid_of(pod)
                self._timeline.after(
                    seconds,
                    partial(self._taint_evict, namespace_of(pod), name_of(pod), uid),
                    key=("taint-evict", uid),
                )

    def _taint_evict(self, namespace: str, name: str, uid: str) -> None:
        """The taint manager deletes a pod whose toleration of the unreachable taint ran out."""
        try:
            pod = self._kube.get(PODS, name, namespace=namespace)
        except NotFoundError:
            return
        if uid_of(pod) != uid or is_terminal(pod) or is_deleting(pod):
            return
        if (pod.get("spec") or {}).get("nodeName") not in self._silent:
            return
        self._delete_pod(pod)

    def instance_gone(self, instance_id: str) -> None:
        """The instance was terminated: delete its Node (the cloud controller manager's job)."""
        name = self._node_of_instance.get(instance_id)
        self._timeline.cancel(
            lambda key: (
                key
                in {
                    ("kubelet-register", instance_id),
                    ("kubelet-ready", instance_id),
                    ("node-lifecycle", instance_id),
                }
            )
        )
        if name is None:
            return
        self._silent.discard(name)
        try:
            node = self._kube.get(NODES, name)
        except NotFoundError:
            return
        for pod in self._pods_on(name):
            self._delete_pod(pod)
        if not is_deleting(node):
            try:
                self._kube.delete(NODES, name)
            except NotFoundError:
                return

    # -- pods --------------------------------------------------------------------------------

    def observe(self, resource: Resource, event: WatchEvent) -> None:
        """React to a change: start pods bound to Ready nodes; GC pods of deleted nodes."""
        obj = event.object
        if resource == PODS and event.type != WatchEventType.DELETED:
            node = (obj.get("spec") or {}).get("nodeName")
            phase = (obj.get("status") or {}).get("phase") or "Pending"
            if node and phase == "Pending" and not is_deleting(obj):
                self._timeline.after(
                    0, lambda: self._start_pods_on(str(node)), key=("kubelet-pods", node)
                )
        elif resource == NODES and event.type == WatchEventType.DELETED:
            name = name_of(obj)
            self._timeline.after(0, lambda: self._gc_pods(name), key=("podgc", name))

    def _pods_on(self, node: str) -> list[JsonObject]:
        return [
            pod
            for pod in self._kube.view(PODS, field_selector=f"spec.nodeName={node}")
            if not is_terminal(pod)
        ]

    def _delete_pod(self, pod: Mapping[str, Any]) -> None:
        with contextlib.suppress(NotFoundError):
            self._kube.delete(
                PODS, name_of(pod), namespace=namespace_of(pod), grace_period_seconds=0
            )

    def _gc_pods(self, node: str) -> None:
        try:
            self._kube.get(NODES, node)
        except NotFoundError:
            for pod in self._kube.view(PODS, field_selector=f"spec.nodeName={node}"):
                self._delete_pod(pod)

    def _start_pods_on(self, node_name: str) -> None:
        if node_name in self._silent:
            return
        try:
            node = self._kube.get(NODES, node_name)
        except NotFoundError:
            return
        if not condition_true(node, "Ready"):
            return
        now = self._timeline.clock.now()
        for pod in self._pods_on(node_name):
            status = pod.get("status") or {}
            if (status.get("phase") or "Pending") != "Pending" or is_deleting(pod):
                continue
            conditions = status.get("conditions")
            for kind in ("Initialized", "ContainersReady", "Ready"):
                conditions = set_condition(conditions, kind, "True", now=now)
            self._kube.patch_status(
                PODS,
                name_of(pod),
                {
                    "status": {
                        "phase": "Running",
                        "startTime": format_time(now),
                        "conditions": conditions,
                    }
                },
                namespace=namespace_of(pod),
            )
            self._schedule_completion(pod)

    def _schedule_completion(self, pod: Mapping[str, Any]) -> None:
        runtime = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RUNTIME)
        if not runtime:
            return
        try:
            seconds = parse_go_duration(str(runtime)).total_seconds()
        except DurationError:
            return
        namespace, name, uid = namespace_of(pod), name_of(pod), uid_of(pod)
        self._timeline.after(
            max(seconds, 0.0),
            lambda: self._complete(namespace, name, uid),
            key=("kubelet-complete", uid),
        )

    def _complete(self, namespace: str, name: str, uid: str) -> None:
        try:
            pod = self._kube.get(PODS, name, namespace=namespace)
        except NotFoundError:
            return
        if uid_of(pod) != uid or (pod.get("status") or {}).get("phase") != "Running":
            return
        if (pod.get("spec") or {}).get("nodeName") in self._silent:
            return
        now = self._timeline.clock.now()
        conditions = (pod.get("status") or {}).get("conditions")
        for kind in ("ContainersReady", "Ready"):
            conditions = set_condition(conditions, kind, "False", now=now, reason="PodCompleted")
        containers = (pod.get("spec") or {}).get("containers") or []
        self._kube.patch_status(
            PODS,
            name,
            {
                "status": {
                    "phase": "Succeeded",
                    "conditions": conditions,
                    "containerStatuses": [
                        {
                            "name": c.get("name", ""),
                            "ready": False,
                            "state": {
                                "terminated": {
                                    "exitCode": 0,
                                    "reason": "Completed",
                                    "finishedAt": format_time(now),
                                }
                            },
                        }
                        for c in containers
                    ],
                }
            },
            namespace=namespace,
        )


def _toleration_seconds(pod: Mapping[str, Any]) -> int | None:
    """How long ``pod`` stays on an unreachable Node; None: for good (the taint manager's rule).

    The shortest ``tolerationSeconds`` of the tolerations matching the ``NoExecute`` taint
    (none set: for good); a pod with none matching has the admission plugin's default.
    """
    matching = []
    for raw in (pod.get("spec") or {}).get("tolerations") or []:
        try:
            toleration = Toleration.from_dict(raw)
        except TaintError:
            continue
        if tolerates(toleration, _UNREACHABLE_NO_EXECUTE):
            matching.append(toleration)
    if not matching:
        return DEFAULT_TOLERATION_SECONDS
    seconds = [t.toleration_seconds for t in matching if t.toleration_seconds is not None]
    return max(min(seconds), 0) if seconds else None
