"""Cost-aware greedy: a group held to one node (hostname ``Affinity``) gets a node it fits."""

import dataclasses
import time

from hypothesis import given, settings

from solver.cpsat import _greedy_plans, _whole_groups, solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import Affinity, Problem, TopologyKey
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems_with_one_bin_groups

TYPES = (bt("small", 3000, 8192, 100), bt("big", 6000, 16384, 210))
IDS = [t.id for t in TYPES]
AFF = (Affinity("aff", None, TopologyKey.HOSTNAME),)


def test_a_group_is_placed_before_other_classes_fill_its_node() -> None:
    # by CPU the filler comes between the group's classes; placed in that order it would take
    # the room the group's node was opened with, and the group's last pods would find none
    p = Problem(
        TYPES,
        (
            pc("g1", 2, 1500, 512, IDS, topology=frozenset({"aff"})),
            pc("filler", 2, 1000, 512, IDS),
            pc("g2", 4, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=AFF,
    )
    for s in (cost_aware_ffd(p), solve(p, TEST_CONFIG)):
        assert violations(p, s) == []
        assert s.unplaced == ()


def test_a_group_does_not_start_on_a_node_without_room_for_it() -> None:
    # the filler's node has room for one pod of the group only
    p = Problem(
        TYPES,
        (
            pc("filler", 1, 2500, 512, IDS),
            pc("g", 6, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=AFF,
    )
    s = cost_aware_ffd(p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    assert sorted(b.placement.counts.get("g", 0) for b in s.new_bins) == [0, 6]


def _group_filler() -> Problem:
    # the filler is placed first (most CPU) on a node of up to 6 CPUs; Karpenter's first fit
    # starts the group there, where only four of its six pods fit
    return Problem(
        TYPES,
        (
            pc("filler", 1, 4000, 512, IDS),
            pc("g", 6, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=AFF,
    )


def test_karpenters_first_fit_with_whole_groups_gives_the_group_a_node() -> None:
    p = _group_filler()
    karpenter = karpenter_ffd(p)
    assert [(u.class_key, u.count) for u in karpenter.unplaced] == [("g", 2)]
    whole = karpenter_ffd(p, whole_groups=True)
    assert violations(p, whole) == []
    assert whole.unplaced == ()
    assert sorted(b.placement.counts.get("g", 0) for b in whole.new_bins) == [0, 6]
    assert karpenter_ffd(p, whole_groups=True, fall_through=False) == whole


def test_the_optimiser_adds_first_fit_with_whole_groups_when_karpenters_leaves_pods() -> None:
    # Karpenter's plan leaves two pods of the group; the whole-group plan joins the candidates
    # (after Karpenter's, which stays) and counts among the plans of full bins
    p = _group_filler()
    plans = _greedy_plans(p, time.monotonic() + 60, _quiet)
    karpenter = plans[-1]
    assert karpenter.seconds > 0
    assert dataclasses.replace(karpenter, seconds=0.0) == karpenter_ffd(p, fall_through=False)
    candidates, full = _whole_groups(p, plans, time.monotonic() + 60, _quiet)
    whole = karpenter_ffd(p, fall_through=False, whole_groups=True)
    assert candidates == [*plans, whole]
    assert full == [karpenter, whole]
    assert solve(p, TEST_CONFIG).unplaced == ()


def test_no_whole_group_plan_without_time_for_its_polish() -> None:
    p = _group_filler()
    plans = _greedy_plans(p, time.monotonic() + 60, _quiet)
    slow = [*plans[:-1], dataclasses.replace(plans[-1], seconds=30.0)]
    # it would take about 30 s and its polish twice that: 60 s left are not enough
    assert _whole_groups(p, slow, time.monotonic() + 60, _quiet) == (slow, [slow[-1]])
    assert len(_whole_groups(p, slow, time.monotonic() + 100, _quiet)[0]) == len(slow) + 1


def test_no_whole_group_plan_when_karpenters_places_as_many_pods() -> None:
    p = Problem(TYPES, (pc("g", 6, 500, 512, IDS, topology=frozenset({"aff"})),), topology=AFF)
    plans = _greedy_plans(p, time.monotonic() + 60, _quiet)
    assert plans[-1].unplaced == ()
    assert _whole_groups(p, plans, time.monotonic() + 60, _quiet) == (plans, [plans[-1]])


def _quiet(_message: str) -> None:
    pass


@settings(max_examples=150, deadline=None)
@given(problems_with_one_bin_groups())
def test_the_optimiser_never_places_fewer_pods_than_karpenter(problem: Problem) -> None:
    s = solve(problem, TEST_CONFIG)
    assert violations(problem, s) == []
    karpenter = karpenter_ffd(problem)
    placed, karpenter_placed = (sum(x.placed_counts().values()) for x in (s, karpenter))
    assert placed >= karpenter_placed
    if placed == karpenter_placed:
        assert s.cost_micros <= karpenter.cost_micros


@settings(max_examples=80)
@given(problems_with_one_bin_groups())
def test_first_fit_with_whole_groups_keeps_every_rule(problem: Problem) -> None:
    assert violations(problem, karpenter_ffd(problem, whole_groups=True)) == []
    assert violations(problem, karpenter_ffd(problem, whole_groups=True, fall_through=False)) == []
