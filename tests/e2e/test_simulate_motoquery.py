"""moto's query parser, indexed while a simulated account runs: same parse, no quadratic scan."""

from __future__ import annotations

from typing import Any

import pytest
from botocore import serialize
from botocore.session import get_session
from hypothesis import given
from hypothesis import strategies as st
from moto.core.parse import EC2QueryParser, QueryParser, RequestDict
from moto.core.serialize import AttributePicker
from werkzeug.datastructures import Headers, MultiDict

from provisioner.simulation.cloud import MotoCloud
from provisioner.simulation.motoquery import has_prefix, indexed
from provisioner.simulation.timeline import Timeline

_NAMES = st.lists(st.text(alphabet="ab.1", max_size=6), max_size=12)


@given(_NAMES, st.text(alphabet="ab.1", min_size=1, max_size=4))
def test_the_sorted_prefix_test_answers_like_a_scan(names: list[str], prefix: str) -> None:
    assert has_prefix(sorted(names), prefix) == any(n.startswith(prefix) for n in names)


def _fleet_request(overrides: int) -> tuple[Any, RequestDict]:
    operation = get_session().get_service_model("ec2").operation_model("CreateFleet")
    params = {
        "Type": "instant",
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "1"},
                "Overrides": [
                    {
                        "InstanceType": f"m5.{index}xlarge",
                        "SubnetId": f"subnet-{index % 3}",
                        "AvailabilityZone": f"us-east-1{'abc'[index % 3]}",
                        "Priority": float(index),
                    }
                    for index in range(overrides)
                ],
            }
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": "spot",
        },
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "karpenter.sh/nodeclaim", "Value": "x"}]}
        ],
    }
    body = serialize.create_serializer("ec2").serialize_to_request(params, operation)["body"]
    request = RequestDict(
        method="POST",
        values=MultiDict(body),
        headers=Headers(),
        body=b"",
        url_path="/",
        url_params={},
    )
    return operation, request


def test_a_large_create_fleet_parses_to_the_same_parameters() -> None:
    operation, request = _fleet_request(120)
    scanned = EC2QueryParser(operation).parse(request)
    with indexed():
        fast = EC2QueryParser(operation).parse(request)
    assert fast == scanned
    overrides = fast["LaunchTemplateConfigs"][0]["Overrides"]
    assert len(overrides) == 120
    assert overrides[7] == {
        "InstanceType": "m5.7xlarge",
        "SubnetId": "subnet-1",
        "AvailabilityZone": "us-east-1b",
        "Priority": 7.0,
    }


@pytest.mark.parametrize(
    ("owner", "method"), [(QueryParser, "_gonna_recurse"), (AttributePicker, "__call__")]
)
def test_moto_is_patched_only_while_an_account_runs(owner: type, method: str) -> None:
    """The query parser's index and the serializer's memo (``motoserialize``) alike."""
    original = getattr(owner, method)
    cloud = MotoCloud(
        timeline=Timeline(), region="us-east-1", cluster="demo", zones=("us-east-1a",), seed=3
    )
    cloud.start()
    try:
        assert getattr(owner, method) is not original
        subnets = cloud.client("ec2").describe_subnets(
            Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]}]
        )["Subnets"]
        assert subnets
    finally:
        cloud.stop()
    assert getattr(owner, method) is original
