"""A tiny discrete-event driver for controller tests: the manager over InMemoryKube and
FakeCloudProvider on a FakeClock, a capturing structlog logger and a fresh registry.

Work items run in due order; events from the in-memory API enqueue work immediately; requeues
are scheduled on the fake clock. `run(seconds)` advances virtual time, never sleeping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from cloudprovider.fake import FakeCloudProvider
from cloudprovider.instancetype import InstanceType, Offering
from provisioner.app.settings import Settings
from provisioner.controllers.assembly import ControllerSet, assemble
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent
from provisioner.kube.resource import EVENTS, NODE_CLAIMS, NODE_POOLS, NODES, PODS, Resource
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.reconciler import Reconciler, Request

GIB = 1024**3 * 1000


def instance_type(name: str, cpu: int, memory_gib: int, price: float) -> InstanceType:
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
        offerings=(
            Offering(zone="zone-a", capacity_type="on-demand", price=price),
            Offering(zone="zone-a", capacity_type="spot", price=price / 3),
            Offering(zone="zone-b", capacity_type="on-demand", price=price * 1.01),
            Offering(zone="zone-b", capacity_type="spot", price=price / 2.9),
        ),
    )


TYPES = [
    instance_type("c.large", 2, 4, 0.085),
    instance_type("c.xlarge", 4, 8, 0.17),
    instance_type("c.2xlarge", 8, 16, 0.34),
]


def nodepool(name: str = "default", **spec_overrides: Any) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "requirements": [
            {
                "key": "karpenter.sh/capacity-type",
                "operator": "In",
                "values": ["spot", "on-demand"],
            },
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    template_spec.update(spec_overrides)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"team": "ml"}}, "spec": template_spec}},
    }


def pending_pod(
    name: str, cpu: str = "500m", memory: str = "512Mi", **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    spec.update(extra)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


@dataclass
class _Item:
    reconciler: Reconciler
    request: Request


class Harness:
    """The controllers on fakes. ``assembled`` runs the full assembly (decorated cloud provider
    and the metrics controllers) instead of the bare manager."""

    def __init__(
        self,
        *,
        types: list[InstanceType] | None = None,
        settings: Settings | None = None,
        assembled: bool = False,
    ):
        self.assembled = assembled
        self.clock = FakeClock()
        self.kube = InMemoryKube(clock=self.clock.now)
        self.cloud = FakeCloudProvider(instance_types=list(types or TYPES), clock=self.clock.now)
        self.settings = settings or Settings(policy="greedy")
        self.unsubscribe: Callable[[], None] | None = None
        self.manager: Manager
        self.new_manager()

    # -- the controller process ---------------------------------------------------------------

    def new_manager(self) -> Manager:
        """(Re)start the controller: fresh manager, state, logger and registry."""
        if self.unsubscribe is not None:
            self.unsubscribe()
        self.capture = CapturingLogger()
        logger = structlog.wrap_logger(
            self.capture,
            processors=[],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        )
        self.registry = CollectorRegistry()
        planner = PlannerConfig(
            policy="greedy",
            ignore_preferences=self.settings.ignore_preferences(),
            min_values_best_effort=self.settings.best_effort_min_values(),
        )
        parts: dict[str, Any] = {
            "kube": self.kube,
            "cloud": self.cloud,
            "clock": self.clock,
            "settings": self.settings,
            "logger": logger,
            "metrics": Metrics(self.registry),
            "planner": planner,
        }
        self.controllers: ControllerSet | Manager
        if self.assembled:
            self.controllers = assemble(**parts)
            self.manager = self.controllers.manager
        else:
            self.manager = self.controllers = Manager(**parts)
        self.queue: dict[tuple[str, Request], tuple[datetime, _Item]] = {}
        self.unsubscribe = self.kube.subscribe(self._on_event)
        for reconciler, request in self.controllers.start():
            self._enqueue(reconciler, request, self.clock.now())
        return self.manager

    def _on_event(self, resource: Resource, event: WatchEvent) -> None:
        for reconciler, request in self.controllers.handle(resource, event):
            self._enqueue(reconciler, request, self.clock.now())

    def _enqueue(self, reconciler: Reconciler, request: Request, due: datetime) -> None:
        key = (reconciler.name, request)
        current = self.queue.get(key)
        if current is None or due < current[0]:
            self.queue[key] = (due, _Item(reconciler, request))

    def run(self, seconds: float = 0.0, *, max_steps: int = 20_000) -> None:
        """Run every item due up to now + seconds, advancing the fake clock."""
        target = self.clock.now() + timedelta(seconds=seconds)
        for _ in range(max_steps):
            due_items = [(due, key) for key, (due, _) in self.queue.items() if due <= target]
            if not due_items:
                break
            due, key = min(due_items, key=lambda x: (x[0], x[1][0], x[1][1]))
            _, item = self.queue.pop(key)
            if due > self.clock.now():
                self.clock.set(due)
            result = item.reconciler.reconcile(item.request)
            if result.requeue_after is not None:
                self._enqueue(
                    item.reconciler, item.request, self.clock.now() + result.requeue_after
                )
        else:
            raise AssertionError("the controllers did not settle")
        if target > self.clock.now():
            self.clock.set(target)

    # -- the world ------------------------------------------------------------------------------

    def create(self, resource: Resource, body: dict[str, Any]) -> dict[str, Any]:
        return self.kube.create(resource, body, namespace=body["metadata"].get("namespace"))

    def claims(self) -> list[dict[str, Any]]:
        return self.kube.list(NODE_CLAIMS).items

    def nodepool_obj(self, name: str = "default") -> dict[str, Any]:
        return self.kube.get(NODE_POOLS, name)

    def kubelet(
        self,
        claim: dict[str, Any],
        *,
        ready: bool = True,
        taints: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """What a kubelet does: register a Node with the claim's providerID."""
        status = claim["status"]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"ip-{claim['metadata']['name']}",
                "labels": {"kubernetes.io/hostname": f"ip-{claim['metadata']['name']}"},
            },
            "spec": {
                "providerID": status["providerID"],
                "taints": [
                    {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                    *(taints or []),
                ],
            },
            "status": {
                "capacity": status["capacity"],
                "allocatable": status["allocatable"],
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
        return self.kube.create(NODES, node)

    def bind(self, pod: str, node: str) -> None:
        self.kube.bind("default", pod, node)

    def logs(self, message: str) -> list[dict[str, Any]]:
        return [c.kwargs for c in self.capture.calls if c.kwargs.get("event") == message]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.kube.list(EVENTS).items if e["reason"] == reason]

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


__all__ = ["PODS", "Harness", "nodepool", "pending_pod"]
