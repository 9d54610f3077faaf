"""node.termination: taint, drain in Karpenter's tiers through the Eviction API, PDB retries,
terminationGracePeriod, protected pods and gangs, then instance termination."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.controllers.node.termination import drain_tier
from provisioner.kube.rbac import PolicyRule, chart_rules
from provisioner.kube.resource import (
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
)
from tests.unit.controllers.disruption.world import World, nodepool, pod


def world_with_node(**pool: Any) -> tuple[World, dict[str, Any]]:
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "Never"}, **pool),
    )
    world.run(1)
    world.deploy("seed", 1, cpu="100m")
    world.run(60)
    (claim,) = world.claims()
    return world, claim


def place(world: World, body: dict[str, Any], node: str) -> str:
    body["spec"]["nodeName"] = node
    world.create(PODS, body)
    namespace = body["metadata"]["namespace"]
    world._start_pod(namespace, body["metadata"]["name"])
    return f"{namespace}/{body['metadata']['name']}"


def daemon(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "ds",
            "controller": True,
        }
    ]
    return body


def critical(body: dict[str, Any]) -> dict[str, Any]:
    body["spec"]["priorityClassName"] = "system-node-critical"
    return body


def names(world: World) -> set[str]:
    return {c["metadata"]["name"] for c in world.claims()}


def delete_claim(world: World, claim: dict[str, Any]) -> None:
    world.api.delete(NODE_CLAIMS, claim["metadata"]["name"])


@pytest.mark.parametrize(
    ("body", "tier"),
    [
        pytest.param(pod("a"), 0, id="plain"),
        pytest.param(daemon(pod("b")), 1, id="daemonset"),
        pytest.param(critical(pod("c")), 2, id="critical"),
        pytest.param(critical(daemon(pod("d"))), 3, id="critical-daemonset"),
    ],
)
def test_drain_tiers(body, tier):
    assert drain_tier(parse_object(Pod, body, kind="Pod")) == tier


def test_pods_are_evicted_tier_by_tier():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    keys = {
        "critical-ds": place(world, critical(daemon(pod("critical-ds", cpu="10m"))), node),
        "ds": place(world, daemon(pod("ds", cpu="10m")), node),
        "critical": place(world, critical(pod("critical", cpu="10m")), node),
        "plain": place(world, pod("plain", cpu="10m"), node),
    }
    world.replicasets.clear()
    delete_claim(world, claim)
    world.run(60)
    order = [e.key for e in world.kube.evictions]
    positions = {name: order.index(key) for name, key in keys.items()}
    assert positions["plain"] < positions["ds"] < positions["critical"] < positions["critical-ds"]
    times = {name: world.kube.evictions[positions[name]].at for name in keys}
    assert times["plain"] <= times["ds"] <= times["critical"] <= times["critical-ds"]
    assert node not in {n["metadata"]["name"] for n in world.nodes()}
    assert claim["metadata"]["name"] not in names(world)
    assert claim["status"]["providerID"] not in world.cloud.created
    assert world.logs("tainted node")
    assert world.logs("deleted node")
    assert world.logs("deleted nodeclaim")
    assert world.metric("karpenter_pods_eviction_requests_total", code="200") == len(order)
    assert world.metric("karpenter_nodes_drained_total", nodepool="default") == 1


def test_the_node_is_tainted_and_excluded_from_load_balancers_while_draining():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    place(world, pod("db-0", labels={"app": "db"}), node)
    world.pdb("db", {"app": "db"}, minAvailable=1)
    delete_claim(world, claim)
    world.run(5)
    found = world.api.get(NODES, node)
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in found["spec"]["taints"]
    assert (
        found["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"]
        == "karpenter"
    )
    stored = world.api.get(NODE_CLAIMS, claim["metadata"]["name"])
    drained = next(c for c in stored["status"]["conditions"] if c["type"] == "Drained")
    assert (drained["status"], drained["reason"]) == ("Unknown", "Draining")


def test_pdb_refusals_are_retried_with_backoff_until_allowed():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    place(world, pod("db-0", labels={"app": "db"}), node)
    world.pdb("db", {"app": "db"}, minAvailable=1)
    delete_claim(world, claim)
    world.run(30)
    attempts = [(t, code) for t, key, code in world.kube.eviction_attempts if key == "default/db-0"]
    assert len(attempts) >= 4
    assert {code for _, code in attempts} == {"TooManyRequestsError"}
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(attempts)]
    assert gaps[-1] > gaps[0]
    assert max(gaps) <= timedelta(seconds=10)
    assert world.metric("karpenter_pods_eviction_requests_total", code="429") == len(attempts)
    assert any(
        e["message"] == "Failed to drain node, evicting pod violates a PDB (Pod=default/db-0)"
        for e in world.events("FailedDraining")
    )
    assert node in {n["metadata"]["name"] for n in world.nodes()}
    world.api.delete(POD_DISRUPTION_BUDGETS, "db", namespace="default")
    world.run(30)
    assert "default/db-0" in {e.key for e in world.kube.evictions}
    assert claim["metadata"]["name"] not in names(world)


def test_protected_pods_stall_the_drain_without_a_grace_period():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    place(world, pod("keep", annotations={"karpenter.sh/do-not-disrupt": "true"}), node)
    kai = pod("serve", annotations={"pod-group-name": "pg"}, schedulerName="kai-scheduler")
    kai["spec"]["priorityClassName"] = "inference"
    place(world, kai, node)
    delete_claim(world, claim)
    world.run(30 * 60)
    evicted = {e.key for e in world.kube.evictions}
    assert "default/keep" not in evicted
    assert "default/serve" not in evicted
    assert node in {n["metadata"]["name"] for n in world.nodes()}
    assert world.events("FailedDraining")


def test_grace_period_deletes_stalled_pods_at_the_deadline():
    world, claim = world_with_node(terminationGracePeriod="2m")
    node = claim["status"]["nodeName"]
    body = pod("keep", annotations={"karpenter.sh/do-not-disrupt": "true"})
    body["spec"]["terminationGracePeriodSeconds"] = 30
    place(world, body, node)
    deleted_at = world.clock.now()
    delete_claim(world, claim)
    world.run(60)
    assert "default/keep" in world.pod_node()
    stored = world.api.get(NODE_CLAIMS, claim["metadata"]["name"])
    assert stored["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
    world.run(60)
    assert "default/keep" not in world.pod_node()
    (disrupted,) = [e for e in world.events("Disrupted") if e["involvedObject"]["name"] == "keep"]
    assert "bypasses the PDB of the pod and the do-not-disrupt annotation" in disrupted["message"]
    assert "default/keep" not in {e.key for e in world.kube.evictions}
    world.run(30)
    assert claim["metadata"]["name"] not in names(world)
    assert world.clock.now() - deleted_at <= timedelta(minutes=3)


def test_a_forbidden_force_delete_is_logged_and_evented_not_swallowed(kube_rbac_rules):
    # The chart without `delete` on pods (the bug of issue 18): the API answers 403.
    without = [
        PolicyRule(r.api_groups, r.resources, r.verbs - {"delete"}, namespace=r.namespace)
        if r.resources == {"pods"}
        else r
        for r in chart_rules()
    ]
    kube_rbac_rules(without)
    world, claim = world_with_node(terminationGracePeriod="2m")
    node = claim["status"]["nodeName"]
    body = pod("keep", annotations={"karpenter.sh/do-not-disrupt": "true"})
    body["spec"]["terminationGracePeriodSeconds"] = 30
    place(world, body, node)
    delete_claim(world, claim)
    world.run(150)
    assert "default/keep" in world.pod_node()
    messages = [e["message"] for e in world.events("FailedDraining")]
    forbidden = [m for m in messages if "deleting pod default/keep" in m]
    assert forbidden, messages
    assert 'pods "keep" is forbidden' in forbidden[0], forbidden[0]
    assert "cannot delete resource" in forbidden[0]
    logged = [c.kwargs for c in world.capture.calls if c.method_name == "error"]
    assert any(
        entry.get("event") == "failed deleting pod for termination grace period"
        and "403" in entry.get("error", "")
        for entry in logged
    ), logged


def test_a_gang_member_is_evicted_only_with_its_whole_gang():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    # a second node that stays
    world.deploy("filler", 30, cpu="500m")
    world.run(60)
    other = next(n["metadata"]["name"] for n in world.nodes() if n["metadata"]["name"] != node)
    world.replicasets.clear()
    gang = []
    for i, target in enumerate([node, node, other]):
        member = pod(
            f"gang-{i}",
            cpu="100m",
            labels={
                "app": "gang",
                "leaderworkerset.sigs.k8s.io/name": "gang",
                "leaderworkerset.sigs.k8s.io/group-index": "0",
            },
            annotations={"leaderworkerset.sigs.k8s.io/size": "3"},
        )
        gang.append(place(world, member, target))
    delete_claim(world, claim)
    world.run(30)
    evictions = {e.key: e.at for e in world.kube.evictions if e.key in gang}
    assert set(evictions) == set(gang)
    assert len(set(evictions.values())) == 1


def test_a_notready_node_whose_instance_is_gone_is_not_drained():
    world, claim = world_with_node()
    node = claim["status"]["nodeName"]
    place(world, pod("stuck", labels={"app": "db"}), node)
    world.pdb("db", {"app": "db"}, minAvailable=1)
    world.api.patch_status(
        NODES, node, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    world.cloud.created.pop(claim["status"]["providerID"])
    delete_claim(world, claim)
    world.run(30)
    assert not world.kube.evictions
    assert claim["metadata"]["name"] not in names(world)
    assert node not in {n["metadata"]["name"] for n in world.nodes()}
