"""nodeclaim.podevents (lastPodEventTime) and nodeclaim.disruption (Consolidatable, Drifted)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from provisioner.kube.event import parse_time
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, PODS
from tests.unit.controllers.disruption.world import World, nodepool, pod


def field(obj: dict[str, Any], kind: str, name: str) -> str | None:
    found = condition(obj, kind)
    return None if found is None else str(found[name])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def quiet_world(consolidate_after: str = "2m") -> World:
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": consolidate_after, "budgets": [{"nodes": "0"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 3)
    world.run(60)
    return world


def test_pod_events_stamp_the_nodeclaim_and_are_deduplicated():
    world = quiet_world()
    (claim,) = world.claims()
    first = parse_time(claim["status"]["lastPodEventTime"])
    world.create(PODS, pod("late-1", cpu="50m"))
    world.run(3)
    (claim,) = world.claims()
    second = parse_time(claim["status"]["lastPodEventTime"])
    assert second > first
    world.create(PODS, pod("late-2", cpu="50m"))
    world.run(2)
    (claim,) = world.claims()
    assert parse_time(claim["status"]["lastPodEventTime"]) == second  # inside the 10 s window
    world.run(15)
    (claim,) = world.claims()
    third = parse_time(claim["status"]["lastPodEventTime"])
    assert third - second >= timedelta(seconds=10)  # stamped when the window closed


def test_consolidatable_follows_consolidate_after():
    world = quiet_world("2m")
    (claim,) = world.claims()
    assert condition(claim, "Consolidatable") is None
    world.run(130)
    (claim,) = world.claims()
    assert field(claim, "Consolidatable", "status") == "True"
    assert world.logs("marking consolidatable")
    world.create(PODS, pod("late", cpu="50m"))
    world.run(5)
    (claim,) = world.claims()
    assert condition(claim, "Consolidatable") is None
    assert world.logs("removing consolidatable status condition")


def test_requirements_drift_is_detected():
    world = quiet_world()
    pool = world.nodepool_obj()
    requirements = pool["spec"]["template"]["spec"]["requirements"]
    requirements.append({"key": "team-size", "operator": "In", "values": ["large"]})
    world.api.merge_patch(
        NODE_POOLS,
        "default",
        {"spec": {"template": {"spec": {"requirements": requirements}}}},
        resource_version=pool["metadata"]["resourceVersion"],
    )
    world.run(5)
    (claim,) = world.api.list(NODE_CLAIMS).items
    assert field(claim, "Drifted", "reason") == "RequirementsDrifted"
    assert world.logs("marking drifted")
