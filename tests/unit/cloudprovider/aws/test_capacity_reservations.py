"""Capacity reservations: DescribeCapacityReservations (botocore Stubber: moto has no such call),
reserved offerings, the reserved launch shape, and the reservation filters of a launch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.capacityreservation import (
    CapacityReservation,
    CapacityReservationProvider,
    describe_filters,
    reserved_offering,
)
from cloudprovider.aws.cloudprovider import _reserved_pool
from cloudprovider.aws.errors import AwsError
from cloudprovider.aws.instance import (
    FleetOverride,
    FleetRequest,
    _instance,
    create_fleet_input,
    parse_fleet_response,
)
from cloudprovider.aws.launchtemplate import LaunchTemplateSpec, launch_template_data
from cloudprovider.aws.nodeclass import CapacityReservationSelectorTerm, parse_nodeclass
from cloudprovider.aws.nodeclassstatus import (
    ConditionState,
    NodeClassCondition,
    ResolvedNodeClass,
)
from cloudprovider.aws.retry import Caller, RetryPolicy
from cloudprovider.instancetype import InstanceType, Offering
from cloudprovider.selection import Candidate, offering_labels

NOW = datetime(2026, 1, 1, tzinfo=UTC)
END = NOW + timedelta(hours=2)


def ec2() -> Any:
    return boto3.client(
        "ec2",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - fake credentials for the stub
    )


def raw_reservation(ident: str, **extra: Any) -> dict[str, Any]:
    body = {
        "CapacityReservationId": ident,
        "OwnerId": "123456789012",
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "InstanceMatchCriteria": "targeted",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "State": "active",
    }
    body.update(extra)
    return body


def term(**fields: Any) -> CapacityReservationSelectorTerm:
    return CapacityReservationSelectorTerm.model_validate(fields)


def test_an_id_term_asks_for_that_reservation_and_other_terms_filter() -> None:
    assert describe_filters(term(id="cr-0123")) == {
        "CapacityReservationIds": ["cr-0123"],
        "Filters": [{"Name": "state", "Values": ["active"]}],
    }
    assert describe_filters(
        term(tags={"team": "ml", "any": "*"}, ownerID="123456789012", instanceMatchCriteria="open")
    ) == {
        "Filters": [
            {"Name": "state", "Values": ["active"]},
            {"Name": "tag-key", "Values": ["any"]},
            {"Name": "tag:team", "Values": ["ml"]},
            {"Name": "owner-id", "Values": ["123456789012"]},
            {"Name": "instance-match-criteria", "Values": ["open"]},
        ]
    }


def test_reservations_are_described_per_term_merged_and_counted_down() -> None:
    client = ec2()
    provider = CapacityReservationProvider(ec2=client, caller=Caller())
    with Stubber(client) as stub:
        stub.add_response(
            "describe_capacity_reservations",
            {
                "CapacityReservations": [raw_reservation("cr-0b")],
                "NextToken": "page-2",
            },
            {
                "CapacityReservationIds": ["cr-0b"],
                "Filters": [{"Name": "state", "Values": ["active"]}],
            },
        )
        stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": []},
            {
                "CapacityReservationIds": ["cr-0b"],
                "Filters": [{"Name": "state", "Values": ["active"]}],
                "NextToken": "page-2",
            },
        )
        stub.add_response(
            "describe_capacity_reservations",
            {
                "CapacityReservations": [
                    raw_reservation("cr-0b"),
                    raw_reservation(
                        "cr-0a",
                        ReservationType="capacity-block",
                        EndDate=END,
                        AvailableInstanceCount=1,
                    ),
                ]
            },
            {
                "Filters": [
                    {"Name": "state", "Values": ["active"]},
                    {"Name": "tag:team", "Values": ["ml"]},
                ]
            },
        )
        found = provider.resolve([term(id="cr-0b"), term(tags={"team": "ml"})])
        stub.assert_no_pending_responses()
        assert provider.resolve([term(id="cr-0b"), term(tags={"team": "ml"})]) == found  # cached

    block, odcr = found
    assert (block.id, block.is_block, block.end_time, block.available) == ("cr-0a", True, END, 1)
    assert (odcr.id, odcr.is_block, odcr.instance_match_criteria) == ("cr-0b", False, "targeted")
    provider.mark_launched("cr-0b")
    assert provider.available(odcr) == 1
    provider.mark_launched("cr-0b")
    assert provider.available(odcr) == 0
    provider.mark_unavailable("cr-0a")  # ReservationCapacityExceeded
    assert provider.available(block) == 0


def test_a_throttled_describe_is_a_classified_error() -> None:
    client = ec2()
    provider = CapacityReservationProvider(
        ec2=client, caller=Caller(policy=RetryPolicy(max_attempts=1), sleep=lambda _: None)
    )
    with Stubber(client) as stub:
        stub.add_client_error("describe_capacity_reservations", "UnauthorizedOperation")
        with pytest.raises(AwsError) as raised:
            provider.resolve([term(id="cr-0b")])
    assert "describing capacity reservations" in str(raised.value)


def test_no_terms_no_call() -> None:
    client = ec2()
    with Stubber(client):  # any call would fail: nothing is stubbed
        assert CapacityReservationProvider(ec2=client, caller=Caller()).resolve(None) == ()


def test_reserved_offerings_are_priced_as_karpenter_prices_them() -> None:
    odcr = CapacityReservation(id="cr-1", instance_type="p5.48xlarge", zone="us-east-1a")
    block = CapacityReservation(
        id="cr-2", instance_type="p5.48xlarge", zone="us-east-1a", reservation_type="capacity-block"
    )
    offering = reserved_offering(odcr, 55.04, 2)
    assert offering.capacity_type == "reserved"
    assert offering.price == pytest.approx(55.04 / 10_000_000)
    assert (offering.reservation_id, offering.reservation_capacity, offering.available) == (
        "cr-1",
        2,
        True,
    )
    assert reserved_offering(block, 55.04, 1).price == 0.0  # a Capacity Block is paid up front
    assert reserved_offering(odcr, 55.04, 0).available is False


def test_a_capacity_block_is_expiring_40_minutes_before_its_end() -> None:
    block = CapacityReservation(
        id="cr-2",
        instance_type="p5.48xlarge",
        zone="us-east-1a",
        reservation_type="capacity-block",
        end_time=END,
    )
    assert not block.expiring(END - timedelta(minutes=41))
    assert block.expiring(END - timedelta(minutes=40))
    nodeclass = parse_nodeclass(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "role": "r",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
                "capacityReservationSelectorTerms": [{"id": "cr-2"}],
            },
        }
    )
    resolved = ResolvedNodeClass(
        nodeclass=nodeclass,
        capacity_reservations=(block,),
        conditions=(NodeClassCondition("Ready", ConditionState.TRUE, "Ready"),),
    )
    (status,) = resolved.to_status(END - timedelta(minutes=30)).capacity_reservations or []
    assert (status.id, status.reservation_type, status.state) == (
        "cr-2",
        "capacity-block",
        "expiring",
    )
    assert status.end_time == END


def test_a_reserved_launch_targets_the_reservation_in_its_launch_template() -> None:
    nodeclass = parse_nodeclass(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "role": "r",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}],
            },
        }
    )
    spec = LaunchTemplateSpec(
        nodeclass=nodeclass,
        image_id="ami-1",
        user_data="",
        security_group_ids=("sg-1",),
        instance_profile="p",
        tags={},
        capacity_reservation_id="cr-2",
        capacity_reservation_type="capacity-block",
    )
    data = launch_template_data(spec)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-2"},
    }
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    plain = launch_template_data(
        LaunchTemplateSpec(
            nodeclass=nodeclass,
            image_id="ami-1",
            user_data="",
            security_group_ids=("sg-1",),
            instance_profile="p",
            tags={},
        )
    )
    assert "CapacityReservationSpecification" not in plain


def fleet(kind: str) -> FleetRequest:
    return FleetRequest(
        nodeclaim="gpu-abcde",
        nodeclaim_uid="uid",
        capacity_type="reserved",
        overrides=(
            FleetOverride(
                instance_type="p5.48xlarge",
                zone="us-east-1a",
                subnet_id="subnet-1",
                image_id="ami-1",
                launch_template="karpenter.k8s.aws/1",
                price=0.0,
                reservation_id="cr-2",
                reservation_type=kind,
            ),
        ),
        tags={},
    )


def test_create_fleet_for_an_odcr_is_on_demand_and_for_a_block_capacity_block() -> None:
    odcr = create_fleet_input(fleet("default"))
    assert odcr["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert odcr["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    block = create_fleet_input(fleet("capacity-block"))
    assert block["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in block
    assert "SpotOptions" not in block


def test_fleet_results_and_errors_name_the_reservation() -> None:
    request = fleet("default")
    override = {"InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a"}
    outcome = parse_fleet_response(
        request,
        {  # type: ignore[typeddict-item]
            "Instances": [
                {
                    "LaunchTemplateAndOverrides": {"Overrides": override},
                    "InstanceIds": ["i-1"],
                    "Lifecycle": "on-demand",
                }
            ],
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": {"Overrides": override},
                    "ErrorCode": "ReservationCapacityExceeded",
                    "ErrorMessage": "full",
                }
            ],
        },
    )
    (instance,) = outcome.instances
    assert (instance.capacity_type, instance.reservation_id) == ("reserved", "cr-2")
    (error,) = outcome.errors
    assert (error.capacity_type, error.reservation_id) == ("reserved", "cr-2")


def test_an_instance_is_reserved_only_when_launched_into_reservations_only() -> None:
    base: dict[str, Any] = {"InstanceId": "i-1", "InstanceType": "p5.48xlarge"}
    only = {
        **base,
        "CapacityReservationId": "cr-2",
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only"
        },
        "InstanceLifecycle": "capacity-block",
    }
    instance = _instance(only)  # type: ignore[arg-type]
    assert (instance.capacity_type, instance.reservation_id, instance.reservation_type) == (
        "reserved",
        "cr-2",
        "capacity-block",
    )
    opened = {
        **base,
        "CapacityReservationId": "cr-3",
        "CapacityReservationSpecification": {"CapacityReservationPreference": "open"},
    }
    assert _instance(opened).capacity_type == "on-demand"  # type: ignore[arg-type]


def candidate(reservation: str, kind: str, room: int, zone: str = "us-east-1a") -> Candidate:
    offering = Offering(
        zone=zone,
        capacity_type="reserved",
        price=0.0 if kind == "capacity-block" else 5.5e-6,
        reservation_id=reservation,
        reservation_type=kind,
        reservation_capacity=room,
    )
    instance_type = InstanceType(
        name="p5.48xlarge", labels={}, capacity={}, allocatable={}, offerings=(offering,)
    )
    return Candidate(instance_type, offering)


def test_a_launch_uses_one_kind_of_reservation_and_the_roomiest_per_type_and_zone() -> None:
    small, big = candidate("cr-1", "default", 1), candidate("cr-2", "default", 3)
    other_zone = candidate("cr-3", "default", 1, zone="us-east-1b")
    block = candidate("cr-9", "capacity-block", 5)
    spot = Candidate(
        small.instance_type, Offering(zone="us-east-1a", capacity_type="spot", price=1)
    )
    # the block is cheapest (paid up): blocks only, one per type and zone
    assert _reserved_pool([small, big, other_zone, block, spot]) == [block]
    assert _reserved_pool([small, big, other_zone, spot]) == [big, other_zone]
    assert _reserved_pool([spot]) == []


def test_a_reserved_offering_gives_the_node_karpenters_reservation_labels() -> None:
    chosen = candidate("cr-2", "capacity-block", 1)
    labels = offering_labels(chosen.instance_type, chosen.offering)
    assert labels["karpenter.k8s.aws/capacity-reservation-id"] == "cr-2"
    assert labels["karpenter.k8s.aws/capacity-reservation-type"] == "capacity-block"
    assert labels["karpenter.sh/capacity-type"] == "reserved"


def test_a_full_reservation_stays_full_for_the_ice_ttl_even_when_re_described() -> None:
    now = [0.0]
    client = ec2()
    provider = CapacityReservationProvider(
        ec2=client,
        caller=Caller(),
        cache=TtlCache(timedelta(minutes=1), lambda: now[0]),
        exhausted=TtlCache(timedelta(minutes=3), lambda: now[0]),
    )
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_response(
                "describe_capacity_reservations",
                {"CapacityReservations": [raw_reservation("cr-0b")]},
            )
        (reservation,) = provider.resolve([term(id="cr-0b")])
        provider.mark_unavailable("cr-0b")
        now[0] = 120.0  # the reservation is described again: EC2 still says 2 available
        (reservation,) = provider.resolve([term(id="cr-0b")])
        assert provider.available(reservation) == 0
    now[0] = 181.0
    assert provider.available(reservation) == 2
