"""The CloudProvider port: what the core asks of a cloud, with its contract.

The core (provisioner) never talks to a cloud SDK. It hands a provider a :class:`LaunchRequest`
built from a NodeClaim it has already persisted (intent before side effects) and gets back a
:class:`CloudNodeClaim`, the provider's view of what it launched. The contract of each method is
written in its docstring, after Karpenter's ``pkg/cloudprovider/types.go``; the contract test suite
(``tests/contract/test_cloudprovider_contract.py``) runs against every implementation.

Errors are the typed control signals of :mod:`cloudprovider.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from cloudprovider.instancetype import InstanceType
from provisioner.apis.core import Taint
from provisioner.scheduling.requirements import Requirements

__all__ = [
    "DRIFT_AMI",
    "DRIFT_NODECLASS",
    "DRIFT_SECURITY_GROUP",
    "DRIFT_SUBNET",
    "CloudNodeClaim",
    "CloudProvider",
    "LaunchRequest",
    "NodeClassRef",
    "NodePoolRef",
]

# Karpenter's provider drift reasons (``karpenter-aws.md`` §5).
DRIFT_AMI: Final = "AMIDrift"
DRIFT_SUBNET: Final = "SubnetDrift"
DRIFT_SECURITY_GROUP: Final = "SecurityGroupDrift"
DRIFT_NODECLASS: Final = "NodeClassDrift"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeClassRef:
    """A NodePool's ``nodeClassRef``.

    Attributes:
        name: the NodeClass object name.
        kind: ``EC2NodeClass`` for AWS.
        group: ``karpenter.k8s.aws`` for AWS.
    """

    name: str
    kind: str = "EC2NodeClass"
    group: str = "karpenter.k8s.aws"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePoolRef:
    """What a provider needs to know about a NodePool to list its instance types.

    Attributes:
        name: the NodePool name.
        node_class: ``spec.template.spec.nodeClassRef``.
    """

    name: str
    node_class: NodeClassRef


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchRequest:
    """What a provider needs from a persisted NodeClaim to launch its instance.

    Attributes:
        name: the NodeClaim name; the provider tags the instance with it and derives its
            idempotency token from it and ``uid``.
        uid: the NodeClaim uid.
        nodepool: the owning NodePool name (label ``karpenter.sh/nodepool``).
        node_class: the NodeClaim's ``nodeClassRef``.
        requirements: ``spec.requirements`` (instance types, zones, capacity types, ...).
        requests: ``spec.resources.requests`` in milli-units.
        labels: labels the node must carry (the NodeClaim's labels).
        annotations: the NodeClaim's annotations.
        taints: ``spec.taints``.
        startup_taints: ``spec.startupTaints``.
    """

    name: str
    uid: str
    nodepool: str
    node_class: NodeClassRef
    requirements: Requirements = field(default_factory=Requirements)
    requests: Mapping[str, int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudNodeClaim:
    """The provider's view of one launched instance, hydrated for its NodeClaim.

    Attributes:
        provider_id: ``aws:///<zone>/<instance-id>`` (the NodeClaim's ``status.providerID``).
        instance_id: the cloud's instance id.
        name: the NodeClaim this instance was launched for (from its tag), "" if untagged.
        nodepool: the NodePool (tag), "" if untagged.
        node_class: the NodeClass name (tag), "" if untagged.
        instance_type: the instance type name.
        zone: the availability zone.
        capacity_type: ``spot``, ``on-demand`` or ``reserved``.
        image_id: the image the instance runs (``status.imageID``).
        labels: labels for the node: the instance type's single-valued labels plus instance
            type, zone, capacity type and nodepool.
        annotations: annotations the provider wants on the NodeClaim (nodeclass hash, ...).
        capacity: node capacity in milli-units.
        allocatable: node allocatable in milli-units.
        created_at: launch time.
        state: the instance state (``pending``, ``running``, ``shutting-down``, ...).
    """

    provider_id: str
    instance_id: str
    name: str = ""
    nodepool: str = ""
    node_class: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    image_id: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    created_at: datetime | None = None
    state: str = "running"


class CloudProvider(Protocol):
    """A cloud the core can launch nodes in.

    Implementations are synchronous and thread-safe: the core calls them from a worker pool.
    """

    @property
    def name(self) -> str:
        """The provider name (``aws``, ``fake``), used in logs and metric labels."""
        ...

    def create(self, request: LaunchRequest) -> CloudNodeClaim:
        """Launch one instance for a NodeClaim and return it hydrated.

        Contract:
            * Idempotent per NodeClaim (``name``/``uid``): calling ``create`` again for a
              NodeClaim whose instance already exists returns that instance and launches
              nothing.
            * Picks one offering allowed by ``request.requirements`` that fits
              ``request.requests``; the result's labels pin instance type, zone and capacity type.

        Raises:
            InsufficientCapacityError: nothing allowed could be launched for capacity
                reasons; the failed offerings are already marked unavailable.
            NodeClassNotReadyError: the NodeClass is missing, terminating or not Ready.
            CreateError: any other failure, with a Karpenter reason; the core retries.
        """
        ...

    def delete(self, provider_id: str) -> None:
        """Terminate the instance behind ``provider_id``.

        Contract:
            * Only instances the provider launched for this cluster are ever terminated.
            * Raises NodeClaimNotFoundError when the instance is already terminated or does not
              exist, so the core can finish deletion; otherwise returns once termination has
              been requested (it may still be shutting down).

        Raises:
            NodeClaimNotFoundError: the instance is gone.
            CloudProviderError: termination could not be requested; the core retries.
        """
        ...

    def get(self, provider_id: str) -> CloudNodeClaim:
        """Return the instance behind ``provider_id``.

        Raises:
            NodeClaimNotFoundError: it does not exist or is terminated.
        """
        ...

    def list_claims(self) -> list[CloudNodeClaim]:
        """Every live instance this provider launched for this cluster (for garbage collection).

        Instances of other clusters, or not launched by the provider, are never listed.
        """
        ...

    def get_instance_types(self, nodepool: NodePoolRef) -> Sequence[InstanceType]:
        """All instance types the NodePool's NodeClass could launch, with their offerings.

        Contract: returns every instance type, **including those with no available
        offering** (marked ``available=False``), so the core can tell "not offered now" from
        "unknown type".

        Raises:
            NodeClassNotReadyError: the NodeClass is missing or not Ready.
        """
        ...

    def is_drifted(self, claim: CloudNodeClaim) -> str | None:
        """The drift reason (``AMIDrift``, ``SubnetDrift``, ...) or None when not drifted.

        ``claim`` carries the persisted NodeClaim's ``providerID``, ``imageID``, annotations and
        NodeClass name. Providers answer None when they cannot tell (NodeClass gone).
        """
        ...

    def restamp(self, claim: CloudNodeClaim, *, drifted: bool) -> Mapping[str, str]:
        """Annotations to set on a NodeClaim stamped under another of the provider's hash versions.

        Karpenter's NodeClass hash controller: a NodeClaim whose NodeClass hash annotation has a
        version the provider does not compute (one launched by Karpenter) gets the current
        version and, unless ``drifted``, the current hash. Empty when nothing is to change or
        the NodeClass is unknown.
        """
        ...
