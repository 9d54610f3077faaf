"""The ``nodeclass`` controller on a fake provider lifecycle: finalizer, status written only when
it changed (transition times kept), and a deleted class held while NodeClaims use it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from cloudprovider.errors import CloudProviderError
from provisioner.controllers.nodeclass.controller import (
    REQUEUE,
    WAIT_REQUEUE,
    NodeClassController,
    merge_conditions,
)
from provisioner.controllers.ports import Ports
from provisioner.kube.errors import NotFoundError
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, PODS
from provisioner.runtime.reconciler import Request
from tests.unit.controllers.harness import Harness, nodepool, pending_pod

FINALIZER = "karpenter.k8s.aws/termination"


class FakeLifecycle:
    def __init__(self) -> None:
        self.ready = "True"
        self.cleaned: list[str] = []
        self.fail_cleanup = False

    @property
    def finalizer(self) -> str:
        return FINALIZER

    def status(self, nodeclass: Mapping[str, Any], now: datetime) -> dict[str, Any]:
        stamp = now.isoformat().replace("+00:00", "Z")
        return {
            "subnets": [{"id": "subnet-1", "zone": "zone-a"}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": self.ready,
                    "reason": "Ready",
                    "message": "",
                    "lastTransitionTime": stamp,
                },
            ],
        }

    def cleanup(self, nodeclass: Mapping[str, Any]) -> list[str]:
        if self.fail_cleanup:
            raise CloudProviderError("throttled")
        name = str(nodeclass["metadata"]["name"])
        self.cleaned.append(name)
        return [f"lt-{name}"]


def setup() -> tuple[Harness, NodeClassController, FakeLifecycle]:
    h = Harness()
    lifecycle = FakeLifecycle()
    ports = Ports(
        state=h.manager.state,
        kube=h.kube,
        cloud=h.cloud,
        clock=h.clock,
        logger=structlog.get_logger(),
        metrics=h.manager.metrics,
        events=h.manager.events,
    )
    controller = NodeClassController(ports=ports, lifecycle=lifecycle, resource=EC2_NODE_CLASSES)
    h.create(
        EC2_NODE_CLASSES,
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {},
        },
    )
    return h, controller, lifecycle


def test_adds_the_finalizer_and_writes_status_once() -> None:
    h, controller, lifecycle = setup()
    assert controller.reconcile(Request(name="default")).requeue_after == REQUEUE
    obj = h.kube.get(EC2_NODE_CLASSES, "default")
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    first = obj["status"]["conditions"][0]["lastTransitionTime"]
    version = obj["metadata"]["resourceVersion"]
    h.run(60)
    controller.reconcile(Request(name="default"))
    assert h.kube.get(EC2_NODE_CLASSES, "default")["metadata"]["resourceVersion"] == version
    lifecycle.ready = "False"
    h.run(60)
    controller.reconcile(Request(name="default"))
    changed = h.kube.get(EC2_NODE_CLASSES, "default")["status"]["conditions"][0]
    assert changed["status"] == "False"
    assert changed["lastTransitionTime"] != first


def test_a_deleted_class_waits_for_its_nodeclaims_then_cleans_up() -> None:
    h, controller, lifecycle = setup()
    h.create(NODE_POOLS, nodepool())
    h.create(PODS, pending_pod("web"))
    h.run(3)
    assert h.claims()
    controller.reconcile(Request(name="default"))
    h.kube.delete(EC2_NODE_CLASSES, "default")
    assert controller.reconcile(Request(name="default")).requeue_after == WAIT_REQUEUE
    assert lifecycle.cleaned == []
    assert h.events("WaitingOnNodeClaimTermination")
    h.kube.delete(PODS, "web", namespace="default")
    for claim in h.claims():
        h.kube.delete(NODE_CLAIMS, claim["metadata"]["name"])
    h.run(30)
    assert h.claims() == []
    lifecycle.fail_cleanup = True
    assert controller.reconcile(Request(name="default")).requeue_after == WAIT_REQUEUE
    h.kube.get(EC2_NODE_CLASSES, "default")  # still held
    lifecycle.fail_cleanup = False
    controller.reconcile(Request(name="default"))
    assert lifecycle.cleaned == ["default"]
    try:
        h.kube.get(EC2_NODE_CLASSES, "default")
    except NotFoundError:
        pass
    else:
        raise AssertionError("the finalizer was not removed")


def test_merge_conditions_keeps_transition_times_of_unchanged_conditions() -> None:
    old = [{"type": "Ready", "status": "True", "lastTransitionTime": "t0"}]
    new = [
        {"type": "Ready", "status": "True", "lastTransitionTime": "t1"},
        {"type": "AMIsReady", "status": "True", "lastTransitionTime": "t1"},
    ]
    assert [c["lastTransitionTime"] for c in merge_conditions(old, new)] == ["t0", "t1"]
