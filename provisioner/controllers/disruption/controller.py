"""``disruption``: the singleton loop that decides what to disrupt (Karpenter's ``c/disruption``).

Every 10 s (virtual time in simulations), once the cache is synced:

1. Marks no running command owns (a disrupted taint or ``DisruptionReason`` left by a crash or a
   lost command) are removed.
2. Candidates are built (:mod:`~provisioner.controllers.disruption.candidates`): protected nodes
   get ``DisruptionBlocked`` and are never considered.
3. Methods run in Karpenter's order: **emptiness**, **drift**, **multi-node** then
   **single-node consolidation**; each gets the candidates it wants and the budgets of its
   reason, counted from the nodes disrupting *now*. The first command wins.
4. Emptiness and consolidation commands wait 15 s and are validated again
   (:mod:`~provisioner.controllers.disruption.validation`); drift commands start at once.
5. A started command goes to the queue (``disruption.queue``), and the loop runs again at once.

Emptiness and consolidation that found nothing (and did not time out) are not re-run while the
cluster's consolidation state has not moved and their candidates and budgets are the same
(:mod:`~provisioner.controllers.disruption.consolidationstate`: pod bindings and deletions,
Nodes and NodeClaims coming, going, initializing or being deleted, NodePools and NodeOverlays;
at most 5 minutes), as Karpenter's ``IsConsolidated``. Drift that found nothing is re-run when
anything in the cache changed or after 5 minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from provisioner.apis import conditions as cond
from provisioner.apis.podmemo import PerPod
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.budgets import BudgetNode, budget_mapping
from provisioner.controllers.disruption.candidates import Candidate, build_candidates
from provisioner.controllers.disruption.command import Command
from provisioner.controllers.disruption.commandqueue import CommandQueue
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.consolidation import (
    MultiNodeConsolidation,
    SingleNodeConsolidation,
)
from provisioner.controllers.disruption.consolidationstate import ConsolidationState
from provisioner.controllers.disruption.drift import Drift
from provisioner.controllers.disruption.emptiness import Emptiness
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.methods import Method, MethodContext
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.disruption.rescheduling import CatalogCache
from provisioner.controllers.disruption.simulations import SimulationCache
from provisioner.controllers.disruption.validation import validate
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.buffers import BUFFER_KIND
from provisioner.controllers.provisioning.controller import bind_buffer_pods
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.podgroups import DetectionMemo
from provisioner.runtime.reconciler import Request, Result

__all__ = ["DisruptionController", "budget_nodes", "simulation_planner"]

NAME: Final = "disruption"
NOT_SYNCED_REQUEUE: Final = timedelta(seconds=1)
IMMEDIATELY: Final = timedelta(0)


@dataclass(slots=True)
class _Pending:
    command: Command
    method: Method
    at: datetime


def budget_nodes(facts: ClusterFacts, disrupting: set[str]) -> list[BudgetNode]:
    """The managed nodes as budget arithmetic counts them."""
    return [
        BudgetNode(
            pool=state.pool,
            counted=state.initialized and not state.instance_terminating,
            disrupting=(
                state.deleting
                or state.tainted
                or state.nodeclaim.name in disrupting
                or not state.ready
            ),
        )
        for state in facts.nodes.values()
    ]


def simulation_planner(planner: PlannerConfig, config: DisruptionConfig) -> PlannerConfig:
    """The planner configuration of the rescheduling simulations: ``planner``'s, policies too.

    The simulations schedule as the provisioner does (``PREFERENCE_POLICY``,
    ``MIN_VALUES_POLICY``, as in Karpenter, whose disruption simulates with the provisioner's
    scheduler options).

    Their wall-clock limit is ``config.simulation_time_limit_seconds`` (1 s), except in a
    reproducible run (``planner.deterministic_time`` set, as ``jointer simulate`` plans).
    There the search is bounded by deterministic work (column-generation rounds, CP-SAT's
    deterministic time, the polish running to its end), and a one-second wall clock would
    cut the few long simulations at a point that depends on the machine's load: two runs of
    the same seed could decide different consolidations (the 24-hour replay of
    ``bench/scenario_scale.py`` has about six such simulations a day). The planner's own
    limit stays as the cap.
    """
    if planner.deterministic_time is not None:
        return planner
    limit = min(planner.time_limit_seconds, config.simulation_time_limit_seconds)
    return replace(planner, time_limit_seconds=limit)


class DisruptionController(ControllerBase):
    """Decides disruption commands and hands them to the queue.

    Args:
        ports: the shared ports (the cloud provider gives instance types and prices).
        queue: the command queue.
        disruption_metrics: disruption metrics.
        planner: planner settings for rescheduling simulations.
        config: disruption settings.
        region: the region label value for templates.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        queue: CommandQueue,
        disruption_metrics: DisruptionMetrics,
        planner: PlannerConfig | None = None,
        config: DisruptionConfig | None = None,
        region: str = "",
    ) -> None:
        super().__init__(ports, NAME)
        self._queue = queue
        self._dmetrics = disruption_metrics
        self._config = config or DisruptionConfig()
        base = planner or PlannerConfig()
        self._planner = simulation_planner(base, self._config)
        self.methods: tuple[Method, ...] = (
            Emptiness(),
            Drift(),
            MultiNodeConsolidation(),
            SingleNodeConsolidation(),
        )
        self._catalogs = CatalogCache(self._cloud, region=region, ttl=self._config.catalog_ttl)
        self._pending: _Pending | None = None
        self._noop: dict[str, tuple[int, frozenset[str], datetime]] = {}
        self.consolidation_state = ConsolidationState(recheck=self._config.recheck_interval)
        """Karpenter's consolidation state: when emptiness and consolidation run again."""
        self.simulations = SimulationCache()
        """Simulation outcomes reused while the cluster, catalog and leaving nodes are unchanged."""
        self._pod_costs: PerPod[tuple[bool, float]] = PerPod()
        """Each pod object's reschedulability and eviction cost, kept across passes."""
        self._idle: tuple[object, datetime] | None = None
        self._failures = 0
        self._groups = DetectionMemo()
        """Each pod object's group, read once over the passes."""

    def reconcile(self, request: Request) -> Result:
        """Run one pass of the disruption loop."""
        del request
        if not self._state.synced:
            return Result.after(NOT_SYNCED_REQUEUE)
        now = self._clock.now()
        nominations = frozenset(
            (key, n.node_claim) for key, n in self._state.nominations(now).items()
        )
        idle_key = (self._state.generation, len(self._queue), frozenset(k for k, _ in nominations))
        if self._pending is None and self._idle is not None:
            seen, at = self._idle
            if seen == idle_key and now - at < self._config.recheck_interval:
                return Result.after(self._config.poll_interval)
        self._idle = None
        placement = self._state.placement_generation  # read before the snapshot it keys
        snapshot = self._state.snapshot(now)
        if self._state.has_kind(BUFFER_KIND):  # its virtual pods hold their room
            snapshot, _ = bind_buffer_pods(snapshot, self._planner)
        self._groups.bound(len(snapshot.pods))
        facts = ClusterFacts.build(
            snapshot, now, self._config.non_preemptible_priority_classes, detector=self._groups
        )
        self._strip_stale(facts, now)
        if self._queue.failures != self._failures:
            self._failures = self._queue.failures
            self._catalogs.invalidate()
        catalog = self._catalogs.get(facts, self._log)
        disrupting = self._queue.disrupting()
        leaving = {name for name, s in facts.nodes.items() if s.deleting} | disrupting
        self.consolidation_state.observe(facts, frozenset(disrupting), now)
        self.simulations.scope(
            (placement, nominations),
            catalog,
            frozenset(leaving),
            self._planner,
        )
        context = MethodContext(
            facts=facts,
            catalog=catalog,
            config=self._config,
            planner=self._planner,
            leaving=frozenset(leaving),
            publish=self._events.publish,
            log=self._log,
            metrics=self._dmetrics,
            now=now,
            monotonic=self._clock.monotonic,
            cache=self.simulations,
        )
        candidates = build_candidates(
            facts,
            catalog,
            in_flight=self._queue.in_flight,
            publish=self._events.publish,
            memo=self._pod_costs,
        )
        nodes = budget_nodes(facts, disrupting)
        self._record_budgets(facts, nodes, now)
        if self._pending is not None:
            pending = self._pending
            if now < pending.at:
                return Result.after(pending.at - now)
            self._pending = None
            return self._run_validated(pending, context, candidates, nodes)
        result = self._decide(context, candidates, nodes, idle_key[0])
        if result is None:
            self._idle = (idle_key, now)
            return Result.after(self._config.poll_interval)
        return result

    def _decide(
        self,
        context: MethodContext,
        candidates: list[Candidate],
        nodes: list[BudgetNode],
        generation: int,
    ) -> Result | None:
        """Run the methods in order; the first command wins (None: nothing to do)."""
        now = context.now
        for method in self.methods:
            wanted = [c for c in candidates if method.should_disrupt(c)]
            key = method.consolidation_type or method.reason
            self._metrics.eligible_nodes.labels(reason=method.reason.lower()).set(len(wanted))
            if not wanted:
                continue
            names = frozenset(c.claim_name for c in wanted)
            budgets = budget_mapping(context.facts.pools, nodes, method.reason, now)
            consolidating = method.consolidation_type != ""
            if consolidating:
                if self.consolidation_state.is_consolidated(key, names, budgets, now):
                    continue
            elif self._unchanged(key, generation, names, now):
                continue
            started = self._clock.monotonic()
            context.incomplete = False
            command = method.compute(context, dict(budgets), wanted)
            self._dmetrics.evaluation_duration.labels(
                reason=method.reason.lower(), consolidation_type=method.consolidation_type
            ).observe(max(self._clock.monotonic() - started, 0.0))
            if not isinstance(command, Command):
                if not consolidating:
                    self._noop[key] = (generation, names, now)
                elif not context.incomplete:  # a timeout: it may find something next pass
                    self.consolidation_state.mark_consolidated(key, names, budgets, now)
                continue
            self._noop.clear()
            self.consolidation_state.forget()
            if not command.validate:
                return self._start(command, context)
            for candidate in command.candidates:
                for event in ev.consolidation_candidate(
                    candidate.state.node,
                    candidate.state.nodeclaim,
                    command.for_node(candidate),
                    command.savings,
                ):
                    self._events.publish(event)
            self._pending = _Pending(command, method, now + self._config.validation_delay)
            return Result.after(self._config.validation_delay)
        return None

    def _unchanged(self, key: str, generation: int, wanted: frozenset[str], now: datetime) -> bool:
        last = self._noop.get(key)
        if last is None:
            return False
        seen_generation, seen, at = last
        return (
            seen_generation == generation
            and seen == wanted
            and now - at < self._config.recheck_interval
        )

    def _run_validated(
        self,
        pending: _Pending,
        context: MethodContext,
        candidates: list[Candidate],
        nodes: list[BudgetNode],
    ) -> Result:
        method = pending.method
        budgets = budget_mapping(context.facts.pools, nodes, method.reason, context.now)
        wanted = [c for c in candidates if method.should_disrupt(c)]
        command, why = validate(pending.command, method, context, wanted, budgets)
        if command is None:
            original = pending.command
            self._dmetrics.failed_validations.labels(
                consolidation_type=original.consolidation_type
            ).inc()
            if original.consolidation_type == "empty":
                self._log.debug(
                    "abandoning empty node consolidation attempt due to pod churn, command is no "
                    "longer valid",
                    command=str(original),
                )
            else:
                self._log.debug(
                    "abandoning consolidation attempt, command is no longer valid",
                    command=str(original),
                    reason=why,
                )
            for candidate in original.candidates:
                for event in ev.consolidation_rejected(
                    candidate.state.node,
                    candidate.state.nodeclaim,
                    original.for_node(candidate),
                    why or "",
                ):
                    self._events.publish(event)
            return Result.after(IMMEDIATELY)
        return self._start(command, context)

    def _start(self, command: Command, context: MethodContext) -> Result:
        if self._queue.start(command, context.catalog):
            return Result.after(IMMEDIATELY)
        return Result.after(self._config.poll_interval)

    def _strip_stale(self, facts: ClusterFacts, now: datetime) -> None:
        stale = []
        for name, state in facts.nodes.items():
            if state.deleting:
                continue
            conditions = state.nodeclaim.status.conditions if state.nodeclaim.status else ()
            has_reason = cond.is_true(conditions, cond.NODECLAIM_CONDITION_DISRUPTION_REASON)
            if state.tainted or has_reason:
                stale.append((name, state.name, state.tainted, has_reason))
        if stale:
            self._queue.strip_stale(stale, now)

    def _record_budgets(self, facts: ClusterFacts, nodes: list[BudgetNode], now: datetime) -> None:
        consuming: dict[str, int] = {}
        for node in nodes:
            if node.counted and node.disrupting:
                consuming[node.pool] = consuming.get(node.pool, 0) + 1
        for reason in cond.DISRUPTION_REASONS:
            allowed = budget_mapping(facts.pools, nodes, reason, now)
            for pool, value in allowed.items():
                self._metrics.allowed_disruptions.labels(nodepool=pool, reason=reason.lower()).set(
                    value
                )
                self._dmetrics.nodes_consuming_budgets.labels(
                    nodepool=pool, reason=reason.lower()
                ).set(consuming.get(pool, 0))
