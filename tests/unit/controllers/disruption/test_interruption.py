"""Spot interruption warnings: replace first, drain inside the two-minute window."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from cloudprovider.interruption import DisruptionAction, DisruptionKind, DisruptionRequest
from provisioner.kube.resource import NODE_POOLS, NODES
from tests.unit.controllers.disruption.world import FakeInterruptionSource, World, nodepool

WINDOW = timedelta(minutes=2)


def interrupt(world: World, source: FakeInterruptionSource, kind=DisruptionKind.SPOT_INTERRUPTED):
    (claim,) = world.claims()
    provider_id = claim["status"]["providerID"]
    instance = world.cloud.created[provider_id]
    # the AWS consumer marks the interrupted spot offering unavailable before handing it over
    world.cloud.mark_unavailable("spot", instance.instance_type, instance.zone)
    source.pending.append(
        DisruptionRequest(
            kind=kind,
            action=DisruptionAction.CORDON_AND_DRAIN,
            instance_id=instance.instance_id,
            nodeclaim=claim["metadata"]["name"],
            message_id="m-1",
            event_time=world.clock.now(),
        )
    )
    return claim, provider_id


def interrupt_all(world: World, source: FakeInterruptionSource, claims: list[Any]) -> None:
    """A spot interruption warning for each of ``claims`` at once."""
    for index, claim in enumerate(claims):
        instance = world.cloud.created[claim["status"]["providerID"]]
        world.cloud.mark_unavailable("spot", instance.instance_type, instance.zone)
        source.pending.append(
            DisruptionRequest(
                kind=DisruptionKind.SPOT_INTERRUPTED,
                action=DisruptionAction.CORDON_AND_DRAIN,
                instance_id=instance.instance_id,
                nodeclaim=claim["metadata"]["name"],
                message_id=f"m-{index}",
                event_time=world.clock.now(),
            )
        )


def test_replacement_is_ready_before_the_interrupted_node_is_gone():
    source = FakeInterruptionSource()
    world = World(interruption=source)
    world.create(NODE_POOLS, nodepool(disruption={"consolidateAfter": "Never"}))
    world.run(1)
    world.deploy("web", 10)
    world.run(120)
    claim, provider_id = interrupt(world, source)
    node_name = claim["status"]["nodeName"]
    warned = world.clock.now()
    gone: dict[str, datetime] = {}
    ready_replacement: dict[str, bool] = {}

    def watch(w: World) -> None:
        nodes = {n["metadata"]["name"]: n for n in w.raw(NODES)}
        if node_name in nodes or "at" in gone:
            return
        gone["at"] = w.clock.now()
        ready_replacement["ok"] = any(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
            and "karpenter.sh/initialized" in n["metadata"].get("labels", {})
            for name, n in nodes.items()
        )

    world.checks.append(watch)
    world.run(3)
    node = world.api.get(NODES, node_name)
    assert any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"]["taints"])
    world.run(170)
    assert gone["at"] - warned < WINDOW
    assert ready_replacement["ok"]
    assert provider_id not in world.cloud.created
    assert not world.pending()
    assert (
        world.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="spot_interrupted",
            nodepool="default",
            capacity_type="spot",
            consolidation_policy="",
            termination_mode="forceful",
        )
        == 1
    )
    assert (
        world.metric(
            "karpenter_nodeclaims_created_total",
            reason="spot_interrupted",
            nodepool="default",
            min_values_relaxed="false",
        )
        == 1
    )
    assert world.logs("initiating delete from interruption message")
    warnings = world.events("SpotInterrupted")
    assert {e["involvedObject"]["kind"] for e in warnings} == {"Node", "NodeClaim"}
    assert warnings[0]["message"] == "Spot interruption warning was triggered"


def test_without_capacity_the_node_is_still_drained_inside_the_window():
    source = FakeInterruptionSource()
    world = World(interruption=source)
    world.create(NODE_POOLS, nodepool(disruption={"consolidateAfter": "Never"}))
    world.run(1)
    world.deploy("web", 10)
    world.run(120)
    claim, provider_id = interrupt(world, source)
    world.cloud.mark_all_unavailable()
    warned = world.clock.now()
    world.run(119)
    assert provider_id not in world.cloud.created
    assert {e.key for e in world.kube.evictions}
    assert all(e.at - warned < WINDOW for e in world.kube.evictions)
    assert claim["metadata"]["name"] not in {c["metadata"]["name"] for c in world.claims()}


def test_rebalance_recommendations_are_only_logged():
    source = FakeInterruptionSource()
    world = World(interruption=source)
    world.create(NODE_POOLS, nodepool(disruption={"consolidateAfter": "Never"}))
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    (claim,) = world.claims()
    source.pending.append(
        DisruptionRequest(
            kind=DisruptionKind.REBALANCE_RECOMMENDATION,
            action=DisruptionAction.NO_ACTION,
            instance_id="i-x",
            nodeclaim=claim["metadata"]["name"],
        )
    )
    world.run(300)
    assert [c["metadata"]["name"] for c in world.claims()] == [claim["metadata"]["name"]]
    assert world.logs("ignoring interruption message")
    assert world.events("SpotRebalanceRecommendation")


def two_one_pod_nodes(pool: dict[str, Any]) -> tuple[World, FakeInterruptionSource, list[Any]]:
    """A world with ``pool`` and two NodeClaims, each launched for one 1.2-CPU pod."""
    source = FakeInterruptionSource()
    world = World(interruption=source)
    world.create(NODE_POOLS, pool)
    world.run(1)
    world.deploy("a", 1, cpu="1200m")
    world.run(60)
    world.deploy("b", 1, cpu="1200m")
    world.run(60)
    claims = world.claims()
    assert len(claims) == 2
    return world, source, claims


def test_replacements_are_sized_for_their_own_nodes_pods_only():
    """Two nodes interrupted at once, a pod pending beside them: each replacement is planned
    for the pods of its own node. Planning the other interrupted node's pods, or the pending
    pod, into every replacement bought bigger nodes than needed (and, at a NodePool's limits,
    more than the limits: the 24 h soak saw 1306 of 1200 CPU)."""
    world, source, claims = two_one_pod_nodes(nodepool(disruption={"consolidateAfter": "Never"}))
    interrupt_all(world, source, claims)
    world.deploy("pending", 1, cpu="6")
    world.run(3)
    interrupted = {c["metadata"]["name"] for c in claims}
    types = [
        next(
            r["values"]
            for r in c["spec"]["requirements"]
            if r["key"] == "node.kubernetes.io/instance-type"
        )
        for c in world.claims()
        if c["metadata"]["name"] not in interrupted
    ]
    assert world.logs("initiating replacement from interruption message")
    created = world.metric(
        "karpenter_nodeclaims_created_total",
        reason="spot_interrupted",
        nodepool="default",
        min_values_relaxed="false",
    )
    assert created == 2
    # each replacement may still launch as the smallest type its one pod needs (the 6-CPU
    # pending pod's own NodeClaim cannot)
    assert sum("c.large" in listed for listed in types) == 2, types


def test_replacements_stay_within_the_nodepools_limits():
    """Replace-before-delete at a NodePool's limits: the interrupted NodeClaims still count until
    they are gone, so only the replacements that fit are bought first; the other pod waits for
    an interrupted node to go and is then provisioned, inside the limits throughout."""
    pool = nodepool(disruption={"consolidateAfter": "Never"})
    pool["spec"]["limits"] = {"cpu": "6"}
    world, source, claims = two_one_pod_nodes(pool)
    assert [c["status"]["capacity"]["cpu"] for c in claims] == ["2", "2"]
    held: list[int] = []
    world.checks.append(lambda w: held.append(w.claimed_cpus()))
    interrupt_all(world, source, claims)
    world.run(3)
    created = world.metric(
        "karpenter_nodeclaims_created_total",
        reason="spot_interrupted",
        nodepool="default",
        min_values_relaxed="false",
    )
    assert created == 1  # 2 + 2 held, room for one more c.large under 6 CPU
    world.run(300)
    assert not world.pending()
    assert {c["metadata"]["name"] for c in world.claims()}.isdisjoint(
        c["metadata"]["name"] for c in claims
    )
    assert max(held) <= 6, held
