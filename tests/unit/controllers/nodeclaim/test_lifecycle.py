"""NodeClaim lifecycle, liveness, termination and garbage collection, with a fake kubelet."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cloudprovider.errors import CreateError, InsufficientCapacityError
from cloudprovider.fake import FakeCloudProvider
from cloudprovider.protocol import LaunchRequest, NodeClassRef
from provisioner.kube.errors import NotFoundError
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, NODES, PODS
from provisioner.runtime.reconciler import Request
from tests.unit.controllers.harness import Harness, nodepool, pending_pod


def condition(claim: dict[str, Any], kind: str) -> str | None:
    for c in claim.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["status"])
    return None


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.create(
        NODE_POOLS,
        nodepool(startupTaints=[{"key": "example.com/agent", "effect": "NoSchedule"}]),
    )
    harness.run()
    harness.create(PODS, pending_pod("web-0", cpu="1"))
    return harness


def only_claim(h: Harness) -> dict[str, Any]:
    claims = h.claims()
    assert len(claims) == 1
    return claims[0]


def test_claim_goes_launched_registered_initialized_ready(h):
    h.run(2)
    claim = only_claim(h)
    assert condition(claim, "Launched") == "True"
    assert claim["status"]["providerID"].startswith("fake://")
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    assert claim["metadata"]["labels"]["topology.kubernetes.io/zone"]
    assert claim["metadata"]["labels"]["karpenter.sh/capacity-type"]
    assert condition(claim, "Registered") is None
    node = h.kubelet(claim)
    h.run(1)
    claim = only_claim(h)
    assert condition(claim, "Registered") == "True"
    assert claim["status"]["nodeName"] == node["metadata"]["name"]
    node = h.kube.get(NODES, node["metadata"]["name"])
    taints = {t["key"] for t in node["spec"]["taints"]}
    assert "karpenter.sh/unregistered" not in taints
    assert "example.com/agent" in taints
    assert node["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
    assert node["metadata"]["ownerReferences"][0]["name"] == claim["metadata"]["name"]
    assert condition(claim, "Initialized") == "Unknown"  # the startup taint is still there
    h.kube.merge_patch(
        NODES,
        node["metadata"]["name"],
        {
            "spec": {
                "taints": [t for t in node["spec"]["taints"] if t["key"] != "example.com/agent"]
            }
        },
    )
    h.run(1)
    claim = only_claim(h)
    assert condition(claim, "Initialized") == "True"
    assert condition(claim, "Ready") == "True"
    node = h.kube.get(NODES, node["metadata"]["name"])
    assert node["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    messages = [c.kwargs["event"] for c in h.capture.calls]
    for message in ("launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"):
        assert message in messages
    assert h.logs("registered nodeclaim")[0]["controller"] == "nodeclaim.lifecycle"
    assert len(h.cloud.create_calls) == 1


def test_insufficient_capacity_deletes_the_claim_and_pods_are_replanned(h):
    h.cloud.next_create_error = InsufficientCapacityError("launching nodeclaim, no capacity")
    h.run(1.5)
    assert h.claims() == []
    assert h.events("InsufficientCapacityError")
    assert h.logs("failed launching nodeclaim")
    h.run(15)
    claim = only_claim(h)
    assert condition(claim, "Launched") == "True"
    assert len(h.cloud.created) == 1


def test_other_launch_errors_retry_without_deleting(h):
    h.cloud.next_create_error = CreateError("boom", reason="LaunchFailed")
    h.run(1.5)
    assert h.logs("failed launching nodeclaim")
    claim = only_claim(h)
    assert condition(claim, "Launched") == "True"
    assert len(h.cloud.create_calls) == 2
    assert len(h.cloud.created) == 1


def test_launch_timeout_deletes_the_claim(h, monkeypatch):
    def failing(self, request):
        raise CreateError("launching nodeclaim, still failing")

    monkeypatch.setattr(FakeCloudProvider, "create", failing)
    h.run(2)
    claim = only_claim(h)
    assert condition(claim, "Launched") == "Unknown"
    h.run(5 * 60)
    assert all(c["metadata"]["uid"] != claim["metadata"]["uid"] for c in h.claims())
    assert (
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="launch_timeout",
            nodepool="default",
            capacity_type="",
            consolidation_policy="",
            termination_mode="forceful",
        )
        >= 1
    )


def test_registration_timeout_deletes_the_claim_and_its_instance(h):
    h.run(2)
    claim = only_claim(h)
    h.run(16 * 60)
    assert all(c["metadata"]["uid"] != claim["metadata"]["uid"] for c in h.claims())
    assert claim["status"]["providerID"] not in h.cloud.created
    assert (
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="registration_timeout",
            nodepool="default",
            capacity_type=claim["metadata"]["labels"]["karpenter.sh/capacity-type"],
            consolidation_policy="",
            termination_mode="forceful",
        )
        >= 1
    )


def test_deleting_a_claim_terminates_node_and_instance(h):
    h.run(2)
    claim = only_claim(h)
    node = h.kubelet(claim)
    h.run(1)
    h.kube.delete(NODE_CLAIMS, claim["metadata"]["name"])
    h.run(1)
    with pytest.raises(NotFoundError):
        h.kube.get(NODE_CLAIMS, claim["metadata"]["name"])
    with pytest.raises(NotFoundError):
        h.kube.get(NODES, node["metadata"]["name"])
    assert claim["status"]["providerID"] not in h.cloud.created
    assert h.logs("deleted node")
    assert h.logs("deleted nodeclaim")
    assert (
        h.metric(
            "karpenter_nodeclaims_terminated_total",
            nodepool="default",
            capacity_type=claim["metadata"]["labels"]["karpenter.sh/capacity-type"],
            zone=claim["metadata"]["labels"]["topology.kubernetes.io/zone"],
        )
        == 1
    )


def test_deleting_the_node_deletes_its_claim(h):
    h.run(2)
    claim = only_claim(h)
    node = h.kubelet(claim)
    h.run(1)
    h.kube.delete(NODES, node["metadata"]["name"])
    h.run(1)
    assert all(c["metadata"]["uid"] != claim["metadata"]["uid"] for c in h.claims())
    assert claim["status"]["providerID"] not in h.cloud.created


def test_restart_in_the_middle_of_launches_leaves_no_duplicate_and_no_orphan():
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    h.run()
    for i in range(12):
        h.create(PODS, pending_pod(f"web-{i}", cpu="1"))
    # the batch closes and claims are created, but the process dies before launching them
    h.run(1)
    claims = h.claims()
    assert claims
    # launch one claim "half-way": the instance exists but the status was never written
    first = claims[0]
    h.cloud.create(
        LaunchRequest(
            name=first["metadata"]["name"],
            uid=first["metadata"]["uid"],
            nodepool="default",
            node_class=NodeClassRef(name="default"),
        )
    )
    h.new_manager()
    h.run(5 * 60)
    claims = h.claims()
    assert len(h.cloud.created) == len(claims)
    assert {c["status"]["providerID"] for c in claims} == set(h.cloud.created)
    names = [c.name for c in h.cloud.created.values()]
    assert len(names) == len(set(names))


def test_gc_deletes_claims_whose_instance_is_gone(h):
    h.run(2)
    claim = only_claim(h)
    h.cloud.created.clear()
    h.run(3 * 60)
    assert all(c["metadata"]["uid"] != claim["metadata"]["uid"] for c in h.claims())
    assert h.logs("garbage collecting nodeclaim with no cloudprovider representation")


def test_gc_terminates_instances_without_claims_after_30s():
    h = Harness()
    h.run()
    orphan = h.cloud.create(
        LaunchRequest(name="ghost", uid="u", nodepool="default", node_class=NodeClassRef(name="x"))
    )
    h.manager.garbage_collection.reconcile(Request())
    assert orphan.provider_id in h.cloud.created  # too young
    h.run(3 * 60)
    assert orphan.provider_id not in h.cloud.created
    assert h.logs("garbage collected instance")


def test_gc_waits_for_the_state_to_sync():
    h = Harness()
    h.manager.state._synced.clear()
    assert h.manager.garbage_collection.reconcile(Request()).requeue_after == timedelta(seconds=1)
