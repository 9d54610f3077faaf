"""One assembly of the controller set, for ``jointer run`` and ``jointer simulate`` alike.

:func:`assemble` builds the :class:`~provisioner.controllers.manager.Manager` on its ports, with
the replacement-first ``interruption`` reconciler when an interruption source is given, the
``nodeclass`` reconciler when the provider has a NodeClass lifecycle,
``providers.pricing`` when the cloud provider has prices to refresh, and Karpenter's metrics
controllers (``metrics.node``, ``metrics.pod``), as one
:class:`ControllerSet` that either driver runs. The cloud provider is decorated once with
Karpenter's ``karpenter_cloudprovider_*`` metrics (:mod:`~provisioner.controllers.cloudmetrics`).
The interruption source is built from a factory given the NodeClaim index over the manager's
state cache and Karpenter's queue metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Protocol

from structlog.typing import FilteringBoundLogger

from cloudprovider.interruption import IndexedNodeClaim, MessageObserver, NodeClaimIndex
from cloudprovider.nodeclass import NodeClassLifecycle
from cloudprovider.protocol import CloudProvider
from provisioner.apis import labels as wk
from provisioner.controllers.cloudmetrics import MetricsCloudProvider
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.interruption import InterruptionSource, MessageMetrics
from provisioner.controllers.manager import ControllerSettings, Manager, WorkItem
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.controllers.statemetrics import (
    NodeMetricsController,
    PodMetricsController,
)
from provisioner.kube.protocol import KubeClient, WatchEvent
from provisioner.kube.resource import Resource
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Reconciler, Request, Result
from provisioner.state.cluster import ClusterState

__all__ = [
    "PRICING_INTERVAL",
    "ControllerSet",
    "InterruptionSourceFactory",
    "PricingController",
    "PricingRefresher",
    "StateNodeClaimIndex",
    "assemble",
]

PRICING_INTERVAL: Final = timedelta(hours=1)
"""How often the pricing refresh looks whether its 12 h TTLs ran out."""

InterruptionSourceFactory = Callable[[NodeClaimIndex, MessageObserver], InterruptionSource]
"""Builds the interruption source (AWS: the SQS consumer) on the cache's index and the metrics."""


class PricingRefresher(Protocol):
    """Prices that go stale (AWS: ``PricingProvider``)."""

    def refresh_if_stale(self, now: datetime | None = None) -> None:
        """Refresh what is stale."""
        ...


class StateNodeClaimIndex:
    """A ``NodeClaimIndex`` over the controllers' cache (NodeClaims by instance id)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def nodeclaim_for_instance(self, instance_id: str) -> IndexedNodeClaim | None:
        """The NodeClaim whose ``status.providerID`` ends with ``instance_id``."""
        for claim in self._state.node_claims():
            if (claim.provider_id or "").rpartition("/")[2] == instance_id:
                labels = claim.metadata.labels
                return IndexedNodeClaim(
                    name=claim.name,
                    instance_type=labels.get(wk.LABEL_INSTANCE_TYPE, ""),
                    zone=labels.get(wk.LABEL_ZONE, ""),
                    capacity_type=labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                )
        return None


class PricingController:
    """``providers.pricing``: refreshes on-demand and spot prices when their TTLs run out."""

    def __init__(self, *, pricing: PricingRefresher, clock: Clock) -> None:
        self._pricing = pricing
        self._clock = clock

    @property
    def name(self) -> str:
        """``providers.pricing``."""
        return "providers.pricing"

    def reconcile(self, request: Request) -> Result:
        """Refresh what is stale."""
        del request
        self._pricing.refresh_if_stale(self._clock.now())
        return Result.after(PRICING_INTERVAL)


@dataclass(frozen=True, slots=True)
class ControllerSet:
    """The manager plus singleton reconcilers of the cloud provider's background work."""

    manager: Manager
    extra: tuple[Reconciler, ...] = ()

    @property
    def reconcilers(self) -> tuple[Reconciler, ...]:
        """Every reconciler."""
        return (*self.manager.reconcilers, *self.extra)

    def start(self) -> list[WorkItem]:
        """The manager's start, then one request for each extra reconciler."""
        return [*self.manager.start(), *((r, Request()) for r in self.extra)]

    def handle(self, resource: Resource, event: WatchEvent) -> list[WorkItem]:
        """The manager's work for an event."""
        return self.manager.handle(resource, event)


def assemble(
    *,
    kube: KubeClient,
    cloud: CloudProvider,
    clock: Clock,
    settings: ControllerSettings,
    logger: FilteringBoundLogger,
    metrics: Metrics,
    planner: PlannerConfig | None = None,
    interruption: InterruptionSourceFactory | None = None,
    pricing: PricingRefresher | None = None,
    disruption: DisruptionConfig | None = None,
    nodeclasses: NodeClassLifecycle | None = None,
    state: ClusterState | None = None,
) -> ControllerSet:
    """Every controller on its ports, as both drivers run them.

    Args:
        kube: the Kubernetes port.
        cloud: the cloud provider.
        clock: the injected clock.
        settings: the controller settings.
        logger: a structlog logger.
        metrics: the metrics.
        planner: overrides the planner settings derived from ``settings``.
        interruption: builds the interruption source; None leaves ``interruption`` out.
        pricing: prices to refresh; None leaves ``providers.pricing`` out.
        disruption: overrides the disruption settings derived from ``settings``.
        nodeclasses: the provider's NodeClass status and cleanup; None leaves ``nodeclass`` out.
        state: the cluster state the controllers keep (a new one when None); given when the
            cloud provider reads from it too (``provisioner.state.nodeclasses``).
    """
    state = state if state is not None else ClusterState(clock=clock)
    cloud = MetricsCloudProvider(cloud, metrics=metrics, clock=clock)
    source = (
        interruption(StateNodeClaimIndex(state), MessageMetrics(metrics, clock))
        if interruption is not None
        else None
    )
    manager = Manager(
        kube=kube,
        cloud=cloud,
        clock=clock,
        settings=settings,
        logger=logger,
        metrics=metrics,
        planner=planner,
        disruption=disruption,
        interruption=source,
        state=state,
        nodeclasses=nodeclasses,
    )
    extra: Sequence[Reconciler] = (
        *((PricingController(pricing=pricing, clock=clock),) if pricing is not None else ()),
        NodeMetricsController(state=state, metrics=metrics, clock=clock),
        PodMetricsController(state=state, metrics=metrics),
    )
    return ControllerSet(manager, tuple(extra))
