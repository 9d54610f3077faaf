"""The EC2NodeClass lifecycle on moto (issue 18 item 5): status with Karpenter's conditions, and
cleanup of the class's launch templates and instance profile on delete."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cloudprovider.aws.instanceprofile import profile_name
from cloudprovider.aws.nodeclasslifecycle import AwsNodeClassLifecycle
from provisioner.apis.base import to_wire
from tests.aws.harness import CLUSTER, REGION, AwsEnv, make_nodeclass, make_request

pytestmark = pytest.mark.aws

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def lifecycle(aws: AwsEnv) -> AwsNodeClassLifecycle:
    return AwsNodeClassLifecycle(
        resolver=aws.provider.resolver,
        launch_templates=aws.provider.launch_templates,
        instance_profiles=aws.provider.resolver.instance_profiles,
        cluster=CLUSTER,
        region=REGION,
    )


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_status_has_karpenters_conditions_and_resolved_resources(aws: AwsEnv) -> None:
    nodeclass = make_nodeclass()
    status = lifecycle(aws).status(to_wire(nodeclass), NOW)

    assert conditions(status) == {
        "SubnetsReady": ("True", "SubnetsReady"),
        "SecurityGroupsReady": ("True", "SecurityGroupsReady"),
        "AMIsReady": ("True", "AMIsReady"),
        "InstanceProfileReady": ("True", "InstanceProfileReady"),
        "CapacityReservationsReady": ("True", "CapacityReservationsReady"),
        "ValidationSucceeded": ("True", "ValidationSucceeded"),
        "Ready": ("True", "Ready"),
    }
    assert [c["type"] for c in status["conditions"]][-1] == "Ready"
    assert len(status["subnets"]) == len(aws.subnets)
    assert [g["id"] for g in status["securityGroups"]] == [aws.security_group]
    assert status["amis"]
    assert status["instanceProfile"] == profile_name(CLUSTER, REGION, nodeclass)


def test_a_malformed_class_fails_validation_naming_the_field(aws: AwsEnv) -> None:
    raw = to_wire(make_nodeclass())
    raw["spec"]["subnetSelectorTerms"] = "not-a-list"
    status = lifecycle(aws).status(raw, NOW)

    assert conditions(status)["ValidationSucceeded"][0] == "False"
    assert conditions(status)["Ready"][0] == "False"
    message = next(c["message"] for c in status["conditions"] if c["type"] == "Ready")
    assert "subnetSelectorTerms" in message


def test_cleanup_deletes_the_classes_launch_templates_and_instance_profile(aws: AwsEnv) -> None:
    nodeclass = aws.nodeclasses.add(make_nodeclass())
    other = aws.nodeclasses.add(make_nodeclass("other"))
    aws.provider.create(make_request(instance_types=("m5.large",)))
    aws.provider.create(
        make_request("other-abcde", instance_types=("m5.large",), nodeclass="other")
    )
    templates = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    assert len(templates) >= 2
    profile = profile_name(CLUSTER, REGION, nodeclass)
    aws.iam.get_instance_profile(InstanceProfileName=profile)

    deleted = lifecycle(aws).cleanup(to_wire(nodeclass))

    remaining = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    tags = [{t["Key"]: t["Value"] for t in lt.get("Tags", [])} for lt in remaining]
    assert remaining
    assert all(t["karpenter.k8s.aws/ec2nodeclass"] == "other" for t in tags)
    assert profile in deleted
    with pytest.raises(aws.iam.exceptions.NoSuchEntityException):
        aws.iam.get_instance_profile(InstanceProfileName=profile)
    aws.iam.get_instance_profile(InstanceProfileName=profile_name(CLUSTER, REGION, other))
    assert lifecycle(aws).cleanup(to_wire(nodeclass)) == [profile]  # idempotent
