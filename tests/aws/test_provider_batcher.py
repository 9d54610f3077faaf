"""FleetBatcher on moto: identical launches merge into one CreateFleet; each NodeClaim gets its
own instance, tagged with its name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cloudprovider.aws.batcher import FleetBatcher
from cloudprovider.aws.instance import FleetOverride, FleetRequest
from tests.aws.harness import AMI_X86, CLUSTER, AwsEnv

pytestmark = pytest.mark.aws


@pytest.fixture(autouse=True)
def template(aws: AwsEnv) -> None:
    aws.ec2.create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/batch", LaunchTemplateData={"ImageId": AMI_X86}
    )


def _request(aws: AwsEnv, name: str) -> FleetRequest:
    return FleetRequest(
        nodeclaim=name,
        nodeclaim_uid=f"uid-{name}",
        capacity_type="on-demand",
        overrides=(
            FleetOverride(
                instance_type="m5.large",
                zone="us-east-1a",
                subnet_id=aws.subnets["us-east-1a"],
                image_id=AMI_X86,
                launch_template="karpenter.k8s.aws/batch",
                price=0.096,
            ),
        ),
        tags={
            "eks:eks-cluster-name": CLUSTER,
            f"kubernetes.io/cluster/{CLUSTER}": "owned",
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/nodeclaim": name,
            "Name": name,
        },
    )


def test_identical_requests_merge_into_one_fleet_call(aws: AwsEnv):
    batcher = FleetBatcher(instances=aws.provider.instances, clock=aws.timer)
    first = batcher.submit(_request(aws, "np-1"))
    second = batcher.submit(_request(aws, "np-2"))

    assert batcher.batcher.flush(force=True) == 1

    (call,) = aws.faults.fleet_calls
    assert call["TargetCapacitySpecification"]["TotalTargetCapacity"] == 2
    (a,) = first.result().instances
    (b,) = second.result().instances
    assert a.id != b.id
    for instance, name in ((a, "np-1"), (b, "np-2")):
        (raw,) = aws.instances(instance_id=[instance.id])
        tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
        assert tags["karpenter.sh/nodeclaim"] == name


def test_different_requests_are_not_merged(aws: AwsEnv):
    batcher = FleetBatcher(instances=aws.provider.instances, clock=aws.timer)
    one = _request(aws, "np-1")
    other = replace(_request(aws, "np-2"), capacity_type="spot")
    batcher.submit(one)
    batcher.submit(other)

    assert batcher.batcher.flush(force=True) == 2
    assert [
        c["TargetCapacitySpecification"]["TotalTargetCapacity"] for c in aws.faults.fleet_calls
    ] == [1, 1]
