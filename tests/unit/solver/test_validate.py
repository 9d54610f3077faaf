import dataclasses
from collections.abc import Sequence

import pytest

from solver.problem import (
    Affinity,
    AntiAffinity,
    ExistingBin,
    ExistingPlacement,
    Gang,
    NewBin,
    Placement,
    PodClass,
    PoolLimit,
    Problem,
    ProblemError,
    Solution,
    SpreadConstraint,
    Status,
    TopologyKey,
    Unplaced,
    UnplacedReason,
)
from solver.validate import cost, violations
from tests.unit.solver.builders import bt, pc

TYPES = (bt("s", 2000, 4096, 100), bt("b", 4000, 8192, 200, zone="b"))


def sol(
    problem: Problem,
    bins: list[NewBin],
    existing: Sequence[ExistingPlacement] = (),
    unplaced: Sequence[Unplaced] = (),
) -> Solution:
    s = Solution(tuple(bins), tuple(existing), tuple(unplaced), 0, 0, Status.GREEDY)
    return dataclasses.replace(s, cost_micros=cost(problem, s))


def nb(t: str, **counts: int) -> NewBin:
    return NewBin(t, Placement(counts))


def test_valid_solution_has_no_violations():
    p = Problem(TYPES, (pc("c", 2, 1000, 1024, ["s"]),))
    assert violations(p, sol(p, [nb("s", c=2)])) == []


@pytest.mark.parametrize(
    ("bins", "unplaced", "needle"),
    [
        ([nb("s", c=1)], (), "placed 1 + unplaced 0"),
        ([nb("s", c=3)], (), "cpu used 3000"),
        ([nb("b", c=2)], (), "not allowed"),
        ([nb("s", c=1)], (Unplaced("c", 1, UnplacedReason.NO_CAPACITY),), None),
    ],
)
def test_accounting_capacity_allowed(bins, unplaced, needle):
    p = Problem(TYPES, (pc("c", 2, 1000, 1024, ["s"]),))
    found = violations(p, sol(p, bins, unplaced=unplaced))
    if needle is None:
        assert found == []
    else:
        assert any(needle in v for v in found), found


def test_cost_and_bound_checked():
    p = Problem(TYPES, (pc("c", 1, 1000, 1024, ["s"]),))
    s = dataclasses.replace(sol(p, [nb("s", c=1)]), cost_micros=5, lower_bound_micros=6)
    found = violations(p, s)
    assert any("cost_micros" in v for v in found)
    assert any("lower bound" in v for v in found)


def test_gang_partial_pool_and_zone():
    p = Problem(TYPES, (pc("g", 4, 1000, 1024, ["s", "b"], gang="G"),), gangs=(Gang("G", 3),))
    partial = sol(p, [nb("s", g=2)], unplaced=[Unplaced("g", 2, UnplacedReason.GANG)])
    assert any("partial" in v for v in violations(p, partial))
    split = sol(p, [nb("s", g=2), nb("b", g=2)])
    assert any("several zones" in v for v in violations(p, split))
    pools = (bt("s", 2000, 4096, 100), bt("t", 2000, 4096, 100, pool="other"))
    p2 = Problem(pools, (pc("g", 4, 1000, 1024, ["s", "t"], gang="G"),), gangs=(Gang("G", 3),))
    assert any("node pools" in v for v in violations(p2, sol(p2, [nb("s", g=2), nb("t", g=2)])))


def test_gang_with_running_members_stays_in_their_pool_and_zone():
    gang = Gang("G", 2, pool="default", zone="b")
    p = Problem(TYPES, (pc("g", 2, 1000, 1024, ["s", "b"], gang="G"),), gangs=(gang,))
    assert violations(p, sol(p, [nb("b", g=2)])) == []
    assert any("outside zone b" in v for v in violations(p, sol(p, [nb("s", g=2)])))
    other = dataclasses.replace(gang, pool="other")
    p2 = dataclasses.replace(p, gangs=(other,))
    assert any("outside pool other" in v for v in violations(p2, sol(p2, [nb("b", g=2)])))


def test_zone_spread_hostname_spread_anti_affinity_affinity():
    spread = SpreadConstraint("z", TopologyKey.ZONE, 1, zones=("a", "b"))
    p = Problem(
        TYPES, (pc("c", 2, 500, 512, ["s", "b"], topology=frozenset({"z"})),), topology=(spread,)
    )
    assert any("max_skew" in v for v in violations(p, sol(p, [nb("s", c=2)])))
    assert violations(p, sol(p, [nb("s", c=1), nb("b", c=1)])) == []
    host = SpreadConstraint("h", TopologyKey.HOSTNAME, 1)
    p = Problem(TYPES, (pc("c", 2, 500, 512, ["s"], topology=frozenset({"h"})),), topology=(host,))
    assert any("max_skew" in v for v in violations(p, sol(p, [nb("s", c=2)])))
    anti = AntiAffinity("x", TopologyKey.HOSTNAME)
    p = Problem(TYPES, (pc("c", 2, 500, 512, ["s"], topology=frozenset({"x"})),), topology=(anti,))
    assert any("anti-affinity" in v for v in violations(p, sol(p, [nb("s", c=2)])))
    aff = Affinity("y")
    p = Problem(
        TYPES, (pc("c", 2, 500, 512, ["s", "b"], topology=frozenset({"y"})),), topology=(aff,)
    )
    assert any("affinity y" in v for v in violations(p, sol(p, [nb("s", c=1), nb("b", c=1)])))


def test_limits_max_count_fractions_existing():
    types = (bt("s", 2000, 4096, 100, max_count=1), bt("g", 8000, 32768, 900, gpus=1))
    p = Problem(
        types, (pc("c", 2, 1500, 1024, ["s"]),), limits=(PoolLimit("default", {"cpu": 3000}),)
    )
    found = violations(p, sol(p, [nb("s", c=1), nb("s", c=1)]))
    assert any("max_count" in v for v in found)
    assert any("limit" in v for v in found)
    frac = pc("f", 3, 100, 128, ["g"], gpu_fraction_milli=500)
    p = Problem(types, (frac,))
    bad = sol(p, [NewBin("g", Placement({"f": 3}, {"f": (3,)}))])
    assert any("fractions" in v for v in violations(p, bad))
    e = ExistingBin("n1", "a", "default", {"cpu": 1000, "memory": 1024, "pods": 10})
    p = Problem(
        types, (pc("c", 2, 800, 100, [], allowed_existing=frozenset({"n1"})),), existing=(e,)
    )
    over = sol(p, [], existing=[ExistingPlacement("n1", Placement({"c": 2}))])
    assert any("existing bin n1" in v for v in violations(p, over))


def test_pool_weight_violation():
    types = (bt("lo", 2000, 4096, 50, pool="cheap"), bt("hi", 2000, 4096, 100, pool="pref"))
    p = Problem(types, (pc("c", 1, 1000, 1024, ["lo", "hi"]),), pool_weights={"pref": 10})
    assert any("higher-weight" in v for v in violations(p, sol(p, [nb("lo", c=1)])))


def test_validate_structure_rejects_bad_input():
    with pytest.raises(ProblemError, match="unknown"):
        Problem(TYPES, (pc("c", 1, 1, 1, ["nope"]),)).validate_structure()
    # sets found known are remembered: a later, different set is still checked
    shared = frozenset({"s"})
    classes = (
        PodClass("a", 1, {"cpu": 1}, shared),
        PodClass("b", 1, {"cpu": 1}, shared),
        PodClass("c", 1, {"cpu": 1}, frozenset({"s", "nope"})),
    )
    with pytest.raises(ProblemError, match=r"class c: allowed_bin_types unknown \['nope'\]"):
        Problem(TYPES, classes).validate_structure()
    with pytest.raises(ProblemError, match="duplicate"):
        Problem((TYPES[0], TYPES[0]), ()).validate_structure()
    with pytest.raises(ProblemError, match="min_count"):
        Problem(
            TYPES, (pc("c", 1, 1, 1, ["s"], gang="G"),), gangs=(Gang("G", 2),)
        ).validate_structure()
