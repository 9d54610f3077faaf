"""Issue 18 item 5 in `jointer simulate`: the EC2NodeClass controller writes status and holds its
finalizer; a deleted class waits for its NodeClaims, then its launch templates and instance
profile are deleted and the finalizer is removed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.kube.errors import NotFoundError
from provisioner.kube.resource import EC2_NODE_CLASSES
from provisioner.simulation.runner import RunOptions, Simulation
from provisioner.simulation.wiring import manager_factory
from tests.e2e.conftest import _CATALOG, events, inline

pytestmark = pytest.mark.usefixtures("test_catalog")

CLUSTER = "demo"
WORKLOAD = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidateAfter: 30s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/web:1
        resources:
          requests: {cpu: "1", memory: 2Gi}
"""


def scenario(*, delete_at: str | None) -> Any:
    steps: list[dict[str, Any]] = [
        {"at": "0s", "applyFile": "nodeclass.yaml"},
        {"at": "0s", "apply": WORKLOAD},
    ]
    if delete_at is not None:
        steps.append(
            {
                "at": delete_at,
                "delete": [
                    {"kind": "Deployment", "namespace": "default", "name": "web"},
                    {"kind": "EC2NodeClass", "name": "default"},
                ],
            }
        )
    body = {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "nodeclass-lifecycle"},
        "spec": {
            "region": "us-east-1",
            "clusterName": CLUSTER,
            "duration": "20m",
            "nodeStartup": "60s",
            "steps": steps,
        },
    }
    return dataclasses.replace(inline(body), catalog=_CATALOG["path"])


def run_observed(delete_at: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run, sampling every virtual minute the EC2NodeClass and its AWS resources."""
    samples: list[dict[str, Any]] = []
    holder: dict[str, Simulation] = {}

    def sample(_: Any) -> None:
        world = holder["simulation"].world
        try:
            nodeclass: dict[str, Any] | None = world.kube.get(EC2_NODE_CLASSES, "default")
        except NotFoundError:
            nodeclass = None
        ec2, iam = world.account.client("ec2"), world.account.client("iam")
        templates = ec2.describe_launch_templates(
            Filters=[{"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": ["default"]}]
        )["LaunchTemplates"]
        profiles = iam.list_instance_profiles(PathPrefix=f"/karpenter/us-east-1/{CLUSTER}/")
        samples.append(
            {
                "nodeclass": nodeclass,
                "templates": len(templates),
                "profiles": len(profiles["InstanceProfiles"]),
            }
        )

    simulation = Simulation(
        scenario(delete_at=delete_at),
        factory=manager_factory,
        options=RunOptions(solver_deterministic_time=0.5, progress=sample, progress_every=60.0),
    )
    holder["simulation"] = simulation
    return simulation.run(), samples


def test_the_ec2nodeclass_gets_status_conditions_and_the_finalizer() -> None:
    report, samples = run_observed(None)
    nodeclass = samples[-1]["nodeclass"]
    assert nodeclass is not None
    assert "karpenter.k8s.aws/termination" in nodeclass["metadata"]["finalizers"]
    status = nodeclass["status"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "SubnetsReady": "True",
        "SecurityGroupsReady": "True",
        "AMIsReady": "True",
        "InstanceProfileReady": "True",
        "CapacityReservationsReady": "True",
        "ValidationSucceeded": "True",
        "Ready": "True",
    }
    assert status["subnets"]
    assert status["securityGroups"]
    assert status["amis"]
    assert status["instanceProfile"].startswith(f"{CLUSTER}_")
    assert samples[-1]["templates"] >= 1
    assert samples[-1]["profiles"] == 1
    # status is stable: the transition times were written once
    first = next(s["nodeclass"] for s in samples if s["nodeclass"] and s["nodeclass"].get("status"))
    assert first["status"]["conditions"] == status["conditions"]
    assert report["summary"]["podsScheduled"] == 2


def test_a_deleted_ec2nodeclass_waits_for_its_nodeclaims_then_cleans_up() -> None:
    report, samples = run_observed("5m")
    deleting = [
        s
        for s in samples
        if s["nodeclass"] is not None and s["nodeclass"]["metadata"].get("deletionTimestamp")
    ]
    assert deleting, "held by its finalizer while NodeClaims use it"
    assert all(s["templates"] >= 1 and s["profiles"] == 1 for s in deleting)
    assert events(report, "WaitingOnNodeClaimTermination", "EC2NodeClass/default")
    final = samples[-1]
    assert final["nodeclass"] is None
    assert final["templates"] == 0
    assert final["profiles"] == 0
    assert all(c["deletedAt"] is not None for c in report["nodeClaims"])
