"""``Affinity``: all matching pods in one domain (kube-scheduler's first-pod rule)."""

import dataclasses

import pytest

from solver.cpsat import solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    Affinity,
    ExistingBin,
    NewBin,
    Placement,
    Problem,
    Solution,
    Status,
    TopologyKey,
)
from solver.validate import cost, violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc

# two small bins (3 pods each) cost less than one big bin (6 pods): only the rule keeps one bin
TYPES = (
    bt("small-a", 3000, 8192, 100, zone="a"),
    bt("small-b", 3000, 8192, 100, zone="b"),
    bt("big-a", 6000, 16384, 230, zone="a"),
    bt("big-b", 6000, 16384, 210, zone="b"),
)
IDS = [t.id for t in TYPES]
SOLVERS = {
    "jointer": lambda p: solve(p, TEST_CONFIG),
    "greedy": karpenter_ffd,
    "cost-aware": cost_aware_ffd,
}


def _problem(key: TopologyKey, n: int = 6, zones: frozenset[str] | None = None) -> Problem:
    return Problem(
        TYPES,
        (pc("g", n, 1000, 512, IDS, topology=frozenset({"aff"})),),
        topology=(Affinity("aff", zones, key),),
    )


def _sol(p: Problem, bins: list[NewBin]) -> Solution:
    s = Solution(tuple(bins), (), (), 0, 0, Status.GREEDY)
    return dataclasses.replace(s, cost_micros=cost(p, s))


def test_validate_hostname_affinity_flags_two_bins():
    p = _problem(TopologyKey.HOSTNAME)
    one = _sol(p, [NewBin("big-b", Placement({"g": 6}))])
    assert violations(p, one) == []
    two = _sol(p, [NewBin("small-a", Placement({"g": 3})), NewBin("small-a", Placement({"g": 3}))])
    assert any("affinity aff: pods on several nodes" in v for v in violations(p, two))


def test_validate_zone_affinity_flags_two_zones():
    p = _problem(TopologyKey.ZONE)
    two = _sol(p, [NewBin("small-a", Placement({"g": 3})), NewBin("small-b", Placement({"g": 3}))])
    assert any("affinity aff: pods in several zones" in v for v in violations(p, two))


@pytest.mark.parametrize("policy", sorted(SOLVERS))
def test_hostname_affinity_one_bin_chosen_for_cost(policy):
    p = _problem(TopologyKey.HOSTNAME)
    s = SOLVERS[policy](p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    assert [b.bin_type for b in s.new_bins] == ["big-b"]


@pytest.mark.parametrize("policy", sorted(SOLVERS))
def test_zone_affinity_one_zone_chosen_for_cost(policy):
    cheaper_b = (*TYPES[:1], dataclasses.replace(TYPES[1], price_micros=90), *TYPES[2:])
    p = dataclasses.replace(_problem(TopologyKey.ZONE, n=12), bin_types=cheaper_b)
    s = SOLVERS[policy](p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    assert {p.bin_type(b.bin_type).zone for b in s.new_bins} == {"b"}


@pytest.mark.parametrize("policy", sorted(SOLVERS))
def test_hostname_affinity_to_an_existing_bin(policy):
    e1 = ExistingBin("n1", "a", "default", {"cpu": 2000, "memory": 8192, "pods": 10})
    e2 = ExistingBin("n2", "a", "default", {"cpu": 2000, "memory": 8192, "pods": 10})
    p = dataclasses.replace(
        _problem(TopologyKey.HOSTNAME, n=3, zones=frozenset({"n2"})),
        existing=(e1, e2),
        classes=(
            pc("g", 3, 1000, 512, IDS, topology=frozenset({"aff"}), allowed_existing={"n1", "n2"}),
        ),
    )
    s = SOLVERS[policy](p)
    assert violations(p, s) == []
    assert s.new_bins == ()
    assert [(e.bin_id, dict(e.placement.counts)) for e in s.existing] == [("n2", {"g": 2})]
    assert sum(u.count for u in s.unplaced) == 1
