"""NodePool weight tiers: which pool may take a pod, and the pre-filter of each tier.

Rule (``plan.md`` rule 9): NodePools are tried in descending weight; a pod goes to new capacity
of a lower-weight NodePool only when no higher-weight NodePool can take it. A pool *can take* a
pod of a class when the class allows one of the pool's bin types, that type holds one pod
(every resource and, for fractional pods, one GPU device), and one more bin of that type fits
the pool's limits and ``max_count`` left after the plan's new bins (``Leftover``); cost decides
among the choices this leaves. ``solver.validate`` states the rule once (it also rejects a pod
left on a lower-weight pool while a higher-weight pool's planned bin has room for it).

``apply_pool_weights`` is the pre-filter of one tier: it keeps, per class, only the allowed bin
types of the highest-weight pool that can take it against the problem's limits (ties between
pools of equal weight keep all of them). When a pool's limits run out while packing, the pods
left over fall through to the next tier (``solver.tiers``): they are planned again with the
pool's limits reduced by what was used, so the pre-filter then picks a lower-weight pool.
Existing bins are not affected by weights.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solver.problem import BinType, NewBin, PodClass, PoolLimit, Problem


def fits_one(problem: Problem, cls: PodClass, bt: BinType) -> bool:
    """Return whether one pod of ``cls`` fits an empty bin of type ``bt`` (resources and GPU).

    The answer depends on ``bt`` only through ``fit_key(bt)``.
    """
    cap = bt.capacity
    if cls.gpu_fraction_milli > 0:
        gpu = problem.gpu_resource
        if bt.gpus < 1 or cls.demand.get(gpu, 0) + 1 > cap.get(gpu, 0):
            return False
    for r, v in cls.demand.items():  # noqa: SIM110 - hot (colgen, bounds): a loop beats all()
        if v > 0 and v > cap.get(r, 0):
            return False
    return True


def fit_key(bt: BinType) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Return what ``fits_one`` reads of ``bt``: bin types with equal keys fit the same pods."""
    return bt.gpus, tuple(sorted(bt.capacity.items()))


def within_limits_alone(bt: BinType, limits: Mapping[str, PoolLimit]) -> bool:
    """Return whether one bin of ``bt`` fits its pool's remaining limits and ``max_count``."""
    if bt.max_count is not None and bt.max_count < 1:
        return False
    lim = limits.get(bt.pool)
    if lim is None:
        return True
    usage = bt.usage_for_limits()
    return all(usage.get(r, 0) <= v for r, v in lim.remaining.items())


def eligible_types(problem: Problem, cls: PodClass) -> list[BinType]:
    """Return the allowed bin types that can take one pod of ``cls`` on their own."""
    limits = {lim.pool: lim for lim in problem.limits}
    return [
        bt
        for bt in problem.bin_types
        if bt.id in cls.allowed_bin_types
        and fits_one(problem, cls, bt)
        and within_limits_alone(bt, limits)
    ]


def top_tier(problem: Problem, cls: PodClass) -> frozenset[str]:
    """Return the ids of the eligible bin types of the class's highest-weight pools."""
    types = eligible_types(problem, cls)
    if not types:
        return frozenset()
    best = max(problem.pool_weights.get(bt.pool, 0) for bt in types)
    return frozenset(bt.id for bt in types if problem.pool_weights.get(bt.pool, 0) == best)


def apply_pool_weights(problem: Problem) -> Problem:
    """Return the problem with each class restricted to its top weight tier of eligible types.

    A class whose allowed bin types all belong to pools of one weight keeps its allowed set
    unchanged (its top tier is every eligible type, and ineligible types can hold none of its
    pods anyway), which keeps this pre-filter cheap on large catalogs.
    """
    pool_of = {t.id: t.pool for t in problem.bin_types}
    weights = problem.pool_weights

    def restrict(c: PodClass) -> PodClass:
        if len({weights.get(pool_of[t], 0) for t in c.allowed_bin_types if t in pool_of}) <= 1:
            return c
        return dataclasses.replace(c, allowed_bin_types=top_tier(problem, c))

    if not any(weights.values()):
        return problem
    classes = tuple(restrict(c) for c in problem.classes)
    return dataclasses.replace(problem, classes=classes)


@dataclass(frozen=True, slots=True)
class Leftover:
    """What a plan's new bins leave of the pools' limits and the offerings' ``max_count``.

    Attributes:
        limits: remaining limits per pool after the new bins.
        used: new bins per bin type id.
    """

    limits: Mapping[str, PoolLimit]
    used: Mapping[str, int]

    @classmethod
    def of(cls, problem: Problem, new_bins: Iterable[NewBin]) -> Leftover:
        """Return what ``new_bins`` leave of ``problem``'s limits and offering counts."""
        types = {t.id: t for t in problem.bin_types}
        used = Counter(b.bin_type for b in new_bins if b.bin_type in types)
        usage: dict[str, Counter[str]] = {}
        for tid, n in used.items():
            t = types[tid]
            pool = usage.setdefault(t.pool, Counter())
            for r, v in t.usage_for_limits().items():
                pool[r] += v * n
        limits = {
            lim.pool: PoolLimit(
                lim.pool,
                {r: v - usage.get(lim.pool, Counter())[r] for r, v in lim.remaining.items()},
            )
            for lim in problem.limits
        }
        return cls(limits, dict(used))

    def bin_type(self, bt: BinType) -> BinType:
        """Return ``bt`` with its ``max_count`` reduced by the bins of it already used."""
        if bt.max_count is None or not self.used.get(bt.id):
            return bt
        return dataclasses.replace(bt, max_count=max(0, bt.max_count - self.used[bt.id]))

    def fresh_fits(self, bt: BinType) -> bool:
        """Return whether one more bin of ``bt`` fits its pool's limits and ``max_count``."""
        return within_limits_alone(self.bin_type(bt), self.limits)

    def residual(self, problem: Problem) -> Problem:
        """Return ``problem`` with the limits and offering counts left (classes unchanged)."""
        return dataclasses.replace(
            problem,
            bin_types=tuple(self.bin_type(t) for t in problem.bin_types),
            limits=tuple(lim for lim in self.limits.values()),
        )


def tier_weight(problem: Problem, cls: PodClass) -> int | None:
    """Return the weight of the class's top tier (``None``: no pool can take one of its pods)."""
    weights = [problem.pool_weights.get(bt.pool, 0) for bt in eligible_types(problem, cls)]
    return max(weights, default=None)


def may_fall_through(problem: Problem) -> bool:
    """Return whether pods can fall through tiers: pools of several weights, some limited."""
    pools = {t.pool for t in problem.bin_types}
    if len({problem.pool_weights.get(p, 0) for p in pools}) <= 1:
        return False
    return bool(problem.limits) or any(t.max_count is not None for t in problem.bin_types)
