"""A disruption pass's simulations enumerate their offerings once (OptionsMemo)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.apis.core import DaemonSet
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.rescheduling import simulate
from provisioner.controllers.provisioning import builder, offerings
from provisioner.controllers.provisioning.offerings import (
    DaemonOverhead,
    OptionsMemo,
    enumerate_options,
)
from tests.unit.controllers.disruption.objects import (
    GREEDY,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)


def _daemonset(cpu: str) -> DaemonSet:
    return DaemonSet.model_validate(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        "containers": [
                            {"name": "a", "image": "a", "resources": {"requests": {"cpu": cpu}}}
                        ]
                    },
                },
            },
        }
    )


def _facts() -> ClusterFacts:
    return facts_of(
        [
            claim("a"),
            node("a"),
            claim("b"),
            node("b"),
            running(pod("web-1"), "node-a"),
            running(pod("web-2"), "node-b"),
        ]
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = offerings.enumerate_options

    def counting(*args: Any, **kwargs: Any) -> list[offerings.Option]:
        calls.append(1)
        return real(*args, **kwargs)

    # both the memo's and the planner's own call are counted
    monkeypatch.setattr(offerings, "enumerate_options", counting)
    monkeypatch.setattr(builder, "enumerate_options", counting)
    return calls


def test_the_memo_gives_what_enumeration_gives_and_a_fresh_list() -> None:
    templates = catalog_of(_facts()).templates()
    daemonsets = (_daemonset("100m"),)
    memo = OptionsMemo()
    daemons, options = memo.get(templates, daemonsets, "us-west-2")
    expected = enumerate_options(templates, DaemonOverhead.from_daemonsets(daemonsets), "us-west-2")
    assert [o.id for o in options] == [o.id for o in expected]
    assert [o.capacity for o in options] == [o.capacity for o in expected]
    assert daemons == DaemonOverhead.from_daemonsets(daemonsets)
    options.clear()  # the caller's list is its own
    assert len(memo.get(templates, daemonsets, "us-west-2")[1]) == len(expected)


def test_the_same_or_equal_inputs_are_enumerated_once_and_any_changed_one_again(
    counted: list[int],
) -> None:
    templates = catalog_of(_facts()).templates()
    daemonsets = (_daemonset("100m"),)
    memo = OptionsMemo()
    memo.get(templates, daemonsets, "us-west-2")
    memo.get(list(templates), daemonsets, "us-west-2")  # a new list of the same templates
    assert len(counted) == 1
    memo.get(templates, daemonsets, "us-east-1")
    assert len(counted) == 2
    # what a provisioning batch passes: equal templates and DaemonSets, built afresh
    equal = [dataclasses.replace(t) for t in templates]
    assert equal[0] is not templates[0]
    memo.get(equal, (_daemonset("100m"),), "us-east-1")
    assert len(counted) == 2
    memo.get(templates, (_daemonset("200m"),), "us-east-1")  # a changed DaemonSet
    assert len(counted) == 3
    changed = [dataclasses.replace(templates[0], weight=templates[0].weight + 1)]
    memo.get(changed, (), "us-east-1")
    assert len(counted) == 4


def test_a_new_daemonset_changes_the_room_left(counted: list[int]) -> None:
    templates = catalog_of(_facts()).templates()
    memo = OptionsMemo()
    _, small = memo.get(templates, (_daemonset("100m"),), "")
    _, large = memo.get(templates, (_daemonset("900m"),), "")
    assert small[0].capacity["cpu"] - large[0].capacity["cpu"] == 800


def test_a_pass_with_several_simulations_enumerates_once(counted: list[int]) -> None:
    facts = _facts()
    catalog = catalog_of(facts)
    first = simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    second = simulate(facts, catalog, [facts.nodes["b"]], planner=GREEDY)
    both = simulate(facts, catalog, [facts.nodes["a"], facts.nodes["b"]], planner=GREEDY)
    assert first.ok
    assert second.ok
    assert both.ok
    assert len(both.new_claims) == 1
    assert len(counted) == 1
    # a fresh catalog (a new pass after a NodePool change) enumerates again
    simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert len(counted) == 2
