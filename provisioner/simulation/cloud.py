"""The simulated AWS account: moto in process, seeded like an EKS cluster's account.

:class:`MotoCloud` resets and seeds moto's backends (moto's ids come from its seeded random
source) and answers the account's boto3 clients from them in process: each client signs and
serialises every request as against AWS, and a ``before-send`` hook hands the prepared HTTP
request to moto's dispatcher (the one ``mock_aws`` and moto's server use) instead of a socket,
so no call ever leaves the process and none pays a loopback round trip (a request moto does not
serve raises). It prepares what Karpenter's
getting-started template leaves in an account: a VPC with one subnet per zone and a security
group tagged ``karpenter.sh/discovery: <cluster>``, EKS-optimised AMIs behind the public SSM
parameters (seeded into moto's backends, ``testing-tools.md`` §2), the node IAM roles, and the
interruption queue fed by the EventBridge rules of ``iam.interruption``.

The controllers get boto3 clients from one session whose botocore event hooks
(``testing-tools.md`` §3) do two things:

* **Capacity outages.** ``provide-client-params`` removes the CreateFleet overrides an active
  outage covers, ``before-call`` answers an empty fleet when none is left (moto is never asked),
  and ``after-call`` appends an ``InsufficientInstanceCapacity`` error per removed override, the
  way EC2 reports them. Nothing leaks: moto launches only from surviving pools.
* **The record.** ``after-call`` of CreateFleet and TerminateInstances notes, in virtual time,
  every instance launched and terminated; the kubelet and the report use it. The instances
  themselves are always read back from moto.
* **Capacity reservations** (moto has no DescribeCapacityReservations): the scenario's
  reservations are answered by ``before-call``; a CreateFleet whose launch template targets one
  (``CapacityReservationSpecification``) launches only while the reservation has room and has
  not ended (else ``ReservationCapacityExceeded`` per override, as EC2 reports it), and
  DescribeInstances shows such instances with their ``CapacityReservationId``.
* **Terminated instances fade.** EC2 shows a terminated instance for about an hour, then
  DescribeInstances no longer does; moto keeps every one forever, so every DescribeInstances
  (garbage collection, drift, interruption) would grow with the run. An hour of virtual time
  after a termination the instance is removed from moto's backend (with its tags); what it looked
  like is kept for the report (:meth:`MotoCloud.instances_ever`).
* **moto's query parser.** moto tests whether a request carries a structure member by scanning
  every parameter for its prefix, per member, so a CreateFleet with hundreds of overrides took
  most of a second to parse; while the account runs, :mod:`provisioner.simulation.motoquery`
  answers that test from the parameter names sorted once (same parse, same result).
* **moto's response serializer.** moto finds each member of a response object by trying
  candidate names from six alias rules, worked out again for every member of every object;
  while the account runs, :mod:`provisioner.simulation.motoserialize` keeps the candidates per
  object class, member and shape (same values picked, same response).
* **moto's tag lookups.** moto reads one resource's tags (for every instance it describes and
  every tag filter it applies) by matching a pattern against every tagged resource of the
  account, fleets and launch templates included, so each lookup grows with the run; the
  account's EC2 backend answers those lookups from its tag table directly (same rows, same
  order) and leaves every other tag query to moto.
* **Repeated EC2 reads.** Garbage collection, drift checks and the EC2NodeClass status ask
  the same ``Describe*`` questions again and again while nothing in EC2 changes; moto built
  and serialized each answer afresh. :mod:`provisioner.simulation.motoreads` keeps each
  answer until the next EC2 call that is not a ``Describe*`` (or an instance fades) and
  draws moto's request id for it as moto would, so runs stay the same.
* **What moto's CreateFleet leaves out.** moto does not give fleet instances the security
  groups of their launch template (``testing-tools.md`` §2); EC2 does, and drift detection
  compares them, so ``after-call`` applies them (``ModifyInstanceAttribute``).

Credentials are fake and passed explicitly; the process environment is never touched.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final
from unittest.mock import patch

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from cloudprovider.aws.ami import alias_parameters
from cloudprovider.aws.tags import TAG_NODECLAIM
from iam.interruption import EVENT_RULES
from provisioner.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
)
from provisioner.simulation import motoquery, motoserialize
from provisioner.simulation.motoreads import OK, PARSED_ACTIONS, ReadCache
from provisioner.simulation.timeline import Timeline

__all__ = [
    "ACCOUNT_ID",
    "KUBERNETES_VERSION",
    "TERMINATED_VISIBLE_FOR",
    "Launch",
    "MotoCloud",
    "Outage",
    "SimReservation",
    "capacity_type_of",
]

ACCOUNT_ID: Final = "123456789012"
"""moto's default account."""
KUBERNETES_VERSION: Final = "1.32"
"""The simulated cluster's Kubernetes minor (what the AMI aliases resolve for)."""
TERMINATED_VISIBLE_FOR: Final = 3600.0
"""Virtual seconds a terminated instance stays visible to DescribeInstances (EC2: about an hour)."""
EKS_AMI_OWNER: Final = "602401143452"
_FAKE_KEY: Final = "testing"
_ALIASES: Final = ("al2023@latest", "al2@latest", "bottlerocket@latest")
_VPC_CIDR: Final = "10.0.0.0/16"
_SUBNET_PREFIX: Final = 20
_ICE_CODE: Final = "InsufficientInstanceCapacity"
_ICE_MESSAGE: Final = "There is no capacity available that matches your request."
_THROTTLE_CODE: Final = "RequestLimitExceeded"
_THROTTLE_MESSAGE: Final = "Request limit exceeded."
_CONTEXT_KEY: Final = "jointer_simulation"
_RESERVATION_CODE: Final = "ReservationCapacityExceeded"
_RESERVATION_MESSAGE: Final = "Insufficient capacity in the targeted capacity reservation."
_RESERVATIONS_ONLY: Final = "capacity-reservations-only"
# One simulation at a time per process: moto's backends are process-wide.
_RUN_LOCK: Final = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class Outage:
    """Offerings whose launches fail for a while.

    Attributes:
        start: virtual second the outage begins.
        end: virtual second it ends.
        capacity_type: ``spot`` or ``on-demand``; None for both.
        instance_types: affected types; empty for all.
        zones: affected zones; empty for all.
    """

    start: float
    end: float
    capacity_type: str | None = None
    instance_types: frozenset[str] = frozenset()
    zones: frozenset[str] = frozenset()

    def covers(self, now: float, capacity_type: str, instance_type: str, zone: str) -> bool:
        """Whether a launch of this offering at ``now`` fails."""
        return (
            self.start <= now < self.end
            and self.capacity_type in {None, capacity_type}
            and (not self.instance_types or instance_type in self.instance_types)
            and (not self.zones or zone in self.zones)
        )


@dataclass(slots=True, kw_only=True)
class SimReservation:
    """A capacity reservation of the simulated account (ODCR or Capacity Block).

    Attributes:
        id: ``cr-...``.
        instance_type: the reserved type.
        zone: its zone.
        count: ``TotalInstanceCount``.
        reservation_type: ``default`` or ``capacity-block``.
        instance_match_criteria: ``open`` or ``targeted``.
        tags: its tags.
        end: virtual second it ends (None: never); its instances are terminated then.
        used: ids of the running instances launched into it.
    """

    id: str
    instance_type: str
    zone: str
    count: int
    reservation_type: str = "default"
    instance_match_criteria: str = "targeted"
    tags: Mapping[str, str] = field(default_factory=dict)
    end: float | None = None
    used: set[str] = field(default_factory=set)

    def active(self, now: float) -> bool:
        """Whether it can still be launched into."""
        return self.end is None or now < self.end

    @property
    def available(self) -> int:
        """Instances it still takes."""
        return max(self.count - len(self.used), 0)


@dataclass(slots=True, kw_only=True)
class Launch:
    """One instance as recorded when CreateFleet returned it."""

    instance_id: str
    at: float
    instance_type: str
    zone: str
    capacity_type: str
    terminated_at: float | None = None
    reservation_id: str | None = None


def capacity_type_of(instance: Mapping[str, Any]) -> str:
    """``spot``, ``on-demand`` or ``reserved`` from an EC2 instance.

    moto sets only ``InstanceLifecycle``; reservations come from the DescribeInstances hook.
    """
    if instance.get("InstanceLifecycle") == "spot" or instance.get("SpotInstanceRequestId"):
        return CAPACITY_TYPE_SPOT
    preference = instance.get("CapacityReservationSpecification", {}).get(
        "CapacityReservationPreference"
    )
    if instance.get("CapacityReservationId") and preference == _RESERVATIONS_ONLY:
        return CAPACITY_TYPE_RESERVED
    return CAPACITY_TYPE_ON_DEMAND


_PATTERN_CHARACTERS: Final = frozenset("*?[]\\")


def _describe_tags(
    backend: Any,
    scan: Callable[[dict[str, list[str]] | None], list[dict[str, str]]],
    filters: dict[str, list[str]] | None = None,
) -> list[dict[str, str]]:
    """The ``describe_tags`` of moto, a ``resource-id`` filter of one plain id answered directly.

    moto matches that id (a pattern anchored at both ends) against every tagged resource; only
    the resource itself can match, so its own tags, in their order, are the same answer.
    """
    ids = (filters or {}).get("resource-id") or []
    if (
        filters is None
        or set(filters) != {"resource-id"}
        or len(ids) != 1
        or _PATTERN_CHARACTERS & set(ids[0])
    ):
        return scan(filters)
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix  # noqa: PLC0415

    resource_id = ids[0]
    tags = backend.tags.get(resource_id) or {}
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [
        {"resource_id": resource_id, "key": key, "value": value, "resource_type": kind}
        for key, value in tags.items()
    ]


def _image_id(name: str) -> str:
    return "ami-0" + hashlib.sha256(name.encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Counters:
    fleet_calls: int = 0
    failed_fleets: int = 0
    ice_errors: int = 0
    throttled_calls: int = 0


@contextmanager
def _virtual_instance_times(timeline: Timeline) -> Iterator[None]:
    """Make moto stamp instances with virtual time (``LaunchTime``, state reasons) while open.

    moto reads the wall clock; the controllers read the virtual one. Garbage collection ages an
    instance by its ``LaunchTime`` (an orphan younger than 30 s is left to the launch still
    writing its NodeClaim); with the wall clock's stamps every instance looked launched months
    after the simulation's start, so no orphan was ever old enough to collect.
    """
    from moto.ec2.models import instances  # noqa: PLC0415 - moto is heavy

    def now() -> datetime:
        # moto keeps naive UTC datetimes
        return timeline.clock.now().astimezone(UTC).replace(tzinfo=None)

    with patch.object(instances, "utcnow", now):
        yield


class MotoCloud:
    """The simulated AWS account.

    Args:
        timeline: virtual time (outage windows and the record use it).
        region: the AWS region.
        cluster: the cluster name (discovery tags, queue name).
        zones: the zones to create subnets in (those moto knows are kept).
        seed: seeds moto's random ids.
    """

    def __init__(
        self,
        *,
        timeline: Timeline,
        region: str,
        cluster: str,
        zones: Iterable[str],
        seed: int,
        check_reads: bool = False,
    ) -> None:
        self.timeline = timeline
        self.region = region
        self.cluster = cluster
        self._wanted_zones = sorted(set(zones))
        self.seed = seed
        self.zones: list[str] = []
        self.subnets: dict[str, str] = {}
        self.queue_url = ""
        self.outages: list[Outage] = []
        self.launches: dict[str, Launch] = {}
        self.counters = _Counters()
        self.on_launch: list[Callable[[Launch], None]] = []
        self.on_terminate: list[Callable[[str], None]] = []
        self.on_stop: list[Callable[[str], None]] = []
        self.after_launch: Callable[[Launch], None] | None = None
        self.throttle_budget = 0
        """How many more EC2 calls of the controllers fail with ``RequestLimitExceeded``."""
        self._roles: set[str] = set()
        self._template_groups: dict[tuple[str, str], list[str]] = {}
        self.reservations: dict[str, SimReservation] = {}
        self._template_reservations: dict[str, str | None] = {}
        self._instance_reservations: dict[str, str] = {}
        self._faded: dict[str, dict[str, Any]] = {}
        self._stubber: Any = None
        self._reads: ReadCache | None = None
        self._check_reads = check_reads
        self._locked = False
        self._session: boto3.session.Session | None = None
        self._admin: dict[str, Any] = {}
        self._patches = ExitStack()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Reset and seed moto and build the account.

        Raises:
            RuntimeError: another simulation is running in this process.
        """
        from moto.core.botocore_stubber import BotocoreStubber  # noqa: PLC0415 - moto is heavy
        from moto.moto_api._internal import mock_random  # noqa: PLC0415
        from moto.moto_api._internal.models import moto_api_backend  # noqa: PLC0415

        if not _RUN_LOCK.acquire(blocking=False):
            raise RuntimeError("another simulation is running in this process")
        self._locked = True
        self._patches.enter_context(motoquery.indexed())
        self._patches.enter_context(motoserialize.memoized())
        self._patches.enter_context(_virtual_instance_times(self.timeline))
        stubber = BotocoreStubber()
        stubber.enabled = True
        self._stubber = stubber
        self._reads = ReadCache(stubber.process_request, check=self._check_reads)
        moto_api_backend.reset()
        self._create_backends()
        self._index_tags()
        mock_random.seed(self.seed)
        self._session = self._new_session()
        self._register_hooks(self._session)
        admin = self._new_session()
        self._admin = {name: self._client(admin, name) for name in ("ec2", "events", "iam")}
        self._seed_images()
        self._reads.forget()  # the images were written to moto's backend directly
        self._network()
        self._queue()

    def stop(self) -> None:
        """Stop answering (moto's state goes with the next reset)."""
        try:
            if self._stubber is not None:
                self._stubber.enabled = False
                self._stubber = None
                self._reads = None
        finally:
            if self._locked:
                self._locked = False
                self._patches.close()
                _RUN_LOCK.release()

    def _send(self, request: Any, **_: Any) -> AWSResponse:
        """``before-send``: moto answers the prepared request in process."""
        from moto.core.botocore_stubber import MockRawResponse  # noqa: PLC0415 - moto is heavy

        reads = self._reads
        if reads is None:
            raise RuntimeError("the simulated account is stopped")
        answer = reads(request)
        if answer is None:
            raise RuntimeError(f"the simulated account does not serve {request.url}")
        status, headers, body = answer
        return AWSResponse(request.url, status, headers, MockRawResponse(body))  # type: ignore[arg-type]

    @property
    def reads(self) -> ReadCache | None:
        """The EC2 answers kept between changes (None while stopped)."""
        return self._reads

    def _create_backends(self) -> None:
        """Create moto's backends before seeding, so their set-up draws no seeded randomness.

        Backends are built lazily on first use, and how much randomness building one draws
        depends on what the previous run left behind; seeding after they exist keeps a run's
        ids a function of its seed alone.
        """
        from moto.core.base_backend import BackendDict  # noqa: PLC0415
        from moto.ec2.models import ec2_backends  # noqa: PLC0415
        from moto.events.models import events_backends  # noqa: PLC0415
        from moto.iam.models import iam_backends  # noqa: PLC0415
        from moto.sqs.models import sqs_backends  # noqa: PLC0415
        from moto.ssm.models import ssm_backends  # noqa: PLC0415

        backends: tuple[BackendDict[Any], ...] = (
            ec2_backends,
            ssm_backends,
            sqs_backends,
            events_backends,
        )
        for backend in backends:
            backend[ACCOUNT_ID][self.region]
        iam_backends[ACCOUNT_ID]["aws"]

    def _index_tags(self) -> None:
        """Answer moto's one-resource tag lookups without scanning every tagged resource."""
        from moto.ec2.models import ec2_backends  # noqa: PLC0415 - moto is heavy

        backend: Any = ec2_backends[ACCOUNT_ID][self.region]
        # An attribute of this run's backend (moto builds new ones at the next reset).
        backend.describe_tags = partial(_describe_tags, backend, backend.describe_tags)

    def _new_session(self) -> boto3.session.Session:
        session = boto3.session.Session(
            aws_access_key_id=_FAKE_KEY,
            aws_secret_access_key=_FAKE_KEY,
            aws_session_token=_FAKE_KEY,
            region_name=self.region,
        )
        session.events.register("before-send", self._send)  # type: ignore[arg-type]
        return session

    def _client(self, session: boto3.session.Session, service: str) -> Any:
        return session.client(
            service,  # type: ignore[call-overload]
            region_name=self.region,
            config=Config(retries={"total_max_attempts": 1}, connect_timeout=10, read_timeout=120),
        )

    def client(self, service: str) -> Any:
        """A client for the controllers (outage hooks and the record apply to it)."""
        if self._session is None:
            raise RuntimeError("the simulated account is not started")
        return self._client(self._session, service)

    # -- seeding -----------------------------------------------------------------------------

    def _seed_images(self) -> None:
        from moto.ec2.models import ec2_backends  # noqa: PLC0415
        from moto.ec2.models.amis import Ami  # noqa: PLC0415
        from moto.ssm.models import Parameter, ssm_backends  # noqa: PLC0415

        ec2 = ec2_backends[ACCOUNT_ID][self.region]
        ssm = ssm_backends[ACCOUNT_ID][self.region]
        moment = self.timeline.start
        # The account's images are the EKS-optimised ones below; moto's catalogue of ~1,300
        # unrelated public images would only be scanned by every DescribeImages.
        ec2.amis.clear()
        for alias in _ALIASES:
            for parameter in alias_parameters(alias, KUBERNETES_VERSION):
                image_id = _image_id(parameter.name)
                arch = "arm64" if parameter.arch == "arm64" else "x86_64"
                name = parameter.name.removeprefix("/aws/service/").replace("/", "-")
                ec2.amis[image_id] = Ami(
                    ec2,
                    ami_id=image_id,
                    name=name,
                    description=f"EKS-optimised image behind {parameter.name}",
                    owner_id=EKS_AMI_OWNER,
                    public=True,
                    virtualization_type="hvm",
                    architecture=arch,
                    hypervisor="xen",
                    root_device_type="ebs",
                    root_device_name="/dev/xvda",
                    creation_date=moment,
                    region_name=self.region,
                )
                ssm._parameters[parameter.name].append(  # noqa: SLF001 - moto's seeding point
                    Parameter(  # type: ignore[abstract]
                        account_id=ACCOUNT_ID,
                        name=parameter.name,
                        value=image_id,
                        parameter_type="String",
                        description=None,
                        allowed_pattern=None,
                        keyid=None,
                        last_modified_date=moment,
                        version=1,
                        data_type="aws:ec2:image",
                    )
                )

    def _discovery_tags(self, resource_type: str) -> list[dict[str, Any]]:
        return [
            {
                "ResourceType": resource_type,
                "Tags": [{"Key": "karpenter.sh/discovery", "Value": self.cluster}],
            }
        ]

    def _network(self) -> None:
        ec2 = self._admin["ec2"]
        known = {
            zone["ZoneName"] for zone in ec2.describe_availability_zones()["AvailabilityZones"]
        }
        self.zones = [zone for zone in self._wanted_zones if zone in known] or sorted(known)
        vpc = ec2.create_vpc(CidrBlock=_VPC_CIDR)["Vpc"]["VpcId"]
        for index, zone in enumerate(self.zones):
            subnet = ec2.create_subnet(
                VpcId=vpc,
                CidrBlock=f"10.0.{index * 16}.0/{_SUBNET_PREFIX}",
                AvailabilityZone=zone,
                TagSpecifications=self._discovery_tags("subnet"),
            )["Subnet"]
            self.subnets[zone] = subnet["SubnetId"]
        ec2.create_security_group(
            GroupName=f"{self.cluster}-nodes",
            Description="nodes of the simulated cluster",
            VpcId=vpc,
            TagSpecifications=self._discovery_tags("security-group"),
        )

    def _queue(self) -> None:
        sqs = self.client("sqs")
        self.queue_url = sqs.create_queue(QueueName=self.cluster)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events = self._admin["events"]
        for rule in EVENT_RULES:
            name = f"{self.cluster}-{rule.logical_name}"
            events.put_rule(Name=name, EventPattern=json.dumps(rule.event_pattern()))
            events.put_targets(Rule=name, Targets=[{"Id": "1", "Arn": arn}])

    def ensure_role(self, name: str) -> None:
        """Create the IAM role ``name`` if it does not exist (an EC2NodeClass's ``spec.role``)."""
        if name in self._roles:
            return
        self._roles.add(name)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        self._admin["iam"].create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))

    # -- hooks -------------------------------------------------------------------------------

    def _register_hooks(self, session: boto3.session.Session) -> None:
        events = session.events
        events.register("provide-client-params.ec2.CreateFleet", self._remove_unavailable)
        events.register("before-call.ec2", self._throttle)
        events.register("before-call.ec2", self._kept_read)  # after a throttling answer
        events.register("after-call.ec2", self._keep_read)
        events.register("before-call.ec2.CreateFleet", self._short_circuit)
        events.register("after-call.ec2.CreateFleet", self._after_fleet)
        events.register("after-call.ec2.TerminateInstances", self._after_terminate)
        events.register(
            "provide-client-params.ec2.DescribeCapacityReservations", self._reservation_query
        )
        events.register("before-call.ec2.DescribeCapacityReservations", self._describe_reservations)
        events.register("after-call.ec2.DescribeInstances", self._after_describe_instances)

    def _remove_unavailable(
        self, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        now = self.timeline.now
        target = params["TargetCapacitySpecification"]
        capacity_type = target["DefaultTargetCapacityType"]
        wanted = int(target.get("TotalTargetCapacity", 1))
        removed: list[tuple[dict[str, Any], dict[str, Any]]] = []
        exceeded: list[tuple[dict[str, Any], dict[str, Any]]] = []
        configs = []
        reserved: str | None = None
        for config in params.get("LaunchTemplateConfigs", []):
            kept = []
            reservation = self._reservation_of(config["LaunchTemplateSpecification"])
            for override in config.get("Overrides", []):
                if reservation is not None:
                    if (
                        reservation.active(now)
                        and reservation.available >= wanted
                        and override.get("InstanceType") == reservation.instance_type
                        and override.get("AvailabilityZone") == reservation.zone
                    ):
                        kept.append(override)
                        reserved = reservation.id
                    else:
                        exceeded.append((config["LaunchTemplateSpecification"], override))
                elif any(
                    outage.covers(
                        now,
                        capacity_type,
                        override.get("InstanceType", ""),
                        override.get("AvailabilityZone", ""),
                    )
                    for outage in self.outages
                ):
                    removed.append((config["LaunchTemplateSpecification"], override))
                else:
                    kept.append(override)
            if kept:
                configs.append({**config, "Overrides": kept})
        state: dict[str, Any] = {
            "removed": removed,
            "exceeded": exceeded,
            "capacity_type": capacity_type,
            "reservation": reserved,
        }
        context[_CONTEXT_KEY] = state
        if reserved is not None and capacity_type == "capacity-block":
            # moto launches only spot and on-demand; a Capacity Block instance is on-demand to it
            params["TargetCapacitySpecification"] = {
                **target,
                "DefaultTargetCapacityType": "on-demand",
            }
        if not removed and not exceeded:
            return
        if configs:
            params["LaunchTemplateConfigs"] = configs
        else:
            state["empty"] = True

    def _throttle(self, context: dict[str, Any], **_: Any) -> Any:
        """Answer ``RequestLimitExceeded`` (HTTP 503) while a throttling burst lasts."""
        if self.throttle_budget <= 0:
            return None
        self.throttle_budget -= 1
        self.counters.throttled_calls += 1
        context.setdefault(_CONTEXT_KEY, {})["throttled"] = True
        return AWSResponse("", 503, {}, None), {  # type: ignore[arg-type]
            "Error": {"Code": _THROTTLE_CODE, "Message": _THROTTLE_MESSAGE},
            "ResponseMetadata": {"HTTPStatusCode": 503},
        }

    def _kept_read(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> Any:
        """``before-call``: a repeated read's kept parsed answer (``ReadCache.parsed``)."""
        reads = self._reads
        if reads is None or model.name not in PARSED_ACTIONS:
            return None
        if context.get(_CONTEXT_KEY, {}).get("throttled"):
            return None
        body = params.get("body")
        if not isinstance(body, dict):
            return None
        key = (model.name, params.get("url"), tuple(sorted(body.items())))
        context.setdefault(_CONTEXT_KEY, {})["read"] = key
        answer = reads.parsed(key)
        if answer is None:
            return None
        headers = answer["ResponseMetadata"]["HTTPHeaders"]
        answer["ResponseMetadata"]["HTTPStatusCode"] = OK
        return AWSResponse(str(params.get("url")), OK, headers, None), answer

    def _keep_read(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        """``after-call``: keep a read's parsed answer (``ReadCache.keep_parsed``)."""
        key = context.get(_CONTEXT_KEY, {}).get("read")
        reads = self._reads
        if key is None or reads is None or getattr(http_response, "raw", None) is None:
            return  # not a kept kind of read, or answered from the kept answer itself
        if getattr(http_response, "status_code", 0) == OK:
            reads.keep_parsed(key, parsed)

    def _short_circuit(self, context: dict[str, Any], **_: Any) -> Any:
        if context.get(_CONTEXT_KEY, {}).get("throttled"):
            return None
        if context.get(_CONTEXT_KEY, {}).get("empty"):
            return AWSResponse("", 200, {}, None), {  # type: ignore[arg-type]
                "FleetId": "fleet-00000000-0000-0000-0000-000000000000",
                "Instances": [],
                "Errors": [],
            }
        return None

    def _after_fleet(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        state = context.get(_CONTEXT_KEY) or {}
        if state.get("throttled"):
            return
        errors = parsed.setdefault("Errors", [])
        for spec, override in state.get("removed", []):
            self.counters.ice_errors += 1
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": spec,
                        "Overrides": override,
                    },
                    "Lifecycle": state["capacity_type"],
                    "ErrorCode": _ICE_CODE,
                    "ErrorMessage": _ICE_MESSAGE,
                }
            )
        for spec, override in state.get("exceeded", []):
            errors.append(
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": spec,
                        "Overrides": override,
                    },
                    "Lifecycle": "on-demand",
                    "ErrorCode": _RESERVATION_CODE,
                    "ErrorMessage": _RESERVATION_MESSAGE,
                }
            )
        reservation = self.reservations.get(state.get("reservation") or "")
        self.counters.fleet_calls += 1
        launched: list[Launch] = []
        for entry in parsed.get("Instances", []):
            override = entry.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
            for instance_id in entry.get("InstanceIds", []):
                launch = Launch(
                    instance_id=instance_id,
                    at=self.timeline.now,
                    instance_type=entry.get("InstanceType") or override.get("InstanceType", ""),
                    zone=override.get("AvailabilityZone", ""),
                    capacity_type=CAPACITY_TYPE_RESERVED
                    if reservation is not None
                    else CAPACITY_TYPE_SPOT
                    if entry.get("Lifecycle") == "spot"
                    else CAPACITY_TYPE_ON_DEMAND,
                    reservation_id=reservation.id if reservation is not None else None,
                )
                if reservation is not None:
                    reservation.used.add(instance_id)
                    self._instance_reservations[instance_id] = reservation.id
                self.launches.setdefault(instance_id, launch)
                launched.append(launch)
        if not launched:
            self.counters.failed_fleets += 1
        self._apply_template_groups(parsed)
        for launch in launched:
            for listener in self.on_launch:
                listener(launch)
        if self.after_launch is not None:
            for launch in launched:
                self.after_launch(launch)

    def _apply_template_groups(self, parsed: dict[str, Any]) -> None:
        ec2 = self._admin["ec2"]
        for entry in parsed.get("Instances", []):
            spec = entry.get("LaunchTemplateAndOverrides", {}).get(
                "LaunchTemplateSpecification", {}
            )
            key = (spec.get("LaunchTemplateId", ""), str(spec.get("Version", "")))
            groups = self._template_groups.get(key)
            if groups is None:
                versions = ec2.describe_launch_template_versions(
                    LaunchTemplateId=key[0], Versions=[key[1]]
                )["LaunchTemplateVersions"]
                data = versions[0].get("LaunchTemplateData", {}) if versions else {}
                groups = list(data.get("SecurityGroupIds") or [])
                for interface in data.get("NetworkInterfaces") or []:
                    groups.extend(interface.get("Groups") or [])
                self._template_groups[key] = groups
            if groups:
                for instance_id in entry.get("InstanceIds", []):
                    ec2.modify_instance_attribute(InstanceId=instance_id, Groups=groups)

    def _after_terminate(self, parsed: dict[str, Any], **_: Any) -> None:
        for entry in parsed.get("TerminatingInstances", []):
            self.record_termination(entry.get("InstanceId", ""))

    def record_termination(self, instance_id: str) -> None:
        """Note that ``instance_id`` was terminated now (the first time only)."""
        reservation = self.reservations.get(self._instance_reservations.get(instance_id, ""))
        if reservation is not None:
            reservation.used.discard(instance_id)
        launch = self.launches.get(instance_id)
        if launch is not None and launch.terminated_at is None:
            launch.terminated_at = self.timeline.now
            for listener in self.on_terminate:
                listener(instance_id)
        if instance_id:
            self.timeline.after(
                TERMINATED_VISIBLE_FOR,
                partial(self._fade, instance_id),
                key=("ec2-fade", instance_id),
            )

    def _fade(self, instance_id: str) -> None:
        """Remove a terminated instance from moto's backend, as EC2 stops showing it."""
        from moto.ec2.models import ec2_backends  # noqa: PLC0415 - moto is heavy

        ec2 = ec2_backends[ACCOUNT_ID][self.region]
        for reservation_id, reservation in list(ec2.reservations.items()):
            if not any(i.id == instance_id for i in reservation.instances):
                continue
            if any(i.id == instance_id and i.state != "terminated" for i in reservation.instances):
                return
            self._faded[instance_id] = self.describe([instance_id])[0]
            if self._reads is not None:
                self._reads.forget()
            reservation.instances = [i for i in reservation.instances if i.id != instance_id]
            if not reservation.instances:
                del ec2.reservations[reservation_id]
            ec2.tags.pop(instance_id, None)
            return

    # -- capacity reservations ----------------------------------------------------------------

    def add_reservation(self, reservation: SimReservation) -> None:
        """Make a capacity reservation exist in the account."""
        self.reservations[reservation.id] = reservation

    def _reservation_of(self, spec: Mapping[str, Any]) -> SimReservation | None:
        """The reservation a launch template targets (by name, ``$Latest``), if any."""
        name = str(spec.get("LaunchTemplateName", ""))
        if not name or not self.reservations:
            return None
        if name not in self._template_reservations:
            versions = self._admin["ec2"].describe_launch_template_versions(
                LaunchTemplateName=name, Versions=["$Latest"]
            )["LaunchTemplateVersions"]
            data = versions[0].get("LaunchTemplateData", {}) if versions else {}
            target = data.get("CapacityReservationSpecification", {}).get(
                "CapacityReservationTarget", {}
            )
            self._template_reservations[name] = target.get("CapacityReservationId")
        found = self._template_reservations[name]
        return self.reservations.get(found) if found else None

    def _reservation_query(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_CONTEXT_KEY] = dict(params)  # before-call sees the serialised request only

    def _describe_reservations(self, context: dict[str, Any], **_: Any) -> Any:
        params = context.get(_CONTEXT_KEY) or {}
        now = self.timeline.now
        ids = set(params.get("CapacityReservationIds") or [])
        filters = {f["Name"]: set(f["Values"]) for f in params.get("Filters") or []}
        found = []
        for reservation in sorted(self.reservations.values(), key=lambda r: r.id):
            state = "active" if reservation.active(now) else "expired"
            fields = {
                "state": state,
                "owner-id": ACCOUNT_ID,
                "instance-match-criteria": reservation.instance_match_criteria,
                "instance-type": reservation.instance_type,
                "availability-zone": reservation.zone,
            }
            if ids and reservation.id not in ids:
                continue
            if not all(
                (name == "tag-key" and values & set(reservation.tags))
                or (name.startswith("tag:") and reservation.tags.get(name[4:]) in values)
                or (name in fields and fields[name] in values)
                for name, values in filters.items()
            ):
                continue
            entry: dict[str, Any] = {
                "CapacityReservationId": reservation.id,
                "OwnerId": ACCOUNT_ID,
                "InstanceType": reservation.instance_type,
                "InstancePlatform": "Linux/UNIX",
                "AvailabilityZone": reservation.zone,
                "Tenancy": "default",
                "TotalInstanceCount": reservation.count,
                "AvailableInstanceCount": reservation.available,
                "State": state,
                "InstanceMatchCriteria": reservation.instance_match_criteria,
                "ReservationType": reservation.reservation_type,
                "Tags": [{"Key": k, "Value": v} for k, v in sorted(reservation.tags.items())],
            }
            if reservation.end is not None:
                entry["EndDate"] = self.timeline.at_seconds(reservation.end)
            found.append(entry)
        return AWSResponse("", 200, {}, None), {  # type: ignore[arg-type]
            "CapacityReservations": found
        }

    def _after_describe_instances(self, parsed: dict[str, Any], **_: Any) -> None:
        if not self._instance_reservations:
            return
        for group in parsed.get("Reservations", []):
            for instance in group.get("Instances", []):
                self._mark_reserved(instance)

    def _mark_reserved(self, instance: dict[str, Any]) -> None:
        found = self._instance_reservations.get(str(instance.get("InstanceId", "")))
        reservation = self.reservations.get(found or "")
        if reservation is None:
            return
        instance["CapacityReservationId"] = reservation.id
        instance["CapacityReservationSpecification"] = {
            "CapacityReservationPreference": _RESERVATIONS_ONLY,
            "CapacityReservationTarget": {"CapacityReservationId": reservation.id},
        }
        if reservation.reservation_type == "capacity-block":
            instance["InstanceLifecycle"] = "capacity-block"

    # -- what the simulation does to the account ----------------------------------------------

    def instances_ever(self) -> list[dict[str, Any]]:
        """Every instance the account ever had: moto's, and those faded from it (the report)."""
        found = {str(i.get("InstanceId")): i for i in self.describe()}
        for instance_id, instance in self._faded.items():
            found.setdefault(instance_id, instance)
        return [found[k] for k in sorted(found)]

    def describe(self, instance_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Instances from moto (all it shows, recently terminated ones too, when no ids are given).

        Raises:
            botocore.exceptions.ClientError: an id is unknown (``InvalidInstanceID.NotFound``).
        """
        ec2 = self._admin["ec2"]
        kwargs: dict[str, Any] = {}
        if instance_ids is not None:
            ids = sorted(set(instance_ids))
            if not ids:
                return []
            kwargs["InstanceIds"] = ids
        reservations = ec2.describe_instances(**kwargs)["Reservations"]
        found = [i for r in reservations for i in r["Instances"]]
        for instance in found:
            self._mark_reserved(instance)
        return sorted(found, key=lambda i: str(i.get("InstanceId")))

    def run_instance(
        self,
        *,
        image_id: str,
        instance_type: str,
        zone: str,
        security_group_ids: Sequence[str],
        tags: Mapping[str, str],
        capacity_type: str,
    ) -> dict[str, Any]:
        """Launch one instance outside Jointer (as another controller did) and record it."""
        params: dict[str, Any] = {
            "ImageId": image_id,
            "InstanceType": instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "SubnetId": self.subnets[zone],
            "SecurityGroupIds": list(security_group_ids),
            "TagSpecifications": [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        }
        if capacity_type == CAPACITY_TYPE_SPOT:
            params["InstanceMarketOptions"] = {"MarketType": "spot"}
        instance: dict[str, Any] = self._admin["ec2"].run_instances(**params)["Instances"][0]
        instance_id = str(instance["InstanceId"])
        self.launches[instance_id] = Launch(
            instance_id=instance_id,
            at=self.timeline.now,
            instance_type=instance_type,
            zone=zone,
            capacity_type=capacity_type,
        )
        return instance

    def terminate(self, instance_id: str) -> None:
        """Terminate an instance as EC2 does after a spot interruption warning."""
        self._admin["ec2"].terminate_instances(InstanceIds=[instance_id])
        self.record_termination(instance_id)

    def send_spot_interruption(self, instance_id: str) -> None:
        """Publish a spot interruption warning through EventBridge (delivered to the queue)."""
        moment = self.timeline.at_seconds(self.timeline.now)
        detail = {"instance-id": instance_id, "instance-action": "terminate"}
        self._admin["events"].put_events(
            Entries=[
                {
                    "Source": "aws.ec2",
                    "DetailType": "EC2 Spot Instance Interruption Warning",
                    "Detail": json.dumps(detail),
                    "Resources": [f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:instance/{instance_id}"],
                    "Time": moment,
                }
            ]
        )

    def send_instance_event(self, instance_id: str, detail_type: str, **detail: str) -> None:
        """Publish an EC2 event about ``instance_id`` through EventBridge (rebalance, state)."""
        moment = self.timeline.at_seconds(self.timeline.now)
        self._admin["events"].put_events(
            Entries=[
                {
                    "Source": "aws.ec2",
                    "DetailType": detail_type,
                    "Detail": json.dumps({"instance-id": instance_id, **detail}),
                    "Resources": [f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:instance/{instance_id}"],
                    "Time": moment,
                }
            ]
        )

    def stop_instance(self, instance_id: str) -> None:
        """Stop an instance outside Jointer (its state-change event is the caller's to send)."""
        self._admin["ec2"].stop_instances(InstanceIds=[instance_id])
        for listener in self.on_stop:
            listener(instance_id)

    def nodeclaim_of(self, instance: Mapping[str, Any]) -> str:
        """The NodeClaim an instance's tags name ("" when untagged)."""
        tags = {t.get("Key"): t.get("Value") for t in instance.get("Tags", [])}
        return str(tags.get(TAG_NODECLAIM) or "")
