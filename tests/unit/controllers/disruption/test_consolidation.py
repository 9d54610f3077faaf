"""Consolidation end to end: the manager's controllers in a virtual-time cluster."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.app.settings import Settings
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS
from tests.unit.controllers.disruption.checks import BudgetCheck
from tests.unit.controllers.disruption.world import World, instance_type, nodepool


def condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


def commands(world: World) -> list[str]:
    return [str(log["command"]) for log in world.logs("disrupting node(s)")]


def test_scale_down_from_200_to_60_pods_cuts_cost_within_budgets():
    world = World()
    world.create(NODE_POOLS, nodepool())  # default budget: 10% of the nodes
    world.run(1)
    world.deploy("web", 200, cpu="700m", memory="1Gi")
    world.run(180)
    assert not world.pending()
    before = world.cost()
    nodes_before = len(world.nodes())
    budget = BudgetCheck()
    world.checks.append(budget)
    world.scale("web", 60)
    world.run(15 * 60)
    assert not world.pending()
    assert world.cost() <= 0.6 * before
    assert len(world.nodes()) < nodes_before
    assert budget.peak["default"] >= 1
    assert commands(world)
    assert all(c.startswith("Underutilized/") for c in commands(world))
    assert (
        world.metric(
            "karpenter_voluntary_disruption_decisions_total",
            decision="delete",
            reason="underutilized",
            consolidation_type="single",
        )
        + world.metric(
            "karpenter_voluntary_disruption_decisions_total",
            decision="delete",
            reason="underutilized",
            consolidation_type="multi",
        )
        >= 1
    )


def test_multi_node_consolidation_deletes_several_nodes_in_one_command():
    world = World()
    world.create(
        NODE_POOLS, nodepool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]})
    )
    world.run(1)
    world.deploy("web", 60, cpu="700m", memory="1Gi")
    world.run(180)
    before = len(world.nodes())
    assert before >= 3
    world.checks.append(BudgetCheck())
    world.scale("web", 8)
    world.run(120)
    multi = [log for log in world.logs("disrupting node(s)") if log["disrupted-node-count"] >= 2]
    assert multi
    assert multi[0]["decision"] == "delete"
    assert len(world.nodes()) < before


def test_replacement_is_initialized_before_the_candidate_is_deleted():
    world = World()
    world.create(NODE_POOLS, nodepool(capacity_types=("on-demand",)))
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    (original,) = world.claims()
    seen: dict[str, bool] = {}

    def replacement_ready_first(w: World) -> None:
        claims = {c["metadata"]["name"]: c for c in w.raw(NODE_CLAIMS)}
        mine = claims.get(original["metadata"]["name"])
        if mine is None or not mine["metadata"].get("deletionTimestamp") or seen:
            return
        others = [c for n, c in claims.items() if n != original["metadata"]["name"]]
        seen["checked"] = True
        assert others
        assert all(condition(c, "Initialized") == "True" for c in others)

    world.checks.append(replacement_ready_first)
    world.scale("web", 2)
    world.run(300)
    assert seen
    (claim,) = world.claims()
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "c.large"
    assert world.cost() == pytest.approx(0.085)
    (command,) = commands(world)
    assert command.startswith("Underutilized/")
    assert ": replace: nodepools=[default]: [ip-" in command
    assert "-> [1 replacement] (savings: $0.60)" in command
    requirements = {r["key"]: r["values"] for r in claim["spec"]["requirements"] if "values" in r}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert (
        world.metric(
            "karpenter_nodeclaims_created_total",
            reason="underutilized",
            nodepool="default",
            min_values_relaxed="false",
        )
        == 1
    )
    assert (
        world.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="underutilized",
            nodepool="default",
            capacity_type="on-demand",
            consolidation_policy="WhenEmptyOrUnderutilized",
            termination_mode="graceful",
        )
        == 1
    )
    assert {e["message"] for e in world.events("Evicted")} == {"Evicted pod: Underutilized"}
    assert world.events("DisruptionLaunching")[0]["message"] == "Launching NodeClaim: Underutilized"
    assert world.events("DisruptionTerminating")
    assert world.events("ConsolidationCandidate")


@pytest.mark.parametrize("policy", ["greedy", "jointer"])
def test_spot_to_spot_is_off_by_default(policy: str):
    # the optimiser's simulations never offer the spot pods spot capacity: Karpenter's message
    world = World(settings=Settings(policy=policy))
    world.create(NODE_POOLS, nodepool())
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 2)
    world.run(120)
    assert not commands(world)
    messages = {e["message"] for e in world.events("Unconsolidatable")}
    assert (
        "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
        in messages
    )


def test_spot_to_spot_needs_fifteen_cheaper_types():
    settings = Settings(policy="greedy", feature_gates="SpotToSpotConsolidation=true")
    world = World(settings=settings)
    world.create(NODE_POOLS, nodepool())
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 2)
    world.run(120)
    assert not commands(world)
    messages = {e["message"] for e in world.events("Unconsolidatable")}
    assert any(m.startswith("SpotToSpotConsolidation requires 15 cheaper") for m in messages)


def test_spot_to_spot_launches_the_fifteen_cheapest_types():
    types = [instance_type(f"m.{i:02d}", 2 + (i % 3), 4, 0.05 + 0.002 * i) for i in range(20)]
    types.append(instance_type("big", 32, 64, 2.0))
    settings = Settings(policy="greedy", feature_gates="SpotToSpotConsolidation=true")
    world = World(settings=settings, types=types)
    world.create(NODE_POOLS, nodepool())
    world.run(1)
    world.deploy("web", 50, cpu="1", memory="1Gi")
    world.run(120)
    assert {
        c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in world.claims()
    } == {"big"}
    world.scale("web", 1)
    world.run(300)
    (claim,) = world.claims()
    assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] != "big"
    assert claim["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    replacements = [
        log for log in world.logs("created nodeclaim") if log["controller"] == "disruption.queue"
    ]
    assert len(replacements) == 1
    requirements = {r["key"]: r.get("values") for r in claim["spec"]["requirements"]}
    assert len(requirements["node.kubernetes.io/instance-type"]) == 15
    assert requirements["karpenter.sh/capacity-type"] == ["spot"]


def test_when_empty_policy_leaves_underutilized_nodes_alone():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "0s", "consolidationPolicy": "WhenEmpty"},
        ),
    )
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 2)
    world.run(300)
    assert not commands(world)
    world.scale("web", 0)
    world.run(120)
    assert commands(world)
    assert commands(world)[0].startswith("Empty/")
    assert not world.nodes()


def test_consolidate_after_never_disables_consolidation():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "Never"}),
    )
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 0)
    world.run(600)
    assert not commands(world)
    assert len(world.nodes()) == 1


def test_consolidate_after_waits_for_quiet_since_the_last_pod_event():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "5m"}),
    )
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 0)
    world.run(200)
    assert not commands(world)
    (claim,) = world.claims()
    assert claim["status"].get("lastPodEventTime")
    assert condition(claim, "Consolidatable") is None
    world.run(200)
    assert commands(world)
    assert commands(world)[0].startswith("Empty/")


def test_emptiness_is_abandoned_when_pods_arrive_during_validation():
    world = World()
    world.create(NODE_POOLS, nodepool(capacity_types=("on-demand",)))
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    world.scale("web", 0)
    # the command waits 15 s for validation; new pods land on the node meanwhile
    for _ in range(200):
        world.run(0.5)
        if world.events("ConsolidationCandidate"):
            break
    assert world.events("ConsolidationCandidate")
    world.scale("web", 3)
    world.run(30)
    assert world.events("ConsolidationRejected")
    assert (
        world.metric(
            "karpenter_voluntary_disruption_failed_validations_total", consolidation_type="empty"
        )
        >= 1
    )
    assert len(world.nodes()) == 1
    assert not world.kube.evictions


def test_zero_budget_blocks_and_says_so():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "0"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    world.scale("web", 0)
    world.run(120)
    assert not commands(world)
    assert any(
        e["message"] == "No allowed disruptions for disruption reason Empty due to blocking budget"
        for e in world.events("DisruptionBlocked")
    )
    assert (
        world.metric("karpenter_nodepools_allowed_disruptions", nodepool="default", reason="empty")
        == 0
    )


def test_balanced_policy_approves_a_move_worth_its_disruption():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "0s", "consolidationPolicy": "Balanced"},
        ),
    )
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    world.scale("web", 2)
    world.run(300)
    (command,) = commands(world)
    assert ": replace: " in command
    assert world.cost() == pytest.approx(0.085)


@pytest.mark.parametrize(("cpu_limit", "replaced"), [("16", False), ("18", True)])
def test_a_replacement_fits_the_limits_beside_the_node_it_replaces(cpu_limit, replaced):
    """The candidate still counts against its NodePool's limits until it is gone, so a
    replacement is made only when both fit: 16 + 2 CPU does not fit 16, does fit 18."""
    world = World()
    pool = nodepool(capacity_types=("on-demand",))
    pool["spec"]["limits"] = {"cpu": cpu_limit}
    world.create(NODE_POOLS, pool)
    world.run(1)
    world.deploy("web", 20)
    world.run(120)
    (original,) = world.claims()
    assert original["status"]["capacity"]["cpu"] == "16"
    held: list[int] = []
    world.checks.append(lambda w: held.append(w.claimed_cpus()))
    world.scale("web", 2)
    world.run(300)
    names = [c["metadata"]["name"] for c in world.claims()]
    assert (original["metadata"]["name"] not in names) is replaced
    assert max(held) <= int(cpu_limit), held
    created = world.metric(
        "karpenter_nodeclaims_created_total",
        reason="underutilized",
        nodepool="default",
        min_values_relaxed="false",
    )
    assert (created or 0) == (1 if replaced else 0)
