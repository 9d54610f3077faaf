"""Vectorised knapsack bounds, the proven pattern bound, and the LP dive."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver import colgen, rounding
from solver.bounds import fast_knapsack_upper
from solver.colgen import (
    SMOOTHING,
    LPTimeout,
    Pattern,
    balanced_slices,
    generate,
    lp_bound,
    master_lp,
    patterns_from_solution,
    proven_bound,
    type_groups,
)
from solver.cpsat import solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.pricing import UpperIndex
from solver.problem import (
    BinType,
    CoLocation,
    NewBin,
    Placement,
    Problem,
    Solution,
    SpreadConstraint,
    Status,
    TopologyKey,
)
from solver.rounding import dive, zone_bound, zone_quotas
from solver.validate import violations
from solver.weights import apply_pool_weights
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems


@settings(max_examples=40, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_vectorised_uppers_equal_the_row_bound(problem: Problem, rng) -> None:
    demand = {c.key: c.count for c in problem.classes}
    groups = type_groups(problem)
    index = UpperIndex(problem, [rep for rep, _ in groups], demand)
    duals = {c.key: rng.choice([0.0, rng.uniform(0, 500)]) for c in problem.classes}
    got = index.uppers(duals)
    for (rep, _), value in zip(groups, got, strict=True):
        want = fast_knapsack_upper(problem, rep, duals, demand)
        assert value == pytest.approx(want, rel=1e-9, abs=1e-6)


@settings(max_examples=30, deadline=None)
@given(problems())
def test_proven_bound_is_below_every_plan_for_its_demand(problem: Problem) -> None:
    filtered = apply_pool_weights(problem)
    for plan in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        demand = {k: n for k, n in plan.new_counts().items() if n > 0}
        cg = generate(filtered, demand, patterns_from_solution(plan), rounds=5, deadline=None)
        assert lp_bound(filtered, cg, demand) <= plan.cost_micros
        groups = type_groups(filtered)
        index = UpperIndex(filtered, [rep for rep, _ in groups], demand)
        duals = dict.fromkeys(demand, 1000.0)  # any non-negative duals give a valid bound
        assert proven_bound(filtered, (groups, index), duals, demand) <= plan.cost_micros


@settings(max_examples=30, deadline=None)
@given(problems())
def test_dive_places_exactly_the_demand_within_capacity(problem: Problem) -> None:
    filtered = apply_pool_weights(problem)
    plan = min((karpenter_ffd(problem), cost_aware_ffd(problem)), key=lambda s: (s.cost_micros, 0))
    demand = {k: n for k, n in plan.new_counts().items() if n > 0}
    cg = generate(filtered, demand, patterns_from_solution(plan), rounds=5, deadline=None)
    bins = dive(filtered, cg.patterns, demand)
    if bins is None:
        return
    got = Solution(tuple(bins), (), (), 0, 0, Status.FEASIBLE)
    placed: dict[str, int] = {}
    for b in got.new_bins:
        for k, n in b.placement.counts.items():
            placed[k] = placed.get(k, 0) + n
    assert placed == demand
    capacity = [v for v in violations(problem, got) if "capacity" in v or "GPU" in v]
    assert capacity == []


def test_dive_reaches_three_bins_where_first_fit_decreasing_needs_four() -> None:
    # sizes 5,5,4,4,3,3,3,3 in bins of 10: FFD makes 5+5, 4+4, 3+3+3, 3; best is 5+5, 4+3+3 x2
    t = bt("t", 10000, 100000, 1000)
    p = Problem(
        (t,),
        (
            pc("five", 2, 5000, 1, ["t"]),
            pc("four", 2, 4000, 1, ["t"]),
            pc("three", 4, 3000, 1, ["t"]),
        ),
    )
    greedy = karpenter_ffd(p)
    assert len(greedy.new_bins) == 4
    demand = greedy.new_counts()
    cg = generate(p, demand, patterns_from_solution(greedy), rounds=10, deadline=None)
    bins = dive(p, cg.patterns, demand)
    assert bins is not None
    assert len(bins) == 3
    assert (
        violations(p, Solution(tuple(bins), (), (), 3 * t.price_micros, 0, Status.FEASIBLE)) == []
    )


def test_a_passed_deadline_stops_every_master_lp_without_a_wrong_answer() -> None:
    t = bt("t", 10000, 100000, 1000)
    p = Problem((t,), (pc("five", 2, 5000, 1, ["t"]), pc("three", 4, 3000, 1, ["t"])))
    greedy = karpenter_ffd(p)
    demand = greedy.new_counts()
    seeds = patterns_from_solution(greedy)
    with pytest.raises(LPTimeout):
        master_lp(p, {"t": t}, seeds, demand, deadline=time.monotonic() - 1)
    late = generate(p, demand, seeds, rounds=10, deadline=0.0, bound_deadline=0.0)
    assert (late.patterns, lp_bound(p, late, demand), late.support) == (seeds, 0, [])
    assert dive(p, seeds, demand, deadline=0.0) is None
    on_time = generate(p, demand, seeds, rounds=10, deadline=None)
    # one bin for the fives, 4/3 for the threes
    assert on_time.lp_value == pytest.approx(7000 / 3)
    # exact pricing proved the LP optimal over all patterns: its value is the bound
    assert on_time.exact_factor == pytest.approx(1, rel=1e-3)
    assert lp_bound(p, on_time, demand) == 2334  # costs are whole micro-dollars


def test_zone_quotas_deal_spread_pods_evenly_from_existing_counts() -> None:
    types = tuple(bt(f"t{z}", 4000, 8192, 100, zone=z) for z in "abc")
    spread = SpreadConstraint("s", TopologyKey.ZONE, 1, ("a", "b", "c"), {"a": 2})
    cls = pc("web", 7, 100, 100, ["ta", "tb", "tc"], topology=frozenset({"s"}))
    p = Problem(types, (cls,), topology=(spread,))
    quotas = zone_quotas(p, {"web": 7})
    assert quotas == {"web": {"a": 1, "b": 3, "c": 3}}


def _linear_catalog(largest: int) -> tuple[BinType, ...]:
    # like Karpenter's fake catalog: size i has i CPUs and 2i GiB for the price of i
    return tuple(bt(f"s{i}", 1000 * i, 2048 * i, 1000 * i) for i in range(1, largest + 1))


def test_balanced_slices_split_every_class_evenly_on_the_cheapest_bin() -> None:
    types = _linear_catalog(20)
    ids = [t.id for t in types]
    p = Problem(types, (pc("cpu", 30, 1000, 256, ids), pc("mem", 30, 125, 2048, ids)))
    slices = balanced_slices(p, {"cpu": 30, "mem": 30}, 4)
    # 60 pods are too many for one bin (110 pods, but 34 units of CPU and memory > 20)
    assert [(s.bin_type, s.counts) for s in slices[:2]] == [
        ("s17", (("cpu", 15), ("mem", 15))),
        ("s12", (("cpu", 10), ("mem", 10))),
    ]
    for s in slices:
        n = dict(s.counts)
        alone = Problem(
            types, (pc("cpu", n["cpu"], 1000, 256, ids), pc("mem", n["mem"], 125, 2048, ids))
        )
        price = next(t.price_micros for t in types if t.id == s.bin_type)
        assert violations(alone, Solution((_bin(s),), (), (), price, 0, Status.FEASIBLE)) == []


def test_balanced_bins_beat_value_ordered_packing_on_a_linear_catalog() -> None:
    types = _linear_catalog(20)
    ids = [t.id for t in types]
    p = Problem(types, (pc("cpu", 30, 1000, 256, ids), pc("mem", 30, 125, 2048, ids)))
    greedy = min((karpenter_ffd(p), cost_aware_ffd(p)), key=lambda s: s.cost_micros)
    solved = solve(p, TEST_CONFIG)
    assert violations(p, solved) == []
    assert solved.cost_micros == 34000 < greedy.cost_micros  # two balanced 17s
    assert solved.lower_bound_micros == 33750  # 33.75 units of CPU and of memory


def _bin(p: Pattern) -> NewBin:
    return NewBin(p.bin_type, Placement(dict(p.counts)))


def _zoned(instance: str, zone: str) -> BinType:
    return dataclasses.replace(
        bt(f"{instance}-{zone}", 4000, 8192, 100, zone=zone), instance_type=instance
    )


def test_dive_copies_columns_to_the_zones_the_spread_deals_pods_to() -> None:
    # the only column is in zone a, but the spread deals half the pods to zone b
    types = (_zoned("m", "a"), _zoned("m", "b"))
    spread = SpreadConstraint("s", TopologyKey.ZONE, 1, ("a", "b"))
    p = Problem(
        types,
        (pc("web", 8, 1000, 1024, ["m-a", "m-b"], topology=frozenset({"s"})),),
        topology=(spread,),
    )
    bins = dive(p, [Pattern("m-a", (("web", 4),))], {"web": 8})
    assert bins is not None
    assert sorted((b.bin_type, b.placement.counts["web"]) for b in bins) == [("m-a", 4), ("m-b", 4)]
    assert violations(p, Solution(tuple(bins), (), (), 200, 0, Status.FEASIBLE)) == []


def test_dive_never_strands_carriers_of_a_hostname_co_location() -> None:
    # every column pairs a carrier with a target, but there are fewer targets than columns
    # hold: the cut keeps one target beside each carrier
    t = bt("t", 4000, 8192, 100)
    co = CoLocation("co", TopologyKey.HOSTNAME, frozenset({"side"}))
    p = Problem(
        (t,),
        (pc("app", 2, 500, 512, ["t"], topology=frozenset({"co"})), pc("side", 2, 500, 512, ["t"])),
        topology=(co,),
    )
    column = Pattern("t", (("app", 3), ("side", 1)))
    bins = dive(p, [column], {"app": 2, "side": 2})
    assert bins is not None
    assert all(b.placement.counts.get("app", 0) >= 1 for b in bins)
    assert violations(p, Solution(tuple(bins), (), (), 100 * len(bins), 0, Status.FEASIBLE)) == []


def test_dive_keeps_the_given_pods_per_zone_of_zone_bound_classes() -> None:
    types = (_zoned("m", "a"), _zoned("m", "b"))
    co = CoLocation("near", TopologyKey.ZONE, frozenset({"client"}))
    p = Problem(
        types,
        (
            pc("server", 1, 1000, 1024, ["m-a", "m-b"], topology=frozenset({"near"})),
            pc("client", 3, 1000, 1024, ["m-a", "m-b"]),
        ),
        topology=(co,),
    )
    assert zone_bound(p) == {"server", "client"}
    columns = [Pattern("m-b", (("client", 2),)), Pattern("m-a", (("client", 2), ("server", 1)))]
    zones = {"server": {"a": 1}, "client": {"a": 3}}
    bins = dive(p, columns, {"server": 1, "client": 3}, zones=zones)
    assert bins is not None
    assert {b.bin_type for b in bins} == {"m-a"}
    assert violations(p, Solution(tuple(bins), (), (), 100 * len(bins), 0, Status.FEASIBLE)) == []


@settings(max_examples=30, deadline=None)
@given(problems())
def test_dive_rounding_to_nearest_at_once_still_places_exactly_the_demand(
    problem: Problem,
) -> None:
    # the branch taken when master LPs are slow, forced for every solve
    filtered = apply_pool_weights(problem)
    plan = cost_aware_ffd(problem)
    demand = {k: n for k, n in plan.new_counts().items() if n > 0}
    columns = patterns_from_solution(plan)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rounding, "_SLOW_LP", -1.0)
        bins = dive(filtered, columns, demand)
    if bins is None:
        return
    placed: dict[str, int] = {}
    for b in bins:
        for k, n in b.placement.counts.items():
            placed[k] = placed.get(k, 0) + n
    assert placed == demand


def _every_pattern(problem: Problem, demand: dict[str, int]) -> list[Pattern]:
    """Return every non-empty pattern of every offering (tiny problems only)."""
    keys = sorted(demand)
    classes = {c.key: c for c in problem.classes}

    def grow(
        t: BinType, i: int, counts: tuple[tuple[str, int], ...], used: dict[str, int]
    ) -> Iterator[Pattern]:
        if i == len(keys):
            if counts:
                yield Pattern(t.id, counts)
            return
        k = keys[i]
        yield from grow(t, i + 1, counts, used)
        if t.id not in classes[k].allowed_bin_types:
            return
        for n in range(1, demand[k] + 1):
            now = {r: used.get(r, 0) + classes[k].demand.get(r, 0) * n for r in t.capacity}
            if any(now[r] > t.capacity[r] for r in now):
                break
            yield from grow(t, i + 1, (*counts, (k, n)), now)

    return [p for t in problem.bin_types for p in grow(t, 0, (), {})]


@pytest.mark.parametrize("smoothing", [0.0, 0.5, SMOOTHING])
@pytest.mark.parametrize("seed", range(6))
def test_column_generation_converges_to_the_pattern_lp_over_every_pattern(
    seed: int, smoothing: float
) -> None:
    # smoothed pricing may look elsewhere, but convergence is declared at the LP's own duals
    rng = __import__("random").Random(seed)
    types = tuple(
        bt(f"t{i}", cpu, 2 * cpu, price)
        for i, (cpu, price) in enumerate([(1000, 1000), (2500, 2300), (4000, 3900)])
    )
    classes = tuple(
        pc(f"c{j}", rng.randint(1, 4), rng.choice([300, 450, 700, 1100]), 100, ["t0", "t1", "t2"])
        for j in range(3)
    )
    p = Problem(types, classes)
    demand = {c.key: c.count for c in classes}
    _, full, _ = master_lp(p, {t.id: t for t in types}, _every_pattern(p, demand), demand)
    start = patterns_from_solution(karpenter_ffd(p))
    cg = generate(p, demand, start, rounds=1000, deadline=None, smoothing=smoothing)
    assert cg.converged
    assert cg.lp_value == pytest.approx(full, rel=1e-6)
    assert lp_bound(p, cg, demand) <= full + 1


def test_column_generation_is_not_converged_where_offerings_were_not_priced_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offerings with more classes than the exact knapsack takes only get the fillers."""
    p = Problem(
        (bt("s", 1000, 2048, 1000), bt("l", 3000, 6144, 2800)),
        tuple(pc(f"c{j}", 2, cpu, 100, ["s", "l"]) for j, cpu in enumerate([300, 450, 700])),
    )
    demand = {c.key: c.count for c in p.classes}
    start = patterns_from_solution(karpenter_ffd(p))
    assert generate(p, demand, start, rounds=1000, deadline=None).converged
    monkeypatch.setattr(colgen, "_EXACT_MAX", 1)
    cg = generate(p, demand, start, rounds=1000, deadline=None)
    assert not cg.converged
    assert cg.exact_factor is None
    assert lp_bound(p, cg, demand) <= cg.lp_value + 1
