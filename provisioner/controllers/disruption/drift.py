"""Drift: replace NodeClaims that no longer match their NodePool or node class (``Drifted``).

Karpenter's ``Drift`` method: candidates whose ``Drifted`` condition is True, empty ones first,
then by when they drifted; the first one the budgets allow whose pods can all be rescheduled is
replaced by whatever new NodeClaims the simulation asks for (no price check), without the 15 s
validation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final

from provisioner.apis.conditions import DISRUPTION_REASON_DRIFTED
from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.disruption.command import Command, Replacement, command_id
from provisioner.controllers.disruption.methods import MethodContext, within_budgets

__all__ = ["Drift"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class Drift:
    """Karpenter's ``Drift`` method."""

    reason: Final = DISRUPTION_REASON_DRIFTED
    consolidation_type: Final = ""

    def should_disrupt(self, candidate: Candidate) -> bool:
        """The NodeClaim is ``Drifted``."""
        return candidate.drifted_at is not None

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> Command | None:
        """Replace the first drifted candidate the budgets allow and the cluster can absorb."""
        ordered = sorted(candidates, key=lambda c: (not c.is_empty, c.drifted_at or _EPOCH, c.name))
        for candidate in within_budgets(
            context, ordered, budgets, self.reason, context.facts.pools
        ):
            # not a move to save money: model pods take their first usable flavor, as new pods
            simulation = context.simulate([candidate], consolidating=False)
            if not simulation.ok:
                context.log.debug(
                    "cannot disrupt drifted node, its pods cannot be rescheduled",
                    Node={"name": candidate.name},
                    reason=simulation.failure,
                )
                continue
            replacements = [
                Replacement(
                    plan=claim,
                    instance_types=claim.instance_types,
                    capacity_types=(),
                    price=claim.price_per_hour,
                    pods=tuple(p for k, p in simulation.displaced.items() if k in claim.pods),
                )
                for claim in simulation.new_claims
            ]
            return Command(
                id=command_id([candidate.name], context.now),
                reason=self.reason,
                consolidation_type=self.consolidation_type,
                candidates=(candidate,),
                replacements=replacements,
                moving=tuple(
                    p
                    for k, p in simulation.displaced.items()
                    if p.spec.node_name != candidate.name and k
                ),
                created_at=context.now,
                validate=False,
            )
        return None
