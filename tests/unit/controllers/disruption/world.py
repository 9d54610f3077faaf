"""A small cluster in virtual time for disruption tests: the production manager plus a kubelet,
a kube-scheduler, ReplicaSets and pod GC, on InMemoryKube, FakeCloudProvider and a FakeClock.

Like ``tests/unit/controllers/harness.py`` (whose builders it reuses), reconciles run in due order
and requeues are scheduled on the fake clock; the world's own actions (node registration, pod
scheduling, ReplicaSet repair) are timed events on the same clock. Every successful eviction the
controllers make is recorded with the pod as it was; ``checks`` run after every step (invariants
such as budgets "at every instant").
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from cloudprovider.fake import FakeCloudProvider
from cloudprovider.instancetype import InstanceType, Offering
from cloudprovider.interruption import DisruptionRequest
from provisioner.app.settings import Settings
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.errors import ConflictError, NotFoundError
from provisioner.kube.event import format_time
from provisioner.kube.forwarding import ForwardingKube
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import (
    EVENTS,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    Resource,
)
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.reconciler import Reconciler, Request
from provisioner.scheduling.quantity import parse_quantity

GIB = 1024**3 * 1000


def instance_type(
    name: str, cpu: int, memory_gib: int, price: float, *, spot: bool = True
) -> InstanceType:
    offerings = [
        Offering(zone="zone-a", capacity_type="on-demand", price=price),
        Offering(zone="zone-b", capacity_type="on-demand", price=price * 1.01),
    ]
    if spot:
        offerings += [
            Offering(zone="zone-a", capacity_type="spot", price=price / 3),
            Offering(zone="zone-b", capacity_type="spot", price=price / 2.9),
        ]
    return InstanceType(
        name=name,
        labels={
            "node.kubernetes.io/instance-type": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
        },
        capacity={"cpu": cpu * 1000, "memory": memory_gib * GIB, "pods": 110_000},
        allocatable={
            "cpu": cpu * 1000 - 100,
            "memory": memory_gib * GIB - GIB // 2,
            "pods": 110_000,
        },
        offerings=tuple(offerings),
    )


TYPES = [
    instance_type("c.large", 2, 4, 0.085),
    instance_type("c.xlarge", 4, 8, 0.17),
    instance_type("c.2xlarge", 8, 16, 0.34),
    instance_type("c.4xlarge", 16, 32, 0.68),
]


def nodepool(
    name: str = "default",
    *,
    capacity_types: tuple[str, ...] = ("spot", "on-demand"),
    disruption: dict[str, Any] | None = None,
    **template_spec: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)}
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    spec.update(template_spec)
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"team": "ml"}}, "spec": spec}},
    }
    if disruption is not None:
        body["spec"]["disruption"] = disruption
    return body


def pod(
    name: str,
    *,
    cpu: str = "500m",
    memory: str = "512Mi",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
    node: str = "",
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {"app": "web"}),
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


@dataclass(frozen=True, slots=True)
class Eviction:
    """One successful eviction: when, and the pod as it was."""

    at: datetime
    pod: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    @property
    def node(self) -> str:
        return str(self.pod["spec"].get("nodeName") or "")


class RecordingKube(ForwardingKube):
    """The in-memory API, with successful evictions recorded (the controllers' port)."""

    def __init__(self, inner: InMemoryKube, clock: FakeClock) -> None:
        super().__init__(inner)
        self._clock = clock
        self.evictions: list[Eviction] = []
        self.eviction_attempts: list[tuple[datetime, str, str]] = []

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        try:
            before = self._inner.get(PODS, name, namespace=namespace)
        except NotFoundError:
            before = None
        try:
            self._inner.evict(namespace, name, uid=uid)
        except Exception as error:
            self.eviction_attempts.append(
                (self._clock.now(), f"{namespace}/{name}", type(error).__name__)
            )
            raise
        self.eviction_attempts.append((self._clock.now(), f"{namespace}/{name}", "200"))
        if before is not None:
            self.evictions.append(Eviction(self._clock.now(), before))

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._inner, attribute)


@dataclass
class ReplicaSet:
    """Keeps ``replicas`` live pods labelled ``app=<name>``."""

    name: str
    replicas: int
    cpu: str = "500m"
    memory: str = "512Mi"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)


class FakeInterruptionSource:
    """Interruption messages a test pushes; ``poll`` hands them over once."""

    def __init__(self) -> None:
        self.pending: list[DisruptionRequest] = []

    def poll(self) -> list[DisruptionRequest]:
        pending, self.pending = self.pending, []
        return pending


class World:
    """The manager plus a simulated kubelet, scheduler and ReplicaSets, in virtual time."""

    def __init__(
        self,
        *,
        types: list[InstanceType] | None = None,
        node_startup: float = 20.0,
        settings: Settings | None = None,
        disruption: DisruptionConfig | None = None,
        cloud: FakeCloudProvider | None = None,
        interruption: FakeInterruptionSource | None = None,
        seed: int = 7,
    ) -> None:
        self.clock = FakeClock()
        self.api = InMemoryKube(clock=self.clock.now)
        self.kube = RecordingKube(self.api, self.clock)
        self.cloud = cloud or FakeCloudProvider(
            instance_types=list(types or TYPES), clock=self.clock.now
        )
        if cloud is not None:
            self.cloud.clock = self.clock.now
        self.node_startup = timedelta(seconds=node_startup)
        self.settings = settings or Settings(policy="greedy")
        self.interruption = interruption
        self.random = random.Random(seed)  # noqa: S311 - reproducible test choices
        self.replicasets: dict[str, ReplicaSet] = {}
        self.checks: list[Callable[[World], None]] = []
        self._seq = itertools.count()
        self._actions: list[tuple[datetime, int, Callable[[], None]]] = []
        self._registering: set[str] = set()
        self._scheduling_due = False
        self._names = itertools.count(1)
        self.capture = CapturingLogger()
        logger = structlog.wrap_logger(
            self.capture,
            processors=[],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        )
        self.registry = CollectorRegistry()
        self.manager = Manager(
            kube=self.kube,
            cloud=self.cloud,
            clock=self.clock,
            settings=self.settings,
            logger=logger,
            metrics=Metrics(self.registry),
            planner=PlannerConfig(policy="greedy"),
            disruption=disruption,
            interruption=interruption,
        )
        self.queue: dict[tuple[str, Request], tuple[datetime, Reconciler]] = {}
        self.api.subscribe(self._on_event)
        for reconciler, request in self.manager.start():
            self._enqueue(reconciler, request, self.clock.now())

    # -- the driver -----------------------------------------------------------------------------

    def _enqueue(self, reconciler: Reconciler, request: Request, due: datetime) -> None:
        key = (reconciler.name, request)
        current = self.queue.get(key)
        if current is None or due < current[0]:
            self.queue[key] = (due, reconciler)

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        due = self.clock.now() + timedelta(seconds=seconds)
        heapq.heappush(self._actions, (due, next(self._seq), action))

    def _on_event(self, resource: Resource, event: WatchEvent) -> None:
        for reconciler, request in self.manager.handle(resource, event):
            self._enqueue(reconciler, request, self.clock.now())
        self._observe(resource, event)

    def run(self, seconds: float = 0.0, *, max_steps: int = 500_000) -> None:
        """Run everything due up to now + seconds."""
        target = self.clock.now() + timedelta(seconds=seconds)
        for _ in range(max_steps):
            item = min(self.queue.items(), key=lambda kv: (kv[1][0], kv[0]), default=None)
            action_due = self._actions[0][0] if self._actions else None
            item_due = item[1][0] if item is not None else None
            if (item_due is None or item_due > target) and (
                action_due is None or action_due > target
            ):
                break
            if action_due is not None and (item_due is None or action_due <= item_due):
                due, _, action = heapq.heappop(self._actions)
                if due > self.clock.now():
                    self.clock.set(due)
                action()
            else:
                assert item is not None
                key, (due, reconciler) = item
                del self.queue[key]
                if due > self.clock.now():
                    self.clock.set(due)
                result = reconciler.reconcile(key[1])
                if result.requeue_after is not None:
                    self._enqueue(reconciler, key[1], self.clock.now() + result.requeue_after)
            for check in self.checks:
                check(self)
        else:
            raise AssertionError("the world did not settle")
        if target > self.clock.now():
            self.clock.set(target)

    # -- the world's controllers ------------------------------------------------------------------

    def _observe(self, resource: Resource, event: WatchEvent) -> None:
        obj = event.object
        if resource == NODE_CLAIMS and event.type != WatchEventType.DELETED:
            name = obj["metadata"]["name"]
            provider_id = (obj.get("status") or {}).get("providerID")
            deleting = bool(obj["metadata"].get("deletionTimestamp"))
            if provider_id and name not in self._registering and not deleting:
                self._registering.add(name)
                self.after(self.node_startup.total_seconds(), lambda: self._register(name))
        if resource == NODES and event.type == WatchEventType.DELETED:
            self.after(0, lambda: self._collect(obj["metadata"]["name"]))
        if resource == PODS:
            if event.type == WatchEventType.DELETED:
                self.after(0, self._repair)
            if not (obj.get("spec") or {}).get("nodeName"):
                self._want_scheduling()
        if resource == NODES:
            self._want_scheduling()

    def _want_scheduling(self) -> None:
        if not self._scheduling_due:
            self._scheduling_due = True
            self.after(1.0, self._schedule)

    def _register(self, claim_name: str) -> None:
        try:
            claim = self.api.get(NODE_CLAIMS, claim_name)
        except NotFoundError:
            return
        if claim["metadata"].get("deletionTimestamp"):
            return
        provider_id = claim["status"]["providerID"]
        if provider_id not in self.cloud.created:
            return
        status = claim["status"]
        name = f"ip-{claim_name}"
        self.api.create(
            NODES,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {
                    "providerID": provider_id,
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                },
                "status": {
                    "capacity": status["capacity"],
                    "allocatable": status["allocatable"],
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )

    def _collect(self, node: str) -> None:
        """Pod GC: pods bound to a deleted node go."""
        for obj in self.api.list(PODS).items:
            if obj["spec"].get("nodeName") == node:
                with contextlib.suppress(NotFoundError):
                    self.api.delete(
                        PODS, obj["metadata"]["name"], namespace=obj["metadata"]["namespace"]
                    )

    def _schedule(self) -> None:
        """kube-scheduler: bind pending pods, least-allocated node first."""
        self._scheduling_due = False
        nodes = [
            n
            for n in self.api.list(NODES).items
            if not n["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
            )
        ]
        pods = self.api.list(PODS).items
        used: dict[str, dict[str, int]] = {n["metadata"]["name"]: {} for n in nodes}
        for p in pods:
            node = p["spec"].get("nodeName")
            if node in used and p["status"].get("phase") not in {"Succeeded", "Failed"}:
                for k, v in _requests(p).items():
                    used[node][k] = used[node].get(k, 0) + v
        pending = [
            p
            for p in pods
            if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
        ]
        for p in sorted(pending, key=lambda x: x["metadata"]["creationTimestamp"]):
            best = None
            for n in nodes:
                if not _feasible(p, n, used[n["metadata"]["name"]]):
                    continue
                cpu = int(n["status"]["allocatable"].get("cpu", "0").rstrip("m") or 0)
                load = used[n["metadata"]["name"]].get("cpu", 0) / max(
                    parse_quantity(str(n["status"]["allocatable"]["cpu"])), 1
                )
                del cpu
                rank = (load, n["metadata"]["name"])
                if best is None or rank < best[0]:
                    best = (rank, n)
            if best is None:
                continue
            node = best[1]["metadata"]["name"]
            try:
                self.api.bind(p["metadata"]["namespace"], p["metadata"]["name"], node)
            except (ConflictError, NotFoundError):
                continue
            self._start_pod(p["metadata"]["namespace"], p["metadata"]["name"])
            for k, v in _requests(p).items():
                used[node][k] = used[node].get(k, 0) + v

    def _start_pod(self, namespace: str, name: str) -> None:
        now = format_time(self.clock.now())
        try:
            current = self.api.get(PODS, name, namespace=namespace)
        except NotFoundError:
            return
        conditions = [c for c in current["status"].get("conditions", []) if c["type"] != "Ready"]
        conditions.append({"type": "Ready", "status": "True"})
        self.api.patch_status(
            PODS,
            name,
            {"status": {"phase": "Running", "startTime": now, "conditions": conditions}},
            namespace=namespace,
        )

    def _repair(self) -> None:
        """ReplicaSets: recreate missing replicas as pending pods."""
        live: dict[str, int] = {}
        for p in self.api.list(PODS).items:
            app = p["metadata"].get("labels", {}).get("rs")
            if (
                app
                and not p["metadata"].get("deletionTimestamp")
                and p["status"].get("phase") not in {"Succeeded", "Failed"}
            ):
                live[app] = live.get(app, 0) + 1
        for rs in self.replicasets.values():
            for _ in range(rs.replicas - live.get(rs.name, 0)):
                self._create_replica(rs)

    def _create_replica(self, rs: ReplicaSet) -> None:
        body = pod(
            f"{rs.name}-{next(self._names)}",
            cpu=rs.cpu,
            memory=rs.memory,
            labels={"app": rs.name, "rs": rs.name, **rs.labels},
            annotations=rs.annotations,
            **rs.spec,
        )
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs.name,
                "uid": rs.name,
                "controller": True,
            }
        ]
        self.api.create(PODS, body, namespace="default")

    # -- what tests do ----------------------------------------------------------------------------

    def create(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        return self.api.create(resource, body, namespace=body["metadata"].get("namespace"))

    def deploy(self, name: str, replicas: int, **options: Any) -> ReplicaSet:
        rs = ReplicaSet(name, replicas, **options)
        self.replicasets[name] = rs
        for _ in range(replicas):
            self._create_replica(rs)
        return rs

    def scale(self, name: str, replicas: int) -> None:
        """Scale a ReplicaSet; extra pods are deleted at random (seeded)."""
        rs = self.replicasets[name]
        rs.replicas = replicas
        live = [
            p
            for p in self.api.list(PODS).items
            if p["metadata"].get("labels", {}).get("rs") == name
            and not p["metadata"].get("deletionTimestamp")
        ]
        self.random.shuffle(live)
        for p in live[: max(len(live) - replicas, 0)]:
            self.api.delete(PODS, p["metadata"]["name"], namespace=p["metadata"]["namespace"])
        for _ in range(replicas - len(live)):
            self._create_replica(rs)

    def pdb(self, name: str, selector: dict[str, str], **spec: Any) -> None:
        self.create(
            POD_DISRUPTION_BUDGETS,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": {"matchLabels": selector}, **spec},
            },
        )

    # -- what tests read --------------------------------------------------------------------------

    def raw(self, resource: Resource) -> list[dict[str, Any]]:
        """The stored objects of ``resource``, uncopied (read only!)."""
        return list(self.api._objects.get(resource, {}).values())

    def nodes(self) -> list[dict[str, Any]]:
        return self.api.list(NODES).items

    def claims(self) -> list[dict[str, Any]]:
        return self.api.list(NODE_CLAIMS).items

    def claimed_cpus(self) -> int:
        """Whole CPUs of the launched NodeClaims' capacity (those being deleted too)."""
        capacities = (c.get("status", {}).get("capacity", {}) for c in self.claims())
        return sum(int(capacity.get("cpu", "0")) for capacity in capacities)

    def pods(self) -> list[dict[str, Any]]:
        return self.api.list(PODS).items

    def pod_node(self) -> dict[str, str]:
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": str(
                p["spec"].get("nodeName") or ""
            )
            for p in self.pods()
        }

    def cost(self) -> float:
        """Hourly price of the live instances."""
        prices = {
            (t.name, o.zone, o.capacity_type): o.price
            for t in self.cloud.instance_types
            for o in t.offerings
        }
        return sum(
            prices[(c.instance_type, c.zone, c.capacity_type)] for c in self.cloud.created.values()
        )

    def pending(self) -> list[dict[str, Any]]:
        return [p for p in self.pods() if not p["spec"].get("nodeName")]

    def logs(self, message: str) -> list[dict[str, Any]]:
        return [c.kwargs for c in self.capture.calls if c.kwargs.get("event") == message]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list(EVENTS).items if e["reason"] == reason]

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def nodepool_obj(self, name: str = "default") -> dict[str, Any]:
        return self.api.get(NODE_POOLS, name)


def _requests(p: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {"pods": 1000}
    for container in p["spec"].get("containers", []):
        for k, v in (container.get("resources", {}).get("requests") or {}).items():
            total[k] = total.get(k, 0) + parse_quantity(str(v))
    return total


def _tolerated(p: dict[str, Any], taint: dict[str, Any]) -> bool:
    for t in p["spec"].get("tolerations") or []:
        effect_ok = not t.get("effect") or t.get("effect") == taint.get("effect")
        if not effect_ok:
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _feasible(p: dict[str, Any], n: dict[str, Any], used: dict[str, int]) -> bool:
    for taint in n["spec"].get("taints") or []:
        if taint.get("effect") in {"NoSchedule", "NoExecute"} and not _tolerated(p, taint):
            return False
    labels = n["metadata"].get("labels") or {}
    for k, v in (p["spec"].get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    allocatable = {k: parse_quantity(str(v)) for k, v in n["status"]["allocatable"].items()}
    return all(used.get(k, 0) + v <= allocatable.get(k, 0) for k, v in _requests(p).items())


__all__ = [
    "GIB",
    "TYPES",
    "Eviction",
    "FakeInterruptionSource",
    "World",
    "instance_type",
    "nodepool",
    "pod",
]
