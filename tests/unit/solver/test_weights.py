"""NodePool weights fall through when a heavier pool's limits run out (plan.md rule 9)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver import cpsat
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    Gang,
    NewBin,
    Placement,
    PoolLimit,
    Problem,
    Solution,
    Status,
    UnplacedReason,
)
from solver.validate import violations
from solver.weights import Leftover
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems

TYPES = (
    bt("od-s", 2000, 4096, 100, pool="od"),
    bt("od-l", 8000, 16384, 380, pool="od"),
    bt("sp-s", 2000, 4096, 40, pool="spot"),
    bt("sp-l", 8000, 16384, 150, pool="spot"),
)
ALL = [t.id for t in TYPES]
WEIGHTS = {"od": 10}


def _limited(cpu: int) -> tuple[PoolLimit, ...]:
    return (PoolLimit("od", {"cpu": cpu}),)


Policy = Callable[[Problem], Solution]
POLICIES: list[Policy] = [
    lambda p: cpsat.solve(p, TEST_CONFIG),
    karpenter_ffd,
    cost_aware_ffd,
]
IDS = ["optimiser", "karpenter", "cost-aware"]


def _pods_by_pool(problem: Problem, s: Solution) -> Counter[str]:
    pool = {t.id: t.pool for t in problem.bin_types}
    out: Counter[str] = Counter()
    for b in s.new_bins:
        out[pool[b.bin_type]] += sum(b.placement.counts.values())
    return out


def _cpu_used(problem: Problem, s: Solution, pool: str) -> int:
    types = {t.id: t for t in problem.bin_types}
    return sum(
        types[b.bin_type].capacity["cpu"] for b in s.new_bins if types[b.bin_type].pool == pool
    )


def _sol(problem: Problem, bins: list[NewBin], unplaced: tuple[()] = ()) -> Solution:
    price = {t.id: t.price_micros for t in problem.bin_types}
    total = sum(price[b.bin_type] for b in bins)
    return Solution(tuple(bins), (), unplaced, total, 0, Status.GREEDY)


@pytest.mark.parametrize("policy", POLICIES, ids=IDS)
def test_limited_heavier_pool_is_used_up_and_the_rest_falls_through(policy: Policy) -> None:
    p = Problem(
        TYPES, (pc("c", 30, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS
    )
    s = policy(p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    assert _cpu_used(p, s, "od") == 10000
    assert _pods_by_pool(p, s) == Counter({"od": 10, "spot": 20})
    # nothing more fits the heavier pool: no new bin within its limits, no room on its bins
    left = Leftover.of(p, s.new_bins)
    assert not any(left.fresh_fits(t) for t in TYPES if t.pool == "od")


@pytest.mark.parametrize("karpenter", [True, False], ids=["karpenter", "cost-aware"])
def test_without_fall_through_the_pods_beyond_the_limits_stay_unplaced(karpenter: bool) -> None:
    p = Problem(
        TYPES, (pc("c", 30, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS
    )
    plan = karpenter_ffd if karpenter else cost_aware_ffd
    s = plan(p, fall_through=False)
    assert [(u.count, u.reason) for u in s.unplaced] == [(20, UnplacedReason.LIMIT)]
    assert _pods_by_pool(p, s) == Counter({"od": 10})


@pytest.mark.parametrize("policy", POLICIES, ids=IDS)
def test_gang_beyond_the_heavier_pools_limits_goes_whole_to_the_next(policy: Policy) -> None:
    p = Problem(
        TYPES,
        (
            pc("solo", 2, 1000, 1024, ALL),
            pc("g", 6, 1000, 1024, ALL, gang="G"),
        ),
        gangs=(Gang("G", 6),),
        limits=_limited(4000),
        pool_weights=WEIGHTS,
    )
    s = policy(p)
    assert violations(p, s) == []
    assert s.unplaced == ()
    pool = {t.id: t.pool for t in TYPES}
    gang_pools = {pool[b.bin_type] for b in s.new_bins if b.placement.counts.get("g")}
    solo_pools = {pool[b.bin_type] for b in s.new_bins if b.placement.counts.get("solo")}
    assert gang_pools == {"spot"}
    assert solo_pools == {"od"}


def test_gang_without_fall_through_is_left_whole() -> None:
    p = Problem(
        TYPES,
        (pc("g", 6, 1000, 1024, ALL, gang="G"),),
        gangs=(Gang("G", 6),),
        limits=_limited(4000),
        pool_weights=WEIGHTS,
    )
    s = karpenter_ffd(p, fall_through=False)
    assert [(u.count, u.reason) for u in s.unplaced] == [(6, UnplacedReason.GANG)]
    assert karpenter_ffd(p).unplaced == ()


@pytest.mark.parametrize("limit", [None, 64000], ids=["unlimited", "not-binding"])
def test_plans_unchanged_when_limits_do_not_bind(limit: int | None) -> None:
    limits = () if limit is None else _limited(limit)
    p = Problem(TYPES, (pc("c", 30, 1000, 1024, ALL),), limits=limits, pool_weights=WEIGHTS)
    for plan in (karpenter_ffd, cost_aware_ffd):
        assert plan(p) == plan(p, fall_through=False)
    solved = dataclasses.replace(cpsat.solve(p, TEST_CONFIG), seconds=0.0)
    assert _pods_by_pool(p, solved) == Counter({"od": 30})
    one_tier = cpsat._solve_tier(p, TEST_CONFIG)
    assert solved == dataclasses.replace(one_tier, seconds=0.0)


def test_three_tiers_fall_through_in_weight_order() -> None:
    types = (*TYPES, bt("mid-s", 2000, 4096, 70, pool="mid"))
    p = Problem(
        types,
        (pc("c", 12, 1000, 1024, [t.id for t in types]),),
        limits=(PoolLimit("od", {"cpu": 4000}), PoolLimit("mid", {"cpu": 4000})),
        pool_weights={"od": 10, "mid": 5},
    )
    for policy in POLICIES:
        s = policy(p)
        assert violations(p, s) == []
        assert _pods_by_pool(p, s) == Counter({"od": 4, "mid": 4, "spot": 4})


def test_optimiser_deterministic_when_falling_through() -> None:
    p = Problem(
        TYPES, (pc("c", 30, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS
    )
    a = dataclasses.replace(cpsat.solve(p, TEST_CONFIG), seconds=0.0)
    b = dataclasses.replace(cpsat.solve(p, TEST_CONFIG), seconds=0.0)
    assert a == b
    for g in (karpenter_ffd(p), cost_aware_ffd(p)):
        assert a.cost_micros <= g.cost_micros
    assert 0 <= a.lower_bound_micros <= a.cost_micros


def test_validate_rejects_a_lighter_pool_while_the_heavier_has_limits_left() -> None:
    p = Problem(TYPES, (pc("c", 4, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS)
    # od has 10 CPUs of limits and uses none
    bad = _sol(p, [NewBin("sp-s", Placement({"c": 2})), NewBin("sp-s", Placement({"c": 2}))])
    assert any("higher-weight pool od" in v for v in violations(p, bad))


def test_validate_accepts_falling_through_once_the_limits_are_used() -> None:
    p = Problem(
        TYPES, (pc("c", 12, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS
    )
    good = _sol(
        p,
        [
            NewBin("od-l", Placement({"c": 8})),
            NewBin("od-s", Placement({"c": 2})),
            NewBin("sp-s", Placement({"c": 2})),
        ],
    )
    assert violations(p, good) == []


def test_validate_rejects_a_lighter_pool_while_a_heavier_bin_has_room() -> None:
    p = Problem(
        TYPES, (pc("c", 12, 1000, 1024, ALL),), limits=_limited(10000), pool_weights=WEIGHTS
    )
    # the limits are used up, but the od-s bin has room for one more pod
    bad = _sol(
        p,
        [
            NewBin("od-l", Placement({"c": 8})),
            NewBin("od-s", Placement({"c": 1})),
            NewBin("sp-s", Placement({"c": 2})),
            NewBin("sp-s", Placement({"c": 1})),
        ],
    )
    assert any("higher-weight pool od" in v for v in violations(p, bad))


def test_validate_judges_a_gang_whole() -> None:
    gang = Problem(
        TYPES,
        (pc("g", 4, 1000, 1024, ALL, gang="G"),),
        gangs=(Gang("G", 4),),
        limits=_limited(2000),
        pool_weights=WEIGHTS,
    )
    # one more od bin fits the limits and one pod, not the whole gang: falling through is fine
    ok = _sol(gang, [NewBin("sp-l", Placement({"g": 4}))])
    assert violations(gang, ok) == []
    roomy = dataclasses.replace(gang, limits=_limited(8000))
    bad = _sol(roomy, [NewBin("sp-l", Placement({"g": 4}))])
    assert any("gang G" in v for v in violations(roomy, bad))


@st.composite
def _limited_heavier(draw: st.DrawFn) -> Problem:
    """The random problems with their limited pool ``q`` the heavier one."""
    return dataclasses.replace(draw(problems()), pool_weights={"q": draw(st.sampled_from([5, 10]))})


@settings(max_examples=25)
@given(_limited_heavier())
def test_falling_through_keeps_every_rule_and_the_optimiser_never_loses(problem: Problem) -> None:
    s = cpsat.solve(problem, TEST_CONFIG)
    assert violations(problem, s) == []
    assert 0 <= s.lower_bound_micros <= s.cost_micros
    placed = sum(s.placed_counts().values())
    for plan in (karpenter_ffd, cost_aware_ffd):
        g = plan(problem)
        assert violations(problem, g) == []
        placed_g = sum(g.placed_counts().values())
        assert placed >= placed_g
        if placed == placed_g:
            assert s.cost_micros <= g.cost_micros
        # falling through only adds pods to the top tier's plan
        alone = plan(problem, fall_through=False)
        assert placed_g >= sum(alone.placed_counts().values())


_ROOM_TYPES = (
    *TYPES,
    bt("mid-s", 2000, 8192, 60, pool="mid"),
    bt("mid-l", 4000, 8192, 90, pool="mid"),
)
_ROOM_CLASSES = (
    pc("small", 50, 250, 512, [t.id for t in _ROOM_TYPES]),
    pc("wide", 50, 1500, 256, [t.id for t in _ROOM_TYPES]),
    pc("tall", 50, 100, 6000, ["od-l", "mid-s", "sp-l"]),
)


_KEYS = ("small", "wide", "tall")


def _first_bin_with_room(problem: Problem, plan: Solution, c_key: str, w: int) -> str | None:
    """The scan ``room_higher`` replaced: the first heavier bin, in plan order, with room."""
    types = {t.id: t for t in problem.bin_types}
    classes = {c.key: c for c in problem.classes}
    c = classes[c_key]
    for nb in plan.new_bins:
        t = types[nb.bin_type]
        if problem.pool_weights.get(t.pool, 0) <= w or t.id not in c.allowed_bin_types:
            continue
        room = dict(t.capacity)
        for k, n in nb.placement.counts.items():
            for r, v in classes[k].demand.items():
                room[r] = room.get(r, 0) - v * n
        if all(v <= room.get(r, 0) for r, v in c.demand.items() if v > 0):
            return t.pool
    return None


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([t.id for t in _ROOM_TYPES]),
            st.integers(0, 12),
            st.integers(0, 4),
            st.integers(0, 2),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_room_higher_names_the_first_heavier_bin_with_room(
    bins: list[tuple[str, int, int, int]],
) -> None:
    from solver.validate import _WeightCheck  # noqa: PLC0415 - the check under test

    p = Problem(_ROOM_TYPES, _ROOM_CLASSES, pool_weights={"od": 10, "mid": 5})
    plan = _sol(
        p,
        [
            NewBin(t, Placement({k: n for k, n in zip(_KEYS, ns, strict=True) if n}))
            for t, *ns in bins
        ],
    )
    check = _WeightCheck(p, {c.key: c for c in p.classes}, plan)
    for c in p.classes:
        for w in (0, 5):
            assert check.room_higher(c, w) == _first_bin_with_room(p, plan, c.key, w)


def test_room_higher_prefers_the_earlier_bin_over_its_types_order() -> None:
    from solver.validate import _WeightCheck  # noqa: PLC0415 - the check under test

    p = Problem(_ROOM_TYPES, _ROOM_CLASSES, pool_weights={"od": 10, "mid": 5})
    # the first od-l bin is full; the mid-s bin comes before the od-l bin with room
    plan = _sol(
        p,
        [
            NewBin("od-l", Placement({"small": 32})),
            NewBin("mid-s", Placement({"small": 1})),
            NewBin("od-l", Placement({"small": 1})),
        ],
    )
    small = next(c for c in p.classes if c.key == "small")
    check = _WeightCheck(p, {c.key: c for c in p.classes}, plan)
    assert check.room_higher(small, 0) == "mid" == _first_bin_with_room(p, plan, "small", 0)
    assert check.room_higher(small, 5) == "od"
