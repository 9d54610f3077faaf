"""The weight-aware bound (``bounds.tiered_bound``) and reachable capacities."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from solver import cpsat
from solver.bounds import fluid_bound, reachable_capacity, tiered_bound
from solver.config import SolverConfig
from solver.problem import BinType, PodClass, PoolLimit, Problem
from solver.weights import fits_one
from tests.unit.solver.builders import bt, pc


def _valid(
    problem: Problem, pods: list[PodClass], groups: list[list[int]], kinds: tuple[BinType, ...]
) -> bool:
    """Whether bins ``kinds`` holding ``groups`` keep capacity, limits and rule 9 (fresh fit)."""
    for group, t in zip(groups, kinds, strict=True):
        used: Counter[str] = Counter()
        for i in group:
            if t.id not in pods[i].allowed_bin_types:
                return False
            used.update(pods[i].demand)
        if any(v > t.capacity.get(r, 0) for r, v in used.items()):
            return False
    usage: Counter[tuple[str, str]] = Counter()
    for t in kinds:
        for r, v in t.usage_for_limits().items():
            usage[(t.pool, r)] += v
    limits = {lim.pool: lim.remaining for lim in problem.limits}
    if any(usage[(p, r)] > v for p, lim in limits.items() for r, v in lim.items()):
        return False
    return not any(
        _heavier_takes(problem, pods[i], t, usage)
        for group, t in zip(groups, kinds, strict=True)
        for i in group
    )


def _heavier_takes(
    problem: Problem, pod: PodClass, t: BinType, usage: Counter[tuple[str, str]]
) -> bool:
    """Whether one more bin of a pool heavier than ``t``'s, within the limits left, holds it."""
    weights = problem.pool_weights
    limits = {lim.pool: lim.remaining for lim in problem.limits}
    for h in problem.bin_types:
        if weights.get(h.pool, 0) <= weights.get(t.pool, 0):
            continue
        if h.id not in pod.allowed_bin_types or not fits_one(problem, pod, h):
            continue
        use = h.usage_for_limits()
        lim = limits.get(h.pool, {})
        if all(usage[(h.pool, r)] + use.get(r, 0) <= v for r, v in lim.items()):
            return True
    return False


def _partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    out: list[list[list[int]]] = []
    for part in _partitions(items[1:]):
        out.extend([*part[:i], [items[0], *part[i]], *part[i + 1 :]] for i in range(len(part)))
        out.append([[items[0]], *part])
    return out


def _optimum(problem: Problem) -> float:
    """Return the cheapest valid plan placing every pod (exhaustive; inf if none)."""
    pods = [c for c in problem.classes for _ in range(c.count)]
    best = math.inf
    for groups in _partitions(list(range(len(pods)))):
        for kinds in itertools.product(problem.bin_types, repeat=len(groups)):
            cost = sum(t.price_micros for t in kinds)
            if cost < best and _valid(problem, pods, groups, kinds):
                best = cost
    return best


@st.composite
def weighted(draw: st.DrawFn) -> Problem:
    """At most 5 pods, a weighted pool with small limits and an unweighted one."""
    types = []
    for i, pool in enumerate(["heavy", "heavy", "light", "light"]):
        size = draw(st.sampled_from([1, 2, 3]))
        price = size * draw(st.sampled_from([60, 100, 150])) + draw(st.integers(0, 20))
        types.append(bt(f"t{i}", size * 1000, size * 2048, price, pool=pool))
    classes = []
    left = 5
    for j in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, min(3, left)))
        left -= count
        cpu = draw(st.sampled_from([300, 500, 900, 1400]))
        allowed = [t.id for t in types]
        classes.append(pc(f"c{j}", count, cpu, 512, allowed))
    limit = PoolLimit("heavy", {"cpu": draw(st.sampled_from([1000, 2000, 3000, 4000]))})
    return Problem(
        tuple(types),
        tuple(classes),
        limits=(limit,),
        pool_weights={"heavy": 10, "light": 0},
    )


@settings(max_examples=120, deadline=None)
@given(weighted())
def test_the_tiered_bound_never_exceeds_the_cheapest_valid_plan(problem: Problem) -> None:
    best = _optimum(problem)
    if math.isinf(best):
        return
    demand = {c.key: c.count for c in problem.classes}
    assert tiered_bound(problem, demand) <= best


def _pools() -> Problem:
    """Pods that must fill a dear, limited pool of weight 10 before a cheap spot pool."""
    types = (
        bt("od", 4000, 8192, 400, pool="on-demand"),
        bt("spot", 4000, 8192, 100, pool="spot"),
    )
    classes = (pc("web", 20, 1000, 1024, ["od", "spot"]),)
    return Problem(
        types,
        classes,
        limits=(PoolLimit("on-demand", {"cpu": 8000}),),
        pool_weights={"on-demand": 10, "spot": 0},
    )


def test_the_bound_of_a_plan_that_falls_through_tiers_counts_the_heavy_pool() -> None:
    problem = _pools()
    demand = {"web": 20}
    unweighted = fluid_bound(dataclasses.replace(problem, pool_weights={}), demand)
    assert unweighted == 500  # everything on spot
    # rule 9: the on-demand pool is used past 4 CPUs (its limit less one bin) before any pod
    # goes to spot; the optimum buys 2 on-demand bins and 3 spot ones
    assert 800 <= tiered_bound(problem, demand) <= 1100
    plan = cpsat.solve(problem, SolverConfig(deterministic_time=1.0, num_workers=1))
    assert plan.cost_micros == 1100
    assert plan.lower_bound_micros >= 800


def test_a_class_that_fits_its_top_tier_keeps_it_in_the_bound() -> None:
    problem = dataclasses.replace(_pools(), classes=(pc("web", 4, 1000, 1024, ["od", "spot"]),))
    assert tiered_bound(problem, {"web": 4}) == 400


def test_reachable_capacity_is_the_largest_sum_of_pod_sizes() -> None:
    assert reachable_capacity(1930, (250, 500, 1000)) == 1750
    assert reachable_capacity(1000, (300,)) == 900
    assert reachable_capacity(1000, (300, 700)) == 1000
    assert reachable_capacity(11, (3, 7)) == 10
    assert reachable_capacity(0, (3,)) == 0


def test_capacity_no_pod_mix_can_fill_is_not_counted() -> None:
    # 1930m of CPU holds 7 pods of 250m (1750m): 14 pods need 2 bins, not 1.81
    problem = Problem((bt("t", 1930, 65536, 100),), (pc("p", 14, 250, 64, ["t"]),))
    assert fluid_bound(problem, {"p": 14}) == 200
