"""Rescheduling simulations reused while everything they read is unchanged.

A simulation (:func:`~provisioner.controllers.disruption.rescheduling.simulate`) is a function of
the cache snapshot, the NodePools' instance types, the NodeClaims already leaving, the planner
settings and the candidates it removes (the gang members that move with them follow from the
snapshot). :class:`SimulationCache` keeps the outcomes for one such world: the disruption loop
scopes it every pass with the cache generation and live nominations, the catalog object, the
leaving NodeClaims and the planner settings, and any difference empties it. A pass on an
unchanged cluster, or a validation 15 s later on a cluster that did not move, then reuses the
outcomes instead of planning again.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from provisioner.controllers.disruption.rescheduling import Simulation
from provisioner.controllers.provisioning.planner import PlannerConfig

__all__ = ["SimulationCache", "SimulationKey"]

LIMIT: Final = 512
"""Outcomes kept per world (single-node consolidation may try every candidate)."""

SimulationKey = tuple[frozenset[str], bool]
"""The removed NodeClaims and whether the simulation is a consolidation's."""


class SimulationCache:
    """Simulation outcomes for one unchanged world.

    Args:
        limit: how many outcomes are kept per world (later ones are not kept).
    """

    def __init__(self, *, limit: int = LIMIT) -> None:
        self._limit = limit
        self._world: tuple[Hashable, frozenset[str], PlannerConfig] | None = None
        self._catalog: object = None
        self._results: dict[SimulationKey, Simulation] = {}

    def scope(
        self, cluster: Hashable, catalog: object, leaving: frozenset[str], planner: PlannerConfig
    ) -> None:
        """Say which world the next simulations run in; a different one forgets every outcome.

        Args:
            cluster: identifies the cache snapshot (generation and live nominations).
            catalog: the catalog object (compared by identity).
            leaving: the NodeClaims already going away.
            planner: the planner settings.
        """
        world = (cluster, leaving, planner)
        if world != self._world or catalog is not self._catalog:
            self._world = world
            self._catalog = catalog
            self._results = {}

    def get(self, key: SimulationKey) -> Simulation | None:
        """The outcome of the same simulation in this world, or None."""
        return self._results.get(key)

    def put(self, key: SimulationKey, simulation: Simulation) -> None:
        """Keep an outcome (up to the limit)."""
        if len(self._results) < self._limit:
            self._results[key] = simulation

    def __len__(self) -> int:
        return len(self._results)
