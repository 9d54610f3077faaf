"""Emptiness: delete consolidatable nodes no pod needs (reason ``Empty``, type ``empty``).

Every empty candidate the budgets allow goes in one delete command, highest savings first; the
command waits for validation (the node must still be empty 15 s later).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from provisioner.apis.conditions import DISRUPTION_REASON_EMPTY
from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.disruption.command import Command, command_id
from provisioner.controllers.disruption.methods import MethodContext, within_budgets

__all__ = ["Emptiness"]

CONSOLIDATION_TYPE: Final = "empty"


class Emptiness:
    """Karpenter's ``Emptiness`` method."""

    reason: Final = DISRUPTION_REASON_EMPTY
    consolidation_type: Final = CONSOLIDATION_TYPE

    def should_disrupt(self, candidate: Candidate) -> bool:
        """Empty, consolidatable, in a pool whose consolidateAfter is not ``Never``."""
        return (
            candidate.nodepool.consolidate_after is not None
            and candidate.consolidatable
            and candidate.is_empty
        )

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> Command | None:
        """One delete of every empty candidate the budgets allow."""
        ordered = sorted(candidates, key=lambda c: (-c.savings_ratio, c.name))
        chosen = within_budgets(context, ordered, budgets, self.reason, context.facts.pools)
        if not chosen:
            return None
        return Command(
            id=command_id([c.name for c in chosen], context.now),
            reason=self.reason,
            consolidation_type=self.consolidation_type,
            candidates=tuple(chosen),
            created_at=context.now,
            validate=True,
        )
