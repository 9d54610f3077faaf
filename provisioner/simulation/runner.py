"""Replaying a scenario: the embedded cluster, the controllers and virtual time put together.

:class:`Simulation` builds, for one run:

* a :class:`~provisioner.simulation.timeline.Timeline` (virtual clock + event queue);
* the in-memory Kubernetes API on that clock, the :class:`Recorder` following it, and the
  simulated kubelet, kube-scheduler and workload controllers;
* the simulated AWS account (moto in process, :class:`MotoCloud`);
* the production controllers, built by a factory from :class:`Ports` (the AWS cloud provider
  on moto, the interruption consumer, the planner's configuration) and run by the
  :class:`ControllerDriver`.

Scenario steps are queued at their times; ``restartController`` (and an injected
:class:`ControllerCrash`) stops the controllers, dropping their queues and caches, and builds
them again from what the API and EC2 hold. At the end the report is assembled from moto's
instances and the record.
"""

from __future__ import annotations

import io
import json
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal

import structlog
from prometheus_client import CollectorRegistry

from cloudprovider.aws.catalog import Catalog, builtin_catalog, read_catalog
from cloudprovider.aws.interruption import DEFAULT_WAIT_SECONDS
from cloudprovider.aws.nodeclass import EC2NodeClass
from cloudprovider.aws.pricing import UnsupportedRegionError
from provisioner.apis import labels as wk
from provisioner.apis.errors import ApiValidationError
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.errors import AlreadyExistsError, KubeApiError, NotFoundError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import KubeClient, WatchEvent
from provisioner.kube.rbac import AuthorizedKube, chart_authorizer
from provisioner.kube.resource import (
    DEPLOYMENTS,
    EC2_NODE_CLASSES,
    EVENTS,
    JOBS,
    LEASES,
    NODES,
    PODS,
    REPLICA_SETS,
    Resource,
)
from provisioner.runtime.collector import collector_for_long_runs
from provisioner.runtime.reconciler import Request
from provisioner.simulation.adopt import SeedError, seed
from provisioner.simulation.cloud import Launch, MotoCloud, Outage, SimReservation
from provisioner.simulation.driver import ControllerCrash, ControllerDriver, Controllers
from provisioner.simulation.kinds import (
    pod_group_resources,
    resource_for_kind,
    resources_by_kind,
)
from provisioner.simulation.kubelet import Kubelet
from provisioner.simulation.objects import is_deleting, labels_of, name_of
from provisioner.simulation.ports import CatalogSource, Ports, build_aws
from provisioner.simulation.recorder import SPOT_INTERRUPTED, Recorder, RecordingKube
from provisioner.simulation.report import build_report
from provisioner.simulation.scenario import (
    ApplyStep,
    CapacityOutageStep,
    DeleteStep,
    KarpenterNodesStep,
    RestartControllerStep,
    ScaleStep,
    Scenario,
    ScenarioError,
    SpotInterruptionStep,
    Step,
)
from provisioner.simulation.scheduler import Scheduler
from provisioner.simulation.timeline import Timeline
from provisioner.simulation.workloads import Workloads
from provisioner.state.cluster import ClusterState

__all__ = [
    "SPOT_WARNING_SECONDS",
    "ControllersFactory",
    "Progress",
    "RunOptions",
    "Simulation",
    "quiet_logger",
]

BLOCK_RECLAIM_LEAD: Final = 1800.0
"""EC2 begins terminating a Capacity Block's instances this many seconds before its end."""
SPOT_WARNING_SECONDS: Final = 120.0
"""EC2 reclaims a spot instance two minutes after the interruption warning."""
INTERRUPTION_RECONCILER: Final = "interruption"
INTERRUPTION_POLL_SECONDS: Final = float(DEFAULT_WAIT_SECONDS)
"""The interruption consumer's long poll, in virtual time: the real one waits up to 20 s
(``WaitTimeSeconds``) on an empty queue and returns the moment a message arrives. Here each
poll is an SQS call made without waiting, the reconciler runs again at the earliest 20 s later,
and the runner wakes it at once when the scenario sends a message (the long poll returning)."""
_SCENARIO_COMPONENT: Final = "Scenario"
_UNWATCHED: Final = frozenset({EVENTS, LEASES})

ControllersFactory = Callable[[Ports], Controllers]
"""Builds the controllers of one (re)start from its ports (the manager's job)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """A live snapshot for the progress line.

    Attributes:
        at: virtual seconds.
        pending_pods: pods not bound and not finished.
        nodes: Nodes by capacity type.
        cost: dollars spent so far.
    """

    at: float
    pending_pods: int
    nodes: Mapping[str, int]
    cost: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How to run a scenario.

    Attributes:
        policy: ``jointer`` (optimiser) or ``greedy`` (Karpenter-style FFD).
        seed: seeds moto's ids, generated names, interruption targets and the solver.
        solver_deterministic_time: the optimiser's budget in CP-SAT deterministic seconds.
        solver_time_limit: the optimiser's wall-clock safety limit.
        progress: receives a snapshot every ``progress_every`` virtual seconds.
        progress_every: virtual seconds between snapshots.
        logger: the controllers' logger (a silent one when None).
        on_launch: called after each instance launch (tests inject faults here; raising
            :class:`ControllerCrash` crashes the controllers mid-reconcile).
        wrap_kube: wraps the controllers' Kubernetes port at each (re)start (the chaos soak
            injects the API server's errors there).
        on_start: called once the world is built, before the controllers first start (the
            chaos soak schedules its faults and invariant checks here).
    """

    policy: Literal["jointer", "greedy"] = "jointer"
    seed: int = 1
    solver_deterministic_time: float = 1.0
    solver_time_limit: float = 30.0
    progress: Callable[[Progress], None] | None = None
    progress_every: float = 60.0
    logger: Any = None
    on_launch: Callable[[Launch], None] | None = None
    wrap_kube: Callable[[KubeClient], KubeClient] | None = None
    on_start: Callable[[Simulation], None] | None = None


def quiet_logger() -> Any:
    """A structlog logger that drops everything."""
    return structlog.wrap_logger(
        structlog.PrintLogger(io.StringIO()),
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        processors=[],
    )


def load_catalog(scenario: Scenario) -> tuple[Catalog, Callable[[EC2NodeClass], Catalog]]:
    """The scenario's catalog and how to resolve it for a nodeclass.

    Raises:
        ScenarioError: the region has no built-in data, or the catalog file is invalid.
    """
    if scenario.catalog is None:
        try:
            default = builtin_catalog(scenario.region)
        except UnsupportedRegionError as error:
            raise ScenarioError(f"spec.region: {error}") from error

        def builtin(nodeclass: EC2NodeClass) -> Catalog:
            return builtin_catalog(scenario.region, nodeclass=nodeclass)

        return default, builtin
    try:
        raw = json.loads(scenario.catalog.read_text(encoding="utf-8"))
        default = read_catalog(raw)
    except (OSError, json.JSONDecodeError, ApiValidationError) as error:
        raise ScenarioError(f"spec.catalog: {scenario.catalog}: {error}") from error
    if default.region != scenario.region:
        raise ScenarioError(
            f"spec.catalog: {scenario.catalog} is for region {default.region}, "
            f"not spec.region {scenario.region}"
        )

    def from_file(nodeclass: EC2NodeClass) -> Catalog:
        return read_catalog(raw, nodeclass=nodeclass)

    return default, from_file


def _prices(catalog: Catalog) -> Callable[[str, str, str], float | None]:
    exact: dict[tuple[str, str, str], float] = {}
    fallback: dict[tuple[str, str], float] = {}
    for instance_type in catalog.instance_types:
        for offering in instance_type.offerings:
            exact[instance_type.name, offering.zone, offering.capacity_type] = offering.price
            key = (instance_type.name, offering.capacity_type)
            fallback[key] = min(fallback.get(key, offering.price), offering.price)

    def price(instance_type: str, zone: str, capacity_type: str) -> float | None:
        if capacity_type == wk.CAPACITY_TYPE_RESERVED:
            return 0.0  # a reservation is paid for whether used or not: using it costs nothing
        found = exact.get((instance_type, zone, capacity_type))
        return found if found is not None else fallback.get((instance_type, capacity_type))

    return price


@dataclass(slots=True)
class _World:
    """The pieces of one run."""

    timeline: Timeline
    kube: InMemoryKube
    recorder: Recorder
    account: MotoCloud
    kubelet: Kubelet
    scheduler: Scheduler
    workloads: Workloads
    driver: ControllerDriver
    source: CatalogSource
    seen: set[Resource] = field(default_factory=set)
    notes: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0


class Simulation:
    """One replay of a scenario.

    Args:
        scenario: the validated scenario.
        factory: builds the controllers from their ports.
        options: how to run.
    """

    def __init__(
        self, scenario: Scenario, *, factory: ControllersFactory, options: RunOptions | None = None
    ) -> None:
        self.scenario = scenario
        self.options = options or RunOptions()
        self._factory = factory
        self._logger = self.options.logger or quiet_logger()
        self._rng = random.Random(self.options.seed)  # noqa: S311 - reproducible, not secret
        self._world: _World | None = None
        self._price: Callable[[str, str, str], float | None] = lambda *_: None

    @property
    def world(self) -> _World:
        """The running world (for tests and fault injection)."""
        if self._world is None:
            raise RuntimeError("the simulation is not running")
        return self._world

    # -- running -----------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Replay the scenario and return the report.

        The cycle collector is set up for a long run meanwhile (``collector_for_long_runs``),
        as in the controller.

        Raises:
            ScenarioError: the scenario cannot be replayed (region, catalog).
        """
        with collector_for_long_runs():
            return self._run()

    def _run(self) -> dict[str, Any]:
        catalog, loader = load_catalog(self.scenario)
        self._price = _prices(catalog)
        zones = sorted({o.zone for t in catalog.instance_types for o in t.offerings})
        timeline = Timeline()
        kube = InMemoryKube(clock=timeline.clock.now, history_window=100)
        recorder = Recorder(timeline=timeline, kube=kube)
        account = MotoCloud(
            timeline=timeline,
            region=self.scenario.region,
            cluster=self.scenario.cluster_name,
            zones=zones,
            seed=self.options.seed,
        )
        account.start()
        try:
            self._reservations(account)
            world = self._build(timeline, kube, recorder, account, CatalogSource(catalog, loader))
            self._world = world
            if self.options.on_start is not None:
                self.options.on_start(self)
            self._start_controllers()
            for step in self.scenario.steps:
                timeline.schedule(step.at, self._runner(step), key=("step", step.index))
            self._tick(0.0)
            timeline.run_until(self.scenario.duration)
            return self._report()
        finally:
            if self._world is not None:
                self._world.driver.stop()
            recorder.close()
            account.stop()

    def _build(
        self,
        timeline: Timeline,
        kube: InMemoryKube,
        recorder: Recorder,
        account: MotoCloud,
        source: CatalogSource,
    ) -> _World:
        kubelet = Kubelet(
            timeline=timeline,
            kube=kube,
            cloud=account,
            catalog=source.catalog(),
            node_startup=self.scenario.node_startup,
            region=self.scenario.region,
        )
        world = _World(
            timeline=timeline,
            kube=kube,
            recorder=recorder,
            account=account,
            kubelet=kubelet,
            scheduler=Scheduler(
                timeline=timeline, kube=kube, group_resources=self._group_resources
            ),
            workloads=Workloads(timeline=timeline, kube=kube, rng=self._rng),
            driver=ControllerDriver(
                timeline,
                kube,
                logger=self._logger,
                min_requeue_for={INTERRUPTION_RECONCILER: INTERRUPTION_POLL_SECONDS},
            ),
            source=source,
        )
        world.driver.on_crash = self._on_crash
        account.on_terminate.append(
            lambda instance_id: timeline.after(
                0, lambda: kubelet.instance_gone(instance_id), key=("ccm", instance_id)
            )
        )
        if self.options.on_launch is not None:
            account.after_launch = self.options.on_launch
        kube.subscribe(self._observe, frozen=True)
        return world

    def _observe(self, resource: Resource, event: WatchEvent) -> None:
        world = self.world
        world.kubelet.observe(resource, event)
        world.scheduler.observe(resource, event)
        world.workloads.observe(resource, event)

    def _group_resources(self) -> list[Resource]:
        if self._world is None:
            return []
        return pod_group_resources(frozenset(self._world.seen))

    # -- controllers -------------------------------------------------------------------------

    def _ports(self) -> Ports:
        world = self.world
        # The controllers act with the chart's RBAC (embedded from `helm template`): a call the
        # chart does not grant fails with the API server's 403, as in a cluster.
        port: KubeClient = RecordingKube(world.kube, world.recorder)
        if self.options.wrap_kube is not None:
            port = self.options.wrap_kube(port)
        kube = AuthorizedKube(port, chart_authorizer())
        # a (re)start's controllers keep a new cache, which the provider reads node classes from
        state = ClusterState(clock=world.timeline.clock)
        aws = build_aws(
            account=world.account,
            kube=kube,
            source=world.source,
            timer=world.timeline.timer,
            state=state,
        )
        return Ports(
            kube=kube,
            clock=world.timeline.clock,
            cloud=aws.cloud,
            interruption=aws.interruption,
            nodeclasses=aws.nodeclasses,
            planner=PlannerConfig(
                policy=self.options.policy,
                time_limit_seconds=self.options.solver_time_limit,
                num_workers=1,
                random_seed=self.options.seed,
                deterministic_time=self.options.solver_deterministic_time,
            ),
            cluster_name=self.scenario.cluster_name,
            region=self.scenario.region,
            logger=self._logger,
            registry=CollectorRegistry(auto_describe=True),
            timer=world.timeline.timer,
            state=state,
        )

    def _reservations(self, account: MotoCloud) -> None:
        """The scenario's capacity reservations.

        EC2 begins terminating a Capacity Block's instances 30 minutes before its end; an
        ODCR's instances keep running as on-demand ones when it ends.
        """
        for spec in self.scenario.reservations:
            reservation = SimReservation(
                id=spec.id,
                instance_type=spec.instance_type,
                zone=spec.zone,
                count=spec.count,
                reservation_type=spec.reservation_type,
                instance_match_criteria=spec.instance_match_criteria,
                tags=dict(spec.tags),
                end=spec.end,
            )
            account.add_reservation(reservation)
            if spec.end is not None and spec.reservation_type == "capacity-block":
                account.timeline.schedule(
                    max(spec.end - BLOCK_RECLAIM_LEAD, 0.0),
                    partial(self._reclaim_block, reservation),
                    key=("reservation-reclaim", spec.id),
                )

    def _reclaim_block(self, reservation: SimReservation) -> None:
        world = self.world
        reclaimed = sorted(reservation.used)
        for instance_id in reclaimed:
            world.account.terminate(instance_id)
        self._note(
            "CapacityBlockReclaimed",
            f"EC2 reclaimed Capacity Block {reservation.id} 30 minutes before its end "
            f"({len(reclaimed)} instance(s) still running were terminated)",
        )

    def _start_controllers(self) -> None:
        world = self.world
        controllers = self._factory(self._ports())
        world.driver.start(controllers, ignored=_UNWATCHED, extra=self._group_resources())

    def restart_controllers(self, reason: str) -> None:
        """Stop the controllers (queues and caches lost) and start them again."""
        world = self.world
        world.driver.stop()
        world.restarts += 1
        self._note("ControllerRestarted", reason)
        self._start_controllers()

    def _on_crash(self, crash: ControllerCrash) -> None:
        world = self.world
        world.driver.stop()
        world.timeline.after(
            0,
            lambda: self.restart_controllers(f"controller crashed: {crash}"),
            key=("restart",),
        )

    # -- steps -------------------------------------------------------------------------------

    def _runner(self, step: Step) -> Callable[[], None]:
        def run() -> None:
            action = step.action
            match action:
                case ApplyStep():
                    self._apply(action)
                case DeleteStep():
                    self._delete(action)
                case ScaleStep():
                    self._scale(action)
                case CapacityOutageStep():
                    self._outage(action)
                case SpotInterruptionStep():
                    self._interrupt(action)
                case RestartControllerStep():
                    self.restart_controllers("restartController step")
                case KarpenterNodesStep():
                    self._seed_karpenter(action)

        return run

    def _note(self, reason: str, message: str, kind: str = "Normal") -> None:
        world = self.world
        world.notes.append(
            {
                "at": round(world.timeline.now, 3),
                "type": kind,
                "reason": reason,
                "object": f"{_SCENARIO_COMPONENT}/{self.scenario.name}",
                "message": message,
            }
        )

    def _apply(self, step: ApplyStep) -> None:
        world = self.world
        for document in step.documents:
            resource = resource_for_kind(str(document["apiVersion"]), str(document["kind"]))
            world.seen.add(resource)
            body = dict(document)
            metadata = dict(body.get("metadata") or {})
            namespace = metadata.get("namespace") or ("default" if resource.namespaced else None)
            if resource == EC2_NODE_CLASSES:
                role = (body.get("spec") or {}).get("role")
                if isinstance(role, str) and role:
                    world.account.ensure_role(role)
            try:
                world.kube.create(resource, body, namespace=namespace)
            except AlreadyExistsError:
                self._update(resource, body, namespace)
            except KubeApiError as error:
                self._note(
                    "ApplyFailed", f"{document['kind']} {metadata.get('name')}: {error}", "Warning"
                )

    def _update(self, resource: Resource, body: Mapping[str, Any], namespace: str | None) -> None:
        world = self.world
        name = str((body.get("metadata") or {}).get("name"))
        metadata = body.get("metadata") or {}
        patch: dict[str, Any] = {
            key: value for key, value in body.items() if key not in {"metadata", "status"}
        }
        patch["metadata"] = {
            key: metadata[key] for key in ("labels", "annotations") if key in metadata
        }
        world.kube.merge_patch(resource, name, patch, namespace=namespace)
        if resource.has_status and "status" in body:
            world.kube.patch_status(resource, name, {"status": body["status"]}, namespace=namespace)

    def _delete(self, step: DeleteStep) -> None:
        world = self.world
        for selector in step.selectors:
            resources = resources_by_kind(selector.kind, selector.api_version) or [
                r for r in world.seen if r.kind == selector.kind
            ]
            for resource in resources:
                namespace = selector.namespace if resource.namespaced else None
                if selector.name is not None:
                    targets = [
                        (selector.name, namespace or ("default" if resource.namespaced else None))
                    ]
                else:
                    found = world.kube.list(
                        resource, namespace=namespace, label_selector=selector.label_selector
                    ).items
                    targets = [
                        (name_of(o), (o.get("metadata") or {}).get("namespace")) for o in found
                    ]
                for name, object_namespace in targets:
                    try:
                        world.kube.delete(resource, name, namespace=object_namespace)
                    except NotFoundError:
                        self._note(
                            "DeleteSkipped",
                            f"{selector.kind} {name} not found",
                            "Warning",
                        )

    def _scale(self, step: ScaleStep) -> None:
        world = self.world
        resource, field_name = {
            "Deployment": (DEPLOYMENTS, "replicas"),
            "ReplicaSet": (REPLICA_SETS, "replicas"),
            "Job": (JOBS, "parallelism"),
        }[step.kind]
        try:
            world.kube.merge_patch(
                resource, step.name, {"spec": {field_name: step.replicas}}, namespace=step.namespace
            )
        except NotFoundError:
            self._note(
                "ScaleSkipped", f"{step.kind} {step.namespace}/{step.name} not found", "Warning"
            )

    def _seed_karpenter(self, step: KarpenterNodesStep) -> None:
        world = self.world
        aws = build_aws(
            account=world.account,
            kube=world.kube,
            source=world.source,
            timer=world.timeline.timer,
        )
        try:
            names = seed(
                step,
                kube=world.kube,
                account=world.account,
                kubelet=world.kubelet,
                catalog=world.source.catalog(),
                resolve=aws.cloud.resolver.resolve,
                rng=self._rng,
                region=self.scenario.region,
                now=world.timeline.clock.now(),
            )
        except SeedError as error:
            self._note("KarpenterNodesFailed", f"karpenterNodes: {error}", "Warning")
            return
        self._note(
            "KarpenterNodesSeeded",
            f"{len(names)} node(s) as Karpenter launched them in NodePool {step.nodepool}",
        )

    def _outage(self, step: CapacityOutageStep) -> None:
        world = self.world
        now = world.timeline.now
        world.account.outages.append(
            Outage(
                start=now,
                end=now + step.duration,
                capacity_type=step.capacity_type,
                instance_types=step.instance_types,
                zones=step.zones,
            )
        )
        scope = ", ".join(
            [
                step.capacity_type or "all capacity types",
                ", ".join(sorted(step.instance_types)) or "all instance types",
                ", ".join(sorted(step.zones)) or "all zones",
            ]
        )
        self._note(
            "CapacityOutage", f"InsufficientInstanceCapacity for {step.duration:g}s: {scope}"
        )

    def _interrupt(self, step: SpotInterruptionStep) -> None:
        world = self.world
        candidates = []
        for node in world.kube.list(NODES).items:
            labels = labels_of(node)
            provider = str((node.get("spec") or {}).get("providerID") or "")
            instance_id = provider.rpartition("/")[2]
            if (
                labels.get(wk.LABEL_CAPACITY_TYPE) == wk.CAPACITY_TYPE_SPOT
                and instance_id
                and not is_deleting(node)
                and instance_id not in world.recorder.interrupted
                and all(labels.get(k) == v for k, v in step.node_selector.items())
            ):
                candidates.append((name_of(node), instance_id))
        candidates.sort()
        chosen = self._rng.sample(candidates, min(step.count, len(candidates)))
        if len(chosen) < step.count:
            self._note(
                "SpotInterruptionShort",
                f"{step.count} spot node(s) asked for, {len(chosen)} match",
                "Warning",
            )
        for node_name, instance_id in sorted(chosen):
            world.recorder.interrupted[instance_id] = SPOT_INTERRUPTED
            world.account.send_spot_interruption(instance_id)
            if world.driver.has(INTERRUPTION_RECONCILER):
                world.driver.enqueue(INTERRUPTION_RECONCILER, Request())
            self._note(
                "SpotInterruptionWarning",
                f"instance {instance_id} (node {node_name}) will be reclaimed in 2 minutes",
            )
            world.timeline.after(
                SPOT_WARNING_SECONDS, self._reclaimer(instance_id), key=("reclaim", instance_id)
            )

    def _reclaimer(self, instance_id: str) -> Callable[[], None]:
        return lambda: self._reclaim(instance_id)

    def _reclaim(self, instance_id: str) -> None:
        world = self.world
        found = world.account.describe([instance_id])
        if found and found[0].get("State", {}).get("Name") not in {"shutting-down", "terminated"}:
            world.account.terminate(instance_id)
        world.kubelet.instance_gone(instance_id)

    # -- progress and report -----------------------------------------------------------------

    def _tick(self, at: float) -> None:
        if self.options.progress is None:
            return
        world = self.world

        def report() -> None:
            self.options.progress(self.snapshot())  # type: ignore[misc]
            following = world.timeline.now + self.options.progress_every
            if following <= self.scenario.duration:
                world.timeline.schedule(following, report, key=("progress",))

        world.timeline.schedule(at, report, key=("progress",))

    def snapshot(self) -> Progress:
        """The current progress snapshot."""
        world = self.world
        now = world.timeline.now
        pods = world.kube.list(PODS).items
        pending = sum(
            1
            for p in pods
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase") not in {"Succeeded", "Failed"}
        )
        nodes: dict[str, int] = {}
        for node in world.kube.list(NODES).items:
            capacity = labels_of(node).get(wk.LABEL_CAPACITY_TYPE, "unmanaged")
            nodes[capacity] = nodes.get(capacity, 0) + 1
        cost = 0.0
        for launch in world.account.launches.values():
            end = launch.terminated_at if launch.terminated_at is not None else now
            price = self._price(launch.instance_type, launch.zone, launch.capacity_type) or 0.0
            cost += price * max(end - launch.at, 0.0) / 3600
        return Progress(at=now, pending_pods=pending, nodes=dict(sorted(nodes.items())), cost=cost)

    def _report(self) -> dict[str, Any]:
        world = self.world
        return build_report(
            scenario=self.scenario.name,
            policy=self.options.policy,
            seed=self.options.seed,
            duration=self.scenario.duration,
            recorder=world.recorder,
            instances=world.account.instances_ever(),
            launches=world.account.launches,
            price=self._price,
            nodeclaim_of=world.account.nodeclaim_of,
            launch_failures=world.account.counters.failed_fleets,
            extra_events=world.notes,
        )
