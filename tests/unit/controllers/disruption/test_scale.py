"""Consolidation at scale (issue 21): shrinking an underutilised cluster, no multi-node cap for
Jointer's policy, and the shortcuts a pass takes at thousands of nodes giving the same answers."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bench import consolidation as bench
from provisioner.controllers.disruption.consolidation import MultiNodeConsolidation
from provisioner.controllers.disruption.facts import ClusterFacts, PdbLimits
from provisioner.controllers.disruption.rescheduling import _as_pending, _without
from provisioner.controllers.provisioning.builder import _ExistingFitIndex, _ExistingNode
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.scheduling.resources import fits
from tests.unit.controllers.disruption.objects import claim, node, pod, running
from tests.unit.controllers.disruption.test_methods import context, lightly_used


def test_an_aws_9207_shaped_cluster_shrinks_by_half_within_its_budgets() -> None:
    """50 nodes at ~35 % use (aws#9207): passes until none finds a command leave <= 25 nodes."""
    objects = bench.underutilised_9207(50)
    result = bench.converge(objects, "greedy")
    assert result.nodes_before == 50
    assert result.nodes_after <= 25, result
    assert result.cost_after <= result.cost_before / 2, result
    assert result.largest <= 5  # the default budget: 10 % of 50 nodes per command


def test_jointer_policy_searches_past_karpenters_multi_node_cap() -> None:
    ctx, candidates, _, _ = context(lightly_used(6))
    capped = replace(ctx.config, multi_node_max_candidates=3)
    ctx.config = capped
    greedy = MultiNodeConsolidation().compute(ctx, {"default": 6}, candidates)
    assert greedy is not None
    assert len(greedy.candidates) == 3
    ctx.planner = PlannerConfig(
        policy="jointer", time_limit_seconds=0.2, num_workers=1, deterministic_time=True
    )
    jointer = MultiNodeConsolidation().compute(ctx, {"default": 6}, candidates)
    assert jointer is not None
    assert len(jointer.candidates) == 6
    assert jointer.savings > greedy.savings


def _small_and_large() -> list[dict[str, object]]:
    """Two c.large nodes with one pod each, two c.2xlarge nodes with two pods each."""
    objects: list[dict[str, object]] = []
    for name, size, cpu, pods in (
        ("s0", "c.large", "1900m", 1),
        ("s1", "c.large", "1900m", 1),
        ("l0", "c.2xlarge", "7900m", 2),
        ("l1", "c.2xlarge", "7900m", 2),
    ):
        objects += [
            claim(name, instance_type=size),
            node(name, cpu=cpu, labels={"node.kubernetes.io/instance-type": size}),
        ]
        objects += [
            running(pod(f"web-{name}-{i}", cpu="400m"), f"node-{name}") for i in range(pods)
        ]
    return objects


def test_jointer_policy_takes_the_most_savings_per_disruption_within_the_budget() -> None:
    """Karpenter takes the cheapest disruption first; Jointer the most savings per disruption."""
    ctx, candidates, _, _ = context(_small_and_large())
    greedy = MultiNodeConsolidation().compute(ctx, {"default": 2}, candidates)
    assert greedy is not None
    assert sorted(c.name for c in greedy.candidates) == ["node-s0", "node-s1"]
    ctx.planner = PlannerConfig(
        policy="jointer", time_limit_seconds=0.2, num_workers=1, deterministic_time=True
    )
    jointer = MultiNodeConsolidation().compute(ctx, {"default": 2}, candidates)
    assert jointer is not None
    assert sorted(c.name for c in jointer.candidates) == ["node-l0", "node-l1"]
    assert jointer.savings > 2 * greedy.savings


def _facts(nodes: int) -> ClusterFacts:
    state = bench.state_of(bench.cluster(bench.Shape(nodes=nodes, gangs=0.3, seed=3)))
    return ClusterFacts.build(state.snapshot(bench.NOW), bench.NOW, frozenset())


def test_a_simulated_cluster_equals_the_snapshot_joined_again() -> None:
    facts = _facts(60)
    snapshot = facts.snapshot
    names = sorted(facts.nodes)
    with_gangs = 0
    for start in range(0, len(names), 5):
        removed = [facts.nodes[n] for n in names[start : start + 3]]
        removed_nodes = {s.name for s in removed}
        removed_claims = {s.claim_name for s in removed}
        moving = {
            m.key
            for s in removed
            for p in s.pods
            if (gang := facts.gang_of(p)) is not None
            for m in facts.gang_members(gang)
            if m.spec.node_name not in removed_nodes
        }
        with_gangs += bool(moving)
        pods = {
            k: _as_pending(p) if k in moving or p.spec.node_name in removed_nodes else p
            for k, p in snapshot.pods.items()
        }
        expected = snapshot.with_changes(
            nodes={k: v for k, v in snapshot.nodes.items() if k not in removed_nodes},
            node_claims={k: v for k, v in snapshot.node_claims.items() if k not in removed_claims},
            pods=pods,
        )
        got = _without(snapshot, removed_nodes, removed_claims, pods, moving)
        assert list(got.state_nodes) == list(expected.state_nodes)
        assert got.state_nodes == expected.state_nodes
        assert got.nominations == expected.nominations
    assert with_gangs > 0  # some cases move gang members off nodes that stay


def test_pdb_limits_match_a_selector_per_label_set_as_per_pod() -> None:
    facts = _facts(40)
    pods = list(facts.snapshot.pods.values())
    limits = PdbLimits(facts.snapshot.pdbs.values(), pods)
    covered = 0
    for item in pods:
        expected = [
            f"{b.metadata.namespace}/{b.metadata.name}"
            for b in facts.snapshot.pdbs.values()
            if b.spec.selector is not None
            and all(
                item.metadata.labels.get(k) == v for k, v in b.spec.selector.match_labels.items()
            )
        ]
        assert limits.covering(item) == expected
        covered += bool(expected)
    assert covered > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_the_existing_node_index_fits_as_fits_does(seed: int) -> None:
    rng = random.Random(seed)  # noqa: S311 - test data
    existing = {
        f"n{i}": _ExistingNode(
            id=f"n{i}",
            zone="a",
            pool="p",
            labels={},
            taints=(),
            remaining={
                "cpu": rng.randrange(0, 4000),
                "memory": rng.randrange(0, 8 * 2**30) * 1000,
                **({"nvidia.com/gpu": 1000} if i % 7 == 0 else {}),
            },
            gpus_free=(1000, 500) if i % 7 == 0 else (),
            hostname=f"n{i}",
        )
        for i in range(200)
    }
    index = _ExistingFitIndex(existing)
    for _ in range(50):
        requests = {"cpu": rng.randrange(0, 4000), "memory": rng.randrange(0, 8 * 2**30) * 1000}
        if rng.random() < 0.3:
            requests["nvidia.com/gpu"] = 1000
        fraction = rng.choice([0, 0, 400, 800])
        expected = {
            e
            for e, n in existing.items()
            if fits(requests, n.remaining)
            and (not fraction or max(n.gpus_free, default=0) >= fraction)
        }
        assert index.fitting(requests, fraction) == expected


def test_the_bench_pass_reports_both_policies_on_one_cluster() -> None:
    row = bench.run_size(30, 4)
    assert row.jointer.nodes == row.greedy.nodes == 30
    assert "empty" in row.jointer.commands
    assert row.jointer.savings >= row.greedy.savings > 0
    text = "\n".join(bench.section([row], None))
    assert "| 30 |" in text
