"""The embedded cluster end to end with stand-in controllers: steps, record, report, progress.

The production controllers are exercised by ``test_simulate_acceptance.py``; these tests pin
down the simulator itself (what it does to the cluster and the account, what it reports).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from provisioner.simulation.report import orphan_instances
from provisioner.simulation.runner import Progress
from tests.e2e.conftest import inline, run
from tests.e2e.stub_controllers import stub_factory

pytestmark = pytest.mark.usefixtures("test_catalog")

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {sim.jointer.dev/runtime: 20m}
    spec:
      containers: [{name: c, image: web, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""
REPORT_KEYS = [
    "apiVersion",
    "kind",
    "scenario",
    "policy",
    "seed",
    "durationSeconds",
    "cost",
    "pods",
    "nodeClaims",
    "ec2Instances",
    "evictions",
    "events",
    "summary",
]
EXTENSION_KEYS = ["gangs", "timeSeries"]
"""Added after the spec's keys (docs/simulate.md): what the HTML report charts."""


def scenario(*steps: dict[str, Any], duration: str = "10m") -> Any:
    return inline(
        {
            "apiVersion": "jointer.dev/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "embedded"},
            "spec": {
                "region": "us-east-1",
                "clusterName": "demo",
                "duration": duration,
                "nodeStartup": "40s",
                "steps": [{"at": "0s", "apply": NODECLASS + "---" + DEPLOYMENT}, *steps],
            },
        }
    )


def test_the_report_has_the_shape_of_the_spec() -> None:
    report, _ = run(scenario(), factory=stub_factory, seed=3)
    assert list(report) == REPORT_KEYS + EXTENSION_KEYS
    assert (report["apiVersion"], report["kind"]) == ("jointer.dev/v1alpha1", "SimulationReport")
    assert (report["scenario"], report["policy"], report["seed"], report["durationSeconds"]) == (
        "embedded",
        "jointer",
        3,
        600,
    )
    assert list(report["pods"][0]) == [
        "name",
        "podGroup",
        "createdAt",
        "scheduledAt",
        "node",
        "completedAt",
        "evictions",
        "deletedAt",
        "requests",
        "protected",
    ]
    assert list(report["nodeClaims"][0]) == [
        "name",
        "nodePool",
        "instanceType",
        "capacityType",
        "zone",
        "node",
        "launchedAt",
        "initializedAt",
        "deletedAt",
        "deletionReason",
        "pricePerHour",
    ]
    assert list(report["ec2Instances"][0]) == [
        "id",
        "instanceType",
        "capacityType",
        "zone",
        "launchedAt",
        "terminatedAt",
        "nodeClaim",
        "pricePerHour",
    ]
    assert list(report["events"][0]) == ["at", "type", "reason", "object", "message"]
    assert list(report["summary"]) == [
        "podsTotal",
        "podsScheduled",
        "timeToScheduleSeconds",
        "nodeClaimsLaunched",
        "launchFailures",
        "disruptions",
        "spendingEfficiency",
        "protectedPodEvictions",
        "partialGangs",
    ]
    assert list(report["timeSeries"]) == [
        "stepSeconds",
        "at",
        "pendingPods",
        "boundPods",
        "nodes",
        "costPerHour",
        "cost",
        "requestedVCPU",
        "requestedMemoryGiB",
    ]
    json.dumps(report)  # plain JSON


def test_pods_are_bound_when_their_node_is_ready_and_complete_after_their_runtime() -> None:
    report, _ = run(scenario(duration="30m"), factory=stub_factory)
    web = [p for p in report["pods"] if p["createdAt"] == 0]
    assert len(web) == 2
    assert all(p["scheduledAt"] == 40 and p["completedAt"] == 40 + 1200 for p in web)
    # the ReplicaSet replaces completed pods; they land on the existing nodes at once
    replacements = [p for p in report["pods"] if p["createdAt"] == 1240]
    assert len(replacements) == 2
    assert all(p["scheduledAt"] == 1240 for p in replacements)
    assert report["summary"]["timeToScheduleSeconds"] == {"p50": 0.0, "p95": 40.0, "max": 40.0}


def test_cost_is_price_times_running_time_over_every_instance() -> None:
    report, _ = run(scenario(), factory=stub_factory)
    instances = report["ec2Instances"]
    assert len(instances) == 2
    expected = sum(i["pricePerHour"] * (600 - i["launchedAt"]) / 3600 for i in instances)
    assert report["cost"]["total"] == round(expected, 6)
    assert report["cost"]["perHourAverage"] == round(expected * 3600 / 600, 6)
    assert orphan_instances(report) == []


def test_a_spot_interruption_warns_then_ec2_reclaims_the_instance() -> None:
    report, simulation = run(
        scenario(
            {"at": "2m", "spotInterruption": {"nodeSelector": {"karpenter.sh/nodepool": "default"}}}
        ),
        factory=stub_factory,
    )
    (warning,) = [e for e in report["events"] if e["reason"] == "SpotInterruptionWarning"]
    assert warning["at"] == 120
    reclaimed = [i for i in report["ec2Instances"] if i["terminatedAt"] is not None]
    assert [i["terminatedAt"] for i in reclaimed] == [240.0]
    assert reclaimed[0]["id"] in warning["message"]
    # the pod on the reclaimed node was deleted; its ReplicaSet made a new one, which got a node
    assert len(report["pods"]) == 3
    assert report["summary"]["podsScheduled"] == 3
    # the instance's message reached the interruption queue through EventBridge
    assert simulation.world.account.counters.fleet_calls == 3


def test_interrupting_more_spot_nodes_than_exist_is_noted() -> None:
    report, _ = run(scenario({"at": "2m", "spotInterruption": {"count": 5}}), factory=stub_factory)
    assert [e["message"] for e in report["events"] if e["reason"] == "SpotInterruptionShort"] == [
        "5 spot node(s) asked for, 2 match"
    ]


def test_a_capacity_outage_fails_launches_it_covers() -> None:
    report, _ = run(
        scenario(
            {"at": "1m", "capacityOutage": {"instanceTypes": ["m6a.large"], "for": "10m"}},
            {
                "at": "2m",
                "scale": {
                    "kind": "Deployment",
                    "namespace": "default",
                    "name": "web",
                    "replicas": 3,
                },
            },
        ),
        factory=stub_factory,
    )
    # one NodeClaim: a spot fleet, then the on-demand fallback; both refused
    assert report["summary"]["launchFailures"] == 2
    assert report["summary"]["nodeClaimsLaunched"] == 2
    assert report["summary"]["podsScheduled"] == 2
    (claim,) = [c for c in report["nodeClaims"] if c["launchedAt"] is None]
    assert (claim["deletedAt"], claim["deletionReason"]) == (120, "InsufficientCapacity")


def test_delete_and_scale_steps_change_the_cluster() -> None:
    report, simulation = run(
        scenario(
            {
                "at": "1m",
                "scale": {
                    "kind": "Deployment",
                    "namespace": "default",
                    "name": "web",
                    "replicas": 0,
                },
            },
            {"at": "2m", "delete": [{"kind": "Deployment", "namespace": "default", "name": "web"}]},
            {
                "at": "3m",
                "delete": [{"kind": "Pod", "namespace": "default", "labelSelector": "app=web"}],
            },
            {
                "at": "4m",
                "scale": {
                    "kind": "Deployment",
                    "namespace": "default",
                    "name": "gone",
                    "replicas": 1,
                },
            },
        ),
        factory=stub_factory,
    )
    kube = simulation.world.kube
    assert kube.list(simulation_resource("apps/v1", "Deployment")).items == []
    assert kube.list(simulation_resource("v1", "Pod")).items == []
    skipped = [e["message"] for e in report["events"] if e["reason"] == "ScaleSkipped"]
    assert skipped == ["Deployment default/gone not found"]


def simulation_resource(api_version: str, kind: str) -> Any:
    from provisioner.simulation.kinds import resource_for_kind  # noqa: PLC0415

    return resource_for_kind(api_version, kind)


def test_the_same_seed_gives_the_same_report_and_another_seed_other_names() -> None:
    steps = ({"at": "2m", "spotInterruption": {"count": 1}},)
    first, _ = run(scenario(*steps), factory=stub_factory, seed=11)
    second, _ = run(scenario(*steps), factory=stub_factory, seed=11)
    other, _ = run(scenario(*steps), factory=stub_factory, seed=12)
    assert json.dumps(first) == json.dumps(second)
    assert {p["name"] for p in first["pods"]} != {p["name"] for p in other["pods"]}


def test_progress_snapshots_arrive_every_virtual_minute() -> None:
    snapshots: list[Progress] = []
    run(scenario(duration="3m"), factory=stub_factory, progress=snapshots.append)
    assert [s.at for s in snapshots] == [0, 60, 120, 180]
    assert snapshots[0].pending_pods == 0  # not yet marked by the scheduler at the first instant
    assert snapshots[1].nodes == {"spot": 2}
    assert snapshots[3].cost > snapshots[2].cost > 0


def test_a_restart_step_rebuilds_the_controllers() -> None:
    report, simulation = run(scenario({"at": "20s", "restartController": {}}), factory=stub_factory)
    assert simulation.world.restarts == 1
    assert [e["at"] for e in report["events"] if e["reason"] == "ControllerRestarted"] == [20]
    assert report["summary"]["podsScheduled"] == 2
    assert len(report["ec2Instances"]) == 2
