"""EC2 instances: CreateFleet launches, describe by id and by cluster tag, termination.

One ``instant`` CreateFleet request per NodeClaim (karpenter-aws.md §1.3-1.4): overrides are
instance type x zone (the zone's subnet) in price order, one ``LaunchTemplateConfigs`` entry per
launch template; spot uses ``price-capacity-optimized``, on-demand ``lowest-price``. The client
token is derived from the NodeClaim uid, name and capacity type, so a retried request never
launches twice at AWS; since moto (and a crash between launch and status write) defeat tokens,
callers also look instances up by the ``karpenter.sh/nodeclaim`` tag first
(:meth:`InstanceProvider.find_by_nodeclaim`).

Fleet ``Errors`` are parsed into :class:`FleetError` values; the caller decides (ICE cache,
fallback, typed error).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from cloudprovider.aws.cache import INSTANCES_DRIFT_TTL, INSTANCES_TTL, Timer, TtlCache
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.tags import (
    TAG_EKS_CLUSTER_NAME,
    TAG_NODECLAIM,
    TAG_NODEPOOL,
    cluster_tag,
    is_owned_by,
    to_tag_list,
)
from provisioner.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import CreateFleetResultTypeDef, InstanceTypeDef

__all__ = [
    "LIVE_STATES",
    "MAX_INSTANCE_TYPES",
    "FleetError",
    "FleetOutcome",
    "FleetOverride",
    "FleetRequest",
    "Instance",
    "InstanceProvider",
    "client_token",
    "create_fleet_input",
    "parse_provider_id",
    "provider_id",
]

# Karpenter's maxInstanceTypes: enough flexibility for PCO, small enough for one request.
MAX_INSTANCE_TYPES: Final = 60
LIVE_STATES: Final = ("pending", "running", "stopping", "stopped", "shutting-down")
_PROVIDER_PREFIX: Final = "aws:///"
_LAUNCH_TAG_RESOURCES: Final = ("instance", "volume", "fleet")
_CAPACITY_BLOCK: Final = "capacity-block"
_RESERVATIONS_ONLY: Final = "capacity-reservations-only"


def provider_id(zone: str, instance_id: str) -> str:
    """``aws:///<zone>/<instance-id>``."""
    return f"{_PROVIDER_PREFIX}{zone}/{instance_id}"


def parse_provider_id(value: str) -> str:
    """The instance id of an ``aws:///<zone>/<id>`` provider id.

    Raises:
        ValueError: not an AWS provider id.
    """
    if not value.startswith(_PROVIDER_PREFIX) or "/i-" not in value:
        raise ValueError(f"not an aws provider id: {value!r}")
    return value.rpartition("/")[2]


def client_token(nodeclaim_uid: str, nodeclaim_name: str, capacity_type: str) -> str:
    """The CreateFleet idempotency token for one launch attempt of one NodeClaim (≤ 64 chars)."""
    raw = f"{nodeclaim_uid}/{nodeclaim_name}/{capacity_type}"
    return hashlib.sha256(raw.encode()).hexdigest()[:64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """An EC2 instance as Jointer sees it."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    image_id: str = ""
    state: str = "running"
    launch_time: datetime | None = None
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    reservation_id: str | None = None
    reservation_type: str | None = None

    @property
    def provider_id(self) -> str:
        """``aws:///<zone>/<id>``."""
        return provider_id(self.zone, self.id)


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetOverride:
    """One (instance type, zone) pool of a fleet request."""

    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    launch_template: str
    price: float
    reservation_id: str | None = None
    reservation_type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetRequest:
    """One CreateFleet ``instant`` request for one NodeClaim.

    Attributes:
        nodeclaim: the NodeClaim name.
        nodeclaim_uid: its uid (for the client token).
        capacity_type: ``spot``, ``on-demand`` or ``reserved`` (then every override targets a
            reservation of one kind, through its launch template).
        overrides: pools in price order.
        tags: launch tags for instance, volume and fleet.
        context: ``spec.context`` of the EC2NodeClass.
    """

    nodeclaim: str
    nodeclaim_uid: str
    capacity_type: str
    overrides: tuple[FleetOverride, ...]
    tags: Mapping[str, str]
    context: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetError:
    """One entry of a CreateFleet response's ``Errors``."""

    code: str
    message: str
    capacity_type: str
    instance_type: str = ""
    zone: str = ""
    subnet_id: str = ""
    reservation_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetOutcome:
    """What one CreateFleet call launched and what failed."""

    instances: tuple[Instance, ...] = ()
    errors: tuple[FleetError, ...] = ()


def create_fleet_input(request: FleetRequest, count: int = 1) -> dict[str, Any]:
    """The CreateFleet parameters of a request for ``count`` instances (golden-tested)."""
    by_template: dict[str, list[dict[str, Any]]] = {}
    for override in request.overrides:
        by_template.setdefault(override.launch_template, []).append(
            {
                "InstanceType": override.instance_type,
                "SubnetId": override.subnet_id,
                "ImageId": override.image_id,
                "AvailabilityZone": override.zone,
                "Priority": override.price,
            }
        )
    tags = to_tag_list(request.tags)
    params: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": client_token(
            request.nodeclaim_uid, request.nodeclaim, request.capacity_type
        ),
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": overrides,
            }
            for name, overrides in by_template.items()
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": _target_capacity_type(request),
        },
        "TagSpecifications": [
            {"ResourceType": resource, "Tags": tags} for resource in _LAUNCH_TAG_RESOURCES
        ],
    }
    if request.capacity_type == CAPACITY_TYPE_SPOT:
        params["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif _target_capacity_type(request) != _CAPACITY_BLOCK:
        params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    if request.context:
        params["Context"] = request.context
    return params


def _target_capacity_type(request: FleetRequest) -> str:
    """Karpenter's ``DefaultTargetCapacityType`` (reserved: per reservation kind).

    ODCRs launch as ``on-demand`` (the launch template targets the reservation), Capacity
    Blocks as ``capacity-block``.
    """
    if request.capacity_type != CAPACITY_TYPE_RESERVED:
        return request.capacity_type
    if any(o.reservation_type == _CAPACITY_BLOCK for o in request.overrides):
        return _CAPACITY_BLOCK
    return CAPACITY_TYPE_ON_DEMAND


def _reservation_id(raw: InstanceTypeDef) -> str | None:
    """The reservation an instance runs in, when it was launched only into reservations."""
    preference = raw.get("CapacityReservationSpecification", {}).get(
        "CapacityReservationPreference"
    )
    reservation = raw.get("CapacityReservationId")
    return reservation if reservation and preference == _RESERVATIONS_ONLY else None


def _capacity_type(raw: InstanceTypeDef) -> str:
    # moto sets InstanceLifecycle but no SpotInstanceRequestId; AWS sets both
    if raw.get("InstanceLifecycle") == "spot" or raw.get("SpotInstanceRequestId"):
        return CAPACITY_TYPE_SPOT
    if _reservation_id(raw) is not None:
        return CAPACITY_TYPE_RESERVED
    return CAPACITY_TYPE_ON_DEMAND


def _instance(raw: InstanceTypeDef) -> Instance:
    reservation = _reservation_id(raw)
    return Instance(
        reservation_id=reservation,
        reservation_type=(
            _CAPACITY_BLOCK if raw.get("InstanceLifecycle") == _CAPACITY_BLOCK else "default"
        )
        if reservation
        else None,
        id=raw.get("InstanceId", ""),
        instance_type=raw.get("InstanceType", ""),
        zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
        capacity_type=_capacity_type(raw),
        image_id=raw.get("ImageId", ""),
        state=raw.get("State", {}).get("Name", ""),
        launch_time=raw.get("LaunchTime"),
        subnet_id=raw.get("SubnetId", ""),
        security_group_ids=tuple(g.get("GroupId", "") for g in raw.get("SecurityGroups", [])),
        tags={t.get("Key", ""): t.get("Value", "") for t in raw.get("Tags", [])},
    )


def parse_fleet_response(request: FleetRequest, response: CreateFleetResultTypeDef) -> FleetOutcome:
    """Instances and errors of a CreateFleet response, zones taken from the overrides."""
    zone_of_subnet = {o.subnet_id: o.zone for o in request.overrides}
    image_of = {(o.instance_type, o.zone): o.image_id for o in request.overrides}
    reserved = request.capacity_type == CAPACITY_TYPE_RESERVED
    reservation_of = {(o.instance_type, o.zone): o for o in request.overrides}

    def lifecycle_type(lifecycle: str) -> str:
        if reserved:
            return CAPACITY_TYPE_RESERVED
        return CAPACITY_TYPE_SPOT if lifecycle == "spot" else CAPACITY_TYPE_ON_DEMAND

    instances: list[Instance] = []
    for entry in response.get("Instances", []):
        override = entry.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        subnet = override.get("SubnetId", "")
        zone = override.get("AvailabilityZone") or zone_of_subnet.get(subnet, "")
        instance_type = entry.get("InstanceType") or override.get("InstanceType", "")
        lifecycle = entry.get("Lifecycle", request.capacity_type)
        target = reservation_of.get((instance_type, zone)) if reserved else None
        instances.extend(
            Instance(
                id=instance_id,
                instance_type=instance_type,
                zone=zone,
                capacity_type=lifecycle_type(lifecycle),
                reservation_id=target.reservation_id if target else None,
                reservation_type=target.reservation_type if target else None,
                image_id=override.get("ImageId") or image_of.get((instance_type, zone), ""),
                state="pending",
                subnet_id=subnet,
                tags=request.tags,
            )
            for instance_id in entry.get("InstanceIds", [])
        )
    errors = []
    for raw in response.get("Errors", []):
        override = raw.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        subnet = override.get("SubnetId", "")
        lifecycle = raw.get("Lifecycle", request.capacity_type)
        instance_type = override.get("InstanceType", "")
        zone = override.get("AvailabilityZone") or zone_of_subnet.get(subnet, "")
        target = reservation_of.get((instance_type, zone)) if reserved else None
        errors.append(
            FleetError(
                code=raw.get("ErrorCode", ""),
                message=raw.get("ErrorMessage", ""),
                capacity_type=lifecycle_type(lifecycle),
                instance_type=instance_type,
                zone=zone,
                subnet_id=subnet,
                reservation_id=target.reservation_id if target else None,
            )
        )
    return FleetOutcome(instances=tuple(instances), errors=tuple(errors))


@dataclass(slots=True, kw_only=True)
class InstanceProvider:
    """Launches, finds and terminates this cluster's instances.

    What ``get`` and ``list_instances`` learn of an instance answers ``get`` for
    ``INSTANCES_TTL`` (Karpenter's AWS provider caches instances the same way) and drift checks
    for ``INSTANCES_DRIFT_TTL``, so that the drift checks of every node do not each cost a
    DescribeInstances call; ``get(skip_cache=True)`` asks EC2 afresh. A list forgets every
    instance it did not find.
    """

    ec2: Ec2Api
    caller: Caller
    cluster: str
    timer: Timer = time.monotonic
    _known: TtlCache[str, Instance] = field(init=False)

    def __post_init__(self) -> None:
        self._known = TtlCache(max(INSTANCES_TTL, INSTANCES_DRIFT_TTL), self.timer)

    def launch(self, request: FleetRequest, count: int = 1) -> FleetOutcome:
        """One CreateFleet call for ``count`` instances.

        Raises:
            AwsError: the call itself failed (classified).
        """
        response = self.caller.call(
            f"launching nodeclaim {request.nodeclaim}",
            self.ec2.create_fleet,
            **create_fleet_input(request, count),
        )
        return parse_fleet_response(request, response)

    def _describe(self, action: str, **kwargs: object) -> list[Instance]:
        instances: list[Instance] = []
        token: str | None = None
        while True:
            extra = {"NextToken": token} if token else {}
            response = self.caller.call(action, self.ec2.describe_instances, **kwargs, **extra)
            instances.extend(
                _instance(raw)
                for reservation in response.get("Reservations", [])
                for raw in reservation.get("Instances", [])
            )
            token = response.get("NextToken")
            if not token:
                return instances

    def _cluster_filters(self) -> list[dict[str, Any]]:
        return [
            {"Name": f"tag:{TAG_EKS_CLUSTER_NAME}", "Values": [self.cluster]},
            {"Name": f"tag:{cluster_tag(self.cluster)}", "Values": ["owned"]},
            {"Name": "tag-key", "Values": [TAG_NODEPOOL]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]

    def find_by_nodeclaim(self, nodeclaim: str) -> Instance | None:
        """A live (not shutting down) instance of this cluster tagged for ``nodeclaim``."""
        found = [
            instance
            for instance in self._describe(
                f"describing instances of nodeclaim {nodeclaim}",
                Filters=[
                    *self._cluster_filters(),
                    {"Name": f"tag:{TAG_NODECLAIM}", "Values": [nodeclaim]},
                ],
            )
            if instance.state != "shutting-down"
        ]
        return min(found, key=lambda i: i.id) if found else None

    def get(
        self, instance_id: str, *, skip_cache: bool = False, within: timedelta = INSTANCES_TTL
    ) -> Instance | None:
        """The instance if it is live and this cluster's, else None.

        A live instance seen ``within`` that long (``INSTANCES_TTL``, at most
        ``INSTANCES_DRIFT_TTL``) is answered from what was seen, unless ``skip_cache``.
        """
        if not skip_cache and (known := self._known.get(instance_id, within=within)) is not None:
            return known
        found = self._describe(
            f"describing instance {instance_id}",
            Filters=[{"Name": "instance-id", "Values": [instance_id]}],
        )
        for instance in found:
            if instance.state in LIVE_STATES and is_owned_by(instance.tags, self.cluster):
                self._known.set(instance_id, instance)
                return instance
        self._known.discard(instance_id)
        return None

    def list_instances(self) -> Sequence[Instance]:
        """Every live instance carrying this cluster's tags (each one remembered)."""
        instances = [
            instance
            for instance in self._describe(
                "listing instances", Filters=self._cluster_filters(), MaxResults=1000
            )
            if is_owned_by(instance.tags, self.cluster)
        ]
        self._known.retain_only({instance.id for instance in instances})
        for instance in instances:
            self._known.set(instance.id, instance)
        return instances

    def terminate(self, instance_id: str) -> None:
        """Terminate one instance (the caller checked ownership); it is forgotten."""
        self._known.discard(instance_id)
        self.caller.call(
            f"terminating instance {instance_id}",
            self.ec2.terminate_instances,
            InstanceIds=[instance_id],
        )

    def tag(self, instance_id: str, tags: Mapping[str, str]) -> None:
        """Add tags to an instance."""
        self.caller.call(
            f"tagging instance {instance_id}",
            self.ec2.create_tags,
            Resources=[instance_id],
            Tags=to_tag_list(tags),
        )
