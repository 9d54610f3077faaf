"""``interruption``: act on the cloud's interruption messages (provider-neutral).

The AWS provider's queue consumer turns EventBridge messages into
:class:`~cloudprovider.interruption.DisruptionRequest` values (it has already marked an interrupted
spot offering unavailable). For each ``CordonAndDrain`` request naming a live NodeClaim:

1. The Node is tainted ``karpenter.sh/disrupted:NoSchedule`` at once (nothing new lands there)
   and held in the command queue (it consumes budgets; no other command picks it).
2. A spot interruption warning (or a scheduled change) starts the replacement at once: the
   node's pods are planned on the rest of the cluster and the NodeClaims they need are created
   (``karpenter_nodeclaims_created_total{reason=<kind>}``).
3. The NodeClaim is deleted (``DisruptionReason=<Kind>``, Info ``initiating delete from
   interruption message``, ``karpenter_nodeclaims_disrupted_total{reason=<kind>}``) as soon as its
   replacements are initialized, and at the latest ``window - margin`` after the warning (two
   minutes minus 45 s by default), so the drain happens inside the two-minute window. A stopped
   or terminated instance is deleted at once.

Every message first gets the AWS provider's event on the Node and NodeClaim (``SpotInterrupted``
"Spot interruption warning was triggered", ``SpotRebalanceRecommendation``, ``InstanceStopping``,
``InstanceTerminating``, ``InstanceUnhealthy``...); rebalance recommendations (``NoAction``) get
nothing else. A source that long-polls (SQS: 20 s) delays deadline checks by at most one poll,
well inside the margin. :class:`MessageMetrics` counts the source's messages (Karpenter's
``karpenter_interruption_*`` metrics). ``jointer run`` and ``jointer simulate`` both build this
controller through :mod:`provisioner.controllers.assembly`: there is one interruption path.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Protocol

from cloudprovider.errors import CloudProviderError
from cloudprovider.interruption import DisruptionAction, DisruptionKind, DisruptionRequest
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.commandqueue import CommandQueue
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.facts import ClusterFacts
from provisioner.controllers.disruption.marks import set_disruption_reason, taint_node
from provisioner.controllers.disruption.rescheduling import (
    load_catalog,
    replacement_body,
    simulate,
)
from provisioner.controllers.events import Event
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.protocol import EventType
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Request, Result

__all__ = ["InterruptionController", "InterruptionSource", "MessageMetrics", "condition_reason"]

NAME: Final = "interruption"
_EVENTS: Final[dict[DisruptionKind, tuple[EventType, str, str]]] = {
    DisruptionKind.SPOT_INTERRUPTED: (
        "Warning",
        "SpotInterrupted",
        "Spot interruption warning was triggered",
    ),
    DisruptionKind.REBALANCE_RECOMMENDATION: (
        "Normal",
        "SpotRebalanceRecommendation",
        "Spot rebalance recommendation was triggered",
    ),
    DisruptionKind.SCHEDULED_CHANGE: (
        "Warning",
        "InstanceUnhealthy",
        "An unhealthy warning was triggered",
    ),
    DisruptionKind.INSTANCE_STOPPED: ("Warning", "InstanceStopping", "Instance is stopping"),
    DisruptionKind.INSTANCE_TERMINATED: (
        "Warning",
        "InstanceTerminating",
        "Instance is terminating",
    ),
    DisruptionKind.CAPACITY_RESERVATION_INTERRUPTED: (
        "Warning",
        "CapacityReservationInterrupted",
        "Capacity reservation interruption warning was triggered",
    ),
}
"""Karpenter's (AWS provider's) event per interruption kind, on the Node and the NodeClaim."""
_REPLACE_FIRST: Final = frozenset(
    {
        DisruptionKind.SPOT_INTERRUPTED,
        DisruptionKind.SCHEDULED_CHANGE,
        DisruptionKind.CAPACITY_RESERVATION_INTERRUPTED,
    }
)


class InterruptionSource(Protocol):
    """Where interruption requests come from (AWS: the SQS queue consumer)."""

    def poll(self) -> list[DisruptionRequest]:
        """Receive and acknowledge the next batch of requests."""
        ...


def condition_reason(kind: DisruptionKind) -> str:
    """The ``DisruptionReason`` of an interruption kind (``SpotInterrupted``)."""
    return "".join(part.capitalize() for part in kind.value.split("_"))


@dataclass(slots=True)
class _Tracked:
    kind: DisruptionKind
    deadline: datetime
    replacements: tuple[str, ...]


class InterruptionController(ControllerBase):
    """Replaces and deletes interrupted NodeClaims.

    Args:
        ports: the shared ports (the cloud provider gives instance types for replacements).
        queue: the disruption command queue (interrupted NodeClaims are held there).
        source: the interruption messages (None: only :meth:`handle` feeds it).
        planner: planner settings for the replacements.
        config: disruption settings (poll interval, window, margin).
        region: the region label value for templates.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        queue: CommandQueue,
        source: InterruptionSource | None = None,
        planner: PlannerConfig | None = None,
        config: DisruptionConfig | None = None,
        region: str = "",
    ) -> None:
        super().__init__(ports, NAME)
        self._queue = queue
        self._source = source
        self._planner = planner or PlannerConfig()
        self._config = config or DisruptionConfig()
        self._region = region
        self._tracked: dict[str, _Tracked] = {}
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        """Poll the source, act on new requests, delete NodeClaims whose time has come."""
        del request
        if not self._state.synced:
            return Result.after(self._config.interruption_poll)
        if self._source is not None:
            try:
                requests = self._source.poll()
            except Exception as error:  # noqa: BLE001 - a failed poll is retried, never fatal
                self._log.error("polling interruption messages", error=str(error))
                requests = []
            for message in requests:
                self.handle(message)
        return self.progress()

    def handle(self, message: DisruptionRequest) -> None:
        """Start acting on one interruption request."""
        now = self._clock.now()
        claim = self._state.node_claim(message.nodeclaim)
        if claim is not None:
            self._announce(message.kind, claim)
        if message.action != DisruptionAction.CORDON_AND_DRAIN:
            self._log.info(
                "ignoring interruption message",
                messageKind=str(message.kind),
                NodeClaim={"name": message.nodeclaim},
            )
            return
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return
        with self._lock:
            if claim.name in self._tracked:
                return
        self._queue.hold(claim.name)
        node = (
            self._state.node(claim.status.node_name)
            if claim.status and claim.status.node_name
            else None
        )
        if node is not None:
            taint_node(self._kube, node.metadata.name)
        replacements: tuple[str, ...] = ()
        deadline = now
        if message.kind in _REPLACE_FIRST:
            start = message.event_time
            window = self._config.interruption_window
            if start is None or start > now or now - start > window:
                start = now
            deadline = start + window - self._config.interruption_drain_margin
            replacements = self._replace(claim.name, message.kind, now)
        self._log.info(
            "initiating replacement from interruption message",
            messageKind=str(message.kind),
            NodeClaim={"name": claim.name},
            replacements=len(replacements),
            deleteBy=deadline.isoformat(),
        )
        with self._lock:
            self._tracked[claim.name] = _Tracked(message.kind, deadline, replacements)

    def _announce(self, kind: DisruptionKind, claim: NodeClaim) -> None:
        event_type, reason, message = _EVENTS.get(
            kind, ("Warning", "Interrupted", f"Interruption message: {kind.value}")
        )
        name = claim.status.node_name if claim.status else None
        node = self._state.node(name) if name else None
        refs = [ev.claim_ref(claim)] + ([ev.node_ref(node)] if node is not None else [])
        for ref in refs:
            self._events.publish(Event(ref, event_type, reason, message))

    def progress(self) -> Result:
        """Delete tracked NodeClaims whose replacements are ready or whose deadline came."""
        now = self._clock.now()
        with self._lock:
            tracked = dict(self._tracked)
        waits = [self._config.interruption_poll] if self._source is not None else []
        for name, entry in tracked.items():
            claim = self._state.node_claim(name)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                self._forget(name)
                continue
            if now >= entry.deadline or self._replaced(entry.replacements):
                self._delete(name, entry, now)
                continue
            waits.append(min(entry.deadline - now, self._config.queue_poll))
        return Result.after(min(waits)) if waits else Result.done()

    def _replaced(self, names: Sequence[str]) -> bool:
        for name in names:
            claim = self._state.node_claim(name)
            if claim is None or claim.metadata.deletion_timestamp is not None:
                continue
            conditions = claim.status.conditions if claim.status else ()
            if not cond.is_true(conditions, cond.NODECLAIM_CONDITION_INITIALIZED):
                return False
        return True

    def _replace(self, claim_name: str, kind: DisruptionKind, now: datetime) -> tuple[str, ...]:
        facts = ClusterFacts.build(
            self._state.snapshot(now), now, self._config.non_preemptible_priority_classes
        )
        state = facts.nodes.get(claim_name)
        if state is None or not state.name:
            return ()
        try:
            catalog = load_catalog(facts, self._cloud, region=self._region, log=self._log)
        except CloudProviderError as error:
            self._log.error("planning interruption replacement", error=str(error))
            return ()
        leaving = {n for n, s in facts.nodes.items() if s.deleting} | self._queue.disrupting()
        # sized for this node's pods only: the cluster's pending pods are the provisioner's (in
        # one replacement per interrupted node they would be counted again for every node)
        simulation = simulate(
            facts, catalog, [state], planner=self._planner, leaving=leaving, pending=False
        )
        plan = simulation.plan
        if plan is None:
            return ()
        created: list[str] = []
        for planned in plan.node_claims:
            pods = [p for k, p in simulation.displaced.items() if k in planned.pods]
            if not pods:
                continue
            try:
                body = replacement_body(planned, catalog, pods)
                obj = self._kube.create(NODE_CLAIMS, body)
            except (ApiValidationError, KubeApiError, KeyError) as error:
                self._log.error("creating interruption replacement", error=str(error))
                continue
            self._state.apply_object(obj)
            name = str(obj["metadata"]["name"])
            created.append(name)
            self._log.info(
                "created nodeclaim",
                NodePool={"name": planned.node_pool},
                NodeClaim={"name": name},
                reason=kind.value,
                **{"instance-types": ", ".join(planned.instance_types[:5])},
            )
            self._metrics.nodeclaims_created.labels(
                reason=kind.value, nodepool=planned.node_pool, min_values_relaxed="false"
            ).inc()
            replacement = self._state.node_claim(name)
            if replacement is not None:
                self._events.publish(ev.launching(replacement, condition_reason(kind)))
        return tuple(created)

    def _delete(self, name: str, entry: _Tracked, now: datetime) -> None:
        claim = self._state.node_claim(name)
        if claim is None:
            self._forget(name)
            return
        set_disruption_reason(self._kube, name, condition_reason(entry.kind), now=now)
        try:
            self._kube.delete(NODE_CLAIMS, name, uid=claim.metadata.uid or None)
        except NotFoundError:
            self._forget(name)
            return
        except KubeApiError as error:
            self._log.error(
                "deleting interrupted nodeclaim", NodeClaim={"name": name}, error=str(error)
            )
            return
        self._log.info(
            "initiating delete from interruption message",
            messageKind=entry.kind.value,
            NodeClaim={"name": name},
        )
        self._metrics.nodeclaims_disrupted.labels(
            reason=entry.kind.value,
            nodepool=claim.nodepool_name or "",
            capacity_type=claim.metadata.labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            consolidation_policy="",
            termination_mode="forceful",
        ).inc()
        self._forget(name)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._tracked.pop(name, None)
        self._queue.release(name)


class MessageMetrics:
    """Karpenter's interruption queue metrics, as a consumer's ``MessageObserver``.

    Args:
        metrics: the metrics.
        clock: the injected clock (a message's time on the queue ends now).
    """

    def __init__(self, metrics: Metrics, clock: Clock) -> None:
        self._metrics = metrics
        self._clock = clock

    def received(self, message_type: str) -> None:
        """``karpenter_interruption_received_messages_total{message_type}``."""
        self._metrics.interruption_received.labels(message_type=message_type).inc()

    def handled(self, event_time: datetime | None) -> None:
        """``karpenter_interruption_message_queue_duration_seconds`` since the event's time."""
        if event_time is None:
            return
        if event_time.tzinfo is None:
            event_time = event_time.replace(tzinfo=UTC)
        waited = (self._clock.now() - event_time).total_seconds()
        self._metrics.interruption_queue_duration.observe(max(0.0, waited))

    def deleted(self) -> None:
        """``karpenter_interruption_deleted_messages_total``."""
        self._metrics.interruption_deleted.inc()
