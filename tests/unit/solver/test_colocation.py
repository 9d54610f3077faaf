import dataclasses

import pytest

from solver.cpsat import solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    CoLocation,
    ExistingBin,
    ExistingPlacement,
    NewBin,
    Placement,
    Problem,
    ProblemError,
    Solution,
    Status,
    TopologyKey,
    UnplacedReason,
)
from solver.validate import cost, violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc

TYPES = (bt("a1", 4000, 8192, 100, zone="a"), bt("b1", 4000, 8192, 100, zone="b"))
IDS = ["a1", "b1"]


def _sol(p: Problem, bins: list[NewBin], existing: tuple[ExistingPlacement, ...] = ()) -> Solution:
    s = Solution(tuple(bins), existing, (), 0, 0, Status.GREEDY)
    return dataclasses.replace(s, cost_micros=cost(p, s))


def _problem(key: TopologyKey, satisfied: frozenset[str] = frozenset()) -> Problem:
    classes = (
        pc("db", 1, 500, 512, IDS, topology=frozenset({"co"})),
        pc("web", 3, 500, 512, IDS),
    )
    return Problem(TYPES, classes, topology=(CoLocation("co", key, frozenset({"web"}), satisfied),))


@pytest.mark.parametrize("key", [TopologyKey.HOSTNAME, TopologyKey.ZONE])
def test_validate_carriers_need_a_target(key):
    p = _problem(key)
    ok = _sol(p, [NewBin("a1", Placement({"db": 1, "web": 3}))])
    assert violations(p, ok) == []
    bad = _sol(p, [NewBin("a1", Placement({"db": 1})), NewBin("b1", Placement({"web": 3}))])
    assert any("co-location co" in v for v in violations(p, bad))


def test_validate_zone_satisfied_and_same_zone_other_bin():
    p = _problem(TopologyKey.ZONE)
    same_zone = _sol(p, [NewBin("a1", Placement({"db": 1})), NewBin("a1", Placement({"web": 3}))])
    assert violations(p, same_zone) == []
    p = _problem(TopologyKey.ZONE, frozenset({"b"}))
    s = _sol(p, [NewBin("a1", Placement({"db": 1})), NewBin("b1", Placement({"web": 3}))])
    assert violations(p, s) == []


def test_validate_hostname_satisfied_existing_bin():
    e = ExistingBin("n1", "a", "default", {"cpu": 4000, "memory": 8192, "pods": 10})
    classes = (pc("web", 2, 500, 512, IDS, allowed_existing=frozenset({"n1"})),)
    topo = (CoLocation("co", TopologyKey.HOSTNAME, frozenset({"web"}), frozenset({"n1"})),)
    p = Problem(TYPES, classes, existing=(e,), topology=topo)
    on_node = _sol(p, [], (ExistingPlacement("n1", Placement({"web": 2})),))
    assert violations(p, on_node) == []
    new = _sol(p, [NewBin("a1", Placement({"web": 2}))])
    assert any("no target" in v for v in violations(p, new))


def test_self_target_carrier_satisfies_itself():
    classes = (pc("peer", 3, 500, 512, IDS, topology=frozenset({"co"})),)
    p = Problem(
        TYPES, classes, topology=(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"peer"})),)
    )
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(p)
        assert violations(p, s) == []
        assert s.placed_counts() == {"peer": 3}


@pytest.mark.parametrize("key", [TopologyKey.HOSTNAME, TopologyKey.ZONE])
def test_greedy_and_solve_place_carriers_with_targets(key):
    p = _problem(key)
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(p)
        assert violations(p, s) == []
        assert s.placed_counts() == {"db": 1, "web": 3}
    s = solve(p, TEST_CONFIG)
    assert violations(p, s) == []
    assert s.placed_counts() == {"db": 1, "web": 3}


def test_carriers_without_any_target_are_unplaced_for_topology():
    classes = (pc("web", 2, 500, 512, IDS),)
    topo = (CoLocation("co", TopologyKey.HOSTNAME, frozenset({"web"})),)
    p = Problem(
        TYPES, (*classes, pc("db", 0, 500, 512, IDS, topology=frozenset({"co"}))), topology=topo
    )
    for plan in (karpenter_ffd, cost_aware_ffd):
        s = plan(p)
        assert violations(p, s) == []
        assert [(u.class_key, u.count, u.reason) for u in s.unplaced] == [
            ("web", 2, UnplacedReason.TOPOLOGY)
        ]


def test_unknown_carrier_rejected():
    p = Problem(TYPES, (), topology=(CoLocation("co", TopologyKey.ZONE, frozenset({"x"})),))
    with pytest.raises(ProblemError, match="carriers unknown"):
        p.validate_structure()


def test_cost_aware_grows_a_target_bin_for_its_carriers():
    # the target alone fits the small offering exactly; its carrier needs the larger one
    types = (bt("s", 1000, 2048, 100), bt("l", 4000, 8192, 300))
    classes = (
        pc("web", 1, 1000, 1024, ["s", "l"], topology=frozenset({"co"})),
        pc("db", 2, 500, 512, ["s", "l"]),
    )
    p = Problem(
        types, classes, topology=(CoLocation("co", TopologyKey.HOSTNAME, frozenset({"db"})),)
    )
    s = cost_aware_ffd(p)
    assert violations(p, s) == []
    assert s.placed_counts() == {"web": 1, "db": 2}
    assert [b.bin_type for b in s.new_bins] == ["l"]
