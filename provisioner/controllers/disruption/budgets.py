"""Disruption budgets: how many of a NodePool's nodes may be disrupting now, per reason.

Karpenter's ``BuildDisruptionBudgetMapping`` and ``NodePool.GetAllowedDisruptionsByReason``:

* a budget applies to a reason when its ``reasons`` list names it (absent = every reason);
* it is active when it has no schedule, or its cron schedule (UTC) fired within ``duration``
  (:func:`~provisioner.controllers.disruption.schedule.is_active`); a schedule that does not parse
  makes the budget allow nothing (Karpenter treats a misconfigured budget as 0);
* the allowed count is the minimum over active budgets of ``ceil(percent x nodes)`` or the
  integer; with no active budget it is unbounded;
* ``nodes`` counts the pool's initialized nodes whose instance is not terminating; nodes that are
  disrupting (deleting, tainted for a running command, or NotReady) are subtracted:
  ``available = max(allowed - disrupting, 0)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption.schedule import CronError, is_active

__all__ = ["UNBOUNDED", "BudgetNode", "allowed_disruptions", "budget_mapping"]

UNBOUNDED: Final = 2**31 - 1
"""What a pool allows when none of its budgets is active (Karpenter's MaxInt32)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetNode:
    """What budget arithmetic needs to know about one managed node.

    Attributes:
        pool: the node's NodePool.
        counted: initialized and its instance not terminating (counts towards the total).
        disrupting: being deleted, part of a running disruption command, or NotReady.
    """

    pool: str
    counted: bool
    disrupting: bool


def allowed_disruptions(nodepool: NodePool, total: int, reason: str, now: datetime) -> int:
    """How many of ``total`` nodes of ``nodepool`` may be disrupting for ``reason`` at ``now``."""
    allowed = UNBOUNDED
    for budget in nodepool.budgets:
        if not budget.applies_to(reason):
            continue
        if budget.schedule is not None:
            duration = budget.duration_timedelta
            try:
                active = duration is not None and is_active(budget.schedule, duration, now)
            except CronError:
                return 0
            if not active:
                continue
        allowed = min(allowed, budget.allowed_disruptions(total))
    return allowed


def budget_mapping(
    nodepools: Mapping[str, NodePool],
    nodes: Iterable[BudgetNode],
    reason: str,
    now: datetime,
) -> dict[str, int]:
    """Per NodePool, how many more nodes may start disrupting for ``reason`` now."""
    totals: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for node in nodes:
        if not node.counted:
            continue
        totals[node.pool] = totals.get(node.pool, 0) + 1
        if node.disrupting:
            disrupting[node.pool] = disrupting.get(node.pool, 0) + 1
    mapping: dict[str, int] = {}
    for name, nodepool in nodepools.items():
        allowed = allowed_disruptions(nodepool, totals.get(name, 0), reason, now)
        mapping[name] = max(allowed - disrupting.get(name, 0), 0)
    return mapping
