"""A disruption pass's simulations reuse what does not depend on the candidate (issue 21 item 4).

The pass's :class:`~provisioner.controllers.provisioning.offerings.OptionsMemo` keeps, besides
the offerings, what the planner derives from them (compatible offerings per signature, fit
indexes, solver bin types), the existing nodes' room per state node and bound pods, and each
pod's group. A problem built with it must equal, field for field and in iteration order, one
built from scratch; a changed pod, node or NodePool must be seen.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta
from typing import Any

import pytest
import structlog

from cloudprovider.fake import FakeCloudProvider
from provisioner.apis.core import Pod
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.rescheduling import (
    CatalogCache,
    PoolCatalog,
    Simulation,
    simulate,
)
from provisioner.controllers.provisioning import builder, offerings, planner
from provisioner.controllers.provisioning.builder import Build
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.podfacts import pod_facts
from provisioner.podgroups import DetectionMemo, detect_group
from provisioner.podgroups import detect as detect_module
from tests.unit.controllers.disruption.objects import (
    GREEDY,
    catalog_of,
    claim,
    facts_of,
    node,
    pod,
    running,
)
from tests.unit.controllers.disruption.world import TYPES

_SIZES = (("c.large", "1900m"), ("c.xlarge", "3900m"), ("c.2xlarge", "7900m"))
_CPUS = ("100m", "250m", "500m", "1", "1500m")


def _random_cluster(rng: random.Random) -> list[dict[str, Any]]:
    """A few nodes of random sizes and zones, pods on them, and a few pending pods."""
    objects: list[dict[str, Any]] = []
    for index in range(rng.randint(2, 6)):
        name = f"n{index}"
        size, allocatable = rng.choice(_SIZES)
        zone = rng.choice(("zone-a", "zone-b"))
        capacity = rng.choice(("spot", "on-demand"))
        labels = {
            "node.kubernetes.io/instance-type": size,
            "topology.kubernetes.io/zone": zone,
            "karpenter.sh/capacity-type": capacity,
        }
        objects += [
            claim(name, instance_type=size, zone=zone, capacity_type=capacity),
            node(name, cpu=allocatable, labels=labels),
        ]
        for number in range(rng.randint(0, 4)):
            extra: dict[str, Any] = {}
            if rng.random() < 0.2:
                extra["nodeSelector"] = {"topology.kubernetes.io/zone": zone}
            if rng.random() < 0.2:
                extra["tolerations"] = [{"operator": "Exists"}]
            body = pod(
                f"p-{name}-{number}",
                cpu=rng.choice(_CPUS),
                labels={"app": rng.choice(("web", "api", "etl"))},
                **extra,
            )
            objects.append(running(body, f"node-{name}"))
    objects += [pod(f"pending-{i}", cpu=rng.choice(_CPUS)) for i in range(rng.randint(0, 2))]
    return objects


@pytest.fixture
def fresh_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Build, Build]]:
    """Every memoised build of the test, with the same view built from scratch."""
    pairs: list[tuple[Build, Build]] = []
    real = builder.build_problem

    def checked(view: ClusterView) -> Build:
        build = real(view)
        if view.options_memo is not None:
            pairs.append((build, real(dataclasses.replace(view, options_memo=None))))
        return build

    monkeypatch.setattr(planner, "build_problem", checked)
    return pairs


def _same_build(memo: Build, fresh: Build) -> None:
    assert memo.problem == fresh.problem
    for ours, theirs in zip(memo.problem.classes, fresh.problem.classes, strict=True):
        # the solver model follows set order: it must be the same too
        assert list(ours.allowed_bin_types) == list(theirs.allowed_bin_types)
        assert list(ours.allowed_existing) == list(theirs.allowed_existing)
    assert [b.id for b in memo.problem.bin_types] == [b.id for b in fresh.problem.bin_types]
    assert list(memo.options) == list(fresh.options)
    assert memo.class_pods == fresh.class_pods
    assert memo.class_allowed == fresh.class_allowed
    assert memo.ignored == fresh.ignored
    assert memo.unschedulable == fresh.unschedulable


def _outcome(simulation: Simulation) -> tuple[object, ...]:
    plan = simulation.plan
    return (
        sorted(simulation.displaced),
        simulation.failure,
        [(c.node_pool, c.instance_types, c.pods) for c in simulation.new_claims],
        None if plan is None else (plan.existing_nodes, plan.unschedulable, plan.ignored),
    )


def _all_moves(facts: ClusterFacts, catalog: PoolCatalog) -> list[Simulation]:
    states = sorted(facts.nodes.values(), key=lambda s: s.name)
    moves = [[state] for state in states] + [states[:2]]
    return [simulate(facts, catalog, move, planner=GREEDY) for move in moves]


@pytest.mark.parametrize("seed", range(12))
def test_a_pass_with_the_memo_builds_and_decides_as_from_scratch(
    seed: int, fresh_builds: list[tuple[Build, Build]]
) -> None:
    """Random small clusters: every simulation of a pass (and of the next pass, after a pod
    moved) builds the problem a fresh build gives and decides the same."""
    rng = random.Random(seed)  # noqa: S311 - test data
    objects = _random_cluster(rng)
    facts = facts_of(objects)
    catalog = catalog_of(facts)
    memoised = _all_moves(facts, catalog)
    # the next pass: one bound pod grew, the same catalog (and memo) is reused
    grown = [dict(o) for o in objects]
    bound = [i for i, o in enumerate(grown) if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    if bound:
        index = rng.choice(bound)
        body = pod(grown[index]["metadata"]["name"], cpu="1200m")
        grown[index] = running(body, grown[index]["spec"]["nodeName"])
    later = facts_of(grown)
    memoised += _all_moves(later, catalog)
    assert fresh_builds
    for memo_build, fresh_build in fresh_builds:
        _same_build(memo_build, fresh_build)
    fresh = _all_moves(facts, catalog_of(facts)) + _all_moves(later, catalog_of(later))
    assert [_outcome(s) for s in memoised] == [_outcome(s) for s in fresh]


def _three_nodes(extra_cpu: str | None = None) -> ClusterFacts:
    objects: list[dict[str, Any]] = []
    for name in ("a", "b", "c"):
        objects += [claim(name), node(name), running(pod(f"web-{name}"), f"node-{name}")]
    if extra_cpu is not None:
        objects.append(running(pod("web-extra", cpu=extra_cpu), "node-c"))
    return facts_of(objects)


@pytest.fixture
def node_bins(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = builder._node_bin

    def counting(state: Any, *args: Any) -> Any:
        calls.append(state.name)
        return real(state, *args)

    monkeypatch.setattr(builder, "_node_bin", counting)
    return calls


def test_existing_nodes_are_read_once_per_pass(node_bins: list[str]) -> None:
    facts = _three_nodes()
    catalog = catalog_of(facts)
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    assert sorted(node_bins) == ["node-b", "node-c"]
    node_bins.clear()
    simulate(facts, catalog, [facts.nodes["b"]], planner=GREEDY)
    assert node_bins == ["node-a"]  # node-c, unchanged, is reused


def test_a_node_whose_pods_changed_is_read_again(node_bins: list[str]) -> None:
    facts = _three_nodes()
    catalog = catalog_of(facts)
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    node_bins.clear()
    crowded = _three_nodes(extra_cpu="3")
    again = simulate(crowded, catalog, [crowded.nodes["a"]], planner=GREEDY)
    assert "node-c" in node_bins
    # node-c has no room left for web-a now: it goes to node-b, as a fresh catalog decides
    fresh = simulate(crowded, catalog_of(crowded), [crowded.nodes["a"]], planner=GREEDY)
    assert again.plan is not None
    assert fresh.plan is not None
    assert again.plan.existing_nodes == fresh.plan.existing_nodes
    assert [p.name for p in again.plan.existing_nodes] == ["node-b"]


def test_bin_types_are_derived_once_for_the_same_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = builder._bin_types_of

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(builder, "_bin_types_of", counting)
    facts = _three_nodes()
    catalog = catalog_of(facts)
    for name in ("a", "b", "c"):  # each moves one pod of the same shape
        assert simulate(facts, catalog, [facts.nodes[name]], planner=GREEDY).ok
    assert len(calls) == 1
    simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)  # a new pass
    assert len(calls) == 2


def test_a_new_nodepool_template_forgets_what_was_derived() -> None:
    facts = _three_nodes()
    catalog = catalog_of(facts)
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    memo = catalog.options
    assert memo.derived is not None
    templates = catalog.templates()
    memo.get(templates, (), "")
    assert memo.derived is not None  # the same templates: kept
    changed = [dataclasses.replace(t, weight=t.weight + 1) for t in templates]
    memo.get(changed, (), "")
    assert memo.derived is None


@pytest.fixture
def detections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the pods `detect_group` looks at, in order, while the test runs."""
    calls: list[str] = []
    real = detect_group

    def counting(p: Any) -> Any:
        calls.append(p.key)
        return real(p)

    monkeypatch.setattr(detect_module, "detect_group", counting)
    return calls


def test_pod_groups_are_detected_once_per_pod_object(detections: list[str]) -> None:
    calls = detections
    facts = _three_nodes()
    catalog = catalog_of(facts)
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    # only the pending pod is looked at: no group, so no group's members are indexed
    assert calls == ["default/web-a"]
    simulate(facts, catalog, [facts.nodes["b"]], planner=GREEDY)
    assert calls == ["default/web-a", "default/web-b"]
    # the same move again: the same pending copy, already detected
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    assert calls == ["default/web-a", "default/web-b"]


def test_a_move_reads_each_pending_copy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []

    def counting(p: Any, **kwargs: Any) -> Any:
        read.append(p.key)
        return pod_facts(p, **kwargs)

    monkeypatch.setattr(builder, "pod_facts", counting)
    facts = _three_nodes()
    catalog = catalog_of(facts)
    first = simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    again = simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    assert read == ["default/web-a"]
    assert first.ok
    assert again.ok
    assert again.plan is not None
    assert first.plan is not None
    assert again.plan.existing_nodes == first.plan.existing_nodes
    assert again.plan.node_claims == first.plan.node_claims == ()


def test_only_the_launch_targets_a_plan_uses_are_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = planner._TargetIndex

    class Counting(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(planner, "_TargetIndex", Counting)
    crowded = facts_of(
        [
            claim("a"),
            node("a"),
            running(pod("big-1", cpu="3500m"), "node-a"),
            claim("b"),
            node("b"),
            running(pod("big-2", cpu="3500m"), "node-b"),
        ]
    )
    catalog = catalog_of(crowded)
    result = simulate(crowded, catalog, [crowded.nodes["a"]], planner=GREEDY)
    assert len(result.new_claims) == 1
    assert len(built) == 1  # of the pool's four (zone x capacity type) targets
    again = simulate(crowded, catalog, [crowded.nodes["b"]], planner=GREEDY)
    assert len(again.new_claims) == 1
    assert len(built) == 1  # the same target, indexed once in the pass
    fresh = simulate(crowded, catalog_of(crowded), [crowded.nodes["b"]], planner=GREEDY)
    assert _outcome(fresh) == _outcome(again)


def _catalogs(types: list[Any]) -> tuple[CatalogCache, FakeCloudProvider]:
    cloud = FakeCloudProvider(instance_types=types)
    return CatalogCache(cloud, region="", ttl=timedelta(minutes=1)), cloud


def test_a_reloaded_catalog_with_the_same_offerings_keeps_the_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the catalog TTL, equal templates are kept: the offerings are not enumerated again."""
    enumerated: list[int] = []
    real = offerings.enumerate_options

    def counting(*args: Any, **kwargs: Any) -> Any:
        enumerated.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(offerings, "enumerate_options", counting)
    cache, cloud = _catalogs(list(TYPES))
    facts = _three_nodes()
    log = structlog.get_logger()
    first = cache.get(facts, log)
    simulate(facts, first, [facts.nodes["a"]], planner=GREEDY)
    later = dataclasses.replace(facts, now=facts.now + timedelta(minutes=2))
    second = cache.get(later, log)
    assert second is first  # reloaded (the TTL passed) but equal in everything: kept
    simulate(later, second, [later.nodes["b"]], planner=GREEDY)
    assert len(enumerated) == 1
    # an offering marked unavailable makes the template differ: enumerated again
    cloud.instance_types = [
        dataclasses.replace(
            t, offerings=tuple(o.with_available(False) for o in t.offerings[:1]) + t.offerings[1:]
        )
        for t in TYPES
    ]
    third = cache.get(dataclasses.replace(facts, now=facts.now + timedelta(minutes=4)), log)
    assert third is not first
    assert third.templates()[0] is not first.templates()[0]
    result = simulate(facts, third, [facts.nodes["a"]], planner=GREEDY)
    assert len(enumerated) == 2
    fresh = simulate(facts, catalog_of(facts), [facts.nodes["a"]], planner=GREEDY)
    assert _outcome(result) == _outcome(fresh)


def test_the_detection_memo_answers_as_detect_group_and_starts_again_when_told() -> None:
    pods = [Pod.model_validate(pod(f"web-{i}")) for i in range(3)]
    kai = Pod.model_validate(
        pod("train-0", annotations={"pod-group-name": "train"}, schedulerName="kai-scheduler")
    )
    memo = DetectionMemo()
    for p in [*pods, kai]:
        assert memo(p) == detect_group(p)
    assert memo(kai) is not None
    assert len(memo) == 4
    memo.bound(live=4)
    assert len(memo) == 4  # within twice the live pods
    memo.bound(live=-600)  # far more held than live: forget the earlier snapshots' pods
    assert len(memo) == 0
    assert memo(kai) == detect_group(kai)


def test_the_disruption_facts_detect_each_pod_once_over_passes(detections: list[str]) -> None:
    calls = detections
    memo = DetectionMemo()
    facts = _three_nodes()
    first = ClusterFacts.build(facts.snapshot, facts.now, frozenset(), detector=memo)
    for state in first.nodes.values():
        for p in state.pods:
            first.gang_of(p)
    seen = len(calls)
    assert seen == 3
    again = ClusterFacts.build(facts.snapshot, facts.now, frozenset(), detector=memo)
    for state in again.nodes.values():
        for p in state.pods:
            again.gang_of(p)
    assert len(calls) == seen


def test_the_derived_tables_start_again_when_they_outgrow_their_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    facts = _three_nodes()
    catalog = catalog_of(facts)
    simulate(facts, catalog, [facts.nodes["a"]], planner=GREEDY)
    kept = catalog.options.derived
    assert kept is not None
    simulate(facts, catalog, [facts.nodes["b"]], planner=GREEDY)
    assert catalog.options.derived is kept
    monkeypatch.setattr(builder, "DERIVED_LIMIT", 0)
    result = simulate(facts, catalog, [facts.nodes["c"]], planner=GREEDY)
    assert catalog.options.derived is not kept
    fresh = simulate(facts, catalog_of(facts), [facts.nodes["c"]], planner=GREEDY)
    assert _outcome(result) == _outcome(fresh)
