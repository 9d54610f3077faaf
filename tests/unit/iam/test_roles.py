"""Node role and controller trust policies (IRSA, EKS Pod Identity), per partition."""

import pytest

from iam import IamParameters, irsa_trust_policy, node_role, pod_identity_trust_policy


@pytest.mark.parametrize(
    ("region", "prefix", "ec2"),
    [
        ("us-east-1", "arn:aws:", "ec2.amazonaws.com"),
        ("cn-north-1", "arn:aws-cn:", "ec2.amazonaws.com.cn"),
        ("us-gov-west-1", "arn:aws-us-gov:", "ec2.amazonaws.com"),
    ],
)
def test_node_role_trust_and_managed_policies(region, prefix, ec2):
    params = IamParameters.create(cluster_name="demo", account_id="111122223333", region=region)
    role = node_role(params)
    assert role.name == "JointerNodeRole-demo"
    assert role.arn == f"{prefix}iam::111122223333:role/JointerNodeRole-demo"
    assert role.managed_policy_arns == tuple(
        f"{prefix}iam::aws:policy/{name}"
        for name in (
            "AmazonEKS_CNI_Policy",
            "AmazonEKSWorkerNodePolicy",
            "AmazonEC2ContainerRegistryPullOnly",
            "AmazonSSMManagedInstanceCore",
        )
    )
    [stmt] = role.trust_policy.to_json()["Statement"]
    assert stmt["Principal"] == {"Service": ec2}
    assert stmt["Action"] == ["sts:AssumeRole"]


def test_irsa_trust_pins_service_account_and_audience():
    arn = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
    params = IamParameters.create(
        cluster_name="demo",
        account_id="111122223333",
        region="us-east-1",
        namespace="karpenter",
        service_account="jointer",
        oidc_provider_arn=arn,
    )
    [stmt] = irsa_trust_policy(params).to_json()["Statement"]
    assert stmt["Principal"] == {"Federated": arn}
    assert stmt["Action"] == ["sts:AssumeRoleWithWebIdentity"]
    issuer = "oidc.eks.us-east-1.amazonaws.com/id/ABC"
    assert stmt["Condition"] == {
        "StringEquals": {
            f"{issuer}:sub": "system:serviceaccount:karpenter:jointer",
            f"{issuer}:aud": "sts.amazonaws.com",
        }
    }


def test_irsa_placeholder_is_partition_aware():
    params = IamParameters.create(
        cluster_name="demo", account_id="111122223333", region="cn-northwest-1"
    )
    [stmt] = irsa_trust_policy(params).to_json()["Statement"]
    assert stmt["Principal"]["Federated"] == (
        "arn:aws-cn:iam::111122223333:oidc-provider/"
        "oidc.eks.cn-northwest-1.amazonaws.com.cn/id/OIDC_ID_PLACEHOLDER"
    )


def test_pod_identity_trust_scoped_by_session_tags(demo):
    [stmt] = pod_identity_trust_policy(demo).to_json()["Statement"]
    assert stmt["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert stmt["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert stmt["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-name": "demo",
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "jointer",
        }
    }
