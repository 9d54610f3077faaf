"""Merging interchangeable classes for the LP phases, and splitting the LP's bins back."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from solver.colgen import patterns_from_solution
from solver.cpsat import solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    CoLocation,
    Gang,
    NewBin,
    Placement,
    PodClass,
    Problem,
    Solution,
    Status,
    TopologyKey,
)
from solver.shapes import lp_view, merge, split
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems

_MERGING = dataclasses.replace(TEST_CONFIG, merge_from=0)


def _gang_pods(name: str, n: int, types: list[str], **kw: object) -> PodClass:
    return pc(name, n, 1000, 1024, types, gang=name, **kw)


def test_classes_that_differ_only_in_key_and_gang_merge() -> None:
    types = (bt("a1", 4000, 8192, 100, zone="a"), bt("b1", 4000, 8192, 100, zone="b"))
    ids = ["a1", "b1"]
    p = Problem(
        types,
        (
            _gang_pods("g1", 2, ids),
            _gang_pods("g2", 3, ids),
            pc("other", 1, 2000, 1024, ids),
            pc("carrier", 1, 1000, 1024, ids),
        ),
        gangs=(Gang("g1", 2), Gang("g2", 3)),
        topology=(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"carrier"})),),
    )
    shapes = merge(p)
    assert shapes is not None
    # the carrier has g1's requests but carries a co-location: it stays apart
    assert shapes.shape_of == {"g1": "g1", "g2": "g1", "other": "other", "carrier": "carrier"}
    assert [(c.key, c.count, c.gang) for c in shapes.problem.classes] == [
        ("g1", 5, None),
        ("other", 1, None),
        ("carrier", 1, None),
    ]
    assert shapes.problem.gangs == ()
    assert shapes.demand({"g1": 2, "g2": 3, "other": 0}) == {"g1": 5}
    assert merge(dataclasses.replace(p, classes=p.classes[2:], gangs=())) is None


def test_split_keeps_every_gang_in_one_zone() -> None:
    # zone a has room for 3 pods, zone b for 4: the gang of 4 must go to b, the gang of 3 to a
    types = (bt("a1", 3000, 8192, 100, zone="a"), bt("b1", 4000, 8192, 100, zone="b"))
    ids = ["a1", "b1"]
    p = Problem(
        types,
        (_gang_pods("small", 3, ids), _gang_pods("big", 4, ids)),
        gangs=(Gang("small", 3), Gang("big", 4)),
    )
    shapes = merge(p)
    assert shapes is not None
    merged = [NewBin("a1", Placement({"small": 3})), NewBin("b1", Placement({"small": 4}))]
    bins = split(shapes, p, merged, {"small": 3, "big": 4})
    assert bins == [NewBin("a1", Placement({"small": 3})), NewBin("b1", Placement({"big": 4}))]
    plan = Solution(tuple(bins), (), (), 200, 0, Status.FEASIBLE)
    assert violations(p, plan) == []
    # with each zone too small for the big gang, there is no split
    short = [NewBin("a1", Placement({"small": 3})), NewBin("b1", Placement({"small": 3}))]
    assert split(shapes, p, short, {"small": 3, "big": 4}) is None


def test_split_hands_out_fractional_pods_device_by_device() -> None:
    t = bt("g", 8000, 32768, 500, gpus=2)
    p = Problem(
        (t,),
        (
            pc("f1", 2, 500, 512, ["g"], gpu_fraction_milli=500),
            pc("f2", 2, 500, 512, ["g"], gpu_fraction_milli=500),
        ),
    )
    shapes = merge(p)
    assert shapes is not None
    merged = [NewBin("g", Placement({"f1": 4}, {"f1": (2, 2)}))]
    bins = split(shapes, p, merged, {"f1": 2, "f2": 2})
    assert bins == [NewBin("g", Placement({"f1": 2, "f2": 2}, {"f1": (2,), "f2": (0, 2)}))]
    assert violations(p, Solution(tuple(bins), (), (), 500, 0, Status.FEASIBLE)) == []


@st.composite
def problems_with_twins(draw: st.DrawFn) -> Problem:
    """Random problems where some classes get a twin: same pods, another key and gang."""
    p = draw(problems())
    classes, gangs = list(p.classes), list(p.gangs)
    for c in p.classes:
        if not draw(st.booleans()):
            continue
        gang = None
        if c.gang is not None:
            source = next(g for g in p.gangs if g.id == c.gang)
            gang = f"{c.gang}-twin"
            gangs.append(dataclasses.replace(source, id=gang))
        classes.append(dataclasses.replace(c, key=f"{c.key}-twin", gang=gang))
    return dataclasses.replace(p, classes=tuple(classes), gangs=tuple(gangs))


@settings(max_examples=60, deadline=None)
@given(problems_with_twins())
def test_split_of_a_merged_plan_is_valid_or_refused(problem: Problem) -> None:
    lp = lp_view(problem, min_classes=0)
    for plan in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        merged = [
            NewBin(q.bin_type, Placement(dict(q.counts), dict(q.devices)))
            for q in (lp.pattern(x) for x in patterns_from_solution(plan))
        ]
        bins = lp.split(problem, merged, plan.new_counts(), plan.existing)
        if bins is None:
            continue
        again = dataclasses.replace(plan, new_bins=tuple(bins))
        assert violations(problem, again) == []


@settings(max_examples=40, deadline=None)
@given(problems_with_twins())
def test_solve_on_problems_with_twins_is_valid_and_never_worse_than_greedy(
    problem: Problem,
) -> None:
    s = solve(problem, _MERGING)
    assert violations(problem, s) == []
    assert s.cost_micros <= karpenter_ffd(problem).cost_micros
    assert 0 <= s.lower_bound_micros <= s.cost_micros


def test_merged_gangs_get_cheaper_than_greedy_and_stay_whole() -> None:
    # eight 2-pod gangs of 1-GPU pods: greedy buys 2-GPU bins in zone a, the merged LP's
    # dive four 4-GPU bins in zone b, and the split keeps every gang on one zone
    types = (
        bt("one", 4000, 16384, 500, gpus=1, zone="a"),
        bt("two", 8000, 32768, 900, gpus=2, zone="a"),
        bt("four", 16000, 65536, 1700, gpus=4, zone="b"),
    )
    ids = [t.id for t in types]
    classes = tuple(pc(f"g{i}", 2, 3000, 8192, ids, gpu=1, gang=f"g{i}") for i in range(8))
    p = Problem(types, classes, gangs=tuple(Gang(f"g{i}", 2) for i in range(8)))
    assert min(karpenter_ffd(p).cost_micros, cost_aware_ffd(p).cost_micros) == 7200
    s = solve(p, _MERGING)
    assert violations(p, s) == []
    assert s.cost_micros == 4 * 1700
    assert {b.bin_type for b in s.new_bins} == {"four"}
