"""``disruption.queue``: carry out disruption commands (Karpenter's orchestration queue).

:meth:`CommandQueue.start` runs in the disruption loop the moment a command is decided:

1. taint every candidate Node ``karpenter.sh/disrupted:NoSchedule`` (no new pods land there);
2. set ``DisruptionReason=True`` (``Underutilized``/``Empty``/``Drifted``) on the candidates;
3. create the replacement NodeClaims (as the provisioner makes them; ``DisruptionLaunching``,
   ``karpenter_nodeclaims_created_total{reason=<reason>}``), and log Info ``disrupting node(s)``.

The reconciler then waits until **every** replacement is ``Initialized``
(``DisruptionWaitingReadiness``) and deletes the candidates' NodeClaims together
(``DisruptionTerminating``, ``karpenter_nodeclaims_disrupted_total``): the termination controller
drains them, evicting each gang as a whole. A replacement that disappears, or a wait longer than
``clamp(80 ms x queued, 10 min, 1 h)``, rolls the command back: the taint and the condition go and
the candidates stay. A command stays in the queue until its candidates are gone, so neither its
candidates nor its replacements are picked again meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from provisioner.apis import conditions as cond
from provisioner.apis.errors import ApiValidationError
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.command import Command
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.marks import (
    clear_disruption_reason,
    set_disruption_reason,
    taint_node,
    untaint_node,
)
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.disruption.rescheduling import PoolCatalog, replacement_body
from provisioner.controllers.events import Event
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["CommandQueue"]

NAME: Final = "disruption.queue"
_PER_QUEUED: Final = timedelta(milliseconds=80)
_TERMINATION_MODE_GRACEFUL: Final = "graceful"
_TERMINATION_MODE_EVENTUAL: Final = "eventual"


@dataclass(slots=True)
class _Entry:
    command: Command
    deadline: datetime
    deleted: bool = False


@dataclass(slots=True)
class _Held:
    claims: set[str] = field(default_factory=set)


class CommandQueue(ControllerBase):
    """Runs disruption commands: replacements first, then the candidates go.

    Args:
        ports: the shared ports.
        disruption_metrics: disruption metrics.
        config: disruption settings.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        disruption_metrics: DisruptionMetrics,
        config: DisruptionConfig | None = None,
    ) -> None:
        super().__init__(ports, NAME)
        self._dmetrics = disruption_metrics
        self._config = config or DisruptionConfig()
        self._entries: list[_Entry] = []
        self._held = _Held()
        self._lock = threading.RLock()
        self.failures = 0
        """How many commands failed (a caller's cached view of capacity may be stale)."""

    # -- what is in flight ------------------------------------------------------------------

    def in_flight(self, claim: str) -> bool:
        """Whether the NodeClaim is a candidate or replacement of a running command, or held."""
        with self._lock:
            if claim in self._held.claims:
                return True
            for entry in self._entries:
                command = entry.command
                if any(c.claim_name == claim for c in command.candidates):
                    return True
                if any(r.name == claim for r in command.replacements):
                    return True
            return False

    def disrupting(self) -> set[str]:
        """NodeClaims being disrupted by running commands (and held ones)."""
        with self._lock:
            claims = set(self._held.claims)
            for entry in self._entries:
                claims.update(c.claim_name for c in entry.command.candidates)
            return claims

    def hold(self, claim: str) -> None:
        """Mark a NodeClaim as being disrupted by another orchestrator (interruption)."""
        with self._lock:
            self._held.claims.add(claim)

    def release(self, claim: str) -> None:
        """Forget a held NodeClaim."""
        with self._lock:
            self._held.claims.discard(claim)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- start --------------------------------------------------------------------------------

    def start(self, command: Command, catalog: PoolCatalog) -> bool:
        """Taint, mark and launch replacements for ``command``; False if it could not start."""
        now = self._clock.now()
        tainted: list[str] = []
        for candidate in command.candidates:
            if not taint_node(self._kube, candidate.name):
                self._undo(command, tainted, now, "candidate node is gone")
                return False
            tainted.append(candidate.name)
        for candidate in command.candidates:
            set_disruption_reason(self._kube, candidate.claim_name, command.reason, now=now)
        if not self._launch(command, catalog):
            self._undo(command, tainted, now, "launching replacement nodeclaims failed")
            return False
        self._log.info("disrupting node(s)", **command.log_fields())
        labels = {
            "decision": str(command.decision),
            "reason": command.reason.lower(),
            "consolidation_type": command.consolidation_type,
        }
        self._metrics.disruption_decisions.labels(**labels).inc()
        for pool in command.pools:
            self._dmetrics.decisions_by_nodepool.labels(nodepool=pool, **labels).inc()
        with self._lock:
            queued = len(self._entries) + 1
            timeout = min(
                max(_PER_QUEUED * queued, self._config.min_queue_timeout),
                self._config.max_queue_timeout,
            )
            entry = _Entry(command, now + timeout)
            self._entries.append(entry)
        self._advance(entry, now)
        return True

    def _launch(self, command: Command, catalog: PoolCatalog) -> bool:
        reason = command.reason.lower()
        for replacement in command.replacements:
            try:
                body = replacement_body(
                    replacement.plan,
                    catalog,
                    replacement.pods,
                    instance_types=replacement.instance_types,
                    capacity_types=replacement.capacity_types or None,
                )
                created = self._kube.create(NODE_CLAIMS, body)
            except (ApiValidationError, KubeApiError, KeyError) as error:
                self._log.error(
                    "creating replacement nodeclaim",
                    NodePool={"name": replacement.plan.node_pool},
                    error=str(error),
                )
                return False
            self._state.apply_object(created)
            replacement.name = str(created["metadata"]["name"])
            self._log.info(
                "created nodeclaim",
                NodePool={"name": replacement.plan.node_pool},
                NodeClaim={"name": replacement.name},
                reason=reason,
                **{"instance-types": ", ".join(replacement.instance_types[:5])},
            )
            self._metrics.nodeclaims_created.labels(
                reason=reason, nodepool=replacement.plan.node_pool, min_values_relaxed="false"
            ).inc()
            claim = self._state.node_claim(replacement.name)
            if claim is not None:
                self._publish([ev.launching(claim, command.reason), ev.waiting_on_readiness(claim)])
        return True

    def _undo(self, command: Command, tainted: Iterable[str], now: datetime, why: str) -> None:
        for name in tainted:
            untaint_node(self._kube, name)
        for candidate in command.candidates:
            clear_disruption_reason(self._kube, candidate.claim_name, now=now)
        self._log.error("failed to disrupt nodes", command=str(command), error=why)
        self.failures += 1
        self._dmetrics.queue_failures.labels(
            decision=str(command.decision),
            reason=command.reason.lower(),
            consolidation_type=command.consolidation_type,
        ).inc()

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result:
        """Advance every running command."""
        del request
        now = self._clock.now()
        with self._lock:
            entries = list(self._entries)
        for entry in entries:
            self._advance(entry, now)
        with self._lock:
            busy = bool(self._entries)
        return Result.after(self._config.queue_poll) if busy else Result.done()

    def _advance(self, entry: _Entry, now: datetime) -> None:
        command = entry.command
        if entry.deleted:
            if all(self._state.node_claim(c.claim_name) is None for c in command.candidates):
                self._remove(entry)
            return
        for replacement in command.replacements:
            claim = self._state.node_claim(replacement.name)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                self._rollback(entry, now, f"replacement nodeclaim {replacement.name} was lost")
                return
            conditions = claim.status.conditions if claim.status else ()
            if cond.is_true(conditions, cond.NODECLAIM_CONDITION_INITIALIZED):
                replacement.initialized = True
        if not all(r.initialized for r in command.replacements):
            if now >= entry.deadline:
                self._rollback(entry, now, "timed out waiting for replacements to initialize")
            return
        self._delete_candidates(entry)

    def _delete_candidates(self, entry: _Entry) -> None:
        command = entry.command
        failed = False
        for candidate in command.candidates:
            claim = candidate.state.nodeclaim
            try:
                self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
            except NotFoundError:
                continue
            except KubeApiError as error:
                failed = True
                self._log.error(
                    "failed terminating nodes while executing a disruption command",
                    command=str(command),
                    error=str(error),
                )
                continue
            self._publish(ev.terminating(candidate.state.node, claim, command.reason))
            mode = (
                _TERMINATION_MODE_EVENTUAL
                if claim.termination_grace_period is not None
                else _TERMINATION_MODE_GRACEFUL
            )
            labels = {
                "reason": command.reason.lower(),
                "nodepool": candidate.pool,
                "capacity_type": candidate.capacity_type,
                "consolidation_policy": candidate.nodepool.consolidation_policy,
                "termination_mode": mode,
            }
            self._metrics.nodeclaims_disrupted.labels(**labels).inc()
            self._dmetrics.pods_disruption_initiated.labels(**labels).inc(
                len(candidate.reschedulable)
            )
        if not failed:
            entry.deleted = True
            self._log.debug("command succeeded", command=str(command))

    def _rollback(self, entry: _Entry, now: datetime, why: str) -> None:
        command = entry.command
        self._undo(command, [c.name for c in command.candidates], now, why)
        self._remove(entry)

    def _remove(self, entry: _Entry) -> None:
        with self._lock:
            if entry in self._entries:
                self._entries.remove(entry)

    def _publish(self, events: Iterable[Event]) -> None:
        for event in events:
            self._events.publish(event)

    # -- stale marks --------------------------------------------------------------------------

    def strip_stale(self, claims: Iterable[tuple[str, str, bool, bool]], now: datetime) -> None:
        """Remove marks no running command owns (after a restart or a lost command).

        Args:
            claims: ``(claim, node, tainted, has_reason)`` of NodeClaims not being deleted.
            now: the current time.
        """
        for claim, node, tainted, has_reason in claims:
            if self.in_flight(claim):
                continue
            if tainted and node:
                untaint_node(self._kube, node)
                self._log.debug("removed stale disrupted taint", Node={"name": node})
            if has_reason:
                clear_disruption_reason(self._kube, claim, now=now)
