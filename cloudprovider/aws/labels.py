"""Well-known node labels Karpenter derives from EC2 instance-type data.

The keys are defined here for now; ``provisioner/apis/labels.py`` is the project's home for label
keys and the core ``kubernetes.io``/``karpenter.sh`` ones below are to be unified with it.

Derivation follows Karpenter's ``pkg/providers/instancetype/types.go`` (v1.14): labels whose value
does not apply to a type (GPU labels on a CPU type, ...) are simply absent.

``instance-network-bandwidth``: Karpenter reads a static table (``zz_generated.bandwidth.go``,
Mbps). That table is not available offline, so Jointer derives the value from the default network
card's ``BaselineBandwidthInGbps`` (x 1000), which is where the table's numbers come from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "ARCH",
    "CAPACITY_TYPE",
    "INSTANCE_ACCELERATOR_COUNT",
    "INSTANCE_ACCELERATOR_MANUFACTURER",
    "INSTANCE_ACCELERATOR_NAME",
    "INSTANCE_CATEGORY",
    "INSTANCE_CPU",
    "INSTANCE_CPU_MANUFACTURER",
    "INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ",
    "INSTANCE_EBS_BANDWIDTH",
    "INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED",
    "INSTANCE_FAMILY",
    "INSTANCE_GENERATION",
    "INSTANCE_GPU_COUNT",
    "INSTANCE_GPU_MANUFACTURER",
    "INSTANCE_GPU_MEMORY",
    "INSTANCE_GPU_NAME",
    "INSTANCE_HYPERVISOR",
    "INSTANCE_LOCAL_NVME",
    "INSTANCE_MEMORY",
    "INSTANCE_NETWORK_BANDWIDTH",
    "INSTANCE_SIZE",
    "INSTANCE_TYPE",
    "OS",
    "REGION",
    "ZONE",
    "arch_from_ec2",
    "labels_from_ec2",
    "labels_from_name",
    "lower_kebab",
]

# core keys (to be unified with provisioner/apis/labels.py)
ARCH: Final = "kubernetes.io/arch"
OS: Final = "kubernetes.io/os"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"

# karpenter.k8s.aws keys
_AWS: Final = "karpenter.k8s.aws/"
INSTANCE_CATEGORY: Final = _AWS + "instance-category"
INSTANCE_FAMILY: Final = _AWS + "instance-family"
INSTANCE_GENERATION: Final = _AWS + "instance-generation"
INSTANCE_SIZE: Final = _AWS + "instance-size"
INSTANCE_CPU: Final = _AWS + "instance-cpu"
INSTANCE_CPU_MANUFACTURER: Final = _AWS + "instance-cpu-manufacturer"
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = _AWS + "instance-cpu-sustained-clock-speed-mhz"
INSTANCE_MEMORY: Final = _AWS + "instance-memory"
INSTANCE_EBS_BANDWIDTH: Final = _AWS + "instance-ebs-bandwidth"
INSTANCE_NETWORK_BANDWIDTH: Final = _AWS + "instance-network-bandwidth"
INSTANCE_LOCAL_NVME: Final = _AWS + "instance-local-nvme"
INSTANCE_HYPERVISOR: Final = _AWS + "instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: Final = _AWS + "instance-encryption-in-transit-supported"
INSTANCE_GPU_NAME: Final = _AWS + "instance-gpu-name"
INSTANCE_GPU_MANUFACTURER: Final = _AWS + "instance-gpu-manufacturer"
INSTANCE_GPU_COUNT: Final = _AWS + "instance-gpu-count"
INSTANCE_GPU_MEMORY: Final = _AWS + "instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME: Final = _AWS + "instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER: Final = _AWS + "instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT: Final = _AWS + "instance-accelerator-count"

ARCH_AMD64: Final = "amd64"
ARCH_ARM64: Final = "arm64"
_ARCHITECTURES: Final[Mapping[str, str]] = {"x86_64": ARCH_AMD64, "arm64": ARCH_ARM64}

# `m5.large` -> (m, 5); `u-6tb1.metal` -> (u, 1); `c7gn.large` -> (c, 7)
_GENERATION_RE: Final = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
# Graviton families carry a `g` right after the generation digit (m6g, c7gn, r8gd, x2gd, im4gn).
_GRAVITON_RE: Final = re.compile(r"^[a-z]+[0-9]+[a-z]*g[a-z]*\.")


def lower_kebab(value: str) -> str:
    """Karpenter's label spelling of EC2 names: lower case, spaces as dashes (``A10G`` -> a10g)."""
    return value.strip().lower().replace(" ", "-")


def arch_from_ec2(info: Mapping[str, Any]) -> str:
    """The Kubernetes architecture of the first supported EC2 architecture."""
    architectures = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    for architecture in architectures:
        if architecture in _ARCHITECTURES:
            return _ARCHITECTURES[architecture]
    return str(architectures[0]) if architectures else ARCH_AMD64


def labels_from_name(name: str) -> dict[str, str]:
    """The labels that follow from the name alone (type, family, size, category, generation)."""
    labels = {INSTANCE_TYPE: name}
    family, _, size = name.partition(".")
    if size:
        labels[INSTANCE_FAMILY] = family
        labels[INSTANCE_SIZE] = size
    match = _GENERATION_RE.match(name)
    if match:
        labels[INSTANCE_CATEGORY] = match.group(1)
        labels[INSTANCE_GENERATION] = match.group(3)
    return labels


def is_graviton_name(name: str) -> bool:
    """Heuristic used only when no EC2 data is at hand: Graviton families spell a ``g``."""
    family = name.partition(".")[0]
    return bool(_GRAVITON_RE.match(name)) and not family.startswith(("g", "p", "dl", "mac"))


def labels_from_ec2(info: Mapping[str, Any], *, os: str = "linux") -> dict[str, str]:
    """Karpenter's well-known labels for one DescribeInstanceTypes entry.

    Args:
        info: one ``InstanceTypes[]`` entry in boto3's shape.
        os: ``linux`` or ``windows`` (from the AMI family).
    """
    name = str(info["InstanceType"])
    labels = labels_from_name(name)
    labels[ARCH] = arch_from_ec2(info)
    labels[OS] = os
    labels.update(_cpu_labels(info))
    memory = info.get("MemoryInfo", {}).get("SizeInMiB")
    if memory is not None:
        labels[INSTANCE_MEMORY] = str(memory)
    labels.update(_network_labels(info))
    labels.update(_storage_labels(info))
    hypervisor = info.get("Hypervisor")
    if hypervisor:
        labels[INSTANCE_HYPERVISOR] = str(hypervisor)
    labels.update(_gpu_labels(info))
    labels.update(_accelerator_labels(info))
    return labels


def _cpu_labels(info: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    vcpus = info.get("VCpuInfo", {}).get("DefaultVCpus")
    if vcpus is not None:
        labels[INSTANCE_CPU] = str(vcpus)
    processor = info.get("ProcessorInfo", {})
    manufacturer = processor.get("Manufacturer")
    if manufacturer:
        labels[INSTANCE_CPU_MANUFACTURER] = lower_kebab(str(manufacturer))
    clock = processor.get("SustainedClockSpeedInGhz")
    if clock:
        labels[INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(round(float(clock) * 1000))
    return labels


def _network_labels(info: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    network = info.get("NetworkInfo", {})
    default_card = network.get("DefaultNetworkCardIndex", 0)
    for card in network.get("NetworkCards", []):
        if card.get("NetworkCardIndex") == default_card and "BaselineBandwidthInGbps" in card:
            labels[INSTANCE_NETWORK_BANDWIDTH] = str(round(card["BaselineBandwidthInGbps"] * 1000))
    if "EncryptionInTransitSupported" in network:
        labels[INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED] = str(
            bool(network["EncryptionInTransitSupported"])
        ).lower()
    ebs = info.get("EbsInfo", {}).get("EbsOptimizedInfo", {})
    if "MaximumBandwidthInMbps" in ebs:
        labels[INSTANCE_EBS_BANDWIDTH] = str(ebs["MaximumBandwidthInMbps"])
    return labels


def _storage_labels(info: Mapping[str, Any]) -> dict[str, str]:
    storage = info.get("InstanceStorageInfo")
    if not storage or storage.get("NvmeSupport") == "unsupported":
        return {}
    total = storage.get("TotalSizeInGB")
    return {INSTANCE_LOCAL_NVME: str(total)} if total is not None else {}


def _gpu_labels(info: Mapping[str, Any]) -> dict[str, str]:
    # Karpenter labels GPUs only when the type has exactly one kind of GPU.
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    if len(gpus) != 1:
        return {}
    gpu = gpus[0]
    labels = {
        INSTANCE_GPU_NAME: lower_kebab(str(gpu.get("Name", ""))),
        INSTANCE_GPU_MANUFACTURER: lower_kebab(str(gpu.get("Manufacturer", ""))),
        INSTANCE_GPU_COUNT: str(gpu.get("Count", 0)),
    }
    memory = gpu.get("MemoryInfo", {}).get("SizeInMiB")
    if memory is not None:
        labels[INSTANCE_GPU_MEMORY] = str(memory)
    return labels


def _accelerator_labels(info: Mapping[str, Any]) -> dict[str, str]:
    # Neuron devices (inf2, trn1, ...) first, then the older InferenceAcceleratorInfo (inf1).
    devices = info.get("NeuronInfo", {}).get("NeuronDevices")
    if devices is None:
        devices = info.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
    if len(devices) != 1:
        return {}
    device = devices[0]
    return {
        INSTANCE_ACCELERATOR_NAME: lower_kebab(str(device.get("Name", ""))),
        INSTANCE_ACCELERATOR_MANUFACTURER: lower_kebab(str(device.get("Manufacturer", "aws"))),
        INSTANCE_ACCELERATOR_COUNT: str(device.get("Count", 0)),
    }
