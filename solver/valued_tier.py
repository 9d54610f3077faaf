"""A first tier chosen by cost: which pods a heavier, limited NodePool takes when not all fit.

Rule 9 (``solver.weights``) sends a pod to a lighter pool only once no heavier pool can take
it, and cost decides among the plans this leaves. When a heavier pool's limits cannot hold
every pod, the tiered search (``solver.tiers``) plans the first tier for as many pods as fit,
so *which* pods use up the limits is an accident of that search: a limited on-demand pool
beside a cheap spot pool may get one large node full of pods that spot would have held for a
fraction of its price. This module chooses the first tier by what it saves instead:

* each tiered class (no gang, topology, GPU fraction or co-location carrier, eligible on
  pools of several weights) gets a value per pod: what its cheapest lighter-tier offering
  costs per pod it holds (the price times the pod's largest share of that offering);
* patterns of the heavier pools' offerings are filled by value (``colgen.price_patterns``,
  plus one class alone per offering), each counted as the offering it would launch as (the
  cheapest of its pool and zone that holds its pods, ``greedy.downsize``);
* a small CP-SAT model picks how many bins of each pattern, within the pools' limits and
  ``max_count``, use a limit up so far that no heavier offering fits what is left
  (``blocking_cases``: one model per limited resource of each heavier pool), at the least
  price minus value;
* the pods it leaves fall through to the lighter tiers, planned by the caller's search.

``solver.cpsat`` keeps the result only when it is valid (``solver.validate``); it replaces the
tiered search's plan when every valid plan uses the limits up (``FirstTier.only``), else the
cheaper of the two is kept.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ortools.sat.python import cp_model

from solver.bounds import fast_knapsack_upper, tier_cases
from solver.colgen import most_pods, price_patterns, type_groups
from solver.greedy import downsize, unplaced_entries
from solver.problem import (
    BinType,
    NewBin,
    Placement,
    PodClass,
    Problem,
    Solution,
    Status,
)
from solver.tiers import movable_classes
from solver.validate import cost
from solver.weights import eligible_types, top_tier

_MAX_PATTERNS_PER_GROUP = 4
_MAX_CASES = 16
"""At most this many cases (one limited resource per heavier pool each) are modelled."""
_EXACT_GROUPS = 16
"""Offering groups priced by an exact knapsack (the rest by greedy fillers)."""
_EFFORT = 0.05
"""Deterministic seconds per exact knapsack."""


def pod_values(problem: Problem, tiered: Mapping[str, frozenset[str]]) -> dict[str, float]:
    """Return per tiered class what one pod costs on its cheapest lighter-tier offering.

    The price of an offering times the pod's largest share of its capacity: what the pod
    occupies of a bin were bins filled with pods like it.
    """
    out: dict[str, float] = {}
    for c in problem.classes:
        top = tiered.get(c.key)
        if top is None:
            continue
        best = min(
            (
                t.price_micros * max(v / t.capacity[r] for r, v in c.demand.items() if v > 0)
                for t in eligible_types(problem, c)
                if t.id not in top
                and all(t.capacity.get(r, 0) > 0 for r, v in c.demand.items() if v > 0)
            ),
            default=None,
        )
        if best is not None:
            out[c.key] = best
    return out


@dataclass(frozen=True, slots=True)
class FirstTier:
    """A first tier chosen by cost.

    Attributes:
        plan: the heavier pools' new bins; its unplaced pods are left to the lighter tiers.
        only: every valid plan uses the heavier pools' limits up (some class asks more than
            they hold and no existing node may take its pods), so the tiered search's plan,
            which may keep every pod on them, is no alternative.
    """

    plan: Solution
    only: bool


def first_tier(
    problem: Problem,
    *,
    deadline: float,
    seed: int = 0,
    deterministic_time: float | None = None,
) -> FirstTier | None:
    """Return a first-tier plan that uses the heavier pools' limits on the pods worth most.

    ``None`` when the problem has no tiered class whose heavier pools are limited, when some
    class planned on a limited heavier pool cannot move freely (gang, topology, fraction),
    or when no case is solved by ``deadline``. The plan's unplaced pods are the ones left to
    the lighter tiers (and to existing nodes' room, which the first tier does not use).
    """
    demand = {c.key: c.count for c in problem.classes}
    top, cases = tier_cases(problem, demand)
    if not top or not any(rows for rows in cases) or not _applies(problem, top):
        return None
    values = pod_values(problem, top)
    if not values:
        return None
    heavy = [t for t in problem.bin_types if any(t.id in top[k] for k in values)]
    cases_left = blocking_cases(problem, heavy)
    patterns = _patterns(problem, heavy, values, demand, deadline) if cases_left else []
    if not patterns:
        return None
    best: tuple[float, list[NewBin]] | None = None
    solve = _Solve(deadline, seed, deterministic_time)
    for rows in cases_left:
        chosen = _choose(problem, patterns, values, rows, solve)
        if chosen is not None and (best is None or chosen[0] < best[0]):
            best = chosen
    if best is None:
        return None
    bins = best[1]
    placed: Counter[str] = Counter()
    for b in bins:
        placed.update(b.placement.counts)
    plan = Solution(tuple(bins), (), unplaced_entries(problem, placed), 0, 0, Status.FEASIBLE)
    plan = dataclasses.replace(plan, cost_micros=cost(problem, plan))
    # room on existing nodes is free and may hold what the heavier pool cannot: then a plan
    # need not use the limits up, so the tiered search (existing room first) is weighed too
    free = any(c.allowed_existing for c in problem.classes if c.key in top)
    return FirstTier(plan, only=None not in cases and not free)


def blocking_cases(problem: Problem, heavy: list[BinType]) -> list[Case]:
    """Return the ways a first tier can leave no heavier offering room for another pod.

    A case picks one limited resource per heavier pool and asks the pool to use it beyond
    its limit minus the least any of its offerings in ``heavy`` (those of the valued pods' top
    tiers) counts against it: then none of them fits, so every pod left may go to a lighter
    pool (rule 9). Empty when a heavier pool has no limit (pods never need to leave it).
    """
    limits = {lim.pool: lim.remaining for lim in problem.limits}
    per_pool = []
    for pool in sorted({t.pool for t in heavy}):
        options = []
        for r, v in limits.get(pool, {}).items():
            least = min(t.usage_for_limits().get(r, 0) for t in heavy if t.pool == pool)
            if least > 0:
                options.append(((pool, r), v - least + 1))
        if not options:
            return []
        per_pool.append(options)
    return [dict(rows) for rows in itertools.islice(itertools.product(*per_pool), _MAX_CASES)]


def _applies(problem: Problem, top: Mapping[str, frozenset[str]]) -> bool:
    """Return whether the first tier is this choice's to make.

    Every class planned on a limited heavier pool is tiered and free to move.
    """
    limited = {lim.pool for lim in problem.limits} | {
        t.pool for t in problem.bin_types if t.max_count is not None
    }
    movable = movable_classes(problem)
    for c in problem.classes:
        if (c.key not in top or c.key not in movable) and _top_pools(problem, c) & limited:
            return False
    return True


def _top_pools(problem: Problem, c: PodClass) -> set[str]:
    ids = top_tier(problem, c)
    return {t.pool for t in problem.bin_types if t.id in ids}


def _patterns(
    problem: Problem,
    heavy: list[BinType],
    values: Mapping[str, float],
    demand: Mapping[str, int],
    deadline: float,
) -> list[tuple[BinType, Counter[str]]]:
    """Return patterns of the heavier offerings filled by value.

    Each group of identical offerings is priced once and its patterns copied to its members.
    """
    ids = {t.id for t in heavy}
    groups = [(rep, members) for rep, members in type_groups(problem) if rep.id in ids]
    # the most promising groups (price minus a cheap bound on what one bin can hold) get an
    # exact knapsack, the others the greedy fillers only
    groups.sort(
        key=lambda g: g[0].price_micros - fast_knapsack_upper(problem, g[0], values, demand)
    )
    launched = _Launched(problem)
    out: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[BinType, Counter[str]]] = {}
    for n, (rep, members) in enumerate(groups):
        if time.monotonic() > deadline:
            break
        found, _ = price_patterns(
            problem, rep, values, demand, exact=n < _EXACT_GROUPS, effort=_EFFORT, deadline=deadline
        )
        fills = [Counter({k: n for k, n in p.counts if k in values}) for p in found]
        for counts in fills[:_MAX_PATTERNS_PER_GROUP] + _solos(problem, rep, values, demand):
            for t in members if counts else ():
                if t.id in ids:
                    pattern = (launched(t, counts), counts)
                    out[pattern[0].id, tuple(sorted(counts.items()))] = pattern
    return list(out.values())


class _Launched:
    """The offering a new bin is launched as: the cheapest of its pool and zone holding it.

    A NodeClaim lists the cheaper types that fit its pods and EC2 launches the cheapest
    (``greedy.downsize`` moves plans there), so a pattern must count what that offering
    counts against the limits, not what the offering it was filled on would.
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.known: dict[tuple[str, tuple[tuple[str, int], ...]], BinType] = {}
        self.types = {t.id: t for t in problem.bin_types}

    def __call__(self, t: BinType, counts: Counter[str]) -> BinType:
        key = (t.id, tuple(sorted(counts.items())))
        if key not in self.known:
            one = Solution((NewBin(t.id, Placement(dict(counts))),), (), (), 0, 0, Status.FEASIBLE)
            self.known[key] = self.types[downsize(self.problem, one).new_bins[0].bin_type]
        return self.known[key]


Case = Mapping[tuple[str, str], int]
"""Rows ``used >= v``: a pool's limited resource used beyond ``v - 1``."""


def _solos(
    problem: Problem, t: BinType, values: Mapping[str, float], demand: Mapping[str, int]
) -> list[Counter[str]]:
    """Return per tiered class the pattern of ``t`` holding only its pods, as many as fit.

    The fillers' patterns mix classes; a limit is sometimes best used up by one class alone
    (bins the other classes' pods would only make dearer to fill).
    """
    out = []
    for c in problem.classes:
        if c.key not in values or t.id not in c.allowed_bin_types:
            continue
        most = most_pods(t, c, demand[c.key])
        if most > 0:
            out.append(Counter({c.key: most}))
    return out


def _choose(
    problem: Problem,
    patterns: list[tuple[BinType, Counter[str]]],
    values: Mapping[str, float],
    rows: Case,
    solve: _Solve,
) -> tuple[float, list[NewBin]] | None:
    """Return (price minus value, the bins) of the best choice for one case, or None."""
    demand = {c.key: c.count for c in problem.classes}
    m = cp_model.CpModel()
    xs = [
        m.new_int_var(0, _most(t, counts, demand), f"x{i}")
        for i, (t, counts) in enumerate(patterns)
    ]
    for k in values:
        m.add(sum(x * counts[k] for x, (_, counts) in zip(xs, patterns, strict=True)) <= demand[k])
    for lim in problem.limits:
        for r, v in lim.remaining.items():
            m.add(_usage(xs, patterns, lim.pool, r) <= v)
    by_type: dict[str, list[cp_model.IntVar]] = {}
    for x, (t, _) in zip(xs, patterns, strict=True):
        by_type.setdefault(t.id, []).append(x)
    for group, (t, _) in ((by_type[t.id], (t, c)) for t, c in patterns):
        if t.max_count is not None:
            m.add(sum(group) <= t.max_count)
    for (pool, r), v in rows.items():
        m.add(_usage(xs, patterns, pool, r) >= v)
    m.minimize(
        sum(
            x * round(t.price_micros - sum(values[k] * n for k, n in counts.items()))
            for x, (t, counts) in zip(xs, patterns, strict=True)
        )
    )
    return solve(m, xs, patterns)


def _most(t: BinType, counts: Counter[str], demand: Mapping[str, int]) -> int:
    most = min(demand[k] // n for k, n in counts.items())
    return most if t.max_count is None else min(most, t.max_count)


def _usage(
    xs: list[cp_model.IntVar], patterns: list[tuple[BinType, Counter[str]]], pool: str, r: str
) -> cp_model.LinearExprT:
    return sum(
        x * t.usage_for_limits().get(r, 0)
        for x, (t, _) in zip(xs, patterns, strict=True)
        if t.pool == pool
    )


class _Solve:
    """Solves a case's model with the caller's seed, time and deterministic time."""

    def __init__(self, deadline: float, seed: int, deterministic_time: float | None) -> None:
        self.deadline, self.seed, self.deterministic_time = deadline, seed, deterministic_time

    def __call__(
        self,
        m: cp_model.CpModel,
        xs: list[cp_model.IntVar],
        patterns: list[tuple[BinType, Counter[str]]],
    ) -> tuple[float, list[NewBin]] | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = self.seed
        solver.parameters.max_time_in_seconds = left
        if self.deterministic_time is not None:
            solver.parameters.max_deterministic_time = self.deterministic_time
        if solver.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        bins = [
            NewBin(t.id, Placement(dict(counts)))
            for x, (t, counts) in zip(xs, patterns, strict=True)
            for _ in range(int(solver.value(x)))
        ]
        return solver.objective_value, bins
