"""The controller's identity policies, split and scoped like Karpenter's CloudFormation.

Five managed policies, each named `JointerController<Name>Policy-<cluster>`:

- **NodeLifecycle**: CreateFleet / RunInstances / CreateLaunchTemplate only with this cluster's
  request tags, CreateTags only while creating (or, after launch, only the three registration
  tags on owned instances), TerminateInstances / DeleteLaunchTemplate only on resources tagged
  `kubernetes.io/cluster/<cluster>=owned` with a `karpenter.sh/nodepool` tag.
- **IAMIntegration**: `iam:PassRole` on the node role only, to EC2 only; instance-profile
  create/tag/add/remove/delete only with owned + region + nodeclass tags.
- **EKSIntegration**: `eks:DescribeCluster` on this cluster (endpoint, CA, service CIDR and
  version at start-up, `provisioner/app/wiring.py`).
- **Interruption**: receive and delete on the interruption queue.
- **ResourceDiscovery**: regional EC2 describes, public SSM parameters, pricing, and the
  unconditioned instance-profile reads.

Deliberately left out, compared with Karpenter's template:

- the **ZonalShift** policy (`arc-zonal-shift:GetManagedResource`): Jointer does not consult
  ARC zonal shifts;
- `ec2:DescribeInstanceStatus`: Jointer has no instance-health controller; interruption and
  state changes arrive through the interruption queue;
- `ec2:DescribePlacementGroups` and the `placement-group` resource of RunInstances/CreateFleet:
  Jointer does not support placement groups yet;
- `ec2:DescribeAvailabilityZones`: zone ids come from DescribeSubnets
  (`AvailabilityZoneId`), so the call is not needed.

Jointer is tighter than Karpenter where it costs nothing: resources Jointer creates (instances,
volumes, fleets, launch templates, network interfaces, spot requests, instance profiles) are
pinned to the cluster's account instead of `*`. Subnets and security groups keep `*` as the
account because shared-VPC subnets belong to the VPC owner's account.

Every action granted here is one the code calls, or one AWS authorizes as part of a call the
code makes (`ec2:RunInstances` for an instant CreateFleet, `iam:PassRole` for the node role,
`iam:TagInstanceProfile` for the tags of CreateInstanceProfile); `CONTROLLER_ACTIONS` lists them
so the least-privilege test (`tests/zz_least_privilege`) can compare the boto3 calls the test
suite records with the policy in both directions.
"""

from __future__ import annotations

from typing import Final

from iam.documents import Condition, NamedPolicy, PolicyDocument, Statement
from iam.params import IamParameters, controller_policy_name

# Tag keys, mirroring provisioner/apis/labels.py (iam may not import the project).
TAG_NODEPOOL: Final = "karpenter.sh/nodepool"
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_REGION: Final = "topology.kubernetes.io/region"
TAG_NAME: Final = "Name"


def cluster_tag(cluster_name: str) -> str:
    """Return the ownership tag key `kubernetes.io/cluster/<cluster>` (value `owned`)."""
    return f"kubernetes.io/cluster/{cluster_name}"


# Every action the controller calls, by policy. The policies grant exactly these.
EC2_DESCRIBE_ACTIONS: Final = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
INSTANCE_PROFILE_MUTATING_ACTIONS: Final = (
    "iam:CreateInstanceProfile",
    # Never called directly: IAM authorizes the Tags of CreateInstanceProfile as TagInstanceProfile.
    "iam:TagInstanceProfile",
    "iam:AddRoleToInstanceProfile",
    "iam:RemoveRoleFromInstanceProfile",
    "iam:DeleteInstanceProfile",
)
INSTANCE_PROFILE_READ_ACTIONS: Final = ("iam:GetInstanceProfile", "iam:ListInstanceProfiles")
CONTROLLER_ACTIONS: Final = frozenset(
    {
        "ec2:CreateFleet",
        # Never called directly: an instant CreateFleet launches through RunInstances, which
        # AWS authorizes against the caller's policy (the launch template, image, subnet, ...).
        "ec2:RunInstances",
        "ec2:CreateLaunchTemplate",
        "ec2:DeleteLaunchTemplate",
        "ec2:CreateTags",
        "ec2:TerminateInstances",
        *EC2_DESCRIBE_ACTIONS,
        "ssm:GetParameter",
        "pricing:GetProducts",
        *INSTANCE_PROFILE_MUTATING_ACTIONS,
        *INSTANCE_PROFILE_READ_ACTIONS,
        # Never called directly: checked when AddRoleToInstanceProfile attaches the node role and
        # when a launch uses the instance profile.
        "iam:PassRole",
        "eks:DescribeCluster",
        "sqs:GetQueueUrl",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
    }
)

_LAUNCH_ACTIONS: Final = ("ec2:RunInstances", "ec2:CreateFleet")
# Resource types a launch creates and tags at creation.
_CREATED_RESOURCE_TYPES: Final = (
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
)


def controller_policies(params: IamParameters) -> tuple[NamedPolicy, ...]:
    """Return the controller's managed policies, in a stable order.

    Args:
        params: Validated generation parameters.

    Returns:
        NodeLifecycle, IAMIntegration, EKSIntegration, Interruption, ResourceDiscovery.
    """
    builders = (
        ("NodeLifecycle", _node_lifecycle, "launch, tag and terminate this cluster's nodes"),
        ("IAMIntegration", _iam_integration, "pass the node role; manage instance profiles"),
        ("EKSIntegration", _eks_integration, "discover the API server endpoint"),
        ("Interruption", _interruption, "read the interruption queue"),
        ("ResourceDiscovery", _resource_discovery, "read EC2, SSM, pricing and profiles"),
    )
    return tuple(
        NamedPolicy(
            logical_name=logical,
            name=controller_policy_name(logical, params.cluster_name),
            document=build(params),
            description=f"Jointer controller ({params.cluster_name}): {text}",
        )
        for logical, build, text in builders
    )


def _eq(key: str, *values: str) -> Condition:
    return Condition(operator="StringEquals", key=key, values=values)


def _like(key: str, *values: str) -> Condition:
    return Condition(operator="StringLike", key=key, values=values)


def _ec2(params: IamParameters, resource: str, *, own_account: bool = True) -> str:
    account = params.account_id if own_account else "*"
    return params.partition.arn("ec2", params.region, account, resource)


def _node_lifecycle(params: IamParameters) -> PolicyDocument:
    owned = cluster_tag(params.cluster_name)
    created = tuple(_ec2(params, f"{kind}/*") for kind in _CREATED_RESOURCE_TYPES)
    request_tags = (
        _eq(f"aws:RequestTag/{owned}", "owned"),
        _eq(f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}", params.cluster_name),
        _like(f"aws:RequestTag/{TAG_NODEPOOL}", "*"),
    )
    resource_tags = (
        _eq(f"aws:ResourceTag/{owned}", "owned"),
        _like(f"aws:ResourceTag/{TAG_NODEPOOL}", "*"),
    )
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowScopedEC2InstanceAccessActions",
                actions=_LAUNCH_ACTIONS,
                resources=(
                    # Public AMIs and their snapshots have no account in their ARN.
                    params.partition.arn("ec2", params.region, "", "image/*"),
                    params.partition.arn("ec2", params.region, "", "snapshot/*"),
                    # Shared-VPC subnets and groups belong to the VPC owner's account.
                    _ec2(params, "security-group/*", own_account=False),
                    _ec2(params, "subnet/*", own_account=False),
                    # Reservations may be shared by another account (ownerID).
                    _ec2(params, "capacity-reservation/*", own_account=False),
                ),
            ),
            Statement(
                sid="AllowScopedEC2LaunchTemplateAccessActions",
                actions=_LAUNCH_ACTIONS,
                resources=(_ec2(params, "launch-template/*"),),
                conditions=resource_tags,
            ),
            Statement(
                sid="AllowScopedEC2InstanceActionsWithTags",
                actions=(*_LAUNCH_ACTIONS, "ec2:CreateLaunchTemplate"),
                resources=created,
                conditions=request_tags,
            ),
            Statement(
                sid="AllowScopedResourceCreationTagging",
                actions=("ec2:CreateTags",),
                resources=created,
                conditions=(
                    *request_tags[:2],
                    _eq("ec2:CreateAction", "RunInstances", "CreateFleet", "CreateLaunchTemplate"),
                    request_tags[2],
                ),
            ),
            Statement(
                sid="AllowScopedResourceTagging",
                actions=("ec2:CreateTags",),
                resources=(_ec2(params, "instance/*"),),
                conditions=(
                    *resource_tags,
                    Condition(
                        operator="StringEqualsIfExists",
                        key=f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}",
                        values=(params.cluster_name,),
                    ),
                    Condition(
                        operator="ForAllValues:StringEquals",
                        key="aws:TagKeys",
                        values=(TAG_EKS_CLUSTER_NAME, TAG_NODECLAIM, TAG_NAME),
                    ),
                ),
            ),
            Statement(
                sid="AllowScopedDeletion",
                actions=("ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"),
                resources=(_ec2(params, "instance/*"), _ec2(params, "launch-template/*")),
                conditions=resource_tags,
            ),
        )
    )


def _iam_integration(params: IamParameters) -> PolicyDocument:
    owned = cluster_tag(params.cluster_name)
    profiles = (params.partition.arn("iam", "", params.account_id, "instance-profile/*"),)
    region_tag = params.region

    def scoped(prefix: str) -> tuple[Condition, ...]:
        return (
            _eq(f"{prefix}/{owned}", "owned"),
            _eq(f"{prefix}/{TAG_REGION}", region_tag),
        )

    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowPassingInstanceRole",
                actions=("iam:PassRole",),
                resources=(params.node_role_arn,),
                conditions=(_eq("iam:PassedToService", *params.partition.ec2_passed_to_service),),
            ),
            Statement(
                sid="AllowScopedInstanceProfileCreationActions",
                actions=("iam:CreateInstanceProfile",),
                resources=profiles,
                conditions=(
                    _eq(f"aws:RequestTag/{owned}", "owned"),
                    _eq(f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}", params.cluster_name),
                    _eq(f"aws:RequestTag/{TAG_REGION}", region_tag),
                    _like(f"aws:RequestTag/{TAG_NODECLASS}", "*"),
                ),
            ),
            Statement(
                sid="AllowScopedInstanceProfileTagActions",
                actions=("iam:TagInstanceProfile",),
                resources=profiles,
                conditions=(
                    *scoped("aws:ResourceTag"),
                    *scoped("aws:RequestTag"),
                    _eq(f"aws:RequestTag/{TAG_EKS_CLUSTER_NAME}", params.cluster_name),
                    _like(f"aws:ResourceTag/{TAG_NODECLASS}", "*"),
                    _like(f"aws:RequestTag/{TAG_NODECLASS}", "*"),
                ),
            ),
            Statement(
                sid="AllowScopedInstanceProfileActions",
                actions=(
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ),
                resources=profiles,
                conditions=(
                    *scoped("aws:ResourceTag"),
                    _like(f"aws:ResourceTag/{TAG_NODECLASS}", "*"),
                ),
            ),
        )
    )


def _eks_integration(params: IamParameters) -> PolicyDocument:
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowAPIServerEndpointDiscovery",
                actions=("eks:DescribeCluster",),
                resources=(params.cluster_arn,),
            ),
        )
    )


def _interruption(params: IamParameters) -> PolicyDocument:
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowInterruptionQueueActions",
                actions=("sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"),
                resources=(params.queue_arn,),
            ),
        )
    )


def _resource_discovery(params: IamParameters) -> PolicyDocument:
    return PolicyDocument(
        statements=(
            Statement(
                sid="AllowRegionalReadActions",
                actions=EC2_DESCRIBE_ACTIONS,
                # EC2 describes support no resource-level permissions.
                resources=("*",),
                conditions=(_eq("aws:RequestedRegion", params.region),),
            ),
            Statement(
                sid="AllowSSMReadActions",
                actions=("ssm:GetParameter",),
                # AWS-owned public parameters (AMI aliases) have no account in their ARN.
                resources=(
                    params.partition.arn("ssm", params.region, "", "parameter/aws/service/*"),
                ),
            ),
            Statement(
                sid="AllowPricingReadActions",
                actions=("pricing:GetProducts",),
                resources=("*",),  # the Price List API has no resources
            ),
            Statement(
                sid="AllowUnscopedInstanceProfileListAction",
                actions=("iam:ListInstanceProfiles",),
                resources=("*",),
            ),
            Statement(
                sid="AllowInstanceProfileReadActions",
                # Unconditioned: a tag condition would turn "no such profile" (which makes the
                # provider create one) into AccessDenied.
                actions=("iam:GetInstanceProfile",),
                resources=(
                    params.partition.arn("iam", "", params.account_id, "instance-profile/*"),
                ),
            ),
        )
    )
