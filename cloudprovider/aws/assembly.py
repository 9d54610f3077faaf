"""One assembly of the AWS provider, for ``jointer run`` (boto3) and ``jointer simulate`` (moto).

:func:`assemble_aws` wires the :class:`~cloudprovider.aws.cloudprovider.AwsCloudProvider` onto the
given clients, its EC2NodeClass lifecycle (status and cleanup for the ``nodeclass`` controller)
and, when an interruption queue is named, a factory of its
:class:`~cloudprovider.aws.interruption.InterruptionConsumer`: the controller assembly calls it
with the NodeClaim index over its cache and the metrics observer. EC2NodeClasses are read through
a raw object reader and parsed here (a malformed one reads as absent).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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
    """A ``NodeClassGetter`` over a raw EC2NodeClass reader (``None`` when absent)."""

    def __init__(self, read: RawReader) -> None:
        self._read = read

    def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass called ``name`` (None when absent or malformed)."""
        raw = self._read(name)
        if raw is None:
            return None
        try:
            return parse_nodeclass(raw)
        except ApiValidationError:
            return None


@dataclass(frozen=True, slots=True)
class AwsAssembly:
    """The AWS provider, its EC2NodeClass lifecycle and, with a queue, its consumer factory."""

    cloud: AwsCloudProvider
    interruption: ConsumerFactory | None
    nodeclasses: AwsNodeClassLifecycle


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
) -> AwsAssembly:
    """The AWS provider on the clients; the consumer factory when ``queue_name`` is set."""
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
    )
    nodeclasses = AwsNodeClassLifecycle(
        resolver=provider.resolver,
        launch_templates=provider.launch_templates,
        instance_profiles=provider.resolver.instance_profiles,
        cluster=cluster.name,
        region=region,
    )
    if not queue_name:
        return AwsAssembly(provider, None, nodeclasses)
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

    return AwsAssembly(provider, consumer, nodeclasses)
