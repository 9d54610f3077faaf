"""Consolidation is not recomputed on an unchanged cluster (Karpenter's ``ConsolidationState``)."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest

from bench import consolidation as bench
from provisioner.controllers.disruption import methods
from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.disruption.consolidation import (
    MultiNodeConsolidation,
    SingleNodeConsolidation,
)
from provisioner.controllers.disruption.consolidationstate import ConsolidationState
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.methods import Method, MethodContext
from provisioner.controllers.disruption.simulations import SimulationCache
from provisioner.kube.resource import NODE_POOLS, PODS
from provisioner.state.cluster import ClusterState
from tests.unit.controllers.disruption.objects import (
    NOW,
    catalog_of,
    claim,
    node,
    running,
    state_of,
)
from tests.unit.controllers.disruption.test_methods import context, lightly_used
from tests.unit.controllers.disruption.world import World, nodepool, pod

# -- the state on its own ----------------------------------------------------------------------


def cluster() -> list[dict[str, Any]]:
    return [
        nodepool(),
        claim("a"),
        node("a"),
        claim("b"),
        node("b"),
        running(pod("web-1"), "node-a"),
        running(pod("web-2"), "node-b"),
        pod("pending-1"),
    ]


def observed(state: ClusterState, tracker: ConsolidationState, seconds: float = 0) -> bool:
    now = NOW + timedelta(seconds=seconds)
    facts = ClusterFacts.build(state.snapshot(now), now, frozenset())
    return tracker.observe(facts, frozenset(), now)


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return copy.deepcopy(
        next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    )


def test_changes_karpenter_ignores_leave_the_state_alone():
    objects = cluster()
    state = state_of(objects)
    tracker = ConsolidationState()
    assert observed(state, tracker)  # the first look always counts
    first = tracker.state(NOW)
    assert not observed(state, tracker, 1)
    relabelled = find(objects, "Pod", "web-1")
    relabelled["metadata"]["labels"]["version"] = "2"
    state.apply_object(relabelled)
    heartbeat = find(objects, "Node", "node-a")
    heartbeat["metadata"]["annotations"]["heartbeat"] = "1"
    state.apply_object(heartbeat)
    state.apply_object(pod("pending-2"))  # a new pending pod
    assert not observed(state, tracker, 2)
    assert tracker.state(NOW + timedelta(seconds=2)) == first


def test_every_change_consolidation_depends_on_moves_the_state():
    def changes() -> list[tuple[str, Any]]:
        objects = cluster()
        moved = find(objects, "Pod", "pending-1")
        terminal = find(objects, "Pod", "web-2")
        terminal["status"]["phase"] = "Succeeded"
        uninitialized = claim("a", initialized=False)
        pool = nodepool()
        pool["metadata"]["generation"] = 2
        return [
            ("bound", lambda s: s.apply_object(running(moved, "node-a"))),
            (
                "bound pod deleted",
                lambda s: s.apply_object(find(objects, "Pod", "web-1"), deleted=True),
            ),
            (
                "pending pod deleted",
                lambda s: s.apply_object(find(objects, "Pod", "pending-1"), deleted=True),
            ),
            ("terminal", lambda s: s.apply_object(terminal)),
            ("node added", lambda s: (s.apply_object(claim("c")), s.apply_object(node("c")))),
            (
                "node removed",
                lambda s: s.apply_object(find(objects, "Node", "node-b"), deleted=True),
            ),
            (
                "nodeclaim removed",
                lambda s: s.apply_object(find(objects, "NodeClaim", "b"), deleted=True),
            ),
            ("initialized", lambda s: s.apply_object(uninitialized)),
            ("deleting", lambda s: s.apply_object(claim("a", deleting=True))),
            ("nodepool", lambda s: s.apply_object(pool)),
        ]

    for name, change in changes():
        state = state_of(cluster())
        tracker = ConsolidationState()
        observed(state, tracker)
        change(state)
        assert observed(state, tracker, 30), name
        assert tracker.state(NOW + timedelta(seconds=30)) == NOW + timedelta(seconds=30), name


def test_a_command_taking_a_node_moves_the_state():
    state = state_of(cluster())
    tracker = ConsolidationState()
    observed(state, tracker)
    facts = ClusterFacts.build(state.snapshot(NOW), NOW, frozenset())
    assert tracker.observe(facts, frozenset({"a"}), NOW)


def test_the_state_moves_on_its_own_after_five_minutes():
    tracker = ConsolidationState()
    budgets = {"default": 1}
    tracker.mark_consolidated("multi", frozenset({"a", "b"}), budgets, NOW)
    later = NOW + timedelta(minutes=4)
    assert tracker.is_consolidated("multi", frozenset({"a", "b"}), budgets, later)
    assert not tracker.is_consolidated("multi", frozenset({"a"}), budgets, later)
    assert not tracker.is_consolidated(
        "multi", frozenset({"a", "b"}), budgets, NOW + timedelta(minutes=5)
    )


# -- the controller -----------------------------------------------------------------------------


class Counting:
    """A method that counts how often it computes."""

    def __init__(self, inner: Method, counts: Counter[str]) -> None:
        self.inner = inner
        self.counts = counts
        self.reason = inner.reason
        self.consolidation_type = inner.consolidation_type

    def should_disrupt(self, candidate: Candidate) -> bool:
        return self.inner.should_disrupt(candidate)

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> object:
        self.counts[self.consolidation_type or self.reason] += 1
        return self.inner.compute(context, budgets, candidates)


def settled() -> tuple[World, Counter[str]]:
    """Well-used nodes consolidation can do nothing about, its methods counted."""
    world = World()
    world.create(NODE_POOLS, nodepool(disruption={"consolidateAfter": "0s"}))
    world.run(1)
    world.deploy("web", 4, cpu="1700m", memory="1Gi")
    world.run(300)
    assert not world.pending()
    assert not world.logs("disrupting node(s)")
    counts: Counter[str] = Counter()
    controller = world.manager.disruption.disruption
    controller.methods = tuple(Counting(m, counts) for m in controller.methods)
    for _ in range(40):  # until the state moves on its own: a known start of its 5 minutes
        world.run(10)
        if computed(counts):
            break
    assert counts == Counter({"multi": 1, "single": 1})
    counts.clear()
    return world, counts


def computed(counts: Counter[str]) -> int:
    return counts["multi"] + counts["single"]


def test_an_unchanged_cluster_is_not_consolidated_again():
    world, counts = settled()
    world.run(120)
    assert computed(counts) == 0
    # neither are changes Karpenter does not count: a pod relabelled, a node annotated
    web = world.pods()[0]
    world.api.merge_patch(
        PODS,
        web["metadata"]["name"],
        {"metadata": {"labels": {"version": "2"}}},
        namespace=web["metadata"]["namespace"],
    )
    world.run(60)
    assert computed(counts) == 0
    assert not world.logs("disrupting node(s)")


def test_a_pod_change_makes_consolidation_run_again():
    world, counts = settled()
    world.run(60)
    web = world.pods()[0]
    world.api.delete(PODS, web["metadata"]["name"], namespace=web["metadata"]["namespace"])
    world.run(60)
    assert counts["multi"] >= 1
    assert counts["single"] >= 1


def test_a_nodepool_change_makes_consolidation_run_again():
    world, counts = settled()
    world.run(60)
    world.api.merge_patch(NODE_POOLS, "default", {"spec": {"weight": 10}})
    world.run(30)
    assert counts["multi"] == 1
    assert counts["single"] == 1


def test_a_new_node_makes_consolidation_run_again():
    world, counts = settled()
    world.run(60)
    world.scale("web", 6)
    nodes = len(world.nodes())
    world.run(120)
    assert len(world.nodes()) > nodes
    assert computed(counts) >= 1


def test_consolidation_runs_again_after_five_minutes():
    world, counts = settled()
    world.run(4 * 60)
    assert computed(counts) == 0
    world.run(90)
    assert computed(counts) == 2


def test_the_five_minute_recheck_of_an_unchanged_cluster_reuses_its_simulations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catalog reloaded after its TTL is the same catalog: nothing is simulated again."""
    world, counts = settled()
    simulated: list[int] = []
    real = methods.simulate  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> Any:
        simulated.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(methods, "simulate", counting)
    world.run(4 * 60 + 90)
    assert computed(counts) == 2  # the methods ran again ...
    assert simulated == []  # ... on the outcomes of the last look
    world.scale("web", 5)  # a change: simulated afresh
    world.run(120)
    assert simulated


# -- what a method leaves to the next pass ------------------------------------------------------


def test_a_method_stopped_by_its_timeout_is_incomplete():
    ctx, candidates, _, _ = context(lightly_used(3))
    SingleNodeConsolidation().compute(ctx, {"default": 0}, candidates)  # held back by a budget
    assert not ctx.incomplete
    ticks = iter(range(0, 10_000, 1000))
    ctx.monotonic = lambda: float(next(ticks))
    assert SingleNodeConsolidation().compute(ctx, {"default": 3}, candidates) is None
    assert ctx.incomplete


def test_a_method_held_back_by_a_budget_runs_again_when_the_budget_changes():
    tracker = ConsolidationState()
    wanted = frozenset({"a", "b"})
    tracker.mark_consolidated("multi", wanted, {"default": 0}, NOW)
    assert tracker.is_consolidated("multi", wanted, {"default": 0}, NOW + timedelta(minutes=1))
    assert not tracker.is_consolidated("multi", wanted, {"default": 1}, NOW + timedelta(minutes=1))


def test_simulations_are_reused_only_in_the_same_world():
    ctx, candidates, _, _ = context(lightly_used(4))
    cache = SimulationCache()
    ctx.cache = cache
    cache.scope(1, ctx.catalog, frozenset(), ctx.planner)
    first = MultiNodeConsolidation().compute(ctx, {"default": 4}, candidates)
    run = ctx.simulations
    assert run >= 2
    assert ctx.reused == 0
    again = MultiNodeConsolidation().compute(ctx, {"default": 4}, candidates)
    assert ctx.simulations == run  # nothing planned again
    assert ctx.reused == run
    assert first is not None
    assert again is not None
    assert [c.name for c in again.candidates] == [c.name for c in first.candidates]
    assert again.savings == first.savings
    for changed in (
        (2, ctx.catalog, frozenset(), ctx.planner),  # the cluster moved
        (2, catalog_of(ctx.facts), frozenset(), ctx.planner),  # another catalog
        (2, ctx.catalog, frozenset({"n9"}), ctx.planner),  # a node leaving
    ):
        cache.scope(*changed)
        assert len(cache) == 0
        MultiNodeConsolidation().compute(ctx, {"default": 4}, candidates)
        assert len(cache) > 0


def test_a_second_bench_pass_on_the_unchanged_cluster_reuses_the_first():
    state = bench.state_of(bench.cluster(bench.Shape(nodes=60, pods_per_node=6)))
    reuse = bench.Reuse()
    first = bench.full_pass(state, "greedy", reuse=reuse)
    again = bench.full_pass(state, "greedy", reuse=reuse)
    alone = bench.full_pass(state, "greedy")
    assert first.commands == alone.commands  # the first pass is a full pass
    assert first.simulations == alone.simulations > 0
    assert again.commands == first.commands
    assert again.simulations == 0
    assert again.reused == first.simulations
