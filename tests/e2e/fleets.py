"""Launching instances into the simulated account the way the AWS provider does (CreateFleet)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner.simulation.cloud import MotoCloud

AL2023_IMAGE = (
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
)
"""The SSM parameter of the simulated account's default AL2023 image."""


def fleet(
    cloud: MotoCloud,
    capacity_type: str,
    *types: str,
    nodeclaim: str = "nc-1",
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Launch one instance of ``types`` in any of the account's zones; return CreateFleet's answer.

    The instance is tagged with ``nodeclaim`` and NodePool ``default``, then ``tags`` over them.
    """
    ec2 = cloud.client("ec2")
    image = cloud.client("ssm").get_parameter(Name=AL2023_IMAGE)["Parameter"]["Value"]
    names = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    if "nodes" not in names:
        ec2.create_launch_template(
            LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": image}
        )
    overrides = [
        {"InstanceType": t, "SubnetId": subnet, "AvailabilityZone": zone}
        for t in types
        for zone, subnet in cloud.subnets.items()
    ]
    tagged = {"karpenter.sh/nodeclaim": nodeclaim, "karpenter.sh/nodepool": "default"}
    tagged.update(tags or {})
    result: dict[str, Any] = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": "nodes",
                    "Version": "$Latest",
                },
                "Overrides": overrides,
            }
        ],
        TargetCapacitySpecification={
            "TotalTargetCapacity": 1,
            "DefaultTargetCapacityType": capacity_type,
        },
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [{"Key": k, "Value": v} for k, v in tagged.items()],
            }
        ],
    )
    return result
