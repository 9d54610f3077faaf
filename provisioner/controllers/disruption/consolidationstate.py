"""When consolidation is worth computing again (Karpenter's ``ConsolidationState``).

Karpenter's cluster state keeps a timestamp that moves (``MarkUnconsolidated``) whenever the
cluster changes in a way that could make consolidation possible: a pod binds to a node or is
deleted, a Node or NodeClaim appears or goes, one becomes initialized or marked for deletion, a
NodePool or NodeOverlay changes. The timestamp also moves on its own once it is 5 minutes old,
so something invisible (an instance type's availability, a price) is looked at again.
Emptiness and multi-node and single-node consolidation remember the timestamp when they found
nothing and were not held back by a budget (``markConsolidated``), and do not run again while it
has not moved (``IsConsolidated``).

Here a method also remembers its candidates and the budgets it was given, and runs again when
either differs (``consolidateAfter`` elapsed, a PDB allowing an eviction again, a budget window
opening, a disruption ending). Held back by a budget, it is skipped while the budgets are the
same (Karpenter recomputes it every pass: the budgets are the only input that differs, and they
are compared). A method stopped by its timeout is never skipped.

:class:`ConsolidationState` derives the same signal from the disruption pass's view of the cache:
it compares what consolidation depends on with what it saw last time. A bound pod turning
terminal also counts (Karpenter waits for its deletion).
"""

from __future__ import annotations

from collections.abc import KeysView, Mapping
from datetime import datetime, timedelta
from typing import Final

from provisioner.controllers.disruption.facts import ClusterFacts

__all__ = ["RECHECK", "ConsolidationState"]

RECHECK: Final = timedelta(minutes=5)
"""Karpenter's forced re-evaluation: the state moves on its own once this old."""

_Nodes = dict[str, tuple[bool, bool, bool, bool]]
_Pools = dict[str, tuple[object, ...]]
_Budgets = frozenset[tuple[str, int]]


class ConsolidationState:
    """The cluster's consolidation state and what each method last found nothing on.

    Args:
        recheck: how old the state may get before it moves on its own (5 minutes).
    """

    def __init__(self, *, recheck: timedelta = RECHECK) -> None:
        self._recheck = recheck
        self._state: datetime | None = None
        self._bindings: Mapping[str, str] | None = None
        self._pods: KeysView[str] = {}.keys()
        self._nodes: _Nodes | None = None
        self._pools: _Pools | None = None
        self._overlays: Mapping[str, object] | None = None
        self._leaving: frozenset[str] = frozenset()
        self._consolidated: dict[str, tuple[datetime, frozenset[str], _Budgets]] = {}
        self.marks = 0
        """How often the state moved because the cluster changed (not counting timeouts)."""

    def mark_unconsolidated(self, now: datetime) -> datetime:
        """Move the state to ``now`` (Karpenter's ``MarkUnconsolidated``)."""
        self._state = now
        return now

    def state(self, now: datetime) -> datetime:
        """The state's timestamp; it moves to ``now`` when older than the recheck interval."""
        if self._state is None or now - self._state >= self._recheck:
            return self.mark_unconsolidated(now)
        return self._state

    def observe(self, facts: ClusterFacts, leaving: frozenset[str], now: datetime) -> bool:
        """Compare the pass's view with the last one; move the state when it changed.

        What counts: a live pod bound, moved, unbound or gone from its node; any pod deleted; a
        Node or NodeClaim added or removed, its initialization or deletion changed or a command
        taking it; a NodePool or a NodeOverlay changed.

        Returns:
            Whether the state moved.
        """
        snapshot = facts.snapshot
        nodes: _Nodes = {
            key: (
                state.node is not None,
                state.claim is not None,
                state.initialized,
                state.deleting,
            )
            for key, state in snapshot.state_nodes.items()
        }
        pools: _Pools = {
            name: (
                entry.uid,
                entry.generation,
                entry.deleting,
                entry.error,
                tuple((str(c.get("type")), str(c.get("status"))) for c in entry.conditions),
            )
            for name, entry in snapshot.nodepools.items()
        }
        changed = (
            self._bindings is None
            or self._bindings != facts.node_of_pod
            or not self._pods <= snapshot.pods.keys()
            or self._nodes != nodes
            or self._leaving != leaving
            or self._pools != pools
            or self._overlays != snapshot.overlays
        )
        self._bindings = facts.node_of_pod
        self._pods = snapshot.pods.keys()
        self._nodes = nodes
        self._leaving = leaving
        self._pools = pools
        self._overlays = snapshot.overlays
        if changed:
            self.marks += 1
            self.mark_unconsolidated(now)
        return changed

    def is_consolidated(
        self, method: str, wanted: frozenset[str], budgets: Mapping[str, int], now: datetime
    ) -> bool:
        """Whether ``method`` found nothing on this state, candidates and budgets before."""
        seen = self._consolidated.get(method)
        return seen is not None and seen == (self.state(now), wanted, _frozen(budgets))

    def mark_consolidated(
        self, method: str, wanted: frozenset[str], budgets: Mapping[str, int], now: datetime
    ) -> None:
        """Remember that ``method`` found nothing for ``wanted`` and ``budgets`` on this state."""
        self._consolidated[method] = (self.state(now), wanted, _frozen(budgets))

    def forget(self) -> None:
        """Forget what every method found (a command started)."""
        self._consolidated.clear()


def _frozen(budgets: Mapping[str, int]) -> _Budgets:
    return frozenset(budgets.items())
