"""AwsCloudProvider with a capacity reservation: moto launches the fleet, and a botocore hook
answers DescribeCapacityReservations (which moto lacks) in EC2's response shape."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.apis.labels import (
    LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_TYPE,
)
from tests.aws.harness import AwsEnv, make_nodeclass, make_request

pytestmark = pytest.mark.aws

RESERVATION = "cr-0aaa1111bbbb2222c"
ZONE = "us-east-1a"


class Reservations:
    """Answers DescribeCapacityReservations for one ODCR of ``count`` m5.large."""

    def __init__(self, ec2: Any, count: int) -> None:
        self.count = count
        self.calls: list[dict[str, Any]] = []
        events = ec2.meta.events
        events.register("provide-client-params.ec2.DescribeCapacityReservations", self._params)
        events.register("before-call.ec2.DescribeCapacityReservations", self._answer)

    def _params(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(dict(params))

    def _answer(self, **_: Any) -> Any:
        body = {
            "CapacityReservations": [
                {
                    "CapacityReservationId": RESERVATION,
                    "OwnerId": "123456789012",
                    "InstanceType": "m5.large",
                    "AvailabilityZone": ZONE,
                    "InstanceMatchCriteria": "targeted",
                    "TotalInstanceCount": self.count,
                    "AvailableInstanceCount": self.count,
                    "State": "active",
                    "ReservationType": "default",
                }
            ]
        }
        return AWSResponse(None, 200, {}, None), body  # type: ignore[arg-type]


@pytest.fixture
def reserved(aws: AwsEnv) -> Reservations:
    answers = Reservations(aws.ec2, count=1)
    aws.nodeclasses.add(make_nodeclass(capacityReservationSelectorTerms=[{"id": RESERVATION}]))
    return answers


def _reserved_offerings(aws: AwsEnv) -> list[Any]:
    types = aws.provider.get_instance_types(
        NodePoolRef(name="default", node_class=NodeClassRef(name="default"))
    )
    return [o for t in types for o in t.offerings if o.capacity_type == "reserved"]


def test_a_reserved_launch_targets_the_reservation_and_counts_it(
    aws: AwsEnv, reserved: Reservations
) -> None:
    (offering,) = _reserved_offerings(aws)
    assert (offering.zone, offering.reservation_id, offering.reservation_capacity) == (
        ZONE,
        RESERVATION,
        1,
    )
    assert reserved.calls[0]["CapacityReservationIds"] == [RESERVATION]

    claim = aws.provider.create(
        make_request(instance_types=("m5.large",), capacity_types=("reserved", "spot", "on-demand"))
    )

    assert (claim.capacity_type, claim.zone, claim.instance_type) == ("reserved", ZONE, "m5.large")
    assert claim.labels[LABEL_CAPACITY_TYPE] == "reserved"
    assert claim.labels[LABEL_CAPACITY_RESERVATION_ID] == RESERVATION
    assert claim.labels[LABEL_CAPACITY_RESERVATION_TYPE] == "default"
    (call,) = aws.faults.fleet_calls
    assert call["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert call["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    (config,) = call["LaunchTemplateConfigs"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]] == [
        ("m5.large", ZONE)
    ]
    name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    (version,) = aws.ec2.describe_launch_template_versions(
        LaunchTemplateName=name, Versions=["$Latest"]
    )["LaunchTemplateVersions"]
    assert version["LaunchTemplateData"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION},
    }
    (offering,) = _reserved_offerings(aws)  # the one instance it held is taken
    assert (offering.available, offering.reservation_capacity) == (False, 0)


def test_a_full_reservation_is_marked_and_the_launch_falls_through_to_spot(
    aws: AwsEnv, reserved: Reservations
) -> None:
    aws.faults.ice_on("on-demand", "m5.large", ZONE)  # the reserved fleet fails for capacity

    claim = aws.provider.create(
        make_request(instance_types=("m5.large",), capacity_types=("reserved", "spot", "on-demand"))
    )

    assert claim.capacity_type == "spot"
    targets = [
        c["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        for c in aws.faults.fleet_calls
    ]
    assert targets == ["on-demand", "spot"]
    (offering,) = _reserved_offerings(aws)
    assert offering.available is False  # the reservation, not on-demand m5.large, is marked
    assert not aws.provider.unavailable.is_unavailable("on-demand", "m5.large", ZONE)


def test_a_nodeclaim_pinned_to_reserved_never_falls_back(
    aws: AwsEnv, reserved: Reservations
) -> None:
    from cloudprovider.errors import InsufficientCapacityError  # noqa: PLC0415

    aws.faults.ice_on("on-demand", "m5.large", ZONE)
    with pytest.raises(InsufficientCapacityError):
        aws.provider.create(
            make_request(instance_types=("m5.large",), capacity_types=("reserved",))
        )
    assert len(aws.faults.fleet_calls) == 1
