"""Controller policies: scoping, tag conditions, partitions, exactly the actions Jointer calls."""

import pytest

from iam import (
    CONTROLLER_ACTIONS,
    IamParameters,
    Statement,
    allowed_actions,
    controller,
    controller_policies,
    is_allowed,
)
from iam.controller import INSTANCE_PROFILE_MUTATING_ACTIONS, INSTANCE_PROFILE_READ_ACTIONS
from provisioner.apis import labels


def _statements(params: IamParameters) -> list[Statement]:
    return [s for p in controller_policies(params) for s in p.document.statements]


def _granting(params: IamParameters, action: str) -> list[Statement]:
    return [s for s in _statements(params) if action in s.actions]


def test_policy_names_and_split(demo):
    assert [p.name for p in controller_policies(demo)] == [
        "JointerControllerNodeLifecyclePolicy-demo",
        "JointerControllerIAMIntegrationPolicy-demo",
        "JointerControllerEKSIntegrationPolicy-demo",
        "JointerControllerInterruptionPolicy-demo",
        "JointerControllerResourceDiscoveryPolicy-demo",
    ]


def test_grants_exactly_the_actions_jointer_calls(demo):
    docs = [p.document for p in controller_policies(demo)]
    assert allowed_actions(docs) == set(CONTROLLER_ACTIONS)


def test_no_wildcard_and_no_deny(demo):
    for stmt in _statements(demo):
        assert stmt.effect == "Allow"
        for action in stmt.actions:
            assert "*" not in action, f"{stmt.sid} grants wildcard {action}"
            assert "?" not in action


def test_left_out_on_purpose(demo):
    docs = [p.document for p in controller_policies(demo)]
    for action in (
        "arc-zonal-shift:GetManagedResource",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeAvailabilityZones",
        "ec2:DescribeInstanceStatus",
    ):
        assert not is_allowed(docs, action)
    resources = [r for s in _statements(demo) for r in s.resources]
    assert not [r for r in resources if "placement-group" in r]


def test_launches_may_target_capacity_reservations_shared_by_any_account(demo):
    assert is_allowed(
        [p.document for p in controller_policies(demo)], "ec2:DescribeCapacityReservations"
    )
    [stmt] = [
        s
        for s in _statements(demo)
        if "arn:aws:ec2:us-east-1:*:capacity-reservation/*" in s.resources
    ]
    assert set(stmt.actions) == {"ec2:RunInstances", "ec2:CreateFleet"}


def test_terminate_instances_only_on_owned_nodepool_instances(demo):
    [stmt] = _granting(demo, "ec2:TerminateInstances")
    assert stmt.resources == (
        "arn:aws:ec2:us-east-1:111122223333:instance/*",
        "arn:aws:ec2:us-east-1:111122223333:launch-template/*",
    )
    conds = {(c.operator, c.key): c.values for c in stmt.conditions}
    assert conds == {
        ("StringEquals", "aws:ResourceTag/kubernetes.io/cluster/demo"): ("owned",),
        ("StringLike", "aws:ResourceTag/karpenter.sh/nodepool"): ("*",),
    }


def test_every_mutating_ec2_statement_is_tag_scoped(demo):
    for action in (
        "ec2:CreateLaunchTemplate",
        "ec2:DeleteLaunchTemplate",
        "ec2:CreateTags",
        "ec2:TerminateInstances",
    ):
        for stmt in _granting(demo, action):
            tag_keys = {c.key for c in stmt.conditions if "Tag/" in c.key}
            assert "aws:RequestTag/kubernetes.io/cluster/demo" in tag_keys or (
                "aws:ResourceTag/kubernetes.io/cluster/demo" in tag_keys
            ), f"{stmt.sid} lets {action} touch resources of other clusters"


def test_launch_creates_only_with_this_clusters_request_tags(demo):
    [stmt] = _granting(demo, "ec2:CreateLaunchTemplate")
    conds = {(c.operator, c.key): c.values for c in stmt.conditions}
    assert conds == {
        ("StringEquals", "aws:RequestTag/kubernetes.io/cluster/demo"): ("owned",),
        ("StringEquals", "aws:RequestTag/eks:eks-cluster-name"): ("demo",),
        ("StringLike", "aws:RequestTag/karpenter.sh/nodepool"): ("*",),
    }
    [creation, later] = _granting(demo, "ec2:CreateTags")
    assert {c.key: c.values for c in creation.conditions}["ec2:CreateAction"] == (
        "RunInstances",
        "CreateFleet",
        "CreateLaunchTemplate",
    )
    tag_keys = {c.key: c.values for c in later.conditions}["aws:TagKeys"]
    assert set(tag_keys) == {"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}
    assert later.resources == ("arn:aws:ec2:us-east-1:111122223333:instance/*",)


def test_instance_profile_mutations_carry_owned_region_and_nodeclass_tags(demo):
    for action in INSTANCE_PROFILE_MUTATING_ACTIONS:
        [stmt] = _granting(demo, action)
        assert stmt.resources == ("arn:aws:iam::111122223333:instance-profile/*",)
        conds = {(c.operator, c.key): c.values for c in stmt.conditions}
        prefix = "aws:RequestTag" if action == "iam:CreateInstanceProfile" else "aws:ResourceTag"
        assert conds[("StringEquals", f"{prefix}/kubernetes.io/cluster/demo")] == ("owned",)
        assert conds[("StringEquals", f"{prefix}/topology.kubernetes.io/region")] == ("us-east-1",)
        assert conds[("StringLike", f"{prefix}/karpenter.k8s.aws/ec2nodeclass")] == ("*",)


def test_instance_profile_reads_are_the_only_unconditioned_profile_actions(demo):
    for action in INSTANCE_PROFILE_READ_ACTIONS:
        [stmt] = _granting(demo, action)
        assert stmt.conditions == ()
        assert stmt.actions == (action,)


def test_pass_role_names_only_the_node_role_and_only_for_ec2(demo):
    [stmt] = _granting(demo, "iam:PassRole")
    assert stmt.actions == ("iam:PassRole",)
    assert stmt.resources == ("arn:aws:iam::111122223333:role/JointerNodeRole-demo",)
    [cond] = stmt.conditions
    assert (cond.operator, cond.key, cond.values) == (
        "StringEquals",
        "iam:PassedToService",
        ("ec2.amazonaws.com",),
    )


def test_pass_role_follows_node_role_override():
    params = IamParameters.create(
        cluster_name="demo", account_id="111122223333", region="us-east-1", node_role_name="Nodes"
    )
    [stmt] = _granting(params, "iam:PassRole")
    assert stmt.resources == ("arn:aws:iam::111122223333:role/Nodes",)


def test_reads_are_region_scoped_and_point_resources_named(demo):
    [describe] = _granting(demo, "ec2:DescribeInstances")
    assert [(c.key, c.values) for c in describe.conditions] == [
        ("aws:RequestedRegion", ("us-east-1",))
    ]
    [eks] = _granting(demo, "eks:DescribeCluster")
    assert eks.resources == ("arn:aws:eks:us-east-1:111122223333:cluster/demo",)
    [sqs] = _granting(demo, "sqs:ReceiveMessage")
    assert sqs.resources == ("arn:aws:sqs:us-east-1:111122223333:demo",)
    [ssm] = _granting(demo, "ssm:GetParameter")
    assert ssm.resources == ("arn:aws:ssm:us-east-1::parameter/aws/service/*",)


@pytest.mark.parametrize(
    ("region", "prefix", "passed_to"),
    [
        ("cn-north-1", "arn:aws-cn:", ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")),
        ("us-gov-west-1", "arn:aws-us-gov:", ("ec2.amazonaws.com",)),
    ],
)
def test_partition_arns(region, prefix, passed_to):
    params = IamParameters.create(cluster_name="demo", account_id="111122223333", region=region)
    for stmt in _statements(params):
        for resource in stmt.resources:
            assert resource == "*" or resource.startswith(prefix), resource
            assert f":{region}:" in resource or ":iam::" in resource or resource == "*"
    [pass_role] = _granting(params, "iam:PassRole")
    assert pass_role.conditions[0].values == passed_to


def test_tag_keys_mirror_the_project_label_keys():
    # iam may not import the project, so it repeats these keys; this keeps them in step.
    assert controller.TAG_NODEPOOL == labels.LABEL_NODEPOOL
    assert controller.TAG_NODECLASS == labels.LABEL_EC2NODECLASS
    assert controller.TAG_REGION == labels.LABEL_REGION
