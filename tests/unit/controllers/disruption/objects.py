"""Builders of cluster objects (wire shape) for disruption unit tests, and a facts helper."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from cloudprovider.fake import FakeCloudProvider
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.rescheduling import PoolCatalog, load_catalog
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.event import format_time
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import TRACKED_RESOURCES, ClusterState
from tests.unit.controllers.disruption.world import TYPES, nodepool, pod

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
EARLIER = datetime(2026, 1, 1, 10, tzinfo=UTC)
GREEDY = PlannerConfig(policy="greedy")
"""The planner settings of the simulations the tests run (deterministic)."""


def claim(
    name: str,
    *,
    pool: str = "default",
    instance_type: str = "c.xlarge",
    capacity_type: str = "on-demand",
    zone: str = "zone-a",
    initialized: bool = True,
    conditions: Iterable[dict[str, Any]] = (),
    annotations: dict[str, str] | None = None,
    created: datetime = EARLIER,
    expire_after: str = "720h",
    deleting: bool = False,
) -> dict[str, Any]:
    stamp = format_time(created)
    status_conditions = [
        {"type": "Launched", "status": "True", "lastTransitionTime": stamp, "reason": "Launched"},
        {
            "type": "Registered",
            "status": "True",
            "lastTransitionTime": stamp,
            "reason": "Registered",
        },
        {
            "type": "Initialized",
            "status": "True" if initialized else "Unknown",
            "lastTransitionTime": stamp,
            "reason": "Initialized" if initialized else "NodeNotReady",
        },
        *conditions,
    ]
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "creationTimestamp": stamp,
        "labels": {
            "karpenter.sh/nodepool": pool,
            "node.kubernetes.io/instance-type": instance_type,
            "karpenter.sh/capacity-type": capacity_type,
            "topology.kubernetes.io/zone": zone,
        },
        "annotations": dict(annotations or {}),
        "finalizers": ["karpenter.sh/termination"],
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": metadata,
        "spec": {
            "requirements": [],
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": "default",
            },
            "expireAfter": expire_after,
        },
        "status": {
            "providerID": f"fake://zone-a/{name}",
            "nodeName": f"node-{name}",
            "conditions": status_conditions,
        },
    }


def node(
    claim_name: str,
    *,
    cpu: str = "3900m",
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    name = f"node-{claim_name}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {
                "kubernetes.io/hostname": name,
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/initialized": "true",
                "node.kubernetes.io/instance-type": "c.xlarge",
                "karpenter.sh/capacity-type": "on-demand",
                "topology.kubernetes.io/zone": "zone-a",
                **(labels or {}),
            },
            "annotations": dict(annotations or {}),
        },
        "spec": {"providerID": f"fake://zone-a/{claim_name}", "taints": list(taints or [])},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "7Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def running(body: dict[str, Any], node_name: str, *, started: datetime = EARLIER) -> dict[str, Any]:
    """A pod bound to ``node_name``, Running and Ready."""
    body["spec"]["nodeName"] = node_name
    body["metadata"].setdefault("uid", f"uid-{body['metadata']['name']}")
    body["status"] = {
        "phase": "Running",
        "startTime": format_time(started),
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
    }
    return body


def state_of(objects: Iterable[dict[str, Any]], *, now: datetime = NOW) -> ClusterState:
    """A synced cache holding ``objects`` (any kinds, pod-group objects included)."""
    state = ClusterState(clock=FakeClock(now))
    for resource in TRACKED_RESOURCES:
        state.replace(resource, [])
    for obj in objects:
        state.apply_object(obj)
    return state


def facts_of(
    objects: Iterable[dict[str, Any]],
    *,
    now: datetime = NOW,
    classes: frozenset[str] = frozenset(),
) -> ClusterFacts:
    state = state_of([nodepool(), *objects], now=now)
    return ClusterFacts.build(state.snapshot(now), now, classes)


def catalog_of(facts: ClusterFacts) -> PoolCatalog:
    import structlog  # noqa: PLC0415

    return load_catalog(
        facts, FakeCloudProvider(instance_types=list(TYPES)), region="", log=structlog.get_logger()
    )


__all__ = [
    "EARLIER",
    "NOW",
    "catalog_of",
    "claim",
    "facts_of",
    "node",
    "pod",
    "running",
    "state_of",
]
