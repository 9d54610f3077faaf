"""The command queue: replacements first, rollback when they fail, stale marks removed."""

from __future__ import annotations

from typing import Any

from cloudprovider.errors import InsufficientCapacityError
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, NODES
from tests.unit.controllers.disruption.world import World, nodepool


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def tainted(world: World, node: str) -> bool:
    found = world.api.get(NODES, node)
    return any(t["key"] == "karpenter.sh/disrupted" for t in found["spec"].get("taints") or [])


def oversized(world: World) -> dict[str, Any]:
    world.create(NODE_POOLS, nodepool(capacity_types=("on-demand",)))
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    (claim,) = world.claims()
    return claim


def test_a_lost_replacement_rolls_the_command_back():
    world = World()
    claim = oversized(world)
    node = claim["status"]["nodeName"]
    world.cloud.next_create_error = InsufficientCapacityError("no capacity")
    world.scale("web", 2)
    for _ in range(120):
        world.run(1)
        if world.logs("failed to disrupt nodes"):
            break
    (failure,) = world.logs("failed to disrupt nodes")
    assert "was lost" in failure["error"]
    assert not tainted(world, node)
    stored = world.api.get(NODE_CLAIMS, claim["metadata"]["name"])
    assert condition(stored, "DisruptionReason") is None
    assert not stored["metadata"].get("deletionTimestamp")
    assert not world.kube.evictions
    assert (
        world.metric(
            "karpenter_voluntary_disruption_queue_failures_total",
            decision="replace",
            reason="underutilized",
            consolidation_type="single",
        )
        == 1
    )
    world.run(300)  # the next attempt succeeds
    assert claim["metadata"]["name"] not in {c["metadata"]["name"] for c in world.claims()}


def test_replacements_that_never_initialize_time_out():
    world = World(node_startup=10**6)
    world.create(NODE_POOLS, nodepool(capacity_types=("on-demand",)))
    world.run(1)
    world.deploy("web", 20)
    world.run(5)
    # register the first node by hand: the kubelet is slow for everything else
    (claim,) = world.claims()
    world._register(claim["metadata"]["name"])
    world.run(60)
    node = f"ip-{claim['metadata']['name']}"
    world.scale("web", 2)
    world.run(60)
    assert tainted(world, node)
    for _ in range(11 * 60):
        world.run(1)
        if world.logs("failed to disrupt nodes"):
            break
    assert "timed out" in world.logs("failed to disrupt nodes")[0]["error"]
    assert not tainted(world, node)  # rolled back (a new attempt may follow)


def test_stale_disrupted_taints_are_removed():
    world = World()
    claim = oversized(world)
    node = f"ip-{claim['metadata']['name']}"
    current = world.api.get(NODES, node)
    world.api.merge_patch(
        NODES,
        node,
        {
            "spec": {
                "taints": [
                    *current["spec"].get("taints", []),
                    {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
                ]
            }
        },
        resource_version=current["metadata"]["resourceVersion"],
    )
    assert tainted(world, node)
    world.run(15)
    assert not tainted(world, node)
