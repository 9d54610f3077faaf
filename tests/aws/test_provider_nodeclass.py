"""EC2NodeClass resolution on moto: subnets, security groups, AMI aliases and terms,
instance profiles, status and Ready reasons, launch templates and drift."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cloudprovider.aws.ami import UnsupportedAliasError, alias_parameters
from cloudprovider.aws.instanceprofile import profile_name
from cloudprovider.aws.nodeclass import EC2NodeClass
from cloudprovider.aws.nodeclassstatus import ConditionState
from cloudprovider.protocol import CloudNodeClaim
from provisioner.apis.labels import ARCHITECTURE_ARM64, LABEL_ARCH, LABEL_INSTANCE_GPU_COUNT
from tests.aws.harness import (
    AMI_ARM,
    AMI_NEURON,
    AMI_NVIDIA,
    AMI_X86,
    CLUSTER,
    K8S,
    REGION,
    ROLE,
    ZONES,
    AwsEnv,
    make_nodeclass,
    make_request,
)

pytestmark = pytest.mark.aws


def test_resolves_subnets_groups_amis_and_profile(aws: AwsEnv):
    resolved = aws.provider.resolver.resolve(make_nodeclass())

    assert resolved.is_ready()
    assert sorted(s.zone for s in resolved.subnets) == list(ZONES)
    assert [g.id for g in resolved.security_groups] == [aws.security_group]
    assert {a.id for a in resolved.amis} == {AMI_X86, AMI_ARM, AMI_NVIDIA, AMI_NEURON}
    assert resolved.instance_profile == profile_name(CLUSTER, REGION, make_nodeclass())
    profile = aws.iam.get_instance_profile(InstanceProfileName=resolved.instance_profile)
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == [ROLE]
    assert profile["InstanceProfile"]["Path"] == f"/karpenter/{REGION}/{CLUSTER}/uid-default/"
    status = resolved.to_status(datetime(2026, 1, 1, tzinfo=UTC))
    assert status.instance_profile == resolved.instance_profile
    assert {c.type: c.status for c in status.conditions or []}["Ready"] == "True"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param(
            {"subnetSelectorTerms": [{"tags": {"x": "y"}}]}, "SubnetsNotFound", id="subnets"
        ),
        pytest.param(
            {"securityGroupSelectorTerms": [{"name": "missing"}]},
            "SecurityGroupsNotFound",
            id="groups",
        ),
        pytest.param(
            {"amiSelectorTerms": [{"alias": "al2023@v19990101"}]}, "AMINotFound", id="amis"
        ),
        pytest.param({"role": "no-such-role"}, "InstanceProfileNotFound", id="role"),
    ],
)
def test_ready_is_false_with_a_reason_naming_what_is_missing(aws: AwsEnv, spec, reason):
    resolved = aws.provider.resolver.resolve(make_nodeclass(**spec))

    assert resolved.ready.status is ConditionState.FALSE
    assert resolved.ready.reason == reason


def test_ready_is_unknown_when_aws_cannot_be_asked(aws: AwsEnv):
    aws.faults.throttle("DescribeSubnets", 10)

    resolved = aws.provider.resolver.resolve(make_nodeclass())

    assert resolved.ready.status is ConditionState.UNKNOWN
    assert resolved.ready.reason == "Throttling"


def test_selector_terms_by_id_and_name(aws: AwsEnv):
    nodeclass = make_nodeclass(
        subnetSelectorTerms=[{"id": aws.subnets["us-east-1b"]}],
        securityGroupSelectorTerms=[{"name": "nodes"}],
        amiSelectorTerms=[{"id": AMI_ARM}],
        amiFamily="AL2023",
    )

    resolved = aws.provider.resolver.resolve(nodeclass)

    assert [s.id for s in resolved.subnets] == [aws.subnets["us-east-1b"]]
    assert [g.id for g in resolved.security_groups] == [aws.security_group]
    (ami,) = resolved.amis
    assert ami.id == AMI_ARM
    assert ami.requirements[LABEL_ARCH].has(ARCHITECTURE_ARM64)


def test_tag_wildcard_selects_every_tagged_subnet(aws: AwsEnv):
    resolved = aws.provider.resolver.resolve(
        make_nodeclass(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "*"}}])
    )

    assert len(resolved.subnets) == 3


def test_pinned_alias_version_resolves_the_pinned_parameter(aws: AwsEnv):
    resolved = aws.provider.resolver.resolve(
        make_nodeclass(amiSelectorTerms=[{"alias": "al2023@v20240807"}])
    )

    assert [a.id for a in resolved.amis] == [AMI_NEURON]


def test_alias_variants_follow_the_instance_type():
    names = [p.name for p in alias_parameters("al2023@latest", K8S)]

    assert (
        f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        in names
    )
    assert (
        f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/arm64/standard/recommended/image_id"
        in names
    )
    assert any("neuron" in n for n in names)
    bottlerocket = [p.name for p in alias_parameters("bottlerocket@v1.20.3", K8S)]
    assert f"/aws/service/bottlerocket/aws-k8s-{K8S}/x86_64/1.20.3/image_id" in bottlerocket
    with pytest.raises(UnsupportedAliasError):
        alias_parameters("al2@latest", "1.33")


def test_gpu_and_arm_types_get_their_variant(aws: AwsEnv):
    resolved = aws.provider.resolver.resolve(make_nodeclass())
    from cloudprovider.aws.ami import ami_for  # noqa: PLC0415

    assert ami_for(resolved.amis, {LABEL_ARCH: "amd64"}).id == AMI_X86  # type: ignore[union-attr]
    assert ami_for(resolved.amis, {LABEL_ARCH: "arm64"}).id == AMI_ARM  # type: ignore[union-attr]
    gpu = {LABEL_ARCH: "amd64", LABEL_INSTANCE_GPU_COUNT: "1"}
    assert ami_for(resolved.amis, gpu).id == AMI_NVIDIA  # type: ignore[union-attr]


def test_launch_templates_are_reused_and_unused_ones_deleted(aws: AwsEnv):
    aws.provider.create(make_request("a-1", instance_types=("m5.large",)))
    aws.provider.create(make_request("a-2", instance_types=("m5.large",)))

    templates = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    assert len(templates) == 1
    assert templates[0]["LaunchTemplateName"].startswith("karpenter.k8s.aws/")
    assert aws.provider.launch_templates.delete_unused() == []
    aws.timer.advance(61)
    assert len(aws.provider.launch_templates.delete_unused()) == 1
    assert aws.ec2.describe_launch_templates()["LaunchTemplates"] == []


def test_a_deleted_launch_template_is_recreated_once(aws: AwsEnv):
    aws.provider.create(make_request("a-1", instance_types=("m5.large",)))
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    aws.ec2.delete_launch_template(LaunchTemplateName=template["LaunchTemplateName"])

    claim = aws.provider.create(make_request("a-2", instance_types=("m5.large",)))

    assert claim.instance_id
    assert len(aws.ec2.describe_launch_templates()["LaunchTemplates"]) == 1


def test_instance_profiles_of_deleted_nodeclasses_are_garbage_collected(aws: AwsEnv):
    name = aws.provider.resolver.resolve(make_nodeclass()).instance_profile

    deleted = aws.provider.resolver.instance_profiles.garbage_collect({"uid-other"})

    assert deleted == [name]
    assert aws.iam.list_instance_profiles()["InstanceProfiles"] == []


def _resolved(aws: AwsEnv, nodeclass: EC2NodeClass) -> EC2NodeClass:
    """The class with the status the nodeclass controller writes for it."""
    status = aws.provider.resolver.resolve(nodeclass).to_status(datetime(2026, 1, 1, tzinfo=UTC))
    return nodeclass.model_copy(update={"status": status})


def _claim_view(aws: AwsEnv, claim: CloudNodeClaim) -> CloudNodeClaim:
    groups = [aws.security_group]
    aws.ec2.modify_instance_attribute(InstanceId=claim.instance_id, Groups=groups)
    return claim


def test_no_drift_right_after_launch(aws: AwsEnv):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    aws.nodeclasses.add(_resolved(aws, make_nodeclass()))

    assert aws.provider.is_drifted(claim) is None


def test_nodeclass_drift_when_the_static_spec_changes(aws: AwsEnv):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    aws.nodeclasses.add(make_nodeclass(tags={"team": "b"}))

    assert aws.provider.is_drifted(claim) == "NodeClassDrift"


def test_ami_drift_when_the_resolved_amis_change(aws: AwsEnv):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    aws.nodeclasses.add(
        _resolved(aws, make_nodeclass(amiSelectorTerms=[{"id": AMI_ARM}], amiFamily="AL2023"))
    )

    assert aws.provider.is_drifted(claim) in {"AMIDrift", "NodeClassDrift"}
    from dataclasses import replace  # noqa: PLC0415

    assert aws.provider.is_drifted(replace(claim, annotations={})) == "AMIDrift"


def test_subnet_drift_when_the_subnet_is_no_longer_selected(aws: AwsEnv):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    others = [s for z, s in aws.subnets.items() if z != claim.zone]
    moved = make_nodeclass(subnetSelectorTerms=[{"id": s} for s in others])
    stale = moved.model_copy(update={"status": _resolved(aws, make_nodeclass()).status})
    aws.nodeclasses.add(stale)

    assert aws.provider.is_drifted(claim) is None  # the status still lists the old subnets
    aws.nodeclasses.add(_resolved(aws, moved))

    assert aws.provider.is_drifted(claim) == "SubnetDrift"


def test_no_dynamic_drift_while_the_class_has_no_status_or_is_not_ready(aws: AwsEnv):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    others = [s for z, s in aws.subnets.items() if z != claim.zone]
    moved = _resolved(aws, make_nodeclass(subnetSelectorTerms=[{"id": s} for s in others]))
    assert moved.status is not None
    not_ready = [
        c.model_copy(update={"status": "False"}) if c.type == "Ready" else c
        for c in moved.status.conditions or ()
    ]
    aws.nodeclasses.add(
        moved.model_copy(
            update={"status": moved.status.model_copy(update={"conditions": not_ready})}
        )
    )
    assert aws.provider.is_drifted(claim) is None
    aws.nodeclasses.add(moved.model_copy(update={"status": None}))

    assert aws.provider.is_drifted(claim) is None


def test_security_group_drift_when_the_groups_differ(aws: AwsEnv):
    claim = aws.provider.create(make_request(capacity_types=("on-demand",)))
    other = aws.ec2.create_security_group(GroupName="x", Description="x", VpcId=aws.vpc_id)[
        "GroupId"
    ]
    aws.ec2.modify_instance_attribute(InstanceId=claim.instance_id, Groups=[other])
    aws.nodeclasses.add(_resolved(aws, make_nodeclass()))

    assert aws.provider.is_drifted(claim) == "SecurityGroupDrift"


def test_drift_checks_are_answered_by_the_garbage_collection_list(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
):
    claim = _claim_view(aws, aws.provider.create(make_request(capacity_types=("on-demand",))))
    aws.nodeclasses.add(_resolved(aws, make_nodeclass()))
    ec2 = aws.provider.instances.ec2
    describe = ec2.describe_instances
    calls: list[object] = []

    def counting(**kwargs: object) -> object:
        calls.append(kwargs.get("Filters"))
        return describe(**kwargs)

    monkeypatch.setattr(ec2, "describe_instances", counting)
    aws.provider.list_claims()
    aws.timer.advance(150)  # older than a liveness answer, young enough for drift

    assert aws.provider.is_drifted(claim) is None
    assert len(calls) == 1  # the list only
    other = aws.ec2.create_security_group(GroupName="x", Description="x", VpcId=aws.vpc_id)[
        "GroupId"
    ]
    aws.ec2.modify_instance_attribute(InstanceId=claim.instance_id, Groups=[other])
    aws.timer.advance(31)  # the list is 3 minutes old: drift asks EC2 again

    assert aws.provider.is_drifted(claim) == "SecurityGroupDrift"
    assert len(calls) == 2
