"""moto's response serializer with memoized candidate names: the same responses (that it is
installed only while a simulated account runs is tested with the query parser's index)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.serialize import AttributePickerContext, XFormedAttributePicker
from moto.core.utils import get_service_model

from provisioner.simulation import motoserialize
from provisioner.simulation.motoserialize import memoized


def _account() -> Any:
    """An EC2 account with a VPC, a subnet and six tagged instances of three types."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    tags: Any = [
        {"ResourceType": "instance", "Tags": [{"Key": "karpenter.sh/nodepool", "Value": "a"}]}
    ]
    for instance_type in ("m5.large", "c5.xlarge", "r5.2xlarge"):
        ec2.run_instances(
            ImageId=image,
            InstanceType=instance_type,
            MinCount=2,
            MaxCount=2,
            SubnetId=subnet,
            TagSpecifications=tags,
        )
    return ec2


def _answers(ec2: Any) -> list[dict[str, Any]]:
    """A few EC2 answers of different shapes, without their request ids."""
    answers = [
        ec2.describe_instances(),
        ec2.describe_instances(Filters=[{"Name": "instance-type", "Values": ["c5.xlarge"]}]),
        ec2.describe_subnets(),
        ec2.describe_instance_types(InstanceTypes=["m5.large", "c5.xlarge"]),
        ec2.describe_tags(),
    ]
    for answer in answers:
        answer.pop("ResponseMetadata", None)
    return answers


def test_responses_serialize_the_same_with_memoized_candidates() -> None:
    with mock_aws():
        ec2 = _account()
        plain = _answers(ec2)
        with memoized():
            fast = _answers(ec2)
            again = _answers(ec2)  # answered from the memo
        after = _answers(ec2)
    assert fast == plain
    assert again == plain
    assert after == plain
    assert len(plain[0]["Reservations"]) == 3
    assert len(plain[1]["Reservations"][0]["Instances"]) == 2
    assert len(plain[3]["InstanceTypes"]) == 2


class Owner:
    """Its class name prefixes ``OwnerId``, so moto finds that member as ``id``."""

    def __init__(self, owner_id: str) -> None:
        self.id = owner_id


class Fleet:
    """Found as ``id`` only where the member's parent shape prefixes the key."""

    def __init__(self, fleet_id: str) -> None:
        self.id = fleet_id


@pytest.mark.parametrize("limit", [motoserialize.MEMO_LIMIT, 2])
def test_candidates_are_kept_per_object_class_member_and_shape(
    limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also when the memo fills up and starts again (``limit`` 2)."""
    monkeypatch.setattr(motoserialize, "MEMO_LIMIT", limit)
    model = get_service_model("ec2")
    instance: Any = model.shape_for("Instance")
    reservation: Any = model.shape_for("Reservation")
    instance_id = instance.members["InstanceId"]
    instance_id.parent = instance
    owner_id = reservation.members["OwnerId"]
    owner_id.parent = reservation
    picker = XFormedAttributePicker()

    def pick(obj: object, key: str, shape: Any) -> Any:
        return picker(AttributePickerContext(obj=obj, key=key, shape=shape))

    with memoized():
        for _ in range(2):  # the second round is answered from the memo
            assert pick({"OwnerId": "o-1"}, "OwnerId", owner_id) == "o-1"
            assert pick(Owner("o-2"), "OwnerId", owner_id) == "o-2"  # by class
            assert pick({"ImageId": "ami-1"}, "ImageId", owner_id) == "ami-1"  # by key
            assert pick(Fleet("f-1"), "InstanceId", instance_id) == "f-1"  # by parent shape
            assert pick(Fleet("f-1"), "InstanceId", owner_id) is None


def test_method_names_are_listed_once_per_class_while_memoized() -> None:
    from moto.core import responses  # noqa: PLC0415
    from moto.ec2.responses import EC2Response  # noqa: PLC0415

    name = "method_names_from_class"
    original = getattr(responses, name)
    with memoized():
        cached = getattr(responses, name)
        assert cached is not original
        assert cached(EC2Response) == original(EC2Response)
        assert "describe_instances" in cached(EC2Response)
        assert cached(EC2Response) is cached(EC2Response)
    assert getattr(responses, name) is original
