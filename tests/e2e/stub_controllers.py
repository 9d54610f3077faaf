"""A stand-in controller set for the simulation's own tests (not the production controllers).

It is deliberately naive: one NodeClaim per unschedulable pod, launched through the real
AWS cloud provider on moto, registered and initialized when its Node appears and is Ready. It
exercises the embedded cluster (kubelet, scheduler, driver, recorder, report) without depending
on the controller manager.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cloudprovider.adapters import launch_request
from cloudprovider.errors import InsufficientCapacityError
from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.kube.errors import NotFoundError
from provisioner.kube.protocol import WatchEvent
from provisioner.kube.resource import NODE_CLAIMS, NODES, PODS, Resource
from provisioner.runtime.reconciler import Request, Result
from provisioner.simulation.objects import condition, name_of, set_condition
from provisioner.simulation.ports import Ports

INSTANCE_TYPE = "m6a.large"


def _unschedulable(pod: dict[str, Any]) -> bool:
    found = condition(pod, "PodScheduled")
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and found is not None
        and found.get("reason") == "Unschedulable"
        and (pod.get("status") or {}).get("phase") not in {"Succeeded", "Failed"}
    )


@dataclass
class StubProvisioner:
    ports: Ports
    nominated: set[str] = field(default_factory=set)
    created: int = 0
    name: str = "provisioner"

    def reconcile(self, request: Request) -> Result:
        kube = self.ports.kube
        existing = {name_of(c) for c in kube.list(NODE_CLAIMS).items}
        for pod in kube.list(PODS).items:
            uid = pod["metadata"]["uid"]
            if not _unschedulable(pod) or uid in self.nominated:
                continue
            claim_name = f"default-{pod['metadata']['name']}"
            if claim_name not in existing:
                kube.create(
                    NODE_CLAIMS,
                    {
                        "apiVersion": "karpenter.sh/v1",
                        "kind": "NodeClaim",
                        "metadata": {
                            "name": claim_name,
                            "labels": {wk.LABEL_NODEPOOL: "default"},
                        },
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "default",
                            },
                            "requirements": [
                                {
                                    "key": wk.LABEL_INSTANCE_TYPE,
                                    "operator": "In",
                                    "values": [INSTANCE_TYPE],
                                },
                                {
                                    "key": wk.LABEL_CAPACITY_TYPE,
                                    "operator": "In",
                                    "values": ["spot", "on-demand"],
                                },
                            ],
                        },
                    },
                )
                self.created += 1
            self.nominated.add(uid)
            kube.create_event(
                pod, reason="Nominated", message=f"Pod should schedule on: nodeclaim/{claim_name}"
            )
        return Result.done()


@dataclass
class StubLifecycle:
    ports: Ports
    name: str = "nodeclaim.lifecycle"

    def reconcile(self, request: Request) -> Result:
        kube = self.ports.kube
        try:
            raw = kube.get(NODE_CLAIMS, request.name)
        except NotFoundError:
            return Result.done()
        status = raw.get("status") or {}
        now = self.ports.clock.now()
        if not status.get("providerID"):
            claim = parse_object(NodeClaim, raw, kind="NodeClaim")
            try:
                launched = self.ports.cloud.create(launch_request(claim))
            except InsufficientCapacityError as error:
                kube.create_event(
                    raw, reason="InsufficientCapacityError", message=str(error), type="Warning"
                )
                kube.delete(NODE_CLAIMS, request.name)
                return Result.done()
            kube.merge_patch(
                NODE_CLAIMS, request.name, {"metadata": {"labels": dict(launched.labels)}}
            )
            kube.patch_status(
                NODE_CLAIMS,
                request.name,
                {
                    "status": {
                        "providerID": launched.provider_id,
                        "conditions": set_condition(
                            status.get("conditions"), "Launched", "True", now=now
                        ),
                    }
                },
            )
            return Result.done()
        node = next(
            (
                n
                for n in kube.list(NODES).items
                if n["spec"].get("providerID") == status["providerID"]
            ),
            None,
        )
        if node is None:
            return Result.done()
        taints = node["spec"].get("taints") or []
        if any(t["key"] == wk.TAINT_UNREGISTERED for t in taints):
            kube.merge_patch(
                NODES,
                name_of(node),
                {"spec": {"taints": [t for t in taints if t["key"] != wk.TAINT_UNREGISTERED]}},
            )
            kube.patch_status(
                NODE_CLAIMS,
                request.name,
                {
                    "status": {
                        "nodeName": name_of(node),
                        "conditions": set_condition(
                            status.get("conditions"), "Registered", "True", now=now
                        ),
                    }
                },
            )
            return Result.done()
        ready = condition(node, "Ready")
        if (
            ready is not None
            and ready.get("status") == "True"
            and condition(raw, "Initialized") is None
        ):
            kube.patch_status(
                NODE_CLAIMS,
                request.name,
                {
                    "status": {
                        "conditions": set_condition(
                            status.get("conditions"), "Initialized", "True", now=now
                        )
                    }
                },
            )
        return Result.done()


def _all_claims(ports: Ports) -> Any:
    def requests(_event: WatchEvent | None) -> Iterable[Request]:
        return [Request(name=name_of(c)) for c in ports.kube.list(NODE_CLAIMS).items]

    return requests


@dataclass
class StubControllers:
    ports: Ports
    observed: int = 0

    def __post_init__(self) -> None:
        self.provisioner = StubProvisioner(self.ports)
        self.lifecycle = StubLifecycle(self.ports)
        self.claims = _all_claims(self.ports)

    @property
    def reconcilers(self) -> tuple[Any, ...]:
        return (self.provisioner, self.lifecycle)

    def start(self) -> list[tuple[Any, Request]]:
        return [(self.provisioner, Request())] + [(self.lifecycle, r) for r in self.claims(None)]

    def handle(self, resource: Resource, event: WatchEvent) -> list[tuple[Any, Request]]:
        self.observed += 1
        if resource == PODS:
            return [(self.provisioner, Request())]
        if resource == NODE_CLAIMS:
            return [(self.lifecycle, Request(name=name_of(event.object)))]
        if resource == NODES:
            return [(self.lifecycle, r) for r in self.claims(event)]
        return []


def stub_factory(ports: Ports) -> StubControllers:
    return StubControllers(ports)
