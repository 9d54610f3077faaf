"""The disruption controllers built together, and how drivers trigger them.

:class:`DisruptionControllers` is the manager's extension point for disruption: it builds the
``disruption`` loop, its ``disruption.queue``, ``nodeclaim.disruption`` (Consolidatable/Drifted),
``nodeclaim.podevents``, ``nodeclaim.expiration`` and, when a message source is given,
``interruption``; :meth:`DisruptionControllers.wirings` says what triggers each (the manager
turns them into its registrations).

========================  ==========================================  =========================
reconciler                watches                                     requeue
========================  ==========================================  =========================
disruption                (none; singleton)                           10 s idle, 15 s validation
disruption.queue          NodeClaims (any change)                     1 s while commands run
nodeclaim.disruption      NodeClaims (by name), NodePools (its claims) consolidateAfter, 5 min drift
nodeclaim.podevents       Pods (bind/terminal/terminating/delete)     end of the 10 s dedupe
nodeclaim.expiration      NodeClaims (by name)                        at expireAfter
nodeclaim.capacity...     NodeClaims (added), EC2NodeClasses          at a block's end - 40 min
interruption              (none; singleton)                           2 s poll, delete deadline
========================  ==========================================  =========================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from provisioner.apis import labels as wk
from provisioner.controllers.disruption.commandqueue import CommandQueue
from provisioner.controllers.disruption.conditions import NodeClaimDisruptionController
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.controller import DisruptionController
from provisioner.controllers.disruption.metrics import DisruptionMetrics
from provisioner.controllers.disruption.podevents import PodEventsController
from provisioner.controllers.interruption import InterruptionController, InterruptionSource
from provisioner.controllers.nodeclaim.expiration import ExpirationController
from provisioner.controllers.nodeclaim.reservationexpiry import ReservationExpirationController
from provisioner.controllers.ports import Ports
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, PODS, Resource
from provisioner.runtime.reconciler import Reconciler, Request

__all__ = ["DisruptionControllers", "Wiring"]

Mapper = Callable[[WatchEvent], list[Request]]


@dataclass(frozen=True, slots=True)
class Wiring:
    """One reconciler with its triggers (the manager's ``Registration`` without its types).

    Attributes:
        reconciler: the reconciler.
        watches: ``(resource, map)`` pairs: events of the resource mapped to requests.
        initial: the requests to run at start.
    """

    reconciler: Reconciler
    watches: tuple[tuple[Resource, Mapper], ...]
    initial: Callable[[], list[Request]]


def _name(event: WatchEvent) -> str:
    return str(event.object.get("metadata", {}).get("name") or "")


class DisruptionControllers:
    """Builds the disruption, expiration and interruption reconcilers from injected ports.

    Args:
        ports: the ports shared with the other controllers (the metrics' registry also gets
            :class:`DisruptionMetrics`).
        planner: the planner settings (rescheduling simulations use a shorter budget).
        config: disruption settings.
        region: the region label value for templates.
        interruption: the interruption message source; None leaves ``interruption`` out.
    """

    def __init__(
        self,
        *,
        ports: Ports,
        planner: PlannerConfig,
        config: DisruptionConfig | None = None,
        region: str = "",
        interruption: InterruptionSource | None = None,
    ) -> None:
        self.state = ports.state
        self.config = config or DisruptionConfig()
        self.metrics = DisruptionMetrics(ports.metrics.registry)
        self.queue = CommandQueue(ports=ports, disruption_metrics=self.metrics, config=self.config)
        self.disruption = DisruptionController(
            ports=ports,
            queue=self.queue,
            disruption_metrics=self.metrics,
            planner=planner,
            config=self.config,
            region=region,
        )
        self.conditions = NodeClaimDisruptionController(ports=ports, config=self.config)
        self.podevents = PodEventsController(ports=ports)
        self.expiration = ExpirationController(ports=ports)
        self.reservation_expiration = ReservationExpirationController(ports=ports)
        self.interruption: InterruptionController | None = None
        if interruption is not None:
            self.interruption = InterruptionController(
                ports=ports,
                queue=self.queue,
                source=interruption,
                planner=planner,
                config=self.config,
                region=region,
            )

    def wirings(self) -> tuple[Wiring, ...]:
        """Every reconciler with its triggers, in registration order."""
        wirings = [
            Wiring(self.disruption, (), _singleton),
            Wiring(self.queue, ((NODE_CLAIMS, _any),), _none),
            Wiring(
                self.conditions,
                ((NODE_CLAIMS, _claim_by_name), (NODE_POOLS, self._claims_of_pool)),
                self._claims,
            ),
            Wiring(self.podevents, ((PODS, self.podevents.observe),), _none),
            Wiring(self.expiration, ((NODE_CLAIMS, _claim_added),), self._claims),
            Wiring(
                self.reservation_expiration,
                ((NODE_CLAIMS, _added_singleton), (EC2_NODE_CLASSES, _any)),
                _singleton,
            ),
        ]
        if self.interruption is not None:
            wirings.append(Wiring(self.interruption, (), _singleton))
        return tuple(wirings)

    def _claims(self) -> list[Request]:
        return [Request(name=c.name) for c in self.state.node_claims()]

    def _claims_of_pool(self, event: WatchEvent) -> list[Request]:
        pool = _name(event)
        return [
            Request(name=c.name)
            for c in self.state.node_claims()
            if c.metadata.labels.get(wk.LABEL_NODEPOOL) == pool
        ]


def _singleton() -> list[Request]:
    return [Request()]


def _none() -> list[Request]:
    return []


def _any(event: WatchEvent) -> list[Request]:
    del event
    return [Request()]


def _claim_by_name(event: WatchEvent) -> list[Request]:
    return [] if event.type == WatchEventType.DELETED else [Request(name=_name(event))]


def _added_singleton(event: WatchEvent) -> list[Request]:
    return [Request()] if event.type == WatchEventType.ADDED else []


def _claim_added(event: WatchEvent) -> list[Request]:
    return [Request(name=_name(event))] if event.type == WatchEventType.ADDED else []
