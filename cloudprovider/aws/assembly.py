"""One assembly of the AWS provider, for ``jointer run`` (boto3) and ``jointer simulate`` (moto).

:func:`assemble_aws` wires the :class:`~cloudprovider.aws.cloudprovider.AwsCloudProvider` onto the
given clients, its EC2NodeClass lifecycle (status and cleanup for the ``nodeclass`` controller)
and, when an interruption queue is named, a factory of its
:class:`~cloudprovider.aws.interruption.InterruptionConsumer`: the controller assembly calls it
with the NodeClaim index over its cache and the metrics observer. EC2NodeClasses are read through
a raw object reader and parsed here (a malformed one reads as absent).

CreateFleet calls go through a :class:`~cloudprovider.aws.batcher.FleetBatcher`, as Karpenter's
do: with ``fleet_window=True`` (``jointer run``) identical launches within 35 ms idle / 1 s of
each other become one CreateFleet of ``TotalTargetCapacity`` N, flushed by a
:class:`~cloudprovider.aws.batcher.BatcherThread` the caller starts (``AwsAssembly.fleet``);
``jointer simulate`` uses a zero window (each launch at once on the reconciling thread: its driver
runs one reconcile at a time, so there is never a second launch to merge with).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cloudprovider.aws.batcher import BatcherThread, FleetBatcher
from cloudprovider.aws.cache import Timer
from cloudprovider.aws.cloudprovider import (
    AwsCloudProvider,
    InstanceTypeSource,
    build_aws_cloud_provider,
)
from cloudprovider.aws.interruption import DEFAULT_WAIT_SECONDS, InterruptionConsumer
from cloudprovider.aws.launchtemplate import ClusterInfo
from cloudprovider.aws.nodeclass import EC2NodeClass, parse_nodeclass
from cloudprovider.aws.nodeclasslifecycle import AwsNodeClassLifecycle
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api, IamApi, SqsApi, SsmApi
from cloudprovider.interruption import MessageObserver, NodeClaimIndex
from provisioner.apis.errors import ApiValidationError

__all__ = ["AwsAssembly", "ConsumerFactory", "ParsedNodeClasses", "assemble_aws"]

ConsumerFactory = Callable[[NodeClaimIndex, MessageObserver], InterruptionConsumer]
"""Builds the interruption consumer on the core's NodeClaim index and metrics observer."""
RawReader = Callable[[str], Mapping[str, Any] | None]


class ParsedNodeClasses:
    """A ``NodeClassGetter`` over a raw EC2NodeClass reader (``None`` when absent).

    The last parse of each class is kept while its ``metadata.resourceVersion`` (which the API
    server changes on every write) stays the same: the provider reads a class for every node
    it checks, and the read is usually the cache's unchanged object.
    """

    def __init__(self, read: RawReader) -> None:
        self._read = read
        self._parsed: dict[str, tuple[str, EC2NodeClass]] = {}

    def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass called ``name`` (None when absent or malformed)."""
        raw = self._read(name)
        if raw is None:
            self._parsed.pop(name, None)
            return None
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        kept = self._parsed.get(name)
        if version and kept is not None and kept[0] == version:
            return kept[1]
        try:
            parsed = parse_nodeclass(raw)
        except ApiValidationError:
            self._parsed.pop(name, None)
            return None
        if version:
            self._parsed[name] = (version, parsed)
        return parsed


@dataclass(frozen=True, slots=True)
class AwsAssembly:
    """The AWS provider, its EC2NodeClass lifecycle and, with a queue, its consumer factory.

    ``fleet`` is the CreateFleet batcher's driver thread (with a window): start it before the
    first launch, stop it (which flushes) at shutdown. ``None`` for the zero window.
    """

    cloud: AwsCloudProvider
    interruption: ConsumerFactory | None
    nodeclasses: AwsNodeClassLifecycle
    fleet: BatcherThread | None = None


def assemble_aws(
    *,
    ec2: Ec2Api,
    ssm: SsmApi,
    iam: IamApi,
    sqs: SqsApi,
    cluster: ClusterInfo,
    region: str,
    kubernetes_version: str,
    read_nodeclass: RawReader,
    instance_types: InstanceTypeSource,
    caller: Caller,
    timer: Timer,
    queue_name: str = "",
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    logger: logging.Logger | None = None,
    fleet_window: bool = False,
    now: Callable[[], datetime] | None = None,
) -> AwsAssembly:
    """The AWS provider on the clients; the consumer factory when ``queue_name`` is set.

    ``fleet_window``: batch CreateFleet calls in Karpenter's window (a thread flushes them);
    otherwise each launch goes out at once on the calling thread.
    """
    provider = build_aws_cloud_provider(
        ec2=ec2,
        ssm=ssm,
        iam=iam,
        cluster=cluster,
        region=region,
        kubernetes_version=kubernetes_version,
        nodeclasses=ParsedNodeClasses(read_nodeclass),
        instance_types=instance_types,
        caller=caller,
        timer=timer,
        now=now,
    )
    nodeclasses = AwsNodeClassLifecycle(
        resolver=provider.resolver,
        launch_templates=provider.launch_templates,
        instance_profiles=provider.resolver.instance_profiles,
        cluster=cluster.name,
        region=region,
    )
    fleet = None
    if fleet_window:
        provider.fleet_batcher = FleetBatcher(instances=provider.instances, clock=timer)
        fleet = BatcherThread(provider.fleet_batcher.batcher)
    else:
        provider.fleet_batcher = FleetBatcher.inline(provider.instances, timer)
    if not queue_name:
        return AwsAssembly(provider, None, nodeclasses, fleet)
    log = logger or logging.getLogger("jointer.interruption")

    def consumer(index: NodeClaimIndex, observer: MessageObserver) -> InterruptionConsumer:
        return InterruptionConsumer(
            sqs=sqs,
            caller=caller,
            queue_name=queue_name,
            index=index,
            unavailable=provider.unavailable,
            wait_seconds=wait_seconds,
            logger=log,
            observer=observer,
        )

    return AwsAssembly(provider, consumer, nodeclasses, fleet)
