"""The node role and the controller's trust policies (IRSA and EKS Pod Identity)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from iam.documents import Condition, PolicyDocument, Principal, Statement
from iam.params import IamParameters

# AWS managed policies every node needs (Karpenter's node role, after PR #7963).
NODE_MANAGED_POLICIES: Final = (
    "AmazonEKS_CNI_Policy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"  # the same in every partition
STS_AUDIENCE: Final = "sts.amazonaws.com"  # the IRSA token audience, in every partition


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRole:
    """The IAM role Jointer's nodes run with.

    Attributes:
        name: Role name (`JointerNodeRole-<cluster>` unless overridden).
        arn: Role ARN (path `/`).
        trust_policy: Lets EC2 assume the role.
        managed_policy_arns: Partition-aware ARNs of the AWS managed policies to attach.
    """

    name: str
    arn: str
    trust_policy: PolicyDocument
    managed_policy_arns: tuple[str, ...]


def node_role(params: IamParameters) -> NodeRole:
    """Return the node role: EC2 trust and the four AWS managed policies."""
    trust = PolicyDocument(
        statements=(
            Statement(
                sid="AllowEC2ToAssumeNodeRole",
                principal=Principal(
                    kind="Service", values=(params.partition.service_principal("ec2"),)
                ),
                actions=("sts:AssumeRole",),
            ),
        )
    )
    arns = tuple(
        params.partition.arn("iam", "", "aws", f"policy/{name}") for name in NODE_MANAGED_POLICIES
    )
    return NodeRole(
        name=params.node_role_name,
        arn=params.node_role_arn,
        trust_policy=trust,
        managed_policy_arns=arns,
    )


def irsa_trust_policy(params: IamParameters) -> PolicyDocument:
    """Return the controller role's trust policy for IAM Roles for Service Accounts.

    Only the controller's service account (`sub`) presenting a token for STS (`aud`) may
    assume the role, through the cluster's OIDC provider.
    """
    issuer = params.oidc_issuer
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowControllerServiceAccountWebIdentity",
                principal=Principal(kind="Federated", values=(params.oidc_provider_arn,)),
                actions=("sts:AssumeRoleWithWebIdentity",),
                conditions=(
                    Condition(
                        operator="StringEquals",
                        key=f"{issuer}:sub",
                        values=(
                            f"system:serviceaccount:{params.namespace}:{params.service_account}",
                        ),
                    ),
                    Condition(operator="StringEquals", key=f"{issuer}:aud", values=(STS_AUDIENCE,)),
                ),
            ),
        )
    )


def pod_identity_trust_policy(params: IamParameters) -> PolicyDocument:
    """Return the controller role's trust policy for EKS Pod Identity.

    The session tags EKS Pod Identity sets (`eks-cluster-name`, `kubernetes-namespace`,
    `kubernetes-service-account`) restrict the role to the controller's service account on
    this cluster; without them any Pod Identity association in the account could use it.
    Associations created with `disableSessionTags` cannot assume this role.
    """
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowEksAuthToAssumeRoleForPodIdentity",
                principal=Principal(kind="Service", values=(POD_IDENTITY_PRINCIPAL,)),
                actions=("sts:AssumeRole", "sts:TagSession"),
                conditions=(
                    Condition(
                        operator="StringEquals",
                        key="aws:RequestTag/eks-cluster-name",
                        values=(params.cluster_name,),
                    ),
                    Condition(
                        operator="StringEquals",
                        key="aws:RequestTag/kubernetes-namespace",
                        values=(params.namespace,),
                    ),
                    Condition(
                        operator="StringEquals",
                        key="aws:RequestTag/kubernetes-service-account",
                        values=(params.service_account,),
                    ),
                ),
            ),
        )
    )
