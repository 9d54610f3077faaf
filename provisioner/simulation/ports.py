"""The ports the controllers are built from in a simulation, and the AWS provider on moto.

:class:`Ports` is everything the controller assembly takes: the Kubernetes port, the virtual
clock, the cloud provider and the factory of its interruption queue consumer, the planner's
configuration, the batching windows, a logger and a metrics registry. :func:`build_aws` calls
the one AWS assembly ``jointer run`` uses (:func:`~cloudprovider.aws.assembly.assemble_aws`) on
the simulated account's clients, with every TTL cache on the virtual timer, retries that never
sleep and SQS polled without waiting (the runner spaces the polls by the 20 s long poll).
Each restart builds them anew, so no cache survives a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any, Final

from prometheus_client import CollectorRegistry

from cloudprovider.aws.assembly import AwsAssembly, ConsumerFactory, assemble_aws
from cloudprovider.aws.catalog import Catalog
from cloudprovider.aws.cloudprovider import AwsCloudProvider
from cloudprovider.aws.launchtemplate import ClusterInfo
from cloudprovider.aws.nodeclass import EC2NodeClass
from cloudprovider.aws.retry import Caller, no_sleep
from cloudprovider.nodeclass import NodeClassLifecycle
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.protocol import KubeClient, get_or_none
from provisioner.kube.resource import EC2_NODE_CLASSES
from provisioner.runtime.clock import FakeClock
from provisioner.simulation.cloud import KUBERNETES_VERSION, MotoCloud
from provisioner.state.cluster import ClusterState
from provisioner.state.nodeclasses import NodeClassReads

__all__ = ["Ports", "build_aws", "cluster_info"]

BATCH_IDLE: Final = timedelta(seconds=1)
BATCH_MAX: Final = timedelta(seconds=10)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ports:
    """What the controllers of one (re)start are built from.

    Attributes:
        kube: the Kubernetes port (the in-memory API, evictions recorded).
        clock: the virtual clock.
        cloud: the AWS cloud provider on moto.
        interruption: builds the interruption queue consumer (SQS on moto, no long polling).
        nodeclasses: EC2NodeClass status and cleanup (the ``nodeclass`` controller's port).
        planner: the planner's configuration (policy, deterministic solver budget).
        cluster_name: the cluster name.
        region: the AWS region.
        batch_idle: ``BATCH_IDLE_DURATION``.
        batch_max: ``BATCH_MAX_DURATION``.
        logger: the controllers' structured logger.
        registry: the metrics registry of this start.
        timer: monotonic virtual seconds (for TTL caches).
        state: the cluster state the controllers keep, which the cloud provider reads its
            EC2NodeClasses from (None: the manager makes its own).
    """

    kube: KubeClient
    clock: FakeClock
    cloud: AwsCloudProvider
    interruption: ConsumerFactory | None
    nodeclasses: NodeClassLifecycle | None
    planner: PlannerConfig
    cluster_name: str
    region: str
    batch_idle: timedelta = BATCH_IDLE
    batch_max: timedelta = BATCH_MAX
    logger: Any
    registry: CollectorRegistry
    timer: Callable[[], float]
    state: ClusterState | None = None


def cluster_info(cluster: str, region: str) -> ClusterInfo:
    """How simulated nodes join the simulated cluster."""
    return ClusterInfo(
        name=cluster,
        endpoint=f"https://{cluster}.sim.{region}.eks.amazonaws.com",
        ca_bundle="c2ltdWxhdGVkLWNh",
        service_cidr="172.20.0.0/16",
        cluster_dns="172.20.0.10",
    )


class CatalogSource:
    """An ``InstanceTypeSource`` over the scenario's catalog (built-in or a file).

    Args:
        default: the catalog resolved for the default nodeclass.
        loader: resolves the catalog for a nodeclass (its kubelet settings change allocatable).
    """

    def __init__(
        self, default: Catalog, loader: Callable[[EC2NodeClass], Catalog] | None = None
    ) -> None:
        self._default = default
        self._loader = loader
        self._resolved: dict[str, Catalog] = {}

    def catalog(self, nodeclass: EC2NodeClass | None = None) -> Catalog:
        """Every instance type with its capacity, allocatable and priced offerings."""
        if nodeclass is None or self._loader is None:
            return self._default
        key = json.dumps(nodeclass.spec.model_dump(mode="json"), sort_keys=True)
        found = self._resolved.get(key)
        if found is None:
            found = self._loader(nodeclass)
            self._resolved[key] = found
        return found


def build_aws(
    *,
    account: MotoCloud,
    kube: KubeClient,
    source: CatalogSource,
    timer: Callable[[], float],
    state: ClusterState | None = None,
) -> AwsAssembly:
    """The AWS cloud provider and interruption consumer factory on the simulated account.

    With ``state`` (the controllers' cache) it reads EC2NodeClasses from there, asking the
    API only for one the cache has not seen, as ``jointer run`` does; without, from the API.
    """
    live = partial(get_or_none, kube, EC2_NODE_CLASSES)
    return assemble_aws(
        ec2=account.client("ec2"),
        ssm=account.client("ssm"),
        iam=account.client("iam"),
        sqs=account.client("sqs"),
        cluster=cluster_info(account.cluster, account.region),
        region=account.region,
        kubernetes_version=KUBERNETES_VERSION,
        read_nodeclass=(
            live if state is None else NodeClassReads(state, EC2_NODE_CLASSES.kind, live)
        ),
        instance_types=source,
        caller=Caller(sleep=no_sleep),
        timer=timer,
        queue_name=account.cluster,
        wait_seconds=0,
        now=account.timeline.clock.now,
    )
