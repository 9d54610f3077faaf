"""AwsCloudProvider.create on moto: CreateFleet shape, ICE cache, spot -> on-demand fallback,
idempotency, throttling, NodeClass readiness."""

from __future__ import annotations

from typing import Any

import pytest

from cloudprovider.aws.errors import ThrottledError
from cloudprovider.aws.retry import Caller, RetryPolicy, no_sleep
from cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClassNotReadyError,
)
from provisioner.apis.labels import (
    ANNOTATION_EC2NODECLASS_HASH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from tests.aws.harness import AMI_X86, CLUSTER, AwsEnv, make_nodeclass, make_request

pytestmark = pytest.mark.aws


def _overrides(call: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (o["InstanceType"], o["AvailabilityZone"])
        for c in call["LaunchTemplateConfigs"]
        for o in c.get("Overrides", [])
    ]


def test_create_launches_cheapest_spot_and_hydrates_the_claim(aws: AwsEnv):
    claim = aws.provider.create(make_request(instance_types=("m5.large", "c5.large")))

    assert claim.capacity_type == "spot"
    assert claim.instance_type == "c5.large"
    assert claim.provider_id == f"aws:///{claim.zone}/{claim.instance_id}"
    assert claim.labels[LABEL_INSTANCE_TYPE] == "c5.large"
    assert claim.labels[LABEL_CAPACITY_TYPE] == "spot"
    assert claim.labels[LABEL_ZONE] == claim.zone
    assert claim.labels[LABEL_NODEPOOL] == "default"
    assert claim.image_id == AMI_X86
    assert claim.allocatable["cpu"] < claim.capacity["cpu"] == 2000
    assert ANNOTATION_EC2NODECLASS_HASH in claim.annotations
    (call,) = aws.faults.fleet_calls
    assert call["Type"] == "instant"
    assert call["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert call["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert _overrides(call)[0][0] == "c5.large"
    (instance,) = aws.instances(tag_key=["karpenter.sh/nodeclaim"])
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["karpenter.sh/nodeclaim"] == "default-abcde"
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["eks:eks-cluster-name"] == CLUSTER
    assert tags["Name"] == "default-abcde"


def test_create_uses_on_demand_lowest_price_when_spot_is_not_allowed(aws: AwsEnv):
    claim = aws.provider.create(make_request(capacity_types=("on-demand",)))

    assert claim.capacity_type == "on-demand"
    (call,) = aws.faults.fleet_calls
    assert call["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in call


def test_spot_ice_everywhere_falls_back_to_on_demand_within_one_create(aws: AwsEnv):
    aws.faults.ice_on("spot")

    claim = aws.provider.create(make_request(instance_types=("m5.large", "c5.large")))

    assert claim.capacity_type == "on-demand"
    spot_call, od_call = aws.faults.fleet_calls
    assert spot_call["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert od_call["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert spot_call["ClientToken"] != od_call["ClientToken"]
    assert aws.provider.unavailable.is_unavailable("spot", "c5.large", "us-east-1a")
    assert len(aws.instances()) == 1


def test_ice_on_the_chosen_offering_is_cached_and_skipped_next_time(aws: AwsEnv):
    aws.faults.ice_on("spot", "c5.large")

    first = aws.provider.create(make_request("a-1", instance_types=("m5.large", "c5.large")))
    second = aws.provider.create(make_request("a-2", instance_types=("m5.large", "c5.large")))

    assert (first.capacity_type, first.instance_type) == ("spot", "m5.large")
    assert second.instance_type == "m5.large"
    assert ("c5.large", "us-east-1a") in _overrides(aws.faults.fleet_calls[0])
    assert all(t != "c5.large" for t, _ in _overrides(aws.faults.fleet_calls[1]))
    aws.timer.advance(181)  # the ICE TTL is 3 minutes
    aws.provider.create(make_request("a-3", instance_types=("m5.large", "c5.large")))
    assert _overrides(aws.faults.fleet_calls[2])[0][0] == "c5.large"


def test_ice_everywhere_raises_insufficient_capacity(aws: AwsEnv):
    aws.faults.ice_on("spot")
    aws.faults.ice_on("on-demand")

    with pytest.raises(InsufficientCapacityError):
        aws.provider.create(make_request(instance_types=("m5.large",)))

    assert aws.instances() == []
    with pytest.raises(InsufficientCapacityError):  # everything is cached unavailable now
        aws.provider.create(make_request(instance_types=("m5.large",)))
    assert len(aws.faults.fleet_calls) == 2


def test_a_retried_create_for_the_same_nodeclaim_launches_nothing(aws: AwsEnv):
    first = aws.provider.create(make_request())
    again = aws.provider.create(make_request())

    assert again.provider_id == first.provider_id
    assert len(aws.faults.fleet_calls) == 1
    assert len(aws.instances()) == 1


def test_throttling_bursts_are_retried(aws: AwsEnv):
    aws.faults.throttle("CreateFleet", 2)
    aws.faults.throttle("DescribeInstances", 1)

    claim = aws.provider.create(make_request())

    assert claim.instance_id
    assert aws.faults.throttled == {"CreateFleet": 2, "DescribeInstances": 1}
    assert len(aws.instances()) == 1


def test_throttling_retries_are_bounded(aws: AwsEnv):
    caller = Caller(policy=RetryPolicy(max_attempts=3), sleep=no_sleep)
    provider = aws.build_provider(caller=caller)
    aws.faults.throttle("CreateFleet", 10)

    with pytest.raises(CreateError) as error:
        provider.create(make_request())

    assert error.value.reason == "RequestLimitExceeded"
    assert isinstance(error.value.__cause__, ThrottledError)
    assert aws.faults.throttled["CreateFleet"] == 3
    assert aws.instances() == []


def test_create_with_a_missing_nodeclass_is_insufficient_capacity(aws: AwsEnv):
    with pytest.raises(InsufficientCapacityError):
        aws.provider.create(make_request(nodeclass="nope"))


def test_create_with_an_unready_nodeclass_raises_not_ready(aws: AwsEnv):
    aws.nodeclasses.add(make_nodeclass(subnetSelectorTerms=[{"tags": {"missing": "x"}}]))

    with pytest.raises(NodeClassNotReadyError, match="SubnetsNotFound"):
        aws.provider.create(make_request())


def test_create_picks_the_gpu_ami_for_gpu_types(aws: AwsEnv):
    claim = aws.provider.create(make_request(instance_types=("g5.xlarge",)))

    assert claim.instance_type == "g5.xlarge"
    assert claim.image_id != AMI_X86


def test_exotic_types_are_used_only_when_nothing_else_fits(aws: AwsEnv):
    claim = aws.provider.create(make_request(instance_types=("g5.xlarge", "m5.xlarge")))

    assert claim.instance_type == "m5.xlarge"
    assert all(t != "g5.xlarge" for t, _ in _overrides(aws.faults.fleet_calls[0]))
