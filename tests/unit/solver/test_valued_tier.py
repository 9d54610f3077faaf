"""A limited heavier pool's pods chosen by what they cost elsewhere (``solver.valued_tier``)."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from solver import cpsat, tiers, valued_tier
from solver.problem import BinType, ExistingBin, PoolLimit, Problem, Solution
from solver.validate import violations
from tests.unit.solver.builders import TEST_CONFIG, bt, pc

GiB = 1024


def _burst(id_: str, price: int, pool: str) -> BinType:
    """A small burstable node: cheap per CPU, at most four pods."""
    t = bt(id_, 2000, 4 * GiB, price, pool=pool)
    return dataclasses.replace(t, capacity={**t.capacity, "pods": 4})


TYPES = (
    _burst("od-burst", 30_000, "od"),
    bt("od-general", 8000, 32 * GiB, 400_000, pool="od"),
    _burst("sp-burst", 9_000, "spot"),
    bt("sp-general", 8000, 32 * GiB, 120_000, pool="spot"),
)
ALL = [t.id for t in TYPES]


def _problem(wide: int = 9, micro: int = 40, cpu_limit: int = 8000) -> Problem:
    return Problem(
        bin_types=TYPES,
        classes=(
            pc("wide", wide, 1000, 3 * GiB, ALL),
            pc("micro", micro, 100, GiB // 4, ALL),
        ),
        limits=(PoolLimit("od", {"cpu": cpu_limit}),),
        pool_weights={"od": 10},
    )


def _pool_usage(problem: Problem, s: Solution, pool: str) -> int:
    """Return the CPU the plan's new bins of ``pool`` count against its limit."""
    types = {t.id: t for t in problem.bin_types}
    return sum(
        types[b.bin_type].usage_for_limits()["cpu"]
        for b in s.new_bins
        if types[b.bin_type].pool == pool
    )


def _plain(problem: Problem) -> Solution:
    """The tiered search alone: the heavier pool's pods chosen by count."""
    return tiers.fall_through(problem, lambda p: cpsat._solve_tier(p, TEST_CONFIG)).solution


def test_first_tier_spends_the_limit_on_the_cheapest_capacity_per_pod_it_spares() -> None:
    problem = _problem()
    first = valued_tier.first_tier(problem, deadline=time.monotonic() + 30, deterministic_time=1)
    assert first is not None
    assert first.only  # nine wide pods ask 9 CPUs of an 8-CPU limit: every valid plan uses it up
    # four burst nodes use the 8 CPUs for $0.12/h, each with a wide pod and three micro ones;
    # one general node would hold the most pods, but for $0.40/h
    assert Counter(b.bin_type for b in first.plan.new_bins) == Counter({"od-burst": 4})
    assert all(b.placement.counts == {"wide": 1, "micro": 3} for b in first.plan.new_bins)


# A slice of the weighted-limits benchmark (built-in us-east-1 catalog, us-east-1a): Graviton
# offerings of an on-demand pool (weight 10, 8 CPUs) and a spot pool, with allocatable
# capacity, price and what each counts against the limit.
_OFFERINGS = {
    "t4g.small": (1930, 1354, 11, 16_800, 6_720, 1830),
    "t4g.medium": (1930, 3182, 17, 33_600, 13_440, 3724),
    "t4g.2xlarge": (7910, 29253, 58, 268_800, 107_520, 30246),
    "r6g.2xlarge": (7910, 59563, 58, 403_200, 161_280, 60556),
    "m6g.4xlarge": (15890, 57627, 234, 616_000, 246_400, 60556),
    "m6g.8xlarge": (31850, 118248, 234, 1_232_000, 492_800, 121177),
}
_MIX = {  # the realistic mix's deployments: pods, CPU, memory
    "web": (31, 250, 512),
    "api": (24, 500, 1024),
    "worker": (18, 1000, 2048),
    "java": (11, 2000, 6144),
    "cache": (8, 500, 4096),
    "analytics": (5, 4000, 16384),
    "ingest": (2, 1500, 1024),
}


def _mix_problem() -> Problem:
    types = []
    for name, (cpu, mem, pods, od, sp, mem_limit) in _OFFERINGS.items():
        for pool, price in (("on-demand", od), ("spot", sp)):
            t = bt(f"{pool}/{name}", cpu, mem, price, pool=pool)
            usage = {"cpu": -(-cpu // 1000) * 1000, "memory": mem_limit, "pods": pods}
            types.append(
                dataclasses.replace(t, capacity={**t.capacity, "pods": pods}, limit_usage=usage)
            )
    ids = [t.id for t in types]
    return Problem(
        bin_types=tuple(types),
        classes=tuple(pc(k, n, cpu, mem, ids) for k, (n, cpu, mem) in _MIX.items()),
        limits=(PoolLimit("on-demand", {"cpu": 8000}),),
        pool_weights={"on-demand": 10},
    )


def test_solve_beats_the_plain_tiered_search_on_a_limited_on_demand_pool_beside_spot() -> None:
    problem = _mix_problem()
    plan = cpsat.solve(problem, TEST_CONFIG)
    plain = _plain(problem)
    assert not violations(problem, plan)
    assert not plan.unplaced
    # the limit is used up: no on-demand node fits what is left of it
    assert _pool_usage(problem, plan, "on-demand") > 8000 - 2000
    # the plain search keeps the most pods on-demand, on one t4g.2xlarge ($0.27/h); four
    # t4g.small ($0.07/h) use the limit up on pods that spot would hold for the most
    assert Counter(b.bin_type for b in plain.new_bins)["on-demand/t4g.2xlarge"] == 1
    assert Counter(
        b.bin_type for b in plan.new_bins if b.bin_type.startswith("on-demand")
    ) == Counter({"on-demand/t4g.small": 4})
    assert plan.cost_micros < 0.92 * plain.cost_micros


def test_pods_that_all_fit_the_heavier_pool_stay_on_it() -> None:
    # three pods fit one on-demand burst node: rule 9 keeps them all on-demand. No first tier
    # can use the limit up with them (a general node holding them would launch as the
    # cheapest node that does, a burst node: EC2 picks the cheapest type a NodeClaim lists),
    # so the choice does not apply and the tiered search plans them
    problem = _problem(wide=1, micro=2)
    assert valued_tier.first_tier(problem, deadline=time.monotonic() + 30) is None
    plan = cpsat.solve(problem, TEST_CONFIG)
    assert _pool_usage(problem, plan, "spot") == 0
    assert plan.cost_micros == 30_000


def test_room_on_existing_nodes_is_used_before_any_limit() -> None:
    # an existing node with room for every pod: nothing new is bought, although the pods ask
    # more than the on-demand limit; the first tier is chosen but not the only plan weighed
    room = ExistingBin("n1", "a", "od", {"cpu": 16_000, "memory": 64 * GiB, "pods": 110})
    problem = _problem()
    problem = dataclasses.replace(
        problem,
        existing=(room,),
        classes=tuple(
            dataclasses.replace(c, allowed_existing=frozenset({"n1"})) for c in problem.classes
        ),
    )
    first = valued_tier.first_tier(problem, deadline=time.monotonic() + 30, deterministic_time=1)
    assert first is not None
    assert not first.only
    plan = cpsat.solve(problem, TEST_CONFIG)
    assert not violations(problem, plan)
    assert not plan.unplaced
    assert plan.new_bins == ()


def test_pod_values_price_a_pod_by_its_largest_share_of_the_cheapest_lighter_offering() -> None:
    problem = _problem()
    top = {c.key: frozenset({"od-burst", "od-general"}) for c in problem.classes}
    values = valued_tier.pod_values(problem, top)
    # wide: 3 GiB of sp-burst's 4 GiB at $0.009/h is 6,750; an eighth of sp-general 15,000
    assert values["wide"] == 9_000 * 3 / 4
    # micro: a quarter of sp-burst's pods is 2,250; an 80th of sp-general's CPU 1,500
    assert values["micro"] == 120_000 / 80


@settings(max_examples=25, deadline=None)
@given(
    wide=st.integers(0, 14),
    micro=st.integers(0, 60),
    cpu_limit=st.sampled_from([2000, 4000, 6000, 8000, 12000]),
)
def test_valued_plans_keep_every_rule_and_never_cost_more_than_the_greedy_plans(
    wide: int, micro: int, cpu_limit: int
) -> None:
    problem = _problem(wide, micro, cpu_limit)
    problem = dataclasses.replace(problem, classes=tuple(c for c in problem.classes if c.count))
    if not problem.classes:
        return
    solved = cpsat.solve_with_greedy(problem, TEST_CONFIG)
    assert not violations(problem, solved.best)
    assert not solved.best.unplaced
    assert all(solved.best.cost_micros <= g.cost_micros for g in solved.greedy if not g.unplaced)
