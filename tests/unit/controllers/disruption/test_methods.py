"""Methods on fixed cluster facts: choices, budgets, timeouts."""

from __future__ import annotations

import itertools
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from provisioner.controllers.disruption.candidates import build_candidates
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.consolidation import (
    MultiNodeConsolidation,
    SingleNodeConsolidation,
)
from provisioner.controllers.disruption.emptiness import Emptiness
from provisioner.controllers.disruption.methods import MethodContext
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.events import Event
from provisioner.controllers.provisioning.planner import PlannerConfig
from tests.unit.controllers.disruption.objects import (
    NOW,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)


def context(
    objects: list[dict[str, Any]], *, clock: Any = None
) -> tuple[MethodContext, list[Any], CollectorRegistry, list[Event]]:
    facts = facts_of(objects)
    catalog = catalog_of(facts)
    registry = CollectorRegistry()
    events: list[Event] = []
    ctx = MethodContext(
        facts=facts,
        catalog=catalog,
        config=DisruptionConfig(),
        planner=PlannerConfig(policy="greedy"),
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
