"""The fluid-guided plan: pods dealt to instance families by a small LP, then first fit."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from solver.greedy import karpenter_ffd, unplaced_entries
from solver.guided import _families, guided_plan, guided_problem
from solver.improve import improve
from solver.problem import BinType, CoLocation, Problem, TopologyKey
from solver.validate import violations
from tests.unit.solver.builders import GPU, bt, interleaved, pc, two_families
from tests.unit.solver.strategies import problems

GIB = 1024
TYPES = two_families()
IDS = [t.id for t in TYPES]
LEAN, FAT = ("k0", "k2", "k4"), ("k1", "k3", "k5")


def _mix(count: int = 4) -> Problem:
    return Problem(tuple(TYPES), interleaved(TYPES, count=count))


def test_lean_pods_are_kept_to_the_cpu_rich_family() -> None:
    # the fat pods fill the CPU-rich nodes' idle memory too: the LP deals them to both
    guided = guided_problem(_mix())
    assert guided is not None
    allowed = {c.key: c.allowed_bin_types for c in guided.classes}
    assert all(allowed[k] == {"c4", "c8"} for k in LEAN)
    assert all(allowed[k] == frozenset(IDS) for k in FAT)


def test_the_guided_first_fit_is_cheaper_than_karpenters_and_polishes_cheaper() -> None:
    # Karpenter's first fit by size mixes lean and fat pods on nodes that fill one
    # resource only; dealt by family, every node fills both
    problem = _mix()
    karpenter = karpenter_ffd(problem, fall_through=False)
    guided = guided_plan(problem)
    assert guided is not None
    assert violations(problem, guided) == []
    assert guided.placed_counts() == karpenter.placed_counts()
    assert (guided.cost_micros, karpenter.cost_micros) == (5600, 6000)
    polished = improve(problem, guided, shed_first=True).cost_micros
    assert (polished, improve(problem, karpenter, shed_first=True).cost_micros) == (5200, 5600)


def test_a_catalog_of_one_family_is_not_guided() -> None:
    # Karpenter's fake instance types: 2 GiB a CPU at every size, less a little overhead
    types = [bt(f"s{k}", 1000 * k - 100, 2048 * k - 10, 100 * k) for k in (1, 2, 4, 8)]
    ids = [t.id for t in types]
    problem = Problem(
        tuple(types), (pc("lean", 8, 1000, GIB, ids), pc("fat", 8, 250, 6 * GIB, ids))
    )
    assert guided_problem(problem) is None
    assert guided_plan(problem) is None


def test_pods_that_request_gpus_are_not_guided() -> None:
    gpu = bt("g", 8000, 64 * GIB, 3000, gpus=1)
    problem = _mix()
    problem = Problem(
        (*problem.bin_types, gpu),
        (*problem.classes, pc("train", 1, 1000, GIB, [*IDS, "g"], gpu=1)),
    )
    assert guided_problem(problem) is None


def test_a_colocations_carriers_keep_the_families_of_its_targets() -> None:
    # a lean carrier must reach a node of its fat target: both keep both families
    base = _mix()
    rule = CoLocation("near-fat", TopologyKey.HOSTNAME, frozenset({"k0"}))
    classes = tuple(
        pc(c.key, c.count, c.demand["cpu"], c.demand["memory"], IDS, topology=frozenset({rule.id}))
        if c.key == "k1"
        else c
        for c in base.classes
    )
    guided = guided_problem(Problem(base.bin_types, classes, topology=(rule,)))
    assert guided is not None
    allowed = {c.key: c.allowed_bin_types for c in guided.classes}
    assert allowed["k0"] == allowed["k1"] == frozenset(IDS)
    assert allowed["k2"] == {"c4", "c8"}


def test_families_are_memory_per_cpu_clusters_per_pool_capacity_type_and_zone() -> None:
    # small sizes have less memory per CPU (the kubelet's reservations): still one family
    small = BinType("c1", "c1", "a", "on-demand", "default", {"cpu": 1930, "memory": 3115}, 90)
    spot = BinType("c8s", "c8s", "a", "spot", "default", dict(TYPES[1].capacity), 300)
    family = _families((*TYPES, small, spot))
    assert family["c1"] == family["c4"] == family["c8"] == ("default", "on-demand", "a", 0)
    assert family["r4"] == family["r8"] == ("default", "on-demand", "a", 1)
    assert family["c8s"] == ("default", "spot", "a", 0)


@st.composite
def _two_family_problems(draw: st.DrawFn) -> Problem:
    """``problems()`` without GPU pods, its offerings of two families, pods of both kinds."""
    base = draw(problems())
    types = tuple(
        dataclasses.replace(
            t,
            capacity={**t.capacity, "memory": t.capacity["memory"] * (4 if i % 2 else 1)},
        )
        for i, t in enumerate(base.bin_types)
    )
    classes = tuple(
        dataclasses.replace(
            c,
            demand={
                **{r: v for r, v in c.demand.items() if r != GPU},
                "memory": draw(st.sampled_from([256, 512, 2048, 4096])),
            },
            gpu_fraction_milli=0,
        )
        for c in base.classes
    )
    return dataclasses.replace(base, bin_types=types, classes=classes)


@settings(max_examples=80, deadline=None)
@given(_two_family_problems())
def test_guided_plans_keep_every_rule(problem: Problem) -> None:
    plan = guided_plan(problem)
    if plan is not None:
        assert violations(problem, plan) == []
        # the pods left out are the problem's, with its reasons
        assert plan.unplaced == unplaced_entries(problem, plan.placed_counts())
