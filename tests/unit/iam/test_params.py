"""Input validation and defaults of `IamParameters.create`."""

import pytest

from iam import IamInputError, IamParameters

BASE = {"cluster_name": "demo", "account_id": "111122223333", "region": "us-east-1"}


def test_defaults_follow_karpenter_naming(demo):
    assert demo.partition.name == "aws"
    assert demo.interruption_queue == "demo"
    assert demo.node_role_name == "JointerNodeRole-demo"
    assert demo.node_role_arn == "arn:aws:iam::111122223333:role/JointerNodeRole-demo"
    assert demo.cluster_arn == "arn:aws:eks:us-east-1:111122223333:cluster/demo"
    assert demo.queue_arn == "arn:aws:sqs:us-east-1:111122223333:demo"
    assert demo.namespace == "kube-system"
    assert demo.service_account == "jointer"
    assert demo.oidc_provider_is_placeholder
    assert demo.oidc_issuer == "oidc.eks.us-east-1.amazonaws.com/id/OIDC_ID_PLACEHOLDER"


@pytest.mark.parametrize(
    ("region", "partition", "suffix"),
    [
        ("us-east-1", "aws", "amazonaws.com"),
        ("eu-central-2", "aws", "amazonaws.com"),
        ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
        ("cn-northwest-1", "aws-cn", "amazonaws.com.cn"),
        ("us-gov-west-1", "aws-us-gov", "amazonaws.com"),
    ],
)
def test_partition_follows_region(region, partition, suffix):
    params = IamParameters.create(**{**BASE, "region": region})
    assert params.partition.name == partition
    assert params.partition.url_suffix == suffix
    assert IamParameters.create(**{**BASE, "region": region, "partition": partition}) == params


def test_overrides():
    params = IamParameters.create(
        **BASE,
        interruption_queue="demo-interruptions",
        node_role_name="MyNodes",
        namespace="karpenter",
        service_account="jointer-controller",
        oidc_provider_arn=(
            "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC123"
        ),
    )
    assert params.queue_arn.endswith(":demo-interruptions")
    assert params.node_role_arn == "arn:aws:iam::111122223333:role/MyNodes"
    assert params.oidc_issuer == "oidc.eks.us-east-1.amazonaws.com/id/ABC123"
    assert not params.oidc_provider_is_placeholder


@pytest.mark.parametrize(
    ("override", "message"),
    [
        pytest.param({"account_id": "12345"}, "account id", id="short-account"),
        pytest.param({"account_id": "11112222333a"}, "account id", id="non-digit-account"),
        pytest.param({"cluster_name": ""}, "cluster name", id="empty-cluster"),
        pytest.param({"cluster_name": "-demo"}, "cluster name", id="cluster-leading-dash"),
        pytest.param({"cluster_name": "de mo"}, "cluster name", id="cluster-space"),
        pytest.param({"cluster_name": "d" * 101}, "cluster name", id="cluster-too-long"),
        pytest.param({"cluster_name": "d" * 90}, "interruption queue", id="queue-too-long"),
        pytest.param(
            {"cluster_name": "d" * 60, "interruption_queue": "q"}, "node role", id="role-too-long"
        ),
        pytest.param(
            {"cluster_name": "d" * 90, "interruption_queue": "q", "node_role_name": "r"},
            "policy name",
            id="policy-name-too-long",
        ),
        pytest.param({"region": "us-east"}, "invalid region", id="bad-region"),
        pytest.param({"region": "US-EAST-1"}, "invalid region", id="upper-region"),
        pytest.param({"region": "us-iso-east-1"}, "invalid region", id="iso-region"),
        pytest.param({"partition": "aws-iso"}, "invalid partition", id="bad-partition"),
        pytest.param({"partition": "aws-cn"}, "is in partition 'aws'", id="region-not-in-cn"),
        pytest.param(
            {"region": "cn-north-1", "partition": "aws"}, "'aws-cn', not 'aws'", id="cn-as-aws"
        ),
        pytest.param(
            {"region": "us-gov-east-1", "partition": "aws"}, "'aws-us-gov'", id="gov-as-aws"
        ),
        pytest.param({"interruption_queue": "bad.name"}, "interruption queue", id="bad-queue"),
        pytest.param({"node_role_name": "bad/role"}, "node role", id="bad-role"),
        pytest.param({"namespace": "Kube_System"}, "namespace", id="bad-namespace"),
        pytest.param({"service_account": "Bad SA"}, "service account", id="bad-sa"),
        pytest.param({"oidc_provider_arn": "oidc.eks.example"}, "OIDC provider", id="bad-oidc"),
        pytest.param(
            {"oidc_provider_arn": "arn:aws-cn:iam::111122223333:oidc-provider/x/id/Y"},
            "partition 'aws-cn'",
            id="oidc-wrong-partition",
        ),
        pytest.param(
            {"oidc_provider_arn": "arn:aws:iam::444455556666:oidc-provider/x/id/Y"},
            "own account",
            id="oidc-other-account",
        ),
    ],
)
def test_invalid_inputs_raise_a_named_error(override, message):
    with pytest.raises(IamInputError, match=message):
        IamParameters.create(**{**BASE, **override})
