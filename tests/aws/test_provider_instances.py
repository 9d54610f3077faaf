"""AwsCloudProvider get / list / delete and leaked-instance garbage collection on moto;
instances of another cluster are never touched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cloudprovider.aws.garbagecollect import InstanceGarbageCollector
from cloudprovider.errors import NodeClaimNotFoundError
from tests.aws.harness import CLUSTER_INFO, AwsEnv, make_request

pytestmark = pytest.mark.aws


def _foreign_instance(aws: AwsEnv, cluster: str = "other-cluster") -> str:
    tags = {
        f"kubernetes.io/cluster/{cluster}": "owned",
        "eks:eks-cluster-name": cluster,
        "karpenter.sh/nodepool": "default",
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.sh/nodeclaim": "default-abcde",
    }
    reservation = aws.ec2.run_instances(
        ImageId="ami-1e749f67",
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=aws.subnets["us-east-1a"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )
    return str(reservation["Instances"][0]["InstanceId"])


def _state(aws: AwsEnv, instance_id: str) -> str:
    reservations = aws.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(reservations[0]["Instances"][0]["State"]["Name"])


def test_get_after_create_returns_the_same_claim(aws: AwsEnv):
    created = aws.provider.create(make_request())

    got = aws.provider.get(created.provider_id)

    assert got.provider_id == created.provider_id
    assert got.instance_type == created.instance_type
    assert got.capacity_type == "spot"
    assert got.name == "default-abcde"
    assert got.node_class == "default"
    assert got.capacity == created.capacity


@pytest.mark.parametrize(
    "provider_id",
    [
        pytest.param("aws:///us-east-1a/i-0123456789abcdef0", id="unknown"),
        pytest.param("fake://x", id="malformed"),
    ],
)
def test_get_of_an_unknown_instance_raises_not_found(aws: AwsEnv, provider_id: str):
    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.get(provider_id)


def test_delete_terminates_and_a_second_delete_raises_not_found(aws: AwsEnv):
    claim = aws.provider.create(make_request())

    aws.provider.delete(claim.provider_id)
    aws.ec2.terminate_instances(InstanceIds=[claim.instance_id])  # settle moto to terminated

    assert _state(aws, claim.instance_id) == "terminated"
    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.delete(claim.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.get(claim.provider_id)


def test_list_returns_only_this_clusters_instances(aws: AwsEnv):
    ours = aws.provider.create(make_request())
    _foreign_instance(aws)

    listed = aws.provider.list_claims()

    assert [c.provider_id for c in listed] == [ours.provider_id]


def test_another_clusters_instance_is_never_deleted(aws: AwsEnv):
    foreign = _foreign_instance(aws)

    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.delete(f"aws:///us-east-1a/{foreign}")

    assert _state(aws, foreign) == "running"


def test_create_does_not_adopt_another_clusters_instance_with_the_same_nodeclaim_name(
    aws: AwsEnv,
):
    foreign = _foreign_instance(aws)

    claim = aws.provider.create(make_request())

    assert claim.instance_id != foreign


def test_garbage_collection_terminates_only_leaked_instances_of_this_cluster(aws: AwsEnv):
    known = aws.provider.create(make_request("known-1"))
    leaked = aws.provider.create(make_request("leaked-1"))
    foreign = _foreign_instance(aws)
    collector = InstanceGarbageCollector(aws.provider)
    now = datetime.now(UTC)

    early, _ = collector.reconcile({known.provider_id}, now)
    collected, requeue = collector.reconcile({known.provider_id}, now + timedelta(seconds=31))

    assert early == []
    assert collected == [leaked.provider_id]
    assert requeue == timedelta(seconds=10)
    assert _state(aws, leaked.instance_id) in {"shutting-down", "terminated"}
    assert _state(aws, known.instance_id) == "running"
    assert _state(aws, foreign) == "running"
    assert CLUSTER_INFO.name != "other-cluster"


def _count_describes(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    ec2 = aws.provider.instances.ec2
    describe = ec2.describe_instances
    calls = [0]

    def counting(**kwargs: object) -> object:
        calls[0] += 1
        return describe(**kwargs)

    monkeypatch.setattr(ec2, "describe_instances", counting)
    return calls


def test_an_instance_seen_within_a_minute_is_not_described_again(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
):
    claim = aws.provider.create(make_request())
    calls = _count_describes(aws, monkeypatch)

    aws.provider.get(claim.provider_id)
    aws.provider.get(claim.provider_id)
    assert calls[0] == 1
    aws.timer.advance(61)
    aws.provider.get(claim.provider_id)
    assert calls[0] == 2
    aws.timer.advance(61)
    aws.provider.list_claims()  # garbage collection's list refreshes every instance
    aws.provider.get(claim.provider_id)
    assert calls[0] == 3


def test_delete_asks_ec2_afresh_and_forgets_the_instance(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
):
    claim = aws.provider.create(make_request())
    aws.provider.get(claim.provider_id)
    calls = _count_describes(aws, monkeypatch)

    aws.provider.delete(claim.provider_id)
    assert calls[0] == 1  # not answered from the instance seen before
    aws.ec2.terminate_instances(InstanceIds=[claim.instance_id])  # settle moto to terminated
    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.get(claim.provider_id)
    assert calls[0] == 2


def test_a_list_forgets_the_instances_it_did_not_find(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch):
    kept = aws.provider.create(make_request("kept-1"))
    gone = aws.provider.create(make_request("gone-1"))
    aws.provider.get(gone.provider_id)
    aws.ec2.terminate_instances(InstanceIds=[gone.instance_id])
    aws.ec2.terminate_instances(InstanceIds=[gone.instance_id])  # settle moto to terminated
    calls = _count_describes(aws, monkeypatch)

    listed = {c.provider_id for c in aws.provider.list_claims()}
    assert listed == {kept.provider_id}
    with pytest.raises(NodeClaimNotFoundError):
        aws.provider.get(gone.provider_id)  # not answered from before the list
    aws.provider.get(kept.provider_id)
    assert calls[0] == 2  # the list and the forgotten instance


def test_a_list_reads_each_nodeclass_once(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch):
    made = [aws.provider.create(make_request(f"claim-{i}")) for i in range(3)]
    read: list[str] = []
    get_nodeclass = aws.nodeclasses.get_nodeclass

    def counting(name: str) -> object:
        read.append(name)
        return get_nodeclass(name)

    monkeypatch.setattr(aws.nodeclasses, "get_nodeclass", counting)
    claims = aws.provider.list_claims()

    assert {c.provider_id for c in claims} == {c.provider_id for c in made}
    assert read == ["default"]
    assert {c.node_class for c in claims} == {"default"}
