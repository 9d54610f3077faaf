"""FleetBatcher on moto: identical launches merge into one CreateFleet; each NodeClaim gets its
own instance, tagged with its name. The assembly wires it: a window for ``jointer run`` (a thread
flushes), a zero window for ``jointer simulate`` (each launch at once, on the reconciling thread).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from cloudprovider.aws.assembly import AwsAssembly, assemble_aws
from cloudprovider.aws.batcher import FleetBatcher
from cloudprovider.aws.instance import FleetOverride, FleetRequest
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from tests.aws.harness import (
    AMI_X86,
    CLUSTER,
    CLUSTER_INFO,
    K8S,
    REGION,
    AwsEnv,
    StaticInstanceTypes,
    make_request,
)

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


def _assembly(aws: AwsEnv, **options: Any) -> AwsAssembly:
    assembly = assemble_aws(
        ec2=aws.ec2,
        ssm=aws.ssm,
        iam=aws.iam,
        sqs=aws.sqs,
        cluster=CLUSTER_INFO,
        region=REGION,
        kubernetes_version=K8S,
        read_nodeclass=lambda _name: None,
        instance_types=StaticInstanceTypes(aws.catalog),
        caller=aws.caller,
        timer=aws.timer,
        **options,
    )
    assembly.cloud.nodeclasses = aws.nodeclasses  # the harness's parsed EC2NodeClasses
    return assembly


def _on_demand(name: str) -> Any:
    return make_request(name, instance_types=("m5.large",), capacity_types=("on-demand",))


def test_run_merges_concurrent_identical_launches_into_one_create_fleet(aws: AwsEnv):
    """``jointer run``'s assembly: two NodeClaims launched at once become one CreateFleet."""
    assembly = _assembly(aws, fleet_window=True)
    provider = assembly.cloud
    assert assembly.fleet is not None
    fleet = provider.fleet_batcher
    assert fleet is not None
    assert not fleet.is_inline
    # resolve the nodeclass first: its concurrent first resolution races on the instance profile
    provider.get_instance_types(
        NodePoolRef(name="default", node_class=NodeClassRef(name="default"))
    )
    submitted = threading.Semaphore(0)
    fleet.batcher.on_submit = submitted.release
    claims: dict[str, Any] = {}
    errors: list[BaseException] = []

    def launch(name: str) -> None:
        try:
            claims[name] = provider.create(_on_demand(name))
        except BaseException as error:
            errors.append(error)
            submitted.release()
            raise

    threads = [threading.Thread(target=launch, args=(n,)) for n in ("np-1", "np-2")]
    for thread in threads:
        thread.start()
    assert submitted.acquire(timeout=60)
    assert submitted.acquire(timeout=60)
    assert errors == []
    assert fleet.batcher.flush(force=True) == 1  # what the batcher thread does after 35 ms
    for thread in threads:
        thread.join(60)

    (call,) = aws.faults.fleet_calls
    assert call["TargetCapacitySpecification"]["TotalTargetCapacity"] == 2
    assert claims["np-1"].provider_id != claims["np-2"].provider_id
    for name, claim in claims.items():
        (raw,) = aws.instances(instance_id=[claim.provider_id.rsplit("/", 1)[-1]])
        tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
        assert tags["karpenter.sh/nodeclaim"] == tags["Name"] == name


def test_the_batcher_thread_flushes_what_waits_when_it_stops(aws: AwsEnv):
    assembly = _assembly(aws, fleet_window=True)
    assert assembly.fleet is not None
    assert assembly.cloud.fleet_batcher is not None
    waiting = assembly.cloud.fleet_batcher.submit(_request(aws, "np-1"))
    assembly.fleet.start()
    assembly.fleet.stop()
    assert waiting.done()
    assert len(waiting.result().instances) == 1


def test_simulate_launches_at_once_on_the_calling_thread(aws: AwsEnv):
    """``jointer simulate``'s assembly: a zero window, no thread, one CreateFleet per launch."""
    assembly = _assembly(aws)
    assert assembly.fleet is None
    assert assembly.cloud.fleet_batcher is not None
    assert assembly.cloud.fleet_batcher.is_inline
    first = assembly.cloud.create(_on_demand("np-1"))
    second = assembly.cloud.create(_on_demand("np-2"))
    assert first.provider_id != second.provider_id
    assert [
        c["TargetCapacitySpecification"]["TotalTargetCapacity"] for c in aws.faults.fleet_calls
    ] == [1, 1]
