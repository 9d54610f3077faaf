"""Methods on fixed cluster facts: choices, budgets, timeouts."""

from __future__ import annotations

import itertools
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from cloudprovider.fake import FakeCloudProvider
from cloudprovider.instancetype import InstanceType
from provisioner.controllers.disruption.candidates import build_candidates
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.consolidation import (
    MultiNodeConsolidation,
    SingleNodeConsolidation,
)
from provisioner.controllers.disruption.emptiness import Emptiness
from provisioner.controllers.disruption.methods import MethodContext
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.disruption.rescheduling import load_catalog
from provisioner.controllers.events import Event
from provisioner.controllers.provisioning.planner import PlannerConfig, Policy
from tests.unit.controllers.disruption.objects import (
    NOW,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)
from tests.unit.controllers.disruption.world import instance_type


def context(
    objects: list[dict[str, Any]],
    *,
    clock: Any = None,
    policy: Policy = "greedy",
    types: list[InstanceType] | None = None,
) -> tuple[MethodContext, list[Any], CollectorRegistry, list[Event]]:
    facts = facts_of(objects)
    if types is None:
        catalog = catalog_of(facts)
    else:
        provider = FakeCloudProvider(instance_types=types)
        catalog = load_catalog(facts, provider, region="", log=structlog.get_logger())
    registry = CollectorRegistry()
    events: list[Event] = []
    ctx = MethodContext(
        facts=facts,
        catalog=catalog,
        config=DisruptionConfig(),
        planner=PlannerConfig(policy=policy),
        leaving=frozenset(),
        publish=events.append,
        log=structlog.get_logger(),
        metrics=DisruptionMetrics(registry),
        now=NOW,
        monotonic=clock or (lambda: 0.0),
    )
    candidates = build_candidates(facts, catalog, in_flight=lambda _: False)
    return ctx, candidates, registry, events


def lightly_used(count: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for i in range(count):
        name = f"n{i}"
        objects += [claim(name), node(name), running(pod(f"web-{i}", cpu="200m"), f"node-{name}")]
    return objects


def test_emptiness_deletes_every_empty_node_the_budget_allows():
    objects = [claim(f"n{i}") for i in range(5)] + [node(f"n{i}") for i in range(5)]
    ctx, candidates, _, _ = context(objects)
    command = Emptiness().compute(ctx, {"default": 2}, candidates)
    assert command is not None
    assert len(command.candidates) == 2
    assert str(command).startswith("Empty/")
    assert ": delete: nodepools=[default]: [node-n" in str(command)


def test_budget_of_zero_publishes_a_nodepool_event():
    objects = [claim("n0"), node("n0")]
    ctx, candidates, _, events = context(objects)
    assert Emptiness().compute(ctx, {"default": 0}, candidates) is None
    assert [e.message for e in events] == [
        "No allowed disruptions for disruption reason Empty due to blocking budget"
    ]


def test_multi_node_consolidation_takes_the_longest_prefix_that_fits():
    ctx, candidates, _, _ = context(lightly_used(4))
    command = MultiNodeConsolidation().compute(ctx, {"default": 4}, candidates)
    assert command is not None
    assert len(command.candidates) == 4  # all four go: one cheaper node holds every pod
    (replacement,) = command.replacements
    assert replacement.price < sum(c.price for c in command.candidates)
    assert ": replace: " in str(command)
    assert "-> [1 replacement]" in str(command)


def test_multi_node_consolidation_respects_the_budget():
    ctx, candidates, _, _ = context(lightly_used(4))
    command = MultiNodeConsolidation().compute(ctx, {"default": 2}, candidates)
    assert command is not None
    assert len(command.candidates) == 2


def test_single_node_consolidation_times_out():
    ticks = itertools.count(0, 200)
    ctx, candidates, registry, _ = context(lightly_used(3), clock=lambda: float(next(ticks)))
    assert SingleNodeConsolidation().compute(ctx, {"default": 3}, candidates) is None
    assert (
        registry.get_sample_value(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            {"consolidation_type": "single"},
        )
        == 1
    )


def test_multi_node_consolidation_returns_the_last_valid_command_on_timeout():
    ticks = iter([0.0, 0.0, 10.0, 1000.0, 1000.0, 1000.0])
    ctx, candidates, registry, _ = context(lightly_used(6), clock=lambda: next(ticks, 1000.0))
    command = MultiNodeConsolidation().compute(ctx, {"default": 6}, candidates)
    assert command is not None
    assert (
        registry.get_sample_value(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            {"consolidation_type": "multi"},
        )
        == 1
    )


def test_a_replacement_split_in_two_falls_back_to_first_fits_single_node():
    # two small nodes (0.05 each) cost less than one medium (0.15), so the optimiser splits the
    # c.2xlarge's two pods over two new nodes, which a command cannot take; first-fit puts
    # both on one cheaper node, as Karpenter would, and that replacement is judged instead
    types = [
        instance_type("s", 2, 4, 0.05),
        instance_type("m", 4, 8, 0.15),
        instance_type("c.2xlarge", 8, 16, 0.34),
    ]
    objects = [
        claim("n0", instance_type="c.2xlarge"),
        node("n0", cpu="7900m", labels={"node.kubernetes.io/instance-type": "c.2xlarge"}),
        running(pod("a", cpu="1500m"), "node-n0"),
        running(pod("b", cpu="1500m"), "node-n0"),
    ]
    for policy in ("jointer", "greedy"):
        ctx, candidates, _, _ = context(objects, policy=policy, types=types)
        if policy == "jointer":
            assert len(ctx.simulate(candidates).new_claims) == 2  # the optimiser's split
        command = SingleNodeConsolidation().compute(ctx, {"default": 1}, candidates)
        assert command is not None, policy
        (replacement,) = command.replacements
        assert replacement.instance_types[0] == "m"
        assert sorted(p.metadata.name for p in replacement.pods) == ["a", "b"]
