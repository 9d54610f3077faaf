"""The greedy phase on two cores: the cost-aware plan and its bound made in a forked child.

Before any search the optimiser makes Karpenter's first-fit-decreasing plan, the cost-aware
plan, the fluid lower bound of the best one's pods and, where Karpenter's first fit splits
groups held to one node, the whole-group plan (``solver.cpsat``). On Karpenter's diverse mix
that is 1.2 s of the 1.6 s budget at 5,000 pods, one after another. With a second core a
forked child (``solver.forked``) makes the cost-aware plan while this process makes the
others, then the bound of its pods while this process polishes the first plan: the same
plans and bound, in about half the time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping

from solver import tiers
from solver.bounds import fluid_bound
from solver.config import SolverConfig
from solver.forked import Forked, fork_allowed
from solver.greedy import plan_tiers
from solver.problem import Problem, Solution
from solver.weights import apply_pool_weights

FORK_FROM = 500
"""Pods from which the greedy phase forks (fewer: the cost-aware plan takes under 0.1 s,
while a fork and sending its plan back take about 5 ms)."""


Made = tiers.Tiers | tuple[dict[str, int], int]
"""What the child sends: the cost-aware plan in tiers, then its first tier's bound."""


class Ahead:
    """What the greedy phase made for the first tier's search beyond its greedy plans.

    The whole-group plan (``cpsat._whole_groups``), made while the child worked because
    Karpenter's plan left pods unplaced, and the child still computing the fluid bound of the
    cost-aware plan's first-tier pods (``bounds.fluid_bound`` of the problem with pool
    weights applied), asked for when the search needs it. ``close`` ends the child.
    """

    def __init__(
        self,
        whole: Solution | None = None,
        child: Forked[Made] | None = None,
        hard: float = math.inf,
    ) -> None:
        self.whole = whole
        self._child, self._hard = child, hard
        self._bound: tuple[Mapping[str, int], int] | None = None

    def bound_of(self, demand: Mapping[str, int]) -> int | None:
        """Return the fluid bound made ahead for exactly ``demand``, if any.

        Waits for the child (until the time limit ``hard`` at most) the first time.
        """
        if self._child is not None:
            _, made = self._child.result(self._hard)
            self._child = None
            if isinstance(made, tuple):
                self._bound = made
        if self._bound is None or dict(self._bound[0]) != dict(demand):
            return None
        return self._bound[1]

    def close(self) -> None:
        """End the child if it still runs (its bound is then not needed)."""
        if self._child is not None:
            self._child.close()
            self._child = None


NOTHING_AHEAD = Ahead()
"""Nothing made ahead: the search makes its bound and whole-group plan itself."""


def forks(problem: Problem, config: SolverConfig) -> bool:
    """Return whether the greedy phase of ``problem`` forks a child for the cost-aware plan.

    Only for wall-clock runs with more than one worker (a reproducible run keeps to one
    process), from ``FORK_FROM`` pods, where forking is safe (``forked.fork_allowed``).
    """
    if config.num_workers < 2 or config.deterministic_time is not None:  # noqa: PLR2004
        return False
    return sum(c.count for c in problem.classes) >= FORK_FROM and fork_allowed()


def cost_aware_then_bound(problem: Problem, hard: float, soft: float) -> Iterator[Made]:
    """Yield the cost-aware plan (in tiers), then the fluid bound of its first tier's pods.

    What ``cpsat`` computes otherwise: ``plan_tiers`` stopping at ``hard``, and the bound
    with the deadline the first tier's search gives it (a second past the budget's end
    ``soft``, never past ``hard``).

    Raises:
        GreedyTimeout: when ``hard`` passes before the plan is made.
    """
    planned = plan_tiers(problem, karpenter=False, deadline=hard)
    yield planned
    demand = planned.rounds[0].new_counts()
    deadline = min(hard, max(soft, time.monotonic()) + 1.0)
    yield demand, fluid_bound(apply_pool_weights(problem), demand, deadline=deadline)
