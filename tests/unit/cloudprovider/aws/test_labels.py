"""Well-known labels derived from DescribeInstanceTypes entries."""

from __future__ import annotations

import pytest

from cloudprovider.aws import labels as L  # noqa: N812 -- reads like the Go constants


def test_g5_xlarge_labels(ec2_types):
    labels = L.labels_from_ec2(ec2_types["g5.xlarge"])
    assert labels[L.INSTANCE_GPU_NAME] == "a10g"
    assert labels[L.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert labels[L.INSTANCE_GPU_COUNT] == "1"
    assert labels[L.INSTANCE_GPU_MEMORY] == "22888"
    assert labels[L.INSTANCE_LOCAL_NVME] == "250"
    assert labels[L.ARCH] == "amd64"
    assert labels[L.OS] == "linux"


def test_m5_large_labels(ec2_types):
    labels = L.labels_from_ec2(ec2_types["m5.large"])
    assert labels == labels | {
        L.INSTANCE_TYPE: "m5.large",
        L.INSTANCE_CATEGORY: "m",
        L.INSTANCE_FAMILY: "m5",
        L.INSTANCE_GENERATION: "5",
        L.INSTANCE_SIZE: "large",
        L.INSTANCE_CPU: "2",
        L.INSTANCE_CPU_MANUFACTURER: "intel",
        L.INSTANCE_MEMORY: "8192",
        L.INSTANCE_HYPERVISOR: "nitro",
        L.INSTANCE_NETWORK_BANDWIDTH: "750",
        L.INSTANCE_EBS_BANDWIDTH: "4750",
        L.INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: "false",
    }
    assert L.INSTANCE_GPU_NAME not in labels
    assert L.INSTANCE_LOCAL_NVME not in labels


def test_arm64_and_accelerator_labels(ec2_types):
    assert L.labels_from_ec2(ec2_types["m6g.large"])[L.ARCH] == "arm64"
    inf2 = L.labels_from_ec2(ec2_types["inf2.xlarge"])
    assert inf2[L.INSTANCE_ACCELERATOR_NAME] == "inferentia2"
    assert inf2[L.INSTANCE_ACCELERATOR_MANUFACTURER] == "aws"
    assert inf2[L.INSTANCE_ACCELERATOR_COUNT] == "1"


def test_metal_has_no_hypervisor_label(ec2_types):
    assert L.INSTANCE_HYPERVISOR not in L.labels_from_ec2(ec2_types["m5.metal"])


@pytest.mark.parametrize(
    ("name", "category", "generation"),
    [("m5.large", "m", "5"), ("u-6tb1.metal", "u", "1"), ("c7gn.large", "c", "7")],
)
def test_category_and_generation_from_name(name, category, generation):
    labels = L.labels_from_name(name)
    assert labels[L.INSTANCE_CATEGORY] == category
    assert labels[L.INSTANCE_GENERATION] == generation


@pytest.mark.parametrize(
    ("name", "graviton"),
    [("m6g.large", True), ("c7gn.large", True), ("m5.large", False), ("g5.xlarge", False)],
)
def test_graviton_name_heuristic(name, graviton):
    assert L.is_graviton_name(name) is graviton
