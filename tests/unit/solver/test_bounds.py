"""Validity and strength of the lower bounds in ``solver.bounds``."""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver import bounds
from solver.bounds import fluid_bound, resource_bound
from solver.colgen import price_patterns
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import (
    GPU_MILLI,
    AntiAffinity,
    BinType,
    PodClass,
    Problem,
    SpreadConstraint,
    TopologyConstraint,
    TopologyKey,
)
from solver.weights import apply_pool_weights
from tests.unit.solver.builders import GPU, bt, pc
from tests.unit.solver.strategies import problems

# --- a brute-force oracle on tiny problems -------------------------------------------------


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    """Yield every set partition of ``items``."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]
        yield [[first], *part]


def _devices(fractions: list[int]) -> int:
    """Return the fewest 1000-milli devices holding ``fractions`` (exact, tiny inputs)."""

    def fits(k: int) -> bool:
        loads = [0] * k

        def place(i: int) -> bool:
            if i == len(fractions):
                return True
            for d in range(k):
                if loads[d] + fractions[i] <= GPU_MILLI:
                    loads[d] += fractions[i]
                    if place(i + 1):
                        return True
                    loads[d] -= fractions[i]
            return False

        return place(0)

    return next(k for k in range(len(fractions) + 1) if fits(k))


def _holds(problem: Problem, t: BinType, pods: list[PodClass], caps: dict[str, int]) -> bool:
    """Return whether one new bin of ``t`` holds ``pods`` (resources, GPUs, hostname caps)."""
    if any(t.id not in c.allowed_bin_types for c in pods):
        return False
    used: dict[str, int] = {}
    for c in pods:
        for r, v in c.demand.items():
            used[r] = used.get(r, 0) + v
    devices = _devices([c.gpu_fraction_milli for c in pods if c.gpu_fraction_milli])
    used[problem.gpu_resource] = used.get(problem.gpu_resource, 0) + devices
    if devices > t.gpus or any(v > t.capacity.get(r, 0) for r, v in used.items() if v):
        return False
    return all(sum(g in c.topology for c in pods) <= cap for g, cap in caps.items())


def _optimum(problem: Problem, demand: dict[str, int]) -> float:
    """Return the cheapest set of new bins holding ``demand`` (inf if none), by enumeration.

    Only the rules every bound relies on are enforced (allowed types, resources, GPU devices,
    hostname caps), so this is at most the true optimum and a bound must not exceed it.
    """
    by_key = {c.key: c for c in problem.classes}
    pods = [by_key[k] for k, n in sorted(demand.items()) for _ in range(n)]
    caps = bounds.hostname_caps(problem)
    best = math.inf
    cheapest: dict[tuple[int, ...], float] = {}
    for part in _partitions(list(range(len(pods)))):
        cost = 0.0
        for group in part:
            key = tuple(sorted(group))
            if key not in cheapest:
                members = [pods[i] for i in key]
                cheapest[key] = min(
                    (
                        t.price_micros
                        for t in problem.bin_types
                        if _holds(problem, t, members, caps)
                    ),
                    default=math.inf,
                )
            cost += cheapest[key]
            if cost >= best:
                break
        best = min(best, cost)
    return best


@st.composite
def tiny(draw: st.DrawFn) -> Problem:
    """Problems of at most 6 pods with the rules the bounds model (and GPUs of every kind)."""
    types = []
    for i in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([1, 2, 3, 4]))
        gpus = draw(st.sampled_from([0, 1, 2]))
        price = size * 100 + gpus * 300 + draw(st.integers(-40, 40))
        types.append(bt(f"t{i}", size * 1000, size * 2048, price, gpus=gpus))
    ids = [t.id for t in types]
    topology: list[TopologyConstraint] = [
        AntiAffinity("ha", TopologyKey.HOSTNAME),
        SpreadConstraint("hs", TopologyKey.HOSTNAME, 2),
    ]
    classes = []
    left = 6
    for j in range(draw(st.integers(1, 3))):
        if left <= 0:
            break
        count = draw(st.integers(1, min(3, left)))
        left -= count
        kw: dict[str, object] = {}
        kind = draw(st.sampled_from(["plain", "frac", "gpu", "ha", "hs", "both"]))
        if kind == "frac":
            kw["gpu_fraction_milli"] = draw(st.sampled_from([250, 300, 400, 500, 600, 700]))
        if kind == "gpu":
            kw["gpu"] = 1
        if kind in ("ha", "hs"):
            kw["topology"] = frozenset({kind})
        if kind == "both":
            kw["topology"] = frozenset({"ha", "hs"})
        allowed = sorted(draw(st.sets(st.sampled_from(ids), min_size=1)))
        cpu = draw(st.sampled_from([300, 600, 900, 1400, 2100]))
        mem = draw(st.sampled_from([256, 1024, 3000]))
        classes.append(pc(f"c{j}", count, cpu, mem, allowed, **kw))
    return Problem(tuple(types), tuple(classes), topology=tuple(topology))


@settings(max_examples=300, deadline=None)
@given(tiny())
def test_bounds_never_exceed_the_exact_optimum(problem: Problem) -> None:
    demand = {c.key: c.count for c in problem.classes}
    best = _optimum(problem, demand)
    if math.isinf(best):
        return  # some pod fits nowhere: no plan places this demand
    assert 0 <= resource_bound(problem, demand) <= best
    assert 0 <= fluid_bound(problem, demand) <= best
    assert fluid_bound(problem, demand, deadline=time.monotonic() + 5) <= best
    # no LP at all: the mixture and bins bounds alone
    assert fluid_bound(problem, demand, deadline=time.monotonic() - 1) <= best


@settings(max_examples=150, deadline=None)
@given(problems())
def test_bounds_never_exceed_greedy_plans_for_their_own_demand(problem: Problem) -> None:
    filtered = apply_pool_weights(problem)
    for plan in (karpenter_ffd(problem), cost_aware_ffd(problem)):
        demand = plan.new_counts()
        assert 0 <= resource_bound(filtered, demand) <= plan.cost_micros
        assert 0 <= fluid_bound(filtered, demand) <= plan.cost_micros
        assert resource_bound(filtered, demand) <= fluid_bound(filtered, demand)


def _full_lp(problem: Problem, demand: dict[str, int]) -> float:
    """Return the fluid LP over every offering at once (the value column generation must hit)."""
    data = bounds._aggregate(problem, demand)
    assert data is not None
    master = bounds._Master(data)
    for t in range(len(data.price)):
        master.add(t)
    assert master.solve(None)
    return float(master.objective.Value()) / bounds._UNIT


@settings(max_examples=100, deadline=None)
@given(problems())
def test_mixture_duals_never_exceed_the_fluid_lp(problem: Problem) -> None:
    # each is a feasible dual of the fluid LP: weak duality puts it at most the LP's value
    filtered = apply_pool_weights(problem)
    demand = karpenter_ffd(problem).new_counts()
    data = bounds._aggregate(filtered, demand)
    if data is None:
        return
    mixture = bounds._Mixture(data)
    common = mixture.best(bounds._MIXTURE_EVALUATIONS)
    own = mixture.refined()
    assert common <= own  # the per-offering weights start from the common ones
    assert own / bounds._UNIT <= _full_lp(filtered, demand) * (1 + 1e-7) + 1


@settings(max_examples=100, deadline=None)
@given(problems())
def test_column_generation_reaches_the_full_fluid_lp(problem: Problem) -> None:
    filtered = apply_pool_weights(problem)
    demand = karpenter_ffd(problem).new_counts()
    data = bounds._aggregate(filtered, demand)
    if data is None:
        return
    solved, value = bounds._fluid_lp(data, None)
    assert solved
    assert value is not None
    assert value / bounds._UNIT == pytest.approx(_full_lp(filtered, demand), rel=1e-6, abs=1)
    # solved: the mixture's duals, which only count when the LP stops early, add nothing
    mixture = bounds._Mixture(data)
    assert (
        max(mixture.best(bounds._MIXTURE_EVALUATIONS), mixture.refined())
        <= value * (1 + 1e-7) + bounds._UNIT
    )


def test_a_linear_catalog_is_never_weaker_than_the_resource_bound() -> None:
    # proportional offerings: the LP must find the resource bound, not a relaxed catalog's
    types = tuple(bt(f"t{i}", 1000 * i - 100, 2048 * i - 10, 314_748 * i - i) for i in range(1, 80))
    ids = [t.id for t in types]
    classes = tuple(pc(f"c{j}", 20 + j, 100 + 150 * j, 512 * (1 + j % 3), ids) for j in range(30))
    p = Problem(types, classes)
    demand = {c.key: c.count for c in classes}
    assert fluid_bound(p, demand) >= resource_bound(p, demand) > 0


def test_pods_larger_than_half_a_bin_take_a_bin_each() -> None:
    # 600m pods on 1000m bins: CPU alone says 1.8 bins, one bin holds one such pod
    p = Problem((bt("t", 1000, 4096, 1000),), (pc("a", 3, 600, 100, ["t"]),))
    assert fluid_bound(p, {"a": 3}) == 3000
    # exactly half: two per bin
    p = Problem((bt("t", 1000, 4096, 1000),), (pc("a", 3, 500, 100, ["t"]),))
    assert fluid_bound(p, {"a": 3}) == 1500


def test_offerings_where_the_pods_are_small_join_the_fluid_lp() -> None:
    # "l" costs more per resource than "s", so the LP starts from "s" alone, where each pod
    # takes a bin; the certificate must still see that one "l" holds all three (1900 < 3000)
    p = Problem(
        (bt("s", 1000, 4096, 1000), bt("l", 1800, 4096, 1900)),
        (pc("a", 3, 600, 100, ["s", "l"]),),
    )
    assert fluid_bound(p, {"a": 3}) == 1900


def test_gpu_fractions_above_half_take_a_whole_device_each() -> None:
    p = Problem((bt("g", 8000, 16384, 1000, gpus=1),), (pc("f", 3, 100, 100, ["g"]),))
    p = Problem(
        p.bin_types, (PodClass("f", 3, {"cpu": 100}, frozenset({"g"}), gpu_fraction_milli=600),)
    )
    assert fluid_bound(p, {"f": 3}) == 3000  # fluid without rounding: 1800


def test_gpu_fractions_round_to_what_fits_on_one_device() -> None:
    # 400 milli: two per device, so five pods need 2.5 devices' worth in the LP
    p = Problem(
        (bt("g", 8000, 16384, 1000, gpus=1),),
        (PodClass("f", 5, {"cpu": 100}, frozenset({"g"}), gpu_fraction_milli=400),),
    )
    assert fluid_bound(p, {"f": 5}) == 2500


def test_whole_gpus_and_fractions_share_the_gpu_capacity() -> None:
    # one whole GPU plus a fraction needs both devices of a 2-GPU bin
    p = Problem(
        (bt("g2", 8000, 16384, 1000, gpus=2),),
        (
            PodClass("w", 2, {"cpu": 100, GPU: 1}, frozenset({"g2"})),
            PodClass("f", 2, {"cpu": 100}, frozenset({"g2"}), gpu_fraction_milli=700),
        ),
    )
    assert fluid_bound(p, {"w": 2, "f": 2}) == 2000


def test_hostname_caps_force_bins() -> None:
    p = Problem(
        (bt("s", 2000, 4096, 100), bt("l", 8000, 16384, 350)),
        (pc("a", 6, 100, 100, ["s", "l"], topology=frozenset({"hs"})),),
        topology=(SpreadConstraint("hs", TopologyKey.HOSTNAME, 2),),
    )
    assert fluid_bound(p, {"a": 6}) == 300  # three bins of s hold two pods each


def test_a_passed_deadline_still_gives_a_valid_bound() -> None:
    types = tuple(bt(f"t{i}", 1000 * i, 2048 * i, 100 * i + 7) for i in range(1, 40))
    ids = [t.id for t in types]
    classes = tuple(pc(f"c{j}", 3, 100 * (j + 1), 300, ids) for j in range(10))
    p = Problem(types, classes)
    demand = {c.key: c.count for c in classes}
    cost = karpenter_ffd(p).cost_micros
    early = fluid_bound(p, demand, deadline=time.monotonic() - 1)
    assert resource_bound(p, demand) <= early <= fluid_bound(p, demand) <= cost


def _two_pools() -> Problem:
    """Compute-only pods and memory-only pods, each class allowed on one offering only."""
    return Problem(
        (bt("c", 4000, 4096, 400), bt("m", 1000, 16384, 400)),
        (pc("a", 8, 1000, 256, ["c"]), pc("b", 8, 100, 2048, ["m"])),
    )


def test_an_unfinished_fluid_lp_still_prices_each_class_at_its_own_offerings() -> None:
    # the resource bound prices all CPU at c's rate (880); per class: a at c's CPU rate (800)
    # plus b at m's (320), with no LP solved (the optimum: two c and one m, 1200)
    p = _two_pools()
    demand = {"a": 8, "b": 8}
    assert resource_bound(p, demand) == 880
    # no LP solved: the mixture's duals, each class at least at its own offerings' rate
    assert 1120 <= fluid_bound(p, demand, deadline=time.monotonic() - 1) <= 1200
    assert fluid_bound(p, demand) == 1200  # a needs two c (8000m), b one m: the optimum


def test_the_mixture_bound_is_tight_only_with_weights_summing_to_one() -> None:
    # the same dual with weights summing to 2, or each class at its dearest offering, claims
    # more than a plan costs (1200: two c for a, one m for b)
    p = _two_pools()
    data = bounds._aggregate(p, {"a": 8, "b": 8})
    assert data is not None
    mixture = bounds._Mixture(data)
    optimum = 1200 * bounds._UNIT
    cpu = np.array([1.0 if i == 0 else 0.0 for i in range(mixture.rows)])
    assert mixture.value(cpu) <= optimum < mixture.value(2 * cpu)
    anywhere = frozenset({"c", "m"})
    both = Problem(
        p.bin_types,
        tuple(dataclasses.replace(c, allowed_bin_types=anywhere) for c in p.classes),
    )
    data = bounds._aggregate(both, {"a": 8, "b": 8})
    assert data is not None
    mixture = bounds._Mixture(data)
    cheapest = mixture.value(cpu)
    dearest = float(
        np.where(np.isfinite(mixture.blocked), cpu @ mixture.cost, -np.inf)
        .reshape(mixture.shape)
        .max(axis=0)
        @ mixture.counts
    )
    assert cheapest <= fluid_bound(both, {"a": 8, "b": 8}) * bounds._UNIT
    assert dearest > 1200 * bounds._UNIT


def test_no_demand_or_no_fitting_offering_gives_zero() -> None:
    p = Problem((bt("s", 1000, 1024, 100),), (pc("big", 2, 4000, 100, ["s"]),))
    assert fluid_bound(p, {}) == 0
    assert fluid_bound(p, {"big": 2}) == resource_bound(p, {"big": 2})


def test_hostname_groups_need_whole_bins() -> None:
    # at most two per bin: three pods need two bins, where the LP buys one and a half
    p = Problem(
        (bt("s", 2000, 4096, 100),),
        (pc("a", 3, 100, 100, ["s"], topology=frozenset({"hs"})),),
        topology=(SpreadConstraint("hs", TopologyKey.HOSTNAME, 2),),
    )
    assert fluid_bound(p, {"a": 3}) == 200


def _best_pattern_value(problem: Problem, t: BinType, duals: dict[str, float]) -> float:
    """Return the most valuable contents of one bin of ``t`` (by enumeration, tiny inputs)."""
    caps = bounds.hostname_caps(problem)
    classes = list(problem.classes)
    best = 0.0
    for counts in itertools.product(*(range(c.count + 1) for c in classes)):
        pods = [c for c, n in zip(classes, counts, strict=True) for _ in range(n)]
        if pods and _holds(problem, t, pods, caps):
            best = max(best, sum(duals[c.key] for c in pods))
    return best


@pytest.mark.parametrize("late", [False, True])
@settings(max_examples=150, deadline=None)
@given(problem=tiny(), rng=st.randoms(use_true_random=False))
def test_exact_pricing_is_the_knapsack_optimum_with_whole_devices(
    problem: Problem, rng, late: bool
) -> None:
    """The exact knapsack bound is never below any pattern and, fractions included, tight.

    ``late``: the pricing deadline has already passed; a knapsack still gets a few
    milliseconds, and whatever bound it returns holds.
    """
    demand = {c.key: c.count for c in problem.classes}
    duals = {c.key: rng.choice([0.0, rng.uniform(1, 500)]) for c in problem.classes}
    deadline = time.monotonic() - 1 if late else None
    for t in problem.bin_types:
        best = _best_pattern_value(problem, t, duals)
        patterns, upper = price_patterns(problem, t, duals, demand, exact=True, deadline=deadline)
        for p in patterns:
            pods = [c for c in problem.classes for _ in range(p.count(c.key))]
            assert _holds(problem, t, pods, bounds.hostname_caps(problem))
            assert sum(duals[c.key] for c in pods) <= best + 1e-9
        if upper is None:
            continue
        assert upper >= best - 1e-9
        if late:
            continue
        # CP-SAT proves these tiny knapsacks; only the integer scaling of the duals is slack
        assert upper <= best + 1e-5 * max(duals.values()) * (sum(demand.values()) + 2)


def test_exact_pricing_packs_fractions_device_by_device() -> None:
    """Three 600-milli pods fill 1800 of 2000 milli-GPUs but need three devices."""
    t = bt("g2", 16000, 65536, 1000, gpus=2)
    p = Problem((t,), (pc("f", 3, 100, 100, ["g2"], gpu_fraction_milli=600),))
    patterns, upper = price_patterns(p, t, {"f": 10.0}, {"f": 3}, exact=True)
    assert upper is not None
    assert upper == pytest.approx(20.0, abs=1e-3)
    assert max(q.count("f") for q in patterns) == 2


def test_the_fluid_lp_adds_twice_as_many_offerings_each_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # many offerings of different shapes price out: adding one a round re-solved the LP once
    # per offering (slow where hundreds of classes are each a row of every offering)
    types = tuple(
        bt(
            f"t{i}",
            500 * (1 + i % 9),
            512 * (1 + (i * 5) % 23),
            50_000 * (1 + i % 9) + 11_000 * (1 + (i * 5) % 23) - 13 * i,
        )
        for i in range(60)
    )
    ids = [t.id for t in types]
    classes = tuple(
        pc(f"c{j}", 3, 90 + 41 * (j % 11), 100 + 97 * ((j * 3) % 17), ids) for j in range(60)
    )
    p = Problem(types, classes)
    demand = {c.key: c.count for c in classes}
    data = bounds._aggregate(p, demand)
    assert data is not None
    full = _full_lp(p, demand)
    sizes: list[int] = []
    solve = bounds._Master.solve

    def counted(master: bounds._Master, deadline: float | None) -> bool:
        sizes.append(len(master.types))
        return solve(master, deadline)

    monkeypatch.setattr(bounds._Master, "solve", counted)
    solved, value = bounds._fluid_lp(data, None)
    assert solved
    assert value is not None
    assert value / bounds._UNIT == pytest.approx(full, rel=1e-6, abs=1)
    added = sizes[-1] - sizes[0]
    assert added >= 4
    assert len(sizes) <= 2 + math.ceil(math.log2(added))
