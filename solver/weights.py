"""NodePool weight tiers, implemented as a pre-filter of each class's allowed bin types.

Rule (``plan.md`` rule 9): a pod goes to new capacity of a lower-weight NodePool only when no
higher-weight NodePool can take it. A pool *can take* a pod of a class when the class allows one
of the pool's bin types, that type holds one pod (every resource and, for fractional pods, one
GPU device), and one bin of that type fits the pool's remaining limits and ``max_count > 0``.
``apply_pool_weights`` keeps, per class, only the allowed bin types of the highest-weight pool
that can take it (ties between pools of equal weight keep all of them; cost decides). This is a
static pre-filter: if a higher-weight pool's limits run out while packing, the remaining pods
are reported unplaced with reason ``limit`` rather than spilling to a lower tier.
Existing bins are not affected by weights.
"""

from __future__ import annotations

import dataclasses

from solver.problem import BinType, PodClass, PoolLimit, Problem


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


def within_limits_alone(bt: BinType, limits: dict[str, PoolLimit]) -> bool:
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
