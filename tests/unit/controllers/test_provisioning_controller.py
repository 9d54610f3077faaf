"""The provisioning reconciler end to end on InMemoryKube + FakeCloudProvider in virtual time."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry

from provisioner.apis.base import parse_object
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.app.settings import Settings
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provisioning.batcher import Batcher
from provisioner.kube.resource import NODE_POOLS, PODS, Resource
from tests.unit.controllers.harness import Harness, nodepool, pending_pod


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.create(NODE_POOLS, nodepool())
    harness.run()
    return harness


def deployment(h: Harness, n: int, prefix: str = "web") -> None:
    for i in range(n):
        h.create(PODS, pending_pod(f"{prefix}-{i}"))


def requirement(claim: dict[str, Any], key: str) -> dict[str, Any]:
    found = [r for r in claim["spec"]["requirements"] if r["key"] == key]
    return found[0] if found else {}


def test_nothing_is_created_before_the_batch_closes(h):
    deployment(h, 3)
    h.run(0.9)
    assert h.claims() == []
    h.run(0.2)
    assert h.claims() != []


def test_twenty_pending_pods_get_valid_nodeclaims(h):
    deployment(h, 20)
    h.run(2)
    claims = h.claims()
    assert claims
    pool = h.nodepool_obj()
    for claim in claims:
        parse_object(NodeClaim, claim, kind="NodeClaim")
        metadata = claim["metadata"]
        assert metadata["name"].startswith("default-")
        assert metadata["labels"]["karpenter.sh/nodepool"] == "default"
        assert metadata["labels"]["team"] == "ml"
        assert metadata["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"
        assert metadata["annotations"]["karpenter.sh/nodepool-hash-version"] == "jointer-v1"
        assert metadata["annotations"]["karpenter.sh/nodepool-hash"]
        assert metadata["ownerReferences"][0]["uid"] == pool["metadata"]["uid"]
        assert metadata["finalizers"] == ["karpenter.sh/termination"]
        assert requirement(claim, "node.kubernetes.io/instance-type")["values"]
        assert requirement(claim, "karpenter.sh/capacity-type")["values"] == ["spot", "on-demand"]
        assert requirement(claim, "karpenter.sh/nodepool")["values"] == ["default"]
        assert requirement(claim, "topology.kubernetes.io/zone") == {}
        assert claim["spec"]["nodeClassRef"]["name"] == "default"
        assert claim["spec"]["expireAfter"] == "720h"
        assert claim["spec"]["resources"]["requests"]["cpu"]
    nominated = h.events("Nominated")
    assert len({e["involvedObject"]["name"] for e in nominated}) == 20
    assert all(e["message"].startswith("Pod should schedule on: nodeclaim/") for e in nominated)
    assert h.metric(
        "karpenter_nodeclaims_created_total",
        reason="provisioned",
        nodepool="default",
        min_values_relaxed="false",
    ) == len(claims)
    found = h.logs("found provisionable pod(s)")
    assert found
    assert found[0]["Pods"].endswith("and 15 other(s)")
    assert h.logs("computed new nodeclaim(s) to fit pod(s)")[0]["pods"] == 20
    created = h.logs("created nodeclaim")
    assert len(created) == len(claims)
    assert created[0]["NodePool"] == {"name": "default"}
    assert created[0]["controller"] == "provisioner"


def test_a_second_batch_never_buys_again_for_nominated_pods(h):
    deployment(h, 20)
    h.run(2)
    first = len(h.claims())
    deployment(h, 1, prefix="late")
    h.run(15)
    claims = h.claims()
    # the late pod fits on in-flight capacity or gets one more claim, never a re-buy of 20
    assert len(claims) <= first + 1
    h.run(60)
    assert len(h.claims()) == len(claims)


def test_in_flight_capacity_is_used_after_a_restart(h):
    deployment(h, 4)
    h.run(2)
    before = len(h.claims())
    h.new_manager()  # nominations are lost; the in-flight claims still count as capacity
    h.run(30)
    assert len(h.claims()) == before
    assert len(h.cloud.created) == before


def test_pods_that_cannot_be_helped_get_one_failed_scheduling_event(h):
    h.create(PODS, pending_pod("huge", cpu="64"))
    h.run(2)
    h.run(30)
    assert h.claims() == []
    events = h.events("FailedScheduling")
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert events[0]["message"].startswith("Failed to schedule pod, ")


def test_pods_that_are_not_provisionable_are_ignored(h):
    pod = pending_pod("gated")
    pod["status"]["conditions"][0]["reason"] = "SchedulingGated"
    h.create(PODS, pod)
    h.run(5)
    assert h.claims() == []


def test_nodepool_limits_are_respected(h):
    h.kube.merge_patch(NODE_POOLS, "default", {"spec": {"limits": {"cpu": "4"}}})
    deployment(h, 20)
    h.run(30)
    total = sum(
        int(c["status"]["capacity"]["cpu"])
        for c in h.claims()
        if c.get("status", {}).get("capacity")
    )
    assert 0 < total <= 4


def test_malformed_nodepool_gets_a_condition_and_event_while_others_serve(h):
    bad = nodepool("broken", expireAfter="forever")
    h.create(NODE_POOLS, bad)
    deployment(h, 2)
    h.run(3)
    status = h.nodepool_obj("broken")["status"]
    validation = next(c for c in status["conditions"] if c["type"] == "ValidationSucceeded")
    assert validation["status"] == "False"
    assert "expireAfter" in validation["message"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    events = h.events("FailedValidation")
    assert len(events) == 1
    assert events[0]["involvedObject"]["name"] == "broken"
    claims = h.claims()
    assert claims
    assert {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims} == {"default"}


def test_nodepool_status_resources_count_its_claims(h):
    deployment(h, 3)
    h.run(3)
    status = h.nodepool_obj()["status"]
    assert status["nodes"] == len(h.claims())
    assert status["resources"]["nodes"] == str(len(h.claims()))
    assert h.metric("karpenter_nodepools_usage", nodepool="default", resource_type="nodes") == len(
        h.claims()
    )


def test_gang_pins_the_zone():
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    h.run()
    for i in range(3):
        pod = pending_pod(f"gang-{i}", cpu="1")
        pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "trainers"
        h.create(PODS, pod)
    h.create(
        Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", namespaced=True),
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "trainers", "namespace": "default"},
            "spec": {"minMember": 3},
        },
    )
    h.run(3)
    claims = h.claims()
    assert claims
    assert all(requirement(c, "topology.kubernetes.io/zone") for c in claims)


def test_batcher_is_built_from_settings():
    h = Harness(
        settings=Settings(policy="greedy", batch_idle_duration="3s", batch_max_duration="5s")
    )
    batcher: Batcher = h.manager.provisioner.batcher
    assert batcher.idle.total_seconds() == 3
    assert batcher.max.total_seconds() == 5


# -- PREFERENCE_POLICY and MIN_VALUES_POLICY ------------------------------------------------------


def _types_of(claim: dict[str, Any]) -> list[str]:
    return list(requirement(claim, "node.kubernetes.io/instance-type").get("values", []))


@pytest.mark.parametrize(("policy", "expected"), [("Respect", "c.2xlarge"), ("Ignore", "c.large")])
def test_preference_policy_ignore_drops_preferred_affinity(policy: str, expected: str):
    h = Harness(settings=Settings(policy="greedy", preference_policy=policy))
    h.create(NODE_POOLS, nodepool())
    h.run()
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": ["c.2xlarge"],
                            }
                        ]
                    },
                }
            ]
        }
    }
    h.create(PODS, pending_pod("picky", affinity=prefer))
    h.run(2)
    [claim] = h.claims()
    assert _types_of(claim)[0] == expected


def _min_values_pool() -> dict[str, Any]:
    return nodepool(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 5},
        ]
    )


def test_min_values_strict_launches_nothing_it_cannot_meet():
    h = Harness(settings=Settings(policy="greedy", min_values_policy="Strict"))
    h.create(NODE_POOLS, _min_values_pool())
    h.run()
    h.create(PODS, pending_pod("web-0"))
    h.run(2)
    assert h.claims() == []


def test_min_values_best_effort_relaxes_and_says_so():
    h = Harness(settings=Settings(policy="greedy", min_values_policy="BestEffort"))
    h.create(NODE_POOLS, _min_values_pool())
    h.run()
    h.create(PODS, pending_pod("web-0"))
    h.run(2)
    [claim] = h.claims()
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-min-values-relaxed"] == "true"
    assert set(_types_of(claim)) == {"c.large", "c.xlarge", "c.2xlarge"}
    assert (
        h.metric(
            "karpenter_nodeclaims_created_total",
            reason="provisioned",
            nodepool="default",
            min_values_relaxed="true",
        )
        == 1
    )


def test_the_manager_plans_with_the_settings_policies():
    h = Harness()
    manager = Manager(
        kube=h.kube,
        cloud=h.cloud,
        clock=h.clock,
        settings=Settings(preference_policy="Ignore", min_values_policy="BestEffort"),
        logger=structlog.get_logger(),
        metrics=Metrics(CollectorRegistry()),
    )
    config = manager.provisioner._planner
    assert config.ignore_preferences
    assert config.min_values_best_effort


def test_a_nodepool_whose_nodeclass_is_missing_is_named_in_events():
    h = Harness()
    h.cloud.node_classes = {"default"}
    h.create(NODE_POOLS, nodepool())
    gpu = nodepool(
        "gpu", nodeClassRef={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}
    )
    gpu["spec"]["template"]["metadata"] = {"labels": {"accelerator": "gpu"}}
    h.create(NODE_POOLS, gpu)
    h.run(1)
    h.create(PODS, pending_pod("train", nodeSelector={"accelerator": "gpu"}))
    h.run(30)
    cause = 'NodeClassReady=False: NodeClass "gpu" not found'
    # the NodePool itself: one Warning when it becomes not ready, not one per recheck
    h.run(180)
    not_ready = h.events("NodeClassNotReady")
    assert [(e["involvedObject"]["name"], e["type"], e["message"]) for e in not_ready] == [
        ("gpu", "Warning", f'NodePool "gpu" not ready: {cause}')
    ]
    # the pod: the NodePool and its cause, then why the ready one cannot take it
    [event] = h.events("FailedScheduling")
    assert event["message"].startswith(
        f'Failed to schedule pod, NodePool "gpu" not ready: {cause}; '
    )
    assert 'incompatible with nodepool "default", incompatible requirements' in event["message"]
    assert h.claims() == []


def test_failed_scheduling_names_the_limit_that_ran_out(h):
    h.kube.merge_patch(NODE_POOLS, "default", {"spec": {"limits": {"cpu": "8"}}})
    h.run(1)
    for i in range(12):
        h.create(PODS, pending_pod(f"web-{i}", cpu="1"))
    h.run(30)
    assert h.claims(), "the limit holds some of the pods"
    messages = {e["message"] for e in h.events("FailedScheduling")}
    expected = (
        "Failed to schedule pod, all available instance types exceed limits for nodepool: "
        '"default" (cpu limit 8 reached)'
    )
    assert messages == {expected}


KAI_POD_GROUP = Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced=True)
OVER_QUOTA = {
    "schedulingConditions": [
        {
            "type": "UnschedulableOnNodePool",
            "status": "True",
            "reasons": [
                {
                    "reason": "NonPreemptibleOverQuota",
                    "message": "Non-preemptible workload is over quota",
                }
            ],
        }
    ]
}


def test_a_kai_pod_group_admitted_later_gets_its_nodeclaims_without_a_pod_event():
    """Over quota -> within quota: the PodGroup's status change alone opens the batch."""
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    h.create(
        KAI_POD_GROUP,
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": 2, "queue": "team"},
            "status": OVER_QUOTA,
        },
    )
    for i in range(2):
        pod = pending_pod(f"w-{i}", cpu="1", schedulerName="kai-scheduler")
        pod["metadata"]["annotations"] = {"pod-group-name": "pg"}
        h.create(PODS, pod)
    h.run(60)
    assert h.claims() == []  # held back by KAI: nothing bought

    h.kube.merge_patch(
        KAI_POD_GROUP, "pg", {"status": {"schedulingConditions": []}}, namespace="default"
    )
    assert h.manager.provisioner.batcher.is_open
    h.run(2)  # one batch window (1 s idle), no pod event in between

    claims = h.claims()
    assert claims
    placed = {e["involvedObject"]["name"] for e in h.events("Nominated")}
    assert placed == {"w-0", "w-1"}


def test_a_pod_group_change_that_keeps_its_pods_held_back_opens_no_batch():
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    h.create(
        KAI_POD_GROUP,
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": 1, "queue": "team"},
            "status": OVER_QUOTA,
        },
    )
    pod = pending_pod("w-0", schedulerName="kai-scheduler")
    pod["metadata"]["annotations"] = {"pod-group-name": "pg"}
    h.create(PODS, pod)
    h.run(60)
    h.kube.merge_patch(
        KAI_POD_GROUP, "pg", {"metadata": {"labels": {"touched": "yes"}}}, namespace="default"
    )
    assert not h.manager.provisioner.batcher.is_open
    h.run(60)
    assert h.claims() == []
