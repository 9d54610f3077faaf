"""Consolidation: delete nodes whose pods fit elsewhere, or replace them with a cheaper one.

Karpenter's ``computeConsolidation`` (reason ``Underutilized``):

1. Simulate the candidates' pods (and their gangs' other members) on the rest of the cluster.
2. No new NodeClaim needed: **delete**. More than one: nothing (``Can't remove without creating
   N candidates``). One: keep the instance types strictly cheaper than the candidates together
   (none: ``Can't replace with a cheaper node``); a spot replacement that could also be on-demand
   is forced to spot, so a failed spot launch never buys a pricier node.
3. Spot to spot (every candidate spot, the replacement spot) needs the ``SpotToSpotConsolidation``
   gate; single-node also needs at least 15 cheaper instance types and launches the 15 cheapest.
4. ``Balanced`` pools approve a move only when its share of the pool's savings is at least half
   its share of the pool's disruption.

**Multi-node** takes the candidates the budgets allow, the least disruption per dollar saved
first, and binary-searches the longest prefix (at least two) that consolidates, within its time
budget; with ``--policy greedy`` it keeps Karpenter's order (cheapest disruption first) and cap
of 100 candidates (karpenter#3186).
**Single-node** tries the candidates one by one, highest savings first, round-robin over pools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from provisioner.apis import labels as wk
from provisioner.apis.conditions import DISRUPTION_REASON_UNDERUTILIZED
from provisioner.apis.core import Pod
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.disruption.command import Command, Replacement, command_id
from provisioner.controllers.disruption.methods import (
    NO_CHEAPER_NODE,
    SPOT_TO_SPOT_OFF,
    MethodContext,
    all_spot,
    within_budgets,
)
from provisioner.controllers.provisioning.plan import NodeClaimPlan

__all__ = [
    "MIN_SPOT_TO_SPOT_TYPES",
    "MultiNodeConsolidation",
    "SingleNodeConsolidation",
    "compute_consolidation",
]

MIN_SPOT_TO_SPOT_TYPES: Final = 15
"""Karpenter's ``MinInstanceTypesForSpotToSpotConsolidation``."""
BALANCED_K: Final = 2
"""Balanced consolidation approves a move scoring at least ``1/k``."""
_BALANCED: Final = "Balanced"
_WHEN_EMPTY: Final = "WhenEmpty"


def _wants(candidate: Candidate) -> bool:
    policy = candidate.nodepool.consolidation_policy
    return (
        policy != _WHEN_EMPTY
        and candidate.nodepool.consolidate_after is not None
        and candidate.consolidatable
        and not candidate.is_empty
        and candidate.price_known
    )


def _approved(context: MethodContext, command: Command) -> bool:
    """Balanced pools: savings share / disruption share >= 1/k."""
    balanced = [c for c in command.candidates if c.nodepool.consolidation_policy == _BALANCED]
    if not balanced:
        return True
    pools = {c.pool for c in balanced}
    pool_cost = sum(context.pool_totals(p)[0] for p in pools)
    pool_disruption = sum(context.pool_totals(p)[1] for p in pools)
    move_disruption = sum(c.reschedule_cost for c in command.candidates)
    if pool_cost <= 0 or command.savings <= 0:
        return False
    if pool_disruption <= 0 or move_disruption <= 0:
        return True
    score = (command.savings / pool_cost) / (move_disruption / pool_disruption)
    return score >= 1 / BALANCED_K


def compute_consolidation(
    context: MethodContext, candidates: Sequence[Candidate], consolidation_type: str
) -> tuple[Command | None, str | None]:
    """The consolidation command for ``candidates`` together, or why there is none.

    Returns:
        The command (None when there is none) and a reason for ``Unconsolidatable`` (None when
        there is nothing to tell).
    """
    simulation = context.simulate(candidates)
    if not simulation.ok:
        return None, simulation.failure
    names = {c.name for c in candidates}
    moving = tuple(p for p in simulation.displaced.values() if p.spec.node_name not in names)
    command = Command(
        id=command_id([c.name for c in candidates], context.now),
        reason=DISRUPTION_REASON_UNDERUTILIZED,
        consolidation_type=consolidation_type,
        candidates=tuple(candidates),
        moving=moving,
        created_at=context.now,
        validate=True,
    )
    if len(simulation.new_claims) > 1:
        return None, f"Can't remove without creating {len(simulation.new_claims)} candidates"
    if simulation.new_claims:
        claim = simulation.new_claims[0]
        replacement, why = _replacement(context, candidates, claim, simulation.displaced)
        if replacement is None:
            return None, why
        command.replacements = [replacement]
    if not _approved(context, command):
        return None, "Balanced consolidation: the savings do not justify the disruption"
    return command, None


def _replacement(
    context: MethodContext,
    candidates: Sequence[Candidate],
    claim: NodeClaimPlan,
    displaced: Mapping[str, Pod],
) -> tuple[Replacement | None, str | None]:
    source_price = sum(c.price for c in candidates)
    capacity_type = claim.capacity_type
    priced = []
    for name in claim.instance_types:
        price = context.catalog.price(claim.node_pool, name, claim.zone, capacity_type)
        if price is not None and price < source_price:
            priced.append((price, name))
    priced.sort()
    types = [name for _, name in priced]
    spot_to_spot = capacity_type == wk.CAPACITY_TYPE_SPOT and all_spot(candidates)
    if spot_to_spot and not context.config.spot_to_spot:
        return None, SPOT_TO_SPOT_OFF
    if not types:
        return None, NO_CHEAPER_NODE
    if spot_to_spot and len(candidates) == 1:
        if len(types) < MIN_SPOT_TO_SPOT_TYPES:
            return None, (
                f"SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance "
                f"type options than the current candidate to consolidate, got {len(types)}"
            )
        types = types[:MIN_SPOT_TO_SPOT_TYPES]
    pods = tuple(p for k, p in displaced.items() if k in claim.pods)
    return (
        Replacement(
            plan=claim,
            instance_types=tuple(types),
            capacity_types=(capacity_type,),
            price=priced[0][0],
            pods=pods,
        ),
        None,
    )


class MultiNodeConsolidation:
    """Karpenter's ``MultiNodeConsolidation``."""

    reason: Final = DISRUPTION_REASON_UNDERUTILIZED
    consolidation_type: Final = "multi"

    def should_disrupt(self, candidate: Candidate) -> bool:
        """Consolidatable, not empty, priced, in a pool that consolidates when underutilized."""
        return _wants(candidate)

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> Command | None:
        """The longest prefix (at least two) of the candidates that consolidates."""
        if context.planner.policy == "greedy":
            ordered = sorted(candidates, key=lambda c: (c.disruption_cost, c.name))
        else:
            # within budgets, the most savings for the evictions they cost
            ordered = sorted(
                candidates, key=lambda c: (c.disruption_cost / max(c.price, 1e-9), c.name)
            )
        chosen = within_budgets(context, ordered, budgets, self.reason, context.facts.pools)
        if context.planner.policy == "greedy":
            # Karpenter's hard cap (karpenter#3186); Jointer searches every candidate the
            # budgets allow, within the same time budget
            chosen = chosen[: context.config.multi_node_max_candidates]
        if len(chosen) < 2:  # noqa: PLR2004 - multi-node means at least two
            return None
        best: Command | None = None
        low, high = 1, len(chosen) - 1
        started = context.monotonic()
        limit = context.config.multi_node_timeout.total_seconds()
        while low <= high:
            if context.monotonic() - started > limit:
                context.metrics.consolidation_timeouts.labels(
                    consolidation_type=self.consolidation_type
                ).inc()
                if best is None:
                    context.log.debug("failed to find a multi-node consolidation after timeout")
                else:
                    context.log.debug(
                        "stopping multi-node consolidation after timeout, returning last valid "
                        "command"
                    )
                break
            middle = (low + high) // 2
            command, _ = compute_consolidation(
                context, chosen[: middle + 1], self.consolidation_type
            )
            if command is None:
                high = middle - 1
            else:
                best = command
                low = middle + 1
        return best


class SingleNodeConsolidation:
    """Karpenter's ``SingleNodeConsolidation``."""

    reason: Final = DISRUPTION_REASON_UNDERUTILIZED
    consolidation_type: Final = "single"

    def should_disrupt(self, candidate: Candidate) -> bool:
        """Consolidatable, not empty, priced, in a pool that consolidates when underutilized."""
        return _wants(candidate)

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> Command | None:
        """The first candidate that can be deleted or replaced by a cheaper node."""
        started = context.monotonic()
        limit = context.config.single_node_timeout.total_seconds()
        for candidate in _round_robin(candidates):
            if context.monotonic() - started > limit:
                context.metrics.consolidation_timeouts.labels(
                    consolidation_type=self.consolidation_type
                ).inc()
                context.log.debug("abandoning single-node consolidation due to timeout")
                context.incomplete = True
                return None
            if not within_budgets(context, [candidate], budgets, self.reason, context.facts.pools):
                continue
            command, why = compute_consolidation(context, [candidate], self.consolidation_type)
            if command is not None:
                return command
            if why is not None:
                for event in ev.unconsolidatable(
                    candidate.state.node, candidate.state.nodeclaim, why
                ):
                    context.publish(event)
        return None


def _round_robin(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Highest savings first, alternating between NodePools."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: (-c.savings_ratio, c.name)):
        by_pool.setdefault(candidate.pool, []).append(candidate)
    ordered: list[Candidate] = []
    queues = [by_pool[p] for p in sorted(by_pool)]
    while any(queues):
        ordered.extend(queue.pop(0) for queue in queues if queue)
    return ordered
