"""The composition root of ``jointer run``: settings in, a running controller out.

:func:`build_controller` builds, from one :class:`~provisioner.app.settings.Settings`:

* the JSON logger (``LOG_LEVEL``, ``LOG_FORMAT``); stdlib loggers of the Kubernetes port and the
  AWS interruption consumer are bridged into it;
* a private ``CollectorRegistry`` with Karpenter's metrics
  (:class:`~provisioner.controllers.metrics.Metrics`), ``karpenter_build_info`` and the
  process/Python collectors;
* the Kubernetes port (:class:`~provisioner.kube.real.RealKube` from ``--kubeconfig`` or the
  in-cluster service account);
* the AWS cloud provider and its interruption queue consumer on boto3 clients whose botocore
  retries are off (``total_max_attempts=1``), so only the provider's own tenacity loop retries,
  built by the one AWS assembly ``jointer simulate`` uses too
  (:func:`~cloudprovider.aws.assembly.assemble_aws`), CreateFleet calls batched in Karpenter's
  window by its batcher thread (stopped, and flushed, at shutdown); the cluster's endpoint, CA,
  service CIDR and Kubernetes version come from ``eks:DescribeCluster``;
* the controller set, built by the one assembly ``jointer simulate`` uses too
  (:func:`~provisioner.controllers.assembly.assemble`): the
  :class:`~provisioner.controllers.manager.Manager`, its replacement-first ``interruption``
  reconciler when ``INTERRUPTION_QUEUE`` is set (a spot interruption taints the node, launches
  the replacement at once and deletes the NodeClaim once it is ready, at the latest 45 s before
  EC2 reclaims the instance; see :mod:`provisioner.controllers.interruption`) and
  ``providers.pricing``;
* the real :class:`~provisioner.app.driver.Driver` on the resources the cluster serves; optional
  CRDs (pod-group kinds, NodeOverlays with the gate) installed later are found by its
  ``crd.discovery`` reconciler every 5 minutes (:class:`ResourceDiscovery`; a ``Forbidden``
  answer is logged once, naming the resource), the Lease
  :class:`~provisioner.kube.leader.LeaderElector` (``LEADER_ELECT``) and the HTTP endpoints.

:meth:`ControllerProcess.run` serves until its stop event is set (SIGTERM in ``cmd_run``), then
shuts down gracefully: stop taking work, wait for in-flight reconciles up to a bound, release the
Lease, stop serving. Losing the Lease stops the process with :data:`EXIT_LOST_LEADERSHIP`, as
controller-runtime does. :class:`Seams` lets tests substitute the Kubernetes port, the cloud
provider, the interruption source, the clock and the timings; nothing else is configurable from
outside.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import platform
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from importlib import metadata
from typing import Any, Final, Protocol, TextIO, cast

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from structlog.typing import FilteringBoundLogger

from cloudprovider.nodeclass import NodeClassLifecycle
from cloudprovider.protocol import CloudProvider
from provisioner.app.driver import DEFAULT_WORKERS, Driver, format_duration
from provisioner.app.logging_setup import LogFormat, build_logger
from provisioner.app.server import DEFAULT_BIND_ADDRESS, Endpoints
from provisioner.app.settings import Settings, SettingsError
from provisioner.controllers.assembly import (
    ControllerSet,
    InterruptionSourceFactory,
    PricingRefresher,
    assemble,
)
from provisioner.controllers.interruption import InterruptionSource
from provisioner.controllers.manager import BUFFER_RESOURCES, Manager
from provisioner.controllers.metrics import Metrics
from provisioner.kube.errors import ForbiddenError, NotFoundError
from provisioner.kube.informer import DEFAULT_WATCH_TIMEOUT
from provisioner.kube.leader import (
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    LeaderElectionConfig,
    LeaderElector,
)
from provisioner.kube.protocol import KubeClient, get_or_none
from provisioner.kube.resource import (
    EC2_NODE_CLASSES,
    JOBS,
    NODE_OVERLAYS,
    POD_GROUP_RESOURCES,
    Resource,
)
from provisioner.runtime.clock import Clock, SystemClock
from provisioner.runtime.collector import collector_for_long_runs
from provisioner.state.cluster import TRACKED_RESOURCES, ClusterState
from provisioner.state.nodeclasses import NodeClassReads

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "EXIT_LOST_LEADERSHIP",
    "LEASE_NAME",
    "ControllerProcess",
    "LeaseTimings",
    "ResourceDiscovery",
    "Seams",
    "WiringError",
    "build_controller",
    "optional_resources",
    "served_resources",
    "stdlib_logger",
    "watched_resources",
]

LEASE_NAME: Final = "karpenter-leader-election"
"""Karpenter's Lease: Jointer and Karpenter never lead the same cluster at once."""
EXIT_LOST_LEADERSHIP: Final = 1
DEFAULT_SHUTDOWN_TIMEOUT: Final = timedelta(seconds=25)
"""In-flight reconciles get this long after SIGTERM (the chart's grace period is 30 s)."""
RELEASE_TIMEOUT: Final = timedelta(seconds=3)
"""Time left to release the Lease even when the in-flight reconciles used the whole bound."""
_COMPONENT: Final = "karpenter"


class WiringError(RuntimeError):
    """The controller cannot be built or connected; the message says why."""


Waiter = Callable[[float, threading.Event], object]


def _wait_on(delay: float, stop: threading.Event) -> object:
    return stop.wait(delay)


@dataclass(frozen=True, slots=True)
class LeaseTimings:
    """Leader election timings (client-go's defaults)."""

    duration: timedelta = LEASE_DURATION
    renew_deadline: timedelta = RENEW_DEADLINE
    retry_period: timedelta = RETRY_PERIOD


@dataclass(frozen=True, slots=True, kw_only=True)
class Seams:
    """What a test (or an embedding program) substitutes; ``None`` means the production part.

    Attributes:
        kube: the Kubernetes port (default: ``RealKube`` from the kubeconfig).
        cloud: the cloud provider (default: AWS from the SDK's credentials).
        disruptions: the interruption source (default: SQS when ``INTERRUPTION_QUEUE`` is set).
        nodeclasses: the NodeClass status and cleanup beside a substituted ``cloud`` (default:
            the AWS provider's; none with a substituted cloud).
        clock: the clock (default: the system clock).
        log_stream: where logs go (default: standard error).
        host: the address the endpoints bind.
        identity: the leader election identity (default: host name and a random suffix).
        lease: leader election timings.
        watch_timeout: seconds per watch request.
        elector_wait: how the election loop waits between rounds, ``wait(seconds, stop)``.
    """

    kube: KubeClient | None = None
    cloud: CloudProvider | None = None
    disruptions: InterruptionSource | None = None
    nodeclasses: NodeClassLifecycle | None = None
    clock: Clock | None = None
    log_stream: TextIO | None = None
    host: str = DEFAULT_BIND_ADDRESS
    identity: str | None = None
    lease: LeaseTimings = field(default_factory=LeaseTimings)
    watch_timeout: float | None = DEFAULT_WATCH_TIMEOUT
    elector_wait: Waiter | None = None


# -- logging ---------------------------------------------------------------------------------

_RECORD_FIELDS: Final = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class _StructlogHandler(logging.Handler):
    """Forwards stdlib log records (with their ``extra`` fields) to a structlog logger."""

    def __init__(self, logger: FilteringBoundLogger) -> None:
        super().__init__(logging.DEBUG)
        self._logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        extra = {k: v for k, v in record.__dict__.items() if k not in _RECORD_FIELDS}
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        self._logger.log(record.levelno, message, **extra)


NODE_OVERLAY_GATE: Final = "NodeOverlay"
"""The feature gate under which NodeOverlays are watched and applied (off by default)."""


def stdlib_logger(name: str, logger: FilteringBoundLogger) -> logging.Logger:
    """A private stdlib logger (not in ``logging``'s registry) that writes through ``logger``."""
    bridged = logging.Logger(name, logging.DEBUG)  # noqa: LOG001 - deliberately not global
    bridged.propagate = False
    bridged.addHandler(_StructlogHandler(logger.bind(logger=name)))
    return bridged


# -- what the informers follow ----------------------------------------------------------------


def watched_resources(
    manager: Manager, kube: KubeClient | None = None, *, node_overlays: bool = True
) -> list[Resource]:
    """What the informers follow.

    The cache's resources, every reconciler's triggers and, given ``kube``, the optional kinds
    the cluster serves: pod-group kinds and NodeOverlays (a CRD that is not installed is not
    watched; NodeOverlays only with the ``NodeOverlay`` feature gate, ``node_overlays``).
    """
    optional = optional_resources()
    resources = [*TRACKED_RESOURCES, JOBS]
    resources += [
        w.resource for r in manager.registrations for w in r.watches if w.resource not in optional
    ]
    if kube is not None:
        resources += served_resources(kube, optional_resources(node_overlays=node_overlays))
    return list(dict.fromkeys(resources))


def served_resources(kube: KubeClient, candidates: Iterable[Resource]) -> list[Resource]:
    """The ``candidates`` the API server serves (a list answers) and may be read."""
    return ResourceDiscovery(kube, candidates).probe()


def optional_resources(*, node_overlays: bool = True) -> tuple[Resource, ...]:
    """The CRDs watched only where installed: pod groups, CapacityBuffers, NodeOverlays.

    CapacityBuffers come with the PodTemplates and workloads their chunks are shaped by;
    NodeOverlays only with their feature gate.
    """
    base = (*POD_GROUP_RESOURCES, *BUFFER_RESOURCES)
    return (*base, NODE_OVERLAYS) if node_overlays else base


class ResourceDiscovery:
    """Which optional resources the API serves and the controller may read, probed again later.

    A resource answers a list once its CRD is installed; a ``NotFound`` means not installed
    (asked again next time), a ``Forbidden`` means installed but not granted: logged once, as a
    warning naming the resource, since RBAC must grant list and watch on it.

    Args:
        kube: the API.
        candidates: the resources to look for.
        logger: where a ``Forbidden`` answer is reported (not reported without one).
    """

    def __init__(
        self,
        kube: KubeClient,
        candidates: Iterable[Resource],
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self._kube = kube
        self._candidates = tuple(dict.fromkeys(candidates))
        self._log = logger
        self._served: set[Resource] = set()
        self._forbidden: set[Resource] = set()

    def probe(self) -> list[Resource]:
        """Every candidate served now (the ones found before are not listed again)."""
        for resource in self._candidates:
            if resource in self._served:
                continue
            try:
                self._kube.list(resource)
            except NotFoundError:
                continue
            except ForbiddenError as error:
                if resource not in self._forbidden and self._log is not None:
                    self._log.warning(
                        "resource is served but not readable; RBAC must grant list and watch "
                        "on it, until then it is not watched",
                        resource=f"{resource.plural}.{resource.group or 'core'}",
                        error=str(error),
                    )
                self._forbidden.add(resource)
                continue
            self._served.add(resource)
        return [resource for resource in self._candidates if resource in self._served]


# -- AWS -----------------------------------------------------------------------------------------


class _EksApi(Protocol):
    def describe_cluster(self, *args: Any, **kwargs: Any) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _Cloud:
    """The cloud provider and its background parts (none for an injected provider)."""

    provider: CloudProvider
    interruption: InterruptionSourceFactory | None
    pricing: PricingRefresher | None
    region: str
    nodeclasses: NodeClassLifecycle | None = None
    stop: Callable[[], None] | None = None


def _build_aws(
    settings: Settings,
    kube: KubeClient,
    clock: Clock,
    logger: FilteringBoundLogger,
    state: ClusterState,
) -> _Cloud:
    """The AWS provider, pricing and interruption consumer on real boto3 clients.

    It reads EC2NodeClasses from ``state`` (the controllers' cache), asking the API only for
    one the cache has not seen.
    """
    # Imported here so a test run with an injected provider never loads boto3.
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415
    from botocore.exceptions import BotoCoreError  # noqa: PLC0415

    from cloudprovider.aws.assembly import assemble_aws  # noqa: PLC0415
    from cloudprovider.aws.capacity import CapacitySettings  # noqa: PLC0415
    from cloudprovider.aws.catalog import Ec2InstanceTypeProvider  # noqa: PLC0415
    from cloudprovider.aws.errors import AwsError  # noqa: PLC0415
    from cloudprovider.aws.launchtemplate import ClusterInfo  # noqa: PLC0415
    from cloudprovider.aws.pricing import (  # noqa: PLC0415
        PricingProvider,
        UnsupportedRegionError,
        pricing_endpoint_region,
    )
    from cloudprovider.aws.retry import Caller  # noqa: PLC0415

    try:
        session = boto3.session.Session(region_name=settings.aws_region or None)
    except BotoCoreError as error:
        raise WiringError(f"configuring the AWS SDK: {error}") from error
    region = session.region_name
    if not region:
        raise SettingsError("AWS_REGION: not set, and the AWS SDK configuration names no region")
    config = Config(retries={"total_max_attempts": 1}, user_agent_extra="jointer")
    client = cast("Any", session).client
    ec2, ssm, iam, sqs = (client(name, config=config) for name in ("ec2", "ssm", "iam", "sqs"))
    eks: _EksApi = client("eks", config=config)
    caller = Caller()
    try:
        cluster = caller.call(
            "describing cluster", eks.describe_cluster, name=settings.cluster_name
        )["cluster"]
    except AwsError as error:
        raise WiringError(
            f"CLUSTER_NAME: cannot describe EKS cluster {settings.cluster_name!r}: {error}"
        ) from error
    network = cluster.get("kubernetesNetworkConfig") or {}
    service_cidr = network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr")
    info = ClusterInfo(
        name=settings.cluster_name,
        endpoint=settings.cluster_endpoint or str(cluster["endpoint"]),
        ca_bundle=settings.cluster_ca_bundle
        or str((cluster.get("certificateAuthority") or {}).get("data") or ""),
        service_cidr=service_cidr,
        cluster_dns=_cluster_dns(service_cidr),
    )
    pricing_client = (
        None
        if settings.isolated_vpc.lower() == "true"
        else client("pricing", region_name=pricing_endpoint_region(region), config=config)
    )
    try:
        pricing = PricingProvider(
            region, pricing_client=pricing_client, spot_client=ec2, timer=clock.monotonic
        )
    except UnsupportedRegionError:
        if pricing_client is None:
            raise
        pricing = PricingProvider(
            region,
            table={region: {}},
            pricing_client=pricing_client,
            spot_client=ec2,
            timer=clock.monotonic,
        )
    instance_types = Ec2InstanceTypeProvider(
        ec2,
        pricing,
        settings=CapacitySettings(
            vm_memory_overhead_percent=settings.memory_overhead(),
            reserved_enis=int(settings.reserved_enis),
        ),
        timer=clock.monotonic,
    )
    assembly = assemble_aws(
        cluster=info,
        region=region,
        kubernetes_version=str(cluster.get("version") or ""),
        ec2=ec2,
        ssm=ssm,
        iam=iam,
        sqs=sqs,
        read_nodeclass=NodeClassReads(
            state, EC2_NODE_CLASSES.kind, partial(get_or_none, kube, EC2_NODE_CLASSES)
        ),
        instance_types=instance_types,
        caller=caller,
        timer=clock.monotonic,
        queue_name=settings.interruption_queue,
        logger=stdlib_logger("jointer.interruption", logger),
        fleet_window=True,
        now=clock.now,
    )
    stop = None
    if assembly.fleet is not None:
        assembly.fleet.start()
        stop = assembly.fleet.stop
    return _Cloud(
        assembly.cloud, assembly.interruption, pricing, region, assembly.nodeclasses, stop
    )


def _cluster_dns(service_cidr: str | None) -> str | None:
    """The kube-dns address EKS uses: the tenth address of the IPv4 service range."""
    if not service_cidr:
        return None
    try:
        network = ipaddress.ip_network(service_cidr, strict=False)
    except ValueError:
        return None
    return str(network[10]) if network.version == 4 and network.num_addresses > 10 else None  # noqa: PLR2004


# -- the process -----------------------------------------------------------------------------


def _version() -> str:
    try:
        return metadata.version("jointer")
    except metadata.PackageNotFoundError:
        return "unknown"


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class ControllerProcess:
    """A built controller: run it with :meth:`run`.

    Args:
        settings: the settings it was built from.
        logger: its logger.
        registry: its metrics registry (served at ``/metrics``).
        manager: the controller manager.
        controllers: the manager and the cloud provider's reconcilers, as the driver runs them.
        cloud: the cloud provider.
        driver: the real driver.
        kube: the Kubernetes port (for the Lease).
        election: the Lease to lead, or ``None`` to act without electing.
        clock: the injected clock.
        host: the address the endpoints bind.
        shutdown_timeout: how long in-flight reconciles may finish after a stop.
        elector_wait: how the election loop waits between rounds.
        closers: called once the process stopped.

    Raises:
        OSError: a port of the endpoints cannot be bound.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        logger: FilteringBoundLogger,
        registry: CollectorRegistry,
        manager: Manager,
        controllers: ControllerSet,
        cloud: CloudProvider,
        driver: Driver,
        kube: KubeClient,
        election: LeaderElectionConfig | None,
        clock: Clock,
        host: str,
        shutdown_timeout: timedelta,
        elector_wait: Waiter,
        closers: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.settings = settings
        self.logger = logger
        self.registry = registry
        self.manager = manager
        self.controllers = controllers
        self.cloud = cloud
        self.driver = driver
        self.elector = (
            LeaderElector(
                kube,
                election,
                clock=clock.now,
                on_started_leading=self._start_leading,
                on_stopped_leading=self._stopped_leading,
                logger=stdlib_logger("jointer.leader", logger),
            )
            if election is not None
            else None
        )
        self.endpoints = Endpoints(
            registry=registry,
            readiness={"informers": self.synced},
            metrics_port=settings.port("metrics"),
            health_port=settings.port("health"),
            host=host,
        )
        self._clock = clock
        self._shutdown_timeout = shutdown_timeout
        self._elector_wait = elector_wait
        self._closers = list(closers)
        self._elector_stop = threading.Event()
        self._stop: threading.Event | None = None
        self._shutting_down = False
        self._lost = False
        self._started = False
        self._lock = threading.Lock()

    def synced(self) -> bool:
        """Readiness, as Karpenter's: not leadership.

        A standby (controllers not started) is Ready, so a rollout or a drain of the 2 replicas
        under the PDB never waits on it; the leader is Ready once its informers have synced.
        """
        with self._lock:
            started = self._started
        return not started or self.driver.synced

    def leading(self) -> bool:
        """Whether this process may act (it holds the Lease, or does not elect)."""
        return self.elector is None or self.elector.is_leader

    def run(self, stop: threading.Event) -> int:
        """Serve until ``stop`` is set (or leadership is lost), then shut down gracefully.

        The cycle collector is set up for a long run meanwhile (``collector_for_long_runs``).

        Returns:
            The exit status: 0 after a requested stop, :data:`EXIT_LOST_LEADERSHIP` after
            losing the Lease.
        """
        with collector_for_long_runs():
            return self._serve(stop)

    def _serve(self, stop: threading.Event) -> int:
        self._stop = stop
        self.endpoints.start()
        self.logger.info(
            "starting controller",
            version=_version(),
            **{"metrics-port": self.endpoints.metrics_port},
            **{"health-probe-port": self.endpoints.health_port},
        )
        elector_thread: threading.Thread | None = None
        if self.elector is None:
            self._start_leading()
        else:
            elector = self.elector
            elector_thread = threading.Thread(
                target=lambda: elector.run(self._elector_stop, wait=self._elector_wait),
                name="leader-election",
                daemon=True,
            )
            elector_thread.start()
        stop.wait()
        return self._shutdown(elector_thread)

    def _start_leading(self) -> None:
        with self._lock:
            if self._shutting_down or self._lost or self._started:
                return  # a Lease won back after losing it does not restart the controllers
            self._started = True
            self.driver.start()

    def _stopped_leading(self) -> None:
        with self._lock:
            if self._shutting_down:
                return
            self._lost = True
        self._elector_stop.set()  # no new campaign: this process exits
        self.logger.error("leader election lost")
        if self._stop is not None:
            self._stop.set()

    def _shutdown(self, elector_thread: threading.Thread | None) -> int:
        with self._lock:
            self._shutting_down = True
        self.logger.info("stopping controller", timeout=format_duration(self._shutdown_timeout))
        deadline = self._clock.monotonic() + self._shutdown_timeout.total_seconds()
        finished = self.driver.stop(self._shutdown_timeout)
        self._elector_stop.set()  # the election loop releases the Lease as it ends
        if elector_thread is not None:
            remaining = deadline - self._clock.monotonic()
            elector_thread.join(max(remaining, RELEASE_TIMEOUT.total_seconds()))
        self.endpoints.stop()
        for close in self._closers:
            with contextlib.suppress(Exception):
                close()
        self.logger.info("stopped controller", **{"in-flight-finished": finished})
        return EXIT_LOST_LEADERSHIP if self._lost else 0


def build_controller(
    settings: Settings,
    *,
    kubeconfig: str | None = None,
    shutdown_timeout: timedelta = DEFAULT_SHUTDOWN_TIMEOUT,
    workers: int = DEFAULT_WORKERS,
    seams: Seams | None = None,
) -> ControllerProcess:
    """Build every part of the controller from ``settings``.

    Raises:
        SettingsError: a setting is missing or unusable (names the variable).
        WiringError: a dependency cannot be reached or configured.
    """
    seams = seams or Seams()
    if not settings.cluster_name:
        raise SettingsError("CLUSTER_NAME: required (the name of the EKS cluster)")
    clock: Clock = seams.clock or SystemClock()
    log_format = cast("LogFormat", settings.log_format)
    logger = build_logger(level=settings.log_level, log_format=log_format, stream=seams.log_stream)
    registry = _registry()
    metrics = Metrics(registry)
    metrics.build_info.labels(
        version=_version(),
        goversion=f"python{platform.python_version()}",
        goarch=platform.machine(),
        commit="",
    ).set(1)
    closers: list[Callable[[], None]] = []
    kube = (
        seams.kube
        if seams.kube is not None
        else _real_kube(kubeconfig, closers, rate=settings.kube_rate())
    )
    state = ClusterState(clock=clock)
    if seams.cloud is None:
        cloud = _build_aws(settings, kube, clock, logger, state)
        settings = replace(settings, aws_region=cloud.region)
        if cloud.stop is not None:
            closers.append(cloud.stop)  # flushes the CreateFleet batch still waiting
    else:
        cloud = _Cloud(seams.cloud, None, None, settings.aws_region, seams.nodeclasses)
    controllers = assemble(
        kube=kube,
        cloud=cloud.provider,
        clock=clock,
        settings=settings,
        logger=logger,
        metrics=metrics,
        interruption=(
            _given(seams.disruptions) if seams.disruptions is not None else cloud.interruption
        ),
        pricing=cloud.pricing,
        nodeclasses=cloud.nodeclasses,
        state=state,
    )
    manager = controllers.manager
    discovery = ResourceDiscovery(
        kube, optional_resources(node_overlays=settings.gates()[NODE_OVERLAY_GATE]), logger
    )
    driver = Driver(
        controllers,
        kube,
        clock=clock,
        resources=[*watched_resources(manager), *discovery.probe()],
        discover=discovery.probe,
        logger=logger,
        workers=workers,
        watch_timeout=seams.watch_timeout,
        informer_logger=stdlib_logger("jointer.informer", logger),
        registry=registry,
    )
    election = None
    if settings.leader_elect.lower() == "true":
        election = LeaderElectionConfig(
            name=LEASE_NAME,
            namespace=settings.leader_election_namespace,
            identity=seams.identity or f"{socket.gethostname()}_{uuid.uuid4()}",
            lease_duration=seams.lease.duration,
            renew_deadline=seams.lease.renew_deadline,
            retry_period=seams.lease.retry_period,
        )
    try:
        return ControllerProcess(
            settings=settings,
            logger=logger,
            registry=registry,
            manager=manager,
            controllers=controllers,
            cloud=cloud.provider,
            driver=driver,
            kube=kube,
            election=election,
            clock=clock,
            host=seams.host,
            shutdown_timeout=shutdown_timeout,
            elector_wait=seams.elector_wait or _wait_on,
            closers=closers,
        )
    except OSError as error:
        for close in closers:
            close()
        raise WiringError(
            f"METRICS_PORT/HEALTH_PROBE_PORT: cannot listen on {seams.host}: {error}"
        ) from error


def _given(source: InterruptionSource) -> InterruptionSourceFactory:
    """A factory of a source built elsewhere (a test's); it indexes NodeClaims itself."""
    return lambda _index, _observer: source


def _real_kube(
    kubeconfig: str | None, closers: list[Callable[[], None]], *, rate: tuple[float, int]
) -> KubeClient:
    from provisioner.kube.ratelimit import TokenBucket  # noqa: PLC0415
    from provisioner.kube.real import RealKube  # noqa: PLC0415 - loads the kubernetes client

    try:
        kube = RealKube.from_config(kubeconfig, limiter=TokenBucket(*rate))
    except Exception as error:
        where = kubeconfig or "the in-cluster service account or $KUBECONFIG"
        raise WiringError(
            f"loading Kubernetes client configuration from {where}: {error}"
        ) from error
    closers.append(kube.close)
    return kube
