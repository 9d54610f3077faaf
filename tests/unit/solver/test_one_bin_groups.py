"""Cost-aware greedy: a group held to one node (hostname ``Affinity``) gets a node it fits."""

import time

from hypothesis import given, settings

from solver.cpsat import _greedy_plans, _greedy_tiers, solve
from solver.greedy import cost_aware_ffd, karpenter_ffd, plan_tiers
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
    tiered = plan_tiers(p, karpenter=True, whole_groups=True).solution
    assert tiered.unplaced == ()


def test_the_optimiser_starts_from_first_fit_with_whole_groups() -> None:
    # its second greedy plan fills nodes as Karpenter's does but places what Karpenter's leaves
    p = _group_filler()
    plans = _greedy_plans(p, time.monotonic() + 60, lambda _m: None)
    assert plans[-1] == karpenter_ffd(p, whole_groups=True)
    assert [t.solution for t in _greedy_tiers(p, time.monotonic() + 60, lambda _m: None)][
        -1
    ] == plans[-1]


@settings(max_examples=80)
@given(problems_with_one_bin_groups())
def test_first_fit_with_whole_groups_keeps_every_rule(problem: Problem) -> None:
    assert violations(problem, karpenter_ffd(problem, whole_groups=True)) == []
    assert violations(problem, karpenter_ffd(problem, whole_groups=True, fall_through=False)) == []
