import time
from typing import Any

import pytest
from hypothesis import given, settings

from solver import cpsat
from solver.bounds import fluid_bound, resource_bound
from solver.config import SolverConfig
from solver.cpsat import (
    _MERGED,
    _PLAIN,
    _columns_deadline,
    _Incumbent,
    budget_seconds,
    solve,
)
from solver.greedy import GreedyStopped, GreedyTimeout, cost_aware_ffd, karpenter_ffd
from solver.improve import improve
from solver.problem import AntiAffinity, PodClass, Problem, TopologyKey
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems
from tests.unit.solver.synthetic import diverse


def test_greedy_stops_at_its_deadline():
    p = diverse(60)
    with pytest.raises(GreedyTimeout):
        cost_aware_ffd(p, deadline=0.0)
    assert violations(p, karpenter_ffd(p, deadline=None)) == []


def test_karpenter_ffd_gives_up_when_told_to_stop_and_plans_the_same_otherwise():
    p = diverse(60)
    asked: list[int] = []

    def not_yet() -> bool:
        asked.append(1)
        return False

    assert karpenter_ffd(p, stop=not_yet).new_bins == karpenter_ffd(p).new_bins
    assert len(asked) >= 2  # asked now and then, not once
    with pytest.raises(GreedyStopped):
        karpenter_ffd(p, stop=lambda: True)


def test_adaptive_budget_follows_the_latency_targets_and_respects_the_limit():
    def pods(n: int) -> Problem:
        return Problem((bt("t", 1000, 1024, 10),), (pc("a", n, 100, 100, ["t"]),))

    config = SolverConfig(time_limit_seconds=5)
    assert budget_seconds(pods(60), config) == budget_seconds(pods(1000), config) == 0.4
    assert budget_seconds(pods(5000), config) == pytest.approx(1.6)
    assert budget_seconds(pods(20000), config) == 5  # the time limit
    spent = SolverConfig(time_limit_seconds=5, spent_seconds=0.1)
    assert budget_seconds(pods(1000), spent) == pytest.approx(0.3)
    # building the problem never leaves the search less than its minimum
    for gone in (0.3, 0.4, 2.0):
        late = SolverConfig(time_limit_seconds=5, spent_seconds=gone)
        assert budget_seconds(pods(1000), late) == 0.25
    assert budget_seconds(pods(5000), SolverConfig(time_limit_seconds=5, spent_seconds=1.5)) == 0.25
    tight = SolverConfig(time_limit_seconds=0.1, spent_seconds=0.3)
    assert budget_seconds(pods(1000), tight) == 0.1  # the time limit still caps it
    none = SolverConfig(time_limit_seconds=5, spent_seconds=0.5, min_search_seconds=0.0)
    assert budget_seconds(pods(1000), none) == 0.0
    assert budget_seconds(pods(600), TEST_CONFIG) == TEST_CONFIG.time_limit_seconds
    off = SolverConfig(time_limit_seconds=5, adaptive_budget=False)
    assert budget_seconds(pods(600), off) == 5


def test_pods_requesting_gpus_keep_the_whole_time_limit():
    types = (bt("g", 8000, 16384, 1000, gpus=1),)
    whole = Problem(types, (pc("w", 10, 100, 100, ["g"], gpu=1),))
    fraction = PodClass("f", 10, {"cpu": 100}, frozenset({"g"}), gpu_fraction_milli=500)
    config = SolverConfig(time_limit_seconds=5, spent_seconds=0.1)
    assert budget_seconds(whole, config) == budget_seconds(Problem(types, (fraction,)), config) == 5
    assert budget_seconds(whole, SolverConfig(time_limit_seconds=2)) == 2
    cpu_only = Problem(types, (pc("c", 10, 100, 100, ["g"]),))
    assert budget_seconds(cpu_only, config) == pytest.approx(0.3)


def test_fluid_bound_counts_hostname_anti_affinity_bins():
    # four pods that each need their own bin: at least four of the cheapest bins
    p = Problem(
        (bt("s", 2000, 4096, 100), bt("l", 8000, 16384, 400)),
        (pc("a", 4, 100, 128, ["s", "l"], topology=frozenset({"h"})),),
        topology=(AntiAffinity("h", TopologyKey.HOSTNAME),),
    )
    assert fluid_bound(p, {"a": 4}) == 400
    s = solve(p, TEST_CONFIG)
    assert s.cost_micros == 400
    assert s.lower_bound_micros == 400


def test_relaxed_fluid_bound_is_valid_on_a_large_catalog():
    p = diverse(300)
    g = karpenter_ffd(p)
    bound = fluid_bound(p, g.new_counts())
    assert 0 < bound <= g.cost_micros


@settings(max_examples=60)
@given(problems())
def test_resource_bound_never_exceeds_a_feasible_plan(problem):
    for plan in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        assert 0 <= resource_bound(problem, plan.new_counts()) <= plan.cost_micros


def test_resource_bound_is_positive_when_something_must_be_bought():
    # ten 1-cpu pods on 4-cpu bins at 400: at least 10 cpu at 100 per cpu
    p = Problem((bt("t", 4000, 16384, 400),), (pc("a", 10, 1000, 128, ["t"]),))
    assert resource_bound(p, {"a": 10}) == 1000


def test_the_first_plan_is_polished_even_when_it_comes_after_the_budget() -> None:
    p = diverse(60)
    greedy = karpenter_ffd(p)
    gone = time.monotonic() - 1.0  # the budget is already spent
    late = _Incumbent(p, greedy, polish=(gone, 5.0, time.monotonic() + 30), log=lambda _: None)
    late.consider(greedy, "late greedy", valid=True)
    assert late.best.cost_micros < greedy.cost_micros
    assert violations(p, late.best) == []
    # without the first slice (or once it is used) a late plan is kept as it came
    again = _Incumbent(p, greedy, polish=(gone, 0.0, time.monotonic() + 30), log=lambda _: None)
    again.consider(greedy, "late greedy", valid=True)
    assert again.best.cost_micros == greedy.cost_micros
    # and the time limit caps the slice
    capped = _Incumbent(p, greedy, polish=(gone, 5.0, gone), log=lambda _: None)
    capped.consider(greedy, "late greedy", valid=True)
    assert capped.best.cost_micros == greedy.cost_micros


def test_column_generation_leaves_time_to_dive_and_more_of_it_on_merged_lps() -> None:
    """Merged LPs (GPU gangs) keep most of the time; the last dive always gets its share."""
    # 10 s left: 60% of it for plain LPs, 92% for merged ones
    assert _columns_deadline(_PLAIN.share, 100.0, 110.0, 0.0) == pytest.approx(106.0)
    assert _columns_deadline(_MERGED.share, 100.0, 110.0, 0.0) == pytest.approx(109.2)
    # a slow first dive: the last one gets 1.5 times as long
    assert _columns_deadline(_MERGED.share, 100.0, 110.0, 2.0) == pytest.approx(107.0)


def _greedy_taking(monkeypatch, seconds: float) -> list[int]:
    """Freeze the clock at 100 s, make the greedy plans take ``seconds``; record LP dives."""
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    real = cpsat._greedy_tiers

    def greedy(*args, **kwargs):
        out = real(*args, **kwargs)
        clock[0] += seconds
        return out

    dives: list[int] = []

    def dive(*args, **kwargs):
        dives.append(1)
        return iter(())

    monkeypatch.setattr(cpsat, "_greedy_tiers", greedy)
    monkeypatch.setattr(cpsat, "_dive_plans", dive)
    return dives


def test_the_greedy_plans_count_against_the_adaptive_budget(monkeypatch) -> None:
    """Greedy plans that use up the planning step's budget leave no LP phase, only polishing."""
    p = diverse(60)
    # the greedy plans took a second: past the 0.4 s budget
    dives = _greedy_taking(monkeypatch, 1.0)
    calls: list[dict[str, Any]] = []

    def polish(problem, plan, **kwargs):
        calls.append({"plan": plan, **kwargs})
        return improve(problem, plan, **kwargs)

    monkeypatch.setattr(cpsat, "improve", polish)
    config = SolverConfig(time_limit_seconds=5, num_workers=1, colgen_rounds=2)
    s = solve(p, config)
    assert dives == []
    # the first pass of the polish may run for as long again as the step's budget (the
    # greedy second), not to the limit; the passes after it stop with the budget, all gone
    # on the greedy plans
    first = calls[0]
    assert first["first_pass_until"] == pytest.approx(102.0)
    assert first["deadline"] == pytest.approx(101.0)
    assert len(calls) == 1  # past the budget: no other plan is polished
    best = min((karpenter_ffd(p), cost_aware_ffd(p)), key=cpsat._quality)
    assert s.cost_micros == improve(p, **first).cost_micros < best.cost_micros
    assert violations(p, s) == []


@pytest.mark.parametrize(("least", "searched"), [(0.25, True), (0.0, False)])
def test_a_problem_that_took_the_whole_budget_to_build_still_gets_the_minimum_search(
    monkeypatch, least: float, searched: bool
) -> None:
    p = diverse(60)
    dives = _greedy_taking(monkeypatch, 0.1)  # the greedy plans: part of the search's minimum
    # building took 10 s, far past the 0.4 s step budget
    config = SolverConfig(
        time_limit_seconds=30, num_workers=1, spent_seconds=10.0, min_search_seconds=least
    )
    s = solve(p, config)
    assert bool(dives) is searched
    assert violations(p, s) == []
