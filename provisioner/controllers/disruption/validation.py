"""The re-check before a consolidation command runs (Karpenter's 15 s validation).

A command computed on state that changed meanwhile is dropped (``ConsolidationRejected``,
``karpenter_voluntary_disruption_failed_validations_total``):

* **churn**: a candidate is no longer a candidate (pods arrived, it became nominated, protected,
  is being deleted, or, for emptiness, is no longer empty);
* **budget**: the pools' budgets no longer let all candidates go;
* **scheduling** (consolidation): re-simulating the same candidates does not give the same
  decision, or a replacement whose instance types are not among the original ones.

A valid command is returned rebuilt on the fresh candidates (and the fresh replacement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.disruption.command import Command
from provisioner.controllers.disruption.consolidation import compute_consolidation
from provisioner.controllers.disruption.methods import Method, MethodContext

__all__ = ["BUDGET", "CHURN", "SCHEDULING", "validate"]

CHURN: Final = "churn"
BUDGET: Final = "budget"
SCHEDULING: Final = "scheduling"


def validate(  # noqa: PLR0911 - one return per rejection
    command: Command,
    method: Method,
    context: MethodContext,
    candidates: Sequence[Candidate],
    budgets: Mapping[str, int],
) -> tuple[Command | None, str | None]:
    """Re-check ``command`` on fresh candidates and budgets.

    Returns:
        The command to run (rebuilt on the fresh state) and None, or None and the rejection
        reason (``churn``, ``budget`` or ``scheduling``).
    """
    fresh = {c.claim_name: c for c in candidates}
    current: list[Candidate] = []
    for candidate in command.candidates:
        now = fresh.get(candidate.claim_name)
        if now is None or not method.should_disrupt(now):
            return None, CHURN
        current.append(now)
    per_pool: dict[str, int] = {}
    for candidate in current:
        per_pool[candidate.pool] = per_pool.get(candidate.pool, 0) + 1
    if any(count > budgets.get(pool, 0) for pool, count in per_pool.items()):
        return None, BUDGET
    if command.consolidation_type == "empty":
        command.candidates = tuple(current)
        return command, None
    again, _ = compute_consolidation(context, current, command.consolidation_type)
    if again is None or again.decision != command.decision:
        return None, SCHEDULING
    if len(again.replacements) != len(command.replacements):
        return None, SCHEDULING
    for new, old in zip(again.replacements, command.replacements, strict=True):
        if not set(new.instance_types) <= set(old.instance_types):
            return None, SCHEDULING
    again.id = command.id
    again.created_at = command.created_at
    return again, None
