import dataclasses
import time
from typing import Any

import pytest
from hypothesis import given, settings

from solver.bounds import fluid_bound
from solver.colgen import generate, lp_bound, patterns_from_solution
from solver.cpsat import _rebalances, solve, solve_with_greedy
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    AntiAffinity,
    ExistingBin,
    NewBin,
    Placement,
    Problem,
    Solution,
    SpreadConstraint,
    Status,
    TopologyKey,
    Unplaced,
    UnplacedReason,
)
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, interleaved, pc, two_families
from tests.unit.solver.strategies import problems


def _placed(s: Solution) -> int:
    return sum(s.placed_counts().values())


@settings(max_examples=25)
@given(problems())
def test_optimiser_valid_and_never_worse_than_greedy(problem):
    s = solve(problem, TEST_CONFIG)
    assert violations(problem, s) == []
    for g in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        assert _placed(s) >= _placed(g)
        if _placed(s) == _placed(g):
            assert s.cost_micros <= g.cost_micros
    assert 0 <= s.lower_bound_micros <= s.cost_micros


@settings(max_examples=5)
@given(problems())
def test_deterministic_with_seed_and_deterministic_time(problem):
    a = dataclasses.replace(solve(problem, TEST_CONFIG), seconds=0.0)
    b = dataclasses.replace(solve(problem, TEST_CONFIG), seconds=0.0)
    assert a == b


def test_fractions_pack_four_halves_on_two_gpus():
    types = (bt("g2", 8000, 32768, 1000, gpus=2), bt("g4", 16000, 65536, 2100, gpus=4))
    p = Problem(types, (pc("f", 4, 500, 1024, ["g2", "g4"], gpu_fraction_milli=500),))
    s = solve(p, TEST_CONFIG)
    assert violations(p, s) == []
    assert [b.bin_type for b in s.new_bins] == ["g2"]
    assert s.status is Status.OPTIMAL


def test_zone_spread_and_hostname_anti_affinity():
    types = (bt("a1", 4000, 8192, 100, zone="a"), bt("b1", 4000, 8192, 100, zone="b"))
    topo = (
        SpreadConstraint("z", TopologyKey.ZONE, 1, zones=("a", "b")),
        AntiAffinity("h", TopologyKey.HOSTNAME),
    )
    p = Problem(
        types,
        (pc("c", 4, 500, 512, ["a1", "b1"], topology=frozenset({"z", "h"})),),
        topology=topo,
    )
    s = solve(p, TEST_CONFIG)
    assert violations(p, s) == []
    assert len(s.new_bins) == 4
    assert sorted(b.bin_type for b in s.new_bins) == ["a1", "a1", "b1", "b1"]


def test_pool_weight_prefers_heavier_pool():
    types = (bt("cheap", 2000, 4096, 50, pool="spot"), bt("pref", 2000, 4096, 100, pool="reserved"))
    p = Problem(types, (pc("c", 2, 1000, 1024, ["cheap", "pref"]),), pool_weights={"reserved": 5})
    s = solve(p, TEST_CONFIG)
    assert violations(p, s) == []
    assert {b.bin_type for b in s.new_bins} == {"pref"}


def test_beats_karpenter_by_ten_percent_on_gpu_adversarial():
    # FFD keeps growing a claim while the 8-GPU type fits; one-GPU nodes are far cheaper.
    types = (
        bt("g1", 4000, 16384, 530_000, gpus=1),
        bt("g8", 192000, 786432, 16_300_000, gpus=8),
    )
    p = Problem(types, (pc("gpu", 8, 3000, 12288, ["g1", "g8"], gpu=1),))
    s = solve(p, TEST_CONFIG)
    k = karpenter_ffd(p)
    assert violations(p, s) == []
    assert s.cost_micros <= 0.9 * k.cost_micros


def test_lower_bounds_are_below_greedy_costs():
    types = (bt("s", 2000, 4096, 100), bt("m", 4000, 8192, 190), bt("l", 8000, 16384, 370))
    p = Problem(types, (pc("a", 7, 700, 900, ["s", "m", "l"]), pc("b", 5, 1300, 3000, ["m", "l"])))
    g = cost_aware_ffd(p)
    demand = g.new_counts()
    assert fluid_bound(p, demand) <= g.cost_micros
    cg = generate(p, demand, patterns_from_solution(g), rounds=5, deadline=None)
    assert 0 < lp_bound(p, cg, demand) <= g.cost_micros
    s = solve(p, TEST_CONFIG)
    assert s.lower_bound_micros <= s.cost_micros <= g.cost_micros


def test_exact_pricing_finds_the_best_knapsack_pattern():
    from solver.colgen import price_patterns  # noqa: PLC0415

    t = bt("t", 1000, 100000, 100)
    classes = [pc("a", 5, 600, 1, ["t"]), pc("b", 5, 500, 1, ["t"])]
    p = Problem((t,), tuple(classes))
    # greedy by density takes one "a" (value 7); two "b" are worth 10
    duals, demand = {"a": 7.0, "b": 5.0}, {"a": 5, "b": 5}
    heuristic, _ = price_patterns(p, t, duals, demand, exact=False)
    exact, upper = price_patterns(p, t, duals, demand, exact=True)
    assert (("b", 2),) not in [q.counts for q in heuristic]
    assert (("b", 2),) in [q.counts for q in exact]
    assert upper is not None
    assert 10.0 <= upper < 10.1


@settings(max_examples=10)
@given(problems())
def test_solve_with_greedy_returns_solves_plan_and_the_greedy_plans(problem):
    solved = solve_with_greedy(problem, TEST_CONFIG)
    plain = solve(problem, TEST_CONFIG)
    assert dataclasses.replace(solved.best, seconds=0.0) == dataclasses.replace(plain, seconds=0.0)
    assert len(solved.greedy) == 2
    for g in solved.greedy:
        assert violations(problem, g) == []


@settings(max_examples=10)
@given(problems())
def test_a_decisive_greedy_plan_is_returned_at_once(problem):
    solved = solve_with_greedy(problem, TEST_CONFIG, decisive=lambda s: True)
    # the best greedy plan: most pods placed, then cheapest, then fewest nodes
    best = min(solved.greedy, key=lambda s: (-_placed(s), s.cost_micros, len(s.new_bins)))
    assert solved.best is best
    never = solve_with_greedy(problem, TEST_CONFIG, decisive=lambda s: False)
    assert dataclasses.replace(never.best, seconds=0.0) == dataclasses.replace(
        solve(problem, TEST_CONFIG), seconds=0.0
    )


def _priced(cost: int, unplaced: int = 0) -> Solution:
    left = (Unplaced("a", unplaced, UnplacedReason.TOPOLOGY),) if unplaced else ()
    return Solution((), (), left, cost, 0, Status.GREEDY)


def test_karpenters_full_bins_are_polished_first_when_not_much_dearer() -> None:
    from solver.cpsat import _first_polished  # noqa: PLC0415

    cost_aware, karpenter = _priced(1000), _priced(1250)
    assert _first_polished([cost_aware, karpenter]) is karpenter
    cost_aware, karpenter = _priced(1000), _priced(1251)
    assert _first_polished([cost_aware, karpenter]) is cost_aware
    # never a plan that leaves more pods unplaced, however cheap
    cost_aware, karpenter = _priced(1000), _priced(900, unplaced=1)
    assert _first_polished([cost_aware, karpenter]) is cost_aware
    only = _priced(1000)
    assert _first_polished([only]) is only  # the cost-aware plan ran out of time


def test_the_first_polish_of_karpenters_plan_sheds_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from solver import cpsat  # noqa: PLC0415

    p = Problem(
        (bt("m", 4000, 8192, 400), bt("l", 8000, 16384, 700)),
        (pc("a", 5, 1500, 1024, ["m", "l"]),),
    )
    from solver.improve import improve as original  # noqa: PLC0415

    calls: list[tuple[int, bool]] = []

    def polish(problem: Problem, plan: Solution, **kwargs: Any) -> Solution:
        calls.append((plan.cost_micros, kwargs.get("shed_first", False)))
        return original(problem, plan, **kwargs)

    monkeypatch.setattr(cpsat, "improve", polish)
    karpenter = karpenter_ffd(p)
    cost_aware = cost_aware_ffd(p)
    assert karpenter.cost_micros <= 1.25 * cost_aware.cost_micros
    solve(p, TEST_CONFIG)
    assert calls[0] == (karpenter.cost_micros, True)


def _one_pod_bins(n: int, *, gpu: int = 0) -> tuple[Problem, Solution]:
    p = Problem((bt("t", 1000, 2048, 100, gpus=1),), (pc("a", n, 1000, 1024, ["t"], gpu=gpu),))
    bins = tuple(NewBin("t", Placement({"a": 1})) for _ in range(n))
    return p, Solution(bins, (), (), 100 * n, 0, Status.FEASIBLE)


def test_only_a_full_bins_plan_of_many_bins_without_gpu_pods_is_rebalanced() -> None:
    problem, plan = _one_pod_bins(50)
    assert _rebalances(problem, plan, [plan])
    # the polish of a cost-aware plan leaves the time to the LP search
    assert not _rebalances(problem, plan, [])
    few, fewer = _one_pod_bins(49)
    assert not _rebalances(few, fewer, [fewer])
    gpus, on_gpus = _one_pod_bins(50, gpu=1)
    assert not _rebalances(gpus, on_gpus, [on_gpus])


def _interleaved(shrink: int, count: int) -> Problem:
    types = two_families()
    return Problem(tuple(types), interleaved(types, shrink, count))


def _first_of(problem: Problem) -> tuple[Solution, Solution, list[Solution], list[Solution]]:
    from solver.cpsat import _guided  # noqa: PLC0415

    cost_aware = cost_aware_ffd(problem, fall_through=False)
    karpenter = karpenter_ffd(problem, fall_through=False)
    first, candidates, full = _guided(
        problem, ([cost_aware, karpenter], [karpenter]), time.monotonic() + 60, lambda _m: None
    )
    return karpenter, first, candidates, full


def test_the_guided_plan_is_polished_first_where_karpenters_bins_hold_many_pods() -> None:
    # 24 pods a bin: the guided first fit ($3,000) replaces Karpenter's ($3,400) as the
    # full-bins plan polished first
    karpenter, first, candidates, full = _first_of(_interleaved(8, 16))
    assert first is candidates[-1] is full[-1]
    assert first is not karpenter
    assert first.cost_micros == 3000 < karpenter.cost_micros == 3400
    assert violations(_interleaved(8, 16), first) == []


def test_the_guided_plan_is_not_made_where_karpenters_bins_hold_few_pods() -> None:
    # 4 pods a bin: a node's cost is its size rounded up to its few pods, whatever the family
    karpenter, first, candidates, full = _first_of(_interleaved(1, 4))
    assert first is karpenter
    assert len(candidates) == 2
    assert full == [karpenter]


def test_the_guided_plan_is_not_made_beside_existing_nodes() -> None:
    # even nodes no pod fits on: a batch dealt to two families leaves room in both
    problem = _interleaved(8, 16)
    full_node = ExistingBin("n0", "a", "default", {"cpu": 0, "memory": 0, "pods": 0})
    karpenter, first, _, full = _first_of(dataclasses.replace(problem, existing=(full_node,)))
    assert first is karpenter
    assert full == [karpenter]
