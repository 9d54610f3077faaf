"""The disruption method protocol and what every method is handed.

Karpenter's ``Method``: each method says which candidates it wants (``should_disrupt``) and
turns them into at most one :class:`~provisioner.controllers.disruption.command.Command` within
the budgets it is given. Methods run in Karpenter's order (emptiness, drift, multi-node then
single-node consolidation); the first command wins.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from structlog.typing import FilteringBoundLogger

from provisioner.apis import labels as wk
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.candidates import Candidate, eviction_cost, gang_pods
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.facts import ClusterFacts, is_reschedulable
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.disruption.rescheduling import PoolCatalog, Simulation, simulate
from provisioner.controllers.disruption.simulations import SimulationCache
from provisioner.controllers.events import Event
from provisioner.controllers.provisioning.planner import NewCapacityLimit, PlannerConfig

__all__ = [
    "NO_CHEAPER_NODE",
    "SPOT_TO_SPOT_OFF",
    "Method",
    "MethodContext",
    "all_spot",
    "within_budgets",
]


NO_CHEAPER_NODE: Final = "Can't replace with a cheaper node"
"""Karpenter's reason when no replacement costs less than the candidates."""
SPOT_TO_SPOT_OFF: Final = (
    "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
)
"""Karpenter's reason when spot candidates could only be replaced by spot."""


def all_spot(candidates: Sequence[Candidate]) -> bool:
    """Whether every candidate is a spot node (spot-to-spot consolidation's case)."""
    return all(c.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)


@dataclass(slots=True, kw_only=True)
class MethodContext:
    """Everything a method reads and the ports it reports through.

    Attributes:
        facts: the cluster.
        catalog: the NodePools and their instance types.
        config: disruption settings.
        planner: the planner settings for rescheduling simulations.
        leaving: NodeClaims already going away (deleting or in a running command).
        publish: the event recorder's ``publish``.
        log: the ``disruption`` logger.
        metrics: disruption metrics.
        now: the time of this pass.
        monotonic: seconds on a monotonic clock (the methods' timeouts).
        simulations: how many simulations this pass ran.
        cache: simulation outcomes reused while the world is unchanged (None: none).
        reused: how many simulations this pass took from the cache.
        incomplete: set by a method stopped by its timeout (what it did not find, it may find
            next time without the cluster changing).
    """

    facts: ClusterFacts
    catalog: PoolCatalog
    config: DisruptionConfig
    planner: PlannerConfig
    leaving: Collection[str]
    publish: Callable[[Event], object]
    log: FilteringBoundLogger
    metrics: DisruptionMetrics
    now: datetime
    monotonic: Callable[[], float] = lambda: 0.0
    simulations: int = 0
    cache: SimulationCache | None = None
    reused: int = 0
    incomplete: bool = False
    _pool_totals: dict[str, tuple[float, float]] = field(default_factory=dict)

    def simulate(
        self, candidates: Sequence[Candidate], *, consolidating: bool = True
    ) -> Simulation:
        """Move the candidates' pods (and their gangs' other members) elsewhere, on paper.

        With ``consolidating`` (not drift) llmaz model pods keep their flavor or a better one,
        the pods may only take new capacity a replacement could use (cheaper than the
        candidates; not spot when they all are and spot-to-spot consolidation is off) and the
        plan that serves a consolidation best is kept (every pod moved, then at most one new
        node, then the cheapest: ``rescheduling.simulate``'s ``one_replacement``). The same
        simulation in an unchanged world is taken from ``cache``.
        """
        key = (frozenset(c.claim_name for c in candidates), consolidating)
        if self.cache is not None:
            known = self.cache.get(key)
            if known is not None:
                self.reused += 1
                return known
        self.simulations += 1
        simulation = simulate(
            self.facts,
            self.catalog,
            [c.state for c in candidates],
            planner=self.planner,
            leaving=self.leaving,
            moving=gang_pods(candidates, self.facts),
            keep_flavor=consolidating,
            one_replacement=consolidating,
            limit=self._replacement_limit(candidates) if consolidating else None,
        )
        if self.cache is not None:
            self.cache.put(key, simulation)
        return simulation

    def _replacement_limit(self, candidates: Sequence[Candidate]) -> NewCapacityLimit:
        price = sum(c.price for c in candidates)
        if self.config.spot_to_spot or not all_spot(candidates):
            return NewCapacityLimit(below_per_hour=price, reason=NO_CHEAPER_NODE)
        return NewCapacityLimit(below_per_hour=price, spot=False, reason=SPOT_TO_SPOT_OFF)

    def pool_totals(self, pool: str) -> tuple[float, float]:
        """The pool's hourly cost and disruption cost (Balanced consolidation's denominators)."""
        if pool not in self._pool_totals:
            cost = disruption = 0.0
            for state in self.facts.nodes.values():
                if state.pool != pool or not state.initialized or state.deleting:
                    continue
                labels = state.labels
                price = self.catalog.price(
                    pool,
                    labels.get("node.kubernetes.io/instance-type", ""),
                    labels.get("topology.kubernetes.io/zone", ""),
                    labels.get("karpenter.sh/capacity-type", ""),
                )
                cost += price or 0.0
                disruption += 1.0 + sum(
                    max(0.0, eviction_cost(p)) for p in state.pods if is_reschedulable(p)
                )
            self._pool_totals[pool] = (cost, disruption)
        return self._pool_totals[pool]


class Method(Protocol):
    """A disruption method."""

    @property
    def reason(self) -> str:
        """``Empty``, ``Drifted`` or ``Underutilized``: the budget reason and condition reason."""
        ...

    @property
    def consolidation_type(self) -> str:
        """``empty``, ``single``, ``multi`` or ``""`` (the metric label)."""
        ...

    def should_disrupt(self, candidate: Candidate) -> bool:
        """Whether the method wants this candidate."""
        ...

    def compute(
        self, context: MethodContext, budgets: Mapping[str, int], candidates: Sequence[Candidate]
    ) -> object:
        """At most one command (a ``Command``) for the wanted candidates, or None."""
        ...


def within_budgets(
    context: MethodContext,
    candidates: Sequence[Candidate],
    budgets: Mapping[str, int],
    reason: str,
    pools: Mapping[str, NodePool],
) -> list[Candidate]:
    """The candidates, in order, that the pools' budgets let go at once.

    A pool whose budget blocks a wanted candidate gets ``DisruptionBlocked``.
    """
    used: dict[str, int] = {}
    kept: list[Candidate] = []
    blocked: set[str] = set()
    for candidate in candidates:
        pool = candidate.pool
        if used.get(pool, 0) < budgets.get(pool, 0):
            used[pool] = used.get(pool, 0) + 1
            kept.append(candidate)
        elif budgets.get(pool, 0) == 0 and pool not in blocked:
            blocked.add(pool)
            nodepool = pools.get(pool)
            if nodepool is not None:
                context.publish(ev.nodepool_blocked(nodepool, reason))
    return kept
