"""The controller manager: every reconciler built from injected ports, with its watch triggers.

Karpenter's ``c/controllers.go`` for Jointer. The manager owns no threads and no clients; a
driver (the real worker pool or the simulation's discrete-event queue) runs it:

1. ``manager.start()`` lists every tracked resource into the state cache (the ``synced`` gate)
   and returns the first work items: every reconciler's initial requests.
2. For each watch event the driver calls ``manager.handle(resource, event)``: the cache is
   updated first, then the event is mapped to ``(reconciler, Request)`` work items.
3. The driver runs ``reconciler.reconcile(request)``; a ``Result.requeue_after`` schedules the
   same item again after that long on the driver's clock (an earlier event may run it sooner);
   ``None`` means "only on the next event". One item never runs concurrently with itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Protocol

from structlog.typing import FilteringBoundLogger

from cloudprovider.nodeclass import NodeClassLifecycle
from cloudprovider.protocol import CloudProvider
from provisioner.apis.core import Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.labels import ANNOTATION_NODEPOOL_HASH_VERSION, LABEL_NODEPOOL
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION
from provisioner.controllers.capacitybuffer.controller import CapacityBufferController
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.controllers import DisruptionControllers
from provisioner.controllers.events import EventRecorder
from provisioner.controllers.interruption import InterruptionSource
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.node.termination import TerminationController
from provisioner.controllers.nodeclaim.garbagecollection import (
    GC_INTERVAL,
    GarbageCollectionController,
)
from provisioner.controllers.nodeclaim.lifecycle import LifecycleController
from provisioner.controllers.nodeclass.controller import NodeClassController
from provisioner.controllers.nodeoverlay.controller import NodeOverlayController
from provisioner.controllers.nodepool.controller import NodePoolController
from provisioner.controllers.nodepool.hash import NodePoolHashController
from provisioner.controllers.ports import Ports
from provisioner.controllers.provisioning.batcher import Batcher
from provisioner.controllers.provisioning.controller import ProvisioningController
from provisioner.controllers.provisioning.planner import PlannerConfig, Policy
from provisioner.controllers.provisioning.requested import CLAIM_ANNOTATION
from provisioner.controllers.provreq.controller import ProvisioningRequestController, request_key
from provisioner.controllers.static.controller import StaticCapacityController
from provisioner.kube.errors import KubeApiError
from provisioner.kube.protocol import KubeClient, WatchEvent, WatchEventType
from provisioner.kube.resource import (
    CAPACITY_BUFFERS,
    DEPLOYMENTS,
    EC2_NODE_CLASSES,
    JOBS,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    POD_GROUP_RESOURCES,
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUESTS,
    REPLICA_SETS,
    STATEFUL_SETS,
    Resource,
)
from provisioner.podgroups import build_context, detect_group, provisionable_verdicts
from provisioner.podgroups.keys import (
    CONSUME_PROVISIONING_REQUEST,
    CONSUME_PROVISIONING_REQUEST_DEPRECATED,
)
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Reconciler, Request
from provisioner.state.cluster import ClusterState

__all__ = [
    "BUFFER_RESOURCES",
    "ControllerSettings",
    "Manager",
    "Registration",
    "Watch",
    "WorkItem",
]

BUFFER_RESOURCES: Final = (
    CAPACITY_BUFFERS,
    POD_TEMPLATES,
    DEPLOYMENTS,
    REPLICA_SETS,
    STATEFUL_SETS,
)
"""CapacityBuffers and what their chunks are shaped by (watched where served)."""


class ControllerSettings(Protocol):
    """What the controllers read from the process settings.

    ``provisioner.app.settings.Settings`` satisfies it; controllers may not import the app layer.
    """

    @property
    def policy(self) -> str:
        """``jointer`` or ``greedy``."""
        ...

    @property
    def aws_region(self) -> str:
        """The region (for ``topology.kubernetes.io/region`` in templates)."""
        ...

    def batch_idle(self) -> timedelta:
        """``BATCH_IDLE_DURATION``."""
        ...

    def batch_max(self) -> timedelta:
        """``BATCH_MAX_DURATION``."""
        ...

    def solver_budget(self) -> timedelta:
        """The optimiser's budget per batch."""
        ...

    def ignore_preferences(self) -> bool:
        """``PREFERENCE_POLICY=Ignore``."""
        ...

    def best_effort_min_values(self) -> bool:
        """``MIN_VALUES_POLICY=BestEffort``."""
        ...


WorkItem = tuple[Reconciler, Request]
Mapper = Callable[[WatchEvent], Iterable[Request]]


@dataclass(frozen=True, slots=True)
class Watch:
    """A resource whose events trigger a reconciler, and how an event maps to requests."""

    resource: Resource
    map: Mapper


@dataclass(frozen=True, slots=True)
class Registration:
    """One reconciler as a driver sees it.

    Attributes:
        reconciler: the reconciler (its ``name`` is the ``controller`` log field).
        watches: what triggers it.
        initial: requests to run at start (singletons: ``Request()``; per-object: every object).
    """

    reconciler: Reconciler
    watches: tuple[Watch, ...]
    initial: Callable[[], list[Request]]


def _buffer_request(obj: Mapping[str, Any]) -> Request:
    meta = obj.get("metadata") or {}
    return Request(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name")))


_PROVREQ = "ProvisioningRequest"


def _name(event: WatchEvent) -> str:
    return str(event.object.get("metadata", {}).get("name") or "")


def _deleting(event: WatchEvent) -> bool:
    return bool(event.object.get("metadata", {}).get("deletionTimestamp"))


class Manager:
    """Builds the reconcilers from ports and tells drivers what triggers them.

    Args:
        kube: the Kubernetes port.
        cloud: the cloud provider.
        clock: the injected clock.
        settings: the process settings.
        logger: a structlog logger.
        metrics: the metrics (on an injected registry).
        planner: overrides the planner settings derived from ``settings``.
        gc_interval: how often garbage collection runs.
        disruption: disruption settings; by default derived from ``settings`` (its
            non-preemptible PriorityClasses and feature gates, when it has them).
        interruption: the cloud's interruption messages (AWS: the SQS consumer); without it the
            ``interruption`` reconciler is not registered.
        state: the state cache to fill (one the interruption source already indexes).
        nodeclasses: the provider's NodeClass status and cleanup; without it the
            ``nodeclass`` reconciler is not registered.
    """

    def __init__(
        self,
        *,
        kube: KubeClient,
        cloud: CloudProvider,
        clock: Clock,
        settings: ControllerSettings,
        logger: FilteringBoundLogger,
        metrics: Metrics,
        planner: PlannerConfig | None = None,
        gc_interval: timedelta = GC_INTERVAL,
        disruption: DisruptionConfig | None = None,
        interruption: InterruptionSource | None = None,
        state: ClusterState | None = None,
        nodeclasses: NodeClassLifecycle | None = None,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.metrics = metrics
        self.state = state if state is not None else ClusterState(clock=clock)
        self.events = EventRecorder(kube=kube, clock=clock)
        policy: Policy = "greedy" if settings.policy == "greedy" else "jointer"
        planner = planner or PlannerConfig(
            policy=policy,
            time_limit_seconds=settings.solver_budget().total_seconds(),
            ignore_preferences=settings.ignore_preferences(),
            min_values_best_effort=settings.best_effort_min_values(),
        )
        ports = Ports(
            state=self.state,
            kube=kube,
            cloud=cloud,
            clock=clock,
            logger=logger,
            metrics=metrics,
            events=self.events,
        )
        self.provisioner = ProvisioningController(
            ports=ports,
            batcher=Batcher(idle=settings.batch_idle(), max=settings.batch_max()),
            planner=planner,
            region=settings.aws_region,
            nomination_window=max(2 * settings.batch_max(), timedelta(seconds=10)),
        )
        self.lifecycle = LifecycleController(ports=ports)
        self.disruption = DisruptionControllers(
            ports=ports,
            planner=planner,
            config=disruption or DisruptionConfig.from_settings(settings),
            region=settings.aws_region,
            interruption=interruption,
        )
        self.termination = TerminationController(
            ports=ports,
            disruption_metrics=self.disruption.metrics,
            config=self.disruption.config,
        )
        self.nodepools = NodePoolController(ports=ports)
        self.hashes = NodePoolHashController(ports=ports)
        self.overlays = NodeOverlayController(ports=ports)
        self.garbage_collection = GarbageCollectionController(ports=ports, interval=gc_interval)
        self.buffers = CapacityBufferController(ports=ports, planner=planner)
        self.static = StaticCapacityController(ports=ports, region=settings.aws_region)
        self.provisioning_requests = ProvisioningRequestController(
            ports=ports, planner=planner, region=settings.aws_region
        )
        self.nodeclasses = (
            NodeClassController(ports=ports, lifecycle=nodeclasses, resource=EC2_NODE_CLASSES)
            if nodeclasses is not None
            else None
        )
        self.registrations: tuple[Registration, ...] = self._registrations()

    # -- driver API ---------------------------------------------------------------------------

    @property
    def reconcilers(self) -> tuple[Reconciler, ...]:
        """Every reconciler, in registration order."""
        return tuple(r.reconciler for r in self.registrations)

    def start(self) -> list[WorkItem]:
        """List every tracked resource into the cache and return the initial work."""
        self.state.resync(self.kube)
        self.metrics.cluster_state_synced.set(1 if self.state.synced else 0)
        return [(r.reconciler, request) for r in self.registrations for request in r.initial()]

    def handle(self, resource: Resource, event: WatchEvent) -> list[WorkItem]:
        """Apply a watch event to the cache and return the work it triggers."""
        self.state.apply(resource, event)
        self.metrics.cluster_state_node_count.set(self.state.counts()["nodes"])
        work: list[WorkItem] = []
        for registration in self.registrations:
            for watch in registration.watches:
                if watch.resource == resource:
                    work.extend((registration.reconciler, r) for r in watch.map(event))
        return work

    # -- wiring -------------------------------------------------------------------------------

    def _registrations(self) -> tuple[Registration, ...]:
        m = _Mappers(self.state, self.provisioner.trigger, self.kube)
        return (
            Registration(
                self.provisioner,
                (
                    Watch(PODS, m.pod_trigger),
                    Watch(NODE_CLAIMS, m.claim_deleted),
                    Watch(NODE_POOLS, m.any_change),
                    Watch(NODE_OVERLAYS, m.any_change),
                    *(Watch(r, m.group_trigger) for r in (*POD_GROUP_RESOURCES, JOBS)),
                    Watch(CAPACITY_BUFFERS, m.any_change),
                ),
                m.singleton,
            ),
            Registration(
                self.buffers,
                tuple(Watch(r, m.buffers_of_namespace) for r in BUFFER_RESOURCES),
                m.buffers,
            ),
            Registration(
                self.lifecycle,
                (Watch(NODE_CLAIMS, m.claim_by_name), Watch(NODES, m.claim_of_node)),
                m.claims,
            ),
            Registration(
                self.termination,
                (
                    Watch(NODE_CLAIMS, m.claim_being_deleted),
                    Watch(NODES, m.claim_of_deleting_node),
                ),
                m.claims,
            ),
            Registration(
                self.nodepools,
                (Watch(NODE_POOLS, m.pool_by_name), Watch(NODE_CLAIMS, m.pool_of_claim)),
                m.pools,
            ),
            Registration(
                self.hashes,
                (Watch(NODE_POOLS, m.pool_by_name), Watch(NODE_CLAIMS, m.pool_of_foreign_claim)),
                m.pools,
            ),
            Registration(self.overlays, (Watch(NODE_OVERLAYS, m.pool_by_name),), m.overlays),
            Registration(
                self.static,
                (Watch(NODE_POOLS, m.pool_by_name), Watch(NODE_CLAIMS, m.pool_of_claim)),
                m.pools,
            ),
            Registration(self.garbage_collection, (), m.singleton),
            Registration(
                self.provisioning_requests,
                (
                    Watch(PROVISIONING_REQUESTS, m.request_by_key),
                    Watch(PODS, m.request_of_pod),
                    Watch(NODE_CLAIMS, m.request_of_claim),
                ),
                m.requests,
            ),
            *(
                (
                    Registration(
                        self.nodeclasses,
                        (
                            Watch(EC2_NODE_CLASSES, m.claim_by_name),
                            Watch(NODE_CLAIMS, m.nodeclass_of_deleted_claim),
                        ),
                        m.nodeclasses,
                    ),
                )
                if self.nodeclasses is not None
                else ()
            ),
            *(
                Registration(w.reconciler, tuple(Watch(r, f) for r, f in w.watches), w.initial)
                for w in self.disruption.wirings()
            ),
        )


@dataclass(frozen=True, slots=True)
class _Mappers:
    """Event-to-request mappings (the cache is already updated when they run)."""

    state: ClusterState
    trigger: Callable[[Pod], bool]
    kube: KubeClient

    def claims(self) -> list[Request]:
        return [Request(name=c.name) for c in self.state.node_claims()]

    def pools(self) -> list[Request]:
        return [Request(name=p.name) for p in self.state.nodepools()]

    def overlays(self) -> list[Request]:
        return [Request(name=o.name) for o in self.state.overlays()]

    def buffers(self) -> list[Request]:
        objects, _ = self.state.group_objects()
        return [_buffer_request(o) for o in objects if o.get("kind") == CAPACITY_BUFFERS.kind]

    def buffers_of_namespace(self, event: WatchEvent) -> list[Request]:
        """The buffer itself, or every buffer of the namespace a template or workload is in."""
        if event.object.get("kind") == CAPACITY_BUFFERS.kind:
            return [] if event.type == WatchEventType.DELETED else [_buffer_request(event.object)]
        namespace = event.object.get("metadata", {}).get("namespace") or "default"
        return [r for r in self.buffers() if r.namespace == namespace]

    @staticmethod
    def singleton() -> list[Request]:
        return [Request()]

    def pod_trigger(self, event: WatchEvent) -> list[Request]:
        """``provisioner.trigger.pod``: a provisionable pod opens or extends the batch."""
        if event.type == WatchEventType.DELETED:
            return []
        namespace = event.object.get("metadata", {}).get("namespace") or "default"
        pod = self.state.pod(f"{namespace}/{_name(event)}")
        return [Request()] if pod is not None and self.trigger(pod) else []

    def group_trigger(self, event: WatchEvent) -> list[Request]:
        """A pod-group, queue or admission object changed (a gang admitted, a quota raised).

        Its pending grouped pods (of its namespace; of every namespace for a cluster-scoped
        Queue) that the admission rules now let through open or extend the batch, as a pod
        event would; pods still held back trigger nothing.
        """
        if event.object.get("kind") == "ProvisioningRequest":
            return [Request()]  # its virtual pods are found by the provisioner's next step
        namespace = event.object.get("metadata", {}).get("namespace")
        pods = self.state.pods()
        pending = [
            p
            for p in pods
            if not p.spec.node_name
            and (namespace is None or (p.metadata.namespace or "default") == namespace)
            and detect_group(p) is not None
        ]
        if not pending:
            return []
        objects, priorities = self.state.group_objects()
        try:
            context = dataclasses.replace(
                build_context(objects), pods=tuple(pods), priority_classes=priorities
            )
            verdicts = provisionable_verdicts(pending, context)
        except ApiValidationError:
            return [Request()]  # the provisioner judges (and reports) it with the batch
        triggered = [p for p in pending if verdicts[p.key].provisionable and self.trigger(p)]
        return [Request()] if triggered else []

    def requests(self) -> list[Request]:
        objects, _ = self.state.group_objects()
        return [Request(name=request_key(o)) for o in objects if o.get("kind") == _PROVREQ]

    @staticmethod
    def request_by_key(event: WatchEvent) -> list[Request]:
        if event.type == WatchEventType.DELETED:
            return []
        return [Request(name=request_key(event.object))]

    @staticmethod
    def request_of_pod(event: WatchEvent) -> list[Request]:
        """A consumer pod came or went: its request's booking may change."""
        metadata = event.object.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        name = annotations.get(CONSUME_PROVISIONING_REQUEST) or annotations.get(
            CONSUME_PROVISIONING_REQUEST_DEPRECATED
        )
        return [Request(name=f"{metadata.get('namespace') or 'default'}/{name}")] if name else []

    @staticmethod
    def request_of_claim(event: WatchEvent) -> list[Request]:
        """A NodeClaim launched for a request changed (launched, Ready, deleted)."""
        annotations = event.object.get("metadata", {}).get("annotations") or {}
        key = annotations.get(CLAIM_ANNOTATION)
        return [Request(name=str(key))] if key else []

    @staticmethod
    def claim_deleted(event: WatchEvent) -> list[Request]:
        return [Request()] if event.type == WatchEventType.DELETED else []

    @staticmethod
    def any_change(event: WatchEvent) -> list[Request]:
        del event
        return [Request()]

    @staticmethod
    def claim_by_name(event: WatchEvent) -> list[Request]:
        return [] if event.type == WatchEventType.DELETED else [Request(name=_name(event))]

    @staticmethod
    def nodeclass_of_deleted_claim(event: WatchEvent) -> list[Request]:
        """A deleted NodeClaim may be the last one holding its NodeClass's finalizer."""
        if event.type != WatchEventType.DELETED:
            return []
        ref = event.object.get("spec", {}).get("nodeClassRef") or {}
        name = ref.get("name")
        return [Request(name=str(name))] if name else []

    def nodeclasses(self) -> list[Request]:
        try:
            items = self.kube.list(EC2_NODE_CLASSES).items
        except KubeApiError:
            return []
        return [Request(name=str(o["metadata"]["name"])) for o in items]

    @staticmethod
    def claim_being_deleted(event: WatchEvent) -> list[Request]:
        if event.type == WatchEventType.DELETED or not _deleting(event):
            return []
        return [Request(name=_name(event))]

    def claim_of_node(self, event: WatchEvent) -> list[Request]:
        provider_id = str(event.object.get("spec", {}).get("providerID") or "")
        claim = self.state.node_claim_for_provider_id(provider_id) if provider_id else None
        return [Request(name=claim.name)] if claim is not None else []

    def claim_of_deleting_node(self, event: WatchEvent) -> list[Request]:
        if event.type != WatchEventType.DELETED and not _deleting(event):
            return []
        return self.claim_of_node(event)

    @staticmethod
    def pool_of_claim(event: WatchEvent) -> list[Request]:
        pool = event.object.get("metadata", {}).get("labels", {}).get(LABEL_NODEPOOL)
        return [Request(name=str(pool))] if pool else []

    @staticmethod
    def pool_of_foreign_claim(event: WatchEvent) -> list[Request]:
        """The pool of a NodeClaim stamped under another hash version (Karpenter's)."""
        if event.type == WatchEventType.DELETED:
            return []
        annotations = event.object.get("metadata", {}).get("annotations") or {}
        if annotations.get(ANNOTATION_NODEPOOL_HASH_VERSION) == NODEPOOL_HASH_VERSION:
            return []
        return _Mappers.pool_of_claim(event)

    @staticmethod
    def pool_by_name(event: WatchEvent) -> list[Request]:
        return [] if event.type == WatchEventType.DELETED else [Request(name=_name(event))]
