"""Golden files: the CreateFleet request and user data per AMI family.

Regenerate with ``pytest tests/aws/test_provider_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable

import pytest

from cloudprovider.aws.instance import FleetOverride, FleetRequest, create_fleet_input
from cloudprovider.aws.nodeclass import AMIFamily, KubeletConfiguration
from cloudprovider.aws.userdata import BootstrapOptions, render
from cloudprovider.aws.userdata.options import parse_mime
from provisioner.apis.core import Taint

Golden = Callable[[str, str], None]

OPTIONS = BootstrapOptions(
    cluster_name="test-cluster",
    cluster_endpoint="https://test-cluster.gr7.us-east-1.eks.amazonaws.com",
    ca_bundle="Y2EtYnVuZGxl",
    cluster_cidr="172.20.0.0/16",
    cluster_dns=("172.20.0.10",),
    max_pods=29,
    labels={
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/capacity-type": "spot",
        "team": "a",
        "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a",
    },
    taints=(Taint(key="dedicated", value="gpu", effect="NoSchedule"),),
    kubelet=KubeletConfiguration.model_validate(
        {"systemReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"}}
    ),
)


def _fleet_request(capacity_type: str) -> FleetRequest:
    return FleetRequest(
        nodeclaim="default-abcde",
        nodeclaim_uid="2f1c6f0e-0000-4000-8000-000000000001",
        capacity_type=capacity_type,
        overrides=tuple(
            FleetOverride(
                instance_type=name,
                zone=zone,
                subnet_id=f"subnet-{zone[-1]}",
                image_id="ami-1e749f67",
                launch_template="karpenter.k8s.aws/1234",
                price=price,
            )
            for name, price in (("c5.large", 0.034), ("m5.large", 0.0384))
            for zone in ("us-east-1a", "us-east-1b")
        ),
        tags={
            "eks:eks-cluster-name": "test-cluster",
            "kubernetes.io/cluster/test-cluster": "owned",
            "karpenter.sh/nodepool": "default",
            "karpenter.k8s.aws/ec2nodeclass": "default",
            "karpenter.sh/nodeclaim": "default-abcde",
            "Name": "default-abcde",
        },
    )


@pytest.mark.parametrize("capacity_type", ["spot", "on-demand"])
def test_create_fleet_request(golden: Golden, capacity_type: str):
    params = create_fleet_input(_fleet_request(capacity_type))

    golden(
        f"create_fleet_{capacity_type}.json", json.dumps(params, indent=2, sort_keys=True) + "\n"
    )


def test_al2023_user_data(golden: Golden):
    golden("al2023_userdata.golden", render(AMIFamily.AL2023, OPTIONS))


def test_al2023_user_data_merged_with_a_user_script(golden: Golden):
    from dataclasses import replace  # noqa: PLC0415

    text = render(AMIFamily.AL2023, replace(OPTIONS, user_data="#!/bin/bash\necho hello\n"))

    parts = parse_mime(text)
    assert parts is not None
    assert [p.content_type for p in parts] == [
        'text/x-shellscript; charset="us-ascii"',
        "application/node.eks.aws",
    ]
    golden("al2023_userdata_merged.golden", text)


def test_bottlerocket_user_data_merges_user_toml(golden: Golden):
    from dataclasses import replace  # noqa: PLC0415

    user = (
        '[settings.kubernetes]\ncluster-name = "wrong"\n"image-gc-high-threshold-percent" = "85"\n'
        "[settings.host-containers.admin]\nenabled = true\n"
    )
    text = render(AMIFamily.BOTTLEROCKET, replace(OPTIONS, user_data=user))

    parsed = tomllib.loads(text)
    kubernetes = parsed["settings"]["kubernetes"]
    assert kubernetes["cluster-name"] == "test-cluster"  # Karpenter wins
    assert kubernetes["image-gc-high-threshold-percent"] == "85"  # user's kept
    assert parsed["settings"]["host-containers"]["admin"]["enabled"] is True
    assert kubernetes["node-taints"]["karpenter.sh/unregistered"] == [":NoExecute"]
    golden("bottlerocket_userdata.golden", text)


def test_al2_user_data(golden: Golden):
    golden("al2_userdata.golden", render(AMIFamily.AL2, OPTIONS))


def test_custom_user_data_is_verbatim():
    from dataclasses import replace  # noqa: PLC0415

    assert render(AMIFamily.CUSTOM, replace(OPTIONS, user_data="raw", custom=True)) == "raw"
