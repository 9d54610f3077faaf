"""Node capacity of an EC2 instance type, as Karpenter computes it (karpenter-aws.md §2.2).

- ``cpu`` = DefaultVCpus.
- ``memory`` = MiB (-64 MiB on arm64) minus the VM memory overhead ``ceil(MiB x percent)``
  (``VM_MEMORY_OVERHEAD_PERCENT``, default 7.5 %, a setting).
- ``pods`` = ``kubelet.maxPods``, else the ENI limit (AL2, AL2023, Bottlerocket, Custom), else
  110 (Windows); then ``podsPerCore`` caps it where the family honours it.
- ``ephemeral-storage``: instance-store RAID0 total (decimal GB), else the ``rootVolume`` block
  device, else the family's ephemeral block device (or the last one for Custom), else the
  family default (20Gi; Bottlerocket 20Gi data volume; Windows 50Gi).
- Extended resources: ``nvidia.com/gpu``, ``amd.com/gpu``, ``habana.ai/gaudi``,
  ``aws.amazon.com/neuron``, ``aws.amazon.com/neuroncore``, ``vpc.amazonaws.com/efa`` and on
  Windows ``vpc.amazonaws.com/PrivateIPv4Address``.

Not reproduced: ``vpc.amazonaws.com/pod-eni`` (needs Karpenter's static VPC limits table) and the
discovered-capacity cache (real node memory per type and AMI).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cloudprovider.aws.labels import ARCH_ARM64, arch_from_ec2
from cloudprovider.aws.nodeclass import AMIFamily, EC2NodeClass, KubeletConfiguration
from provisioner.scheduling.quantity import parse_quantity

__all__ = [
    "CPU",
    "DEFAULT_VM_MEMORY_OVERHEAD_PERCENT",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "CapacitySettings",
    "FamilyFlags",
    "NodeClassView",
    "capacity",
    "eni_limited_pods",
    "family_flags",
    "pods",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HABANA_GAUDI: Final = "habana.ai/gaudi"
NEURON: Final = "aws.amazon.com/neuron"
NEURON_CORE: Final = "aws.amazon.com/neuroncore"
EFA: Final = "vpc.amazonaws.com/efa"
PRIVATE_IPV4: Final = "vpc.amazonaws.com/PrivateIPv4Address"

MI: Final = 2**20
GI: Final = 2**30
MILLI: Final = 1000
DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: Final = 0.075
# Pods per node where the ENI limit does not apply (Windows), as the kubelet's default.
DEFAULT_MAX_PODS: Final = 110
# arm64 nodes lose 64 MiB more to the kernel's memory map than Karpenter's percentage covers.
ARM64_MEMORY_ADJUSTMENT_MIB: Final = 64

_DEFAULT_EPHEMERAL_GI: Final[Mapping[AMIFamily, int]] = {
    AMIFamily.WINDOWS2019: 50,
    AMIFamily.WINDOWS2022: 50,
    AMIFamily.WINDOWS2025: 50,
}
_EPHEMERAL_DEVICE: Final[Mapping[AMIFamily, str]] = {
    AMIFamily.AL2: "/dev/xvda",
    AMIFamily.AL2023: "/dev/xvda",
    AMIFamily.BOTTLEROCKET: "/dev/xvdb",
    AMIFamily.WINDOWS2019: "/dev/sda1",
    AMIFamily.WINDOWS2022: "/dev/sda1",
    AMIFamily.WINDOWS2025: "/dev/sda1",
}
_GPU_RESOURCES: Final[Mapping[str, str]] = {
    "nvidia": NVIDIA_GPU,
    "amd": AMD_GPU,
    "habana": HABANA_GAUDI,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyFlags:
    """What an AMI family's node does differently (Karpenter's ``FeatureFlags``).

    Attributes:
        uses_eni_limited_memory_overhead: kube-reserved memory uses the ENI pod limit, not pods.
        pods_per_core_enabled: ``kubelet.podsPerCore`` caps pods.
        supports_eni_limited_pod_density: pods default to the ENI limit (else 110).
    """

    uses_eni_limited_memory_overhead: bool
    pods_per_core_enabled: bool
    supports_eni_limited_pod_density: bool


_LINUX_FLAGS: Final = FamilyFlags(
    uses_eni_limited_memory_overhead=True,
    pods_per_core_enabled=True,
    supports_eni_limited_pod_density=True,
)
_BOTTLEROCKET_FLAGS: Final = FamilyFlags(
    uses_eni_limited_memory_overhead=False,
    pods_per_core_enabled=False,
    supports_eni_limited_pod_density=True,
)
_WINDOWS_FLAGS: Final = FamilyFlags(
    uses_eni_limited_memory_overhead=False,
    pods_per_core_enabled=True,
    supports_eni_limited_pod_density=False,
)
_FAMILY_FLAGS: Final[Mapping[AMIFamily, FamilyFlags]] = {
    AMIFamily.AL2: _LINUX_FLAGS,
    AMIFamily.AL2023: _LINUX_FLAGS,
    AMIFamily.CUSTOM: _LINUX_FLAGS,
    AMIFamily.BOTTLEROCKET: _BOTTLEROCKET_FLAGS,
    AMIFamily.WINDOWS2019: _WINDOWS_FLAGS,
    AMIFamily.WINDOWS2022: _WINDOWS_FLAGS,
    AMIFamily.WINDOWS2025: _WINDOWS_FLAGS,
}


def family_flags(family: AMIFamily) -> FamilyFlags:
    """The feature flags of an AMI family."""
    return _FAMILY_FLAGS[family]


@dataclass(frozen=True, slots=True)
class CapacitySettings:
    """Controller settings that change capacity.

    Attributes:
        vm_memory_overhead_percent: share of memory the hypervisor keeps
            (``VM_MEMORY_OVERHEAD_PERCENT``).
        reserved_enis: ENIs kept out of pod networking (``RESERVED_ENIS``).
    """

    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    reserved_enis: int = 0


@dataclass(frozen=True, slots=True)
class NodeClassView:
    """The parts of an EC2NodeClass that shape capacity and overhead.

    ``NodeClassView()`` is the default: AL2023 with no kubelet settings and default volumes.
    """

    family: AMIFamily = AMIFamily.AL2023
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: tuple[tuple[str | None, int | None, bool], ...] = ()
    instance_store_raid0: bool = False
    efa_only_interfaces_on_card0: int = 0

    @classmethod
    def from_nodeclass(cls, nodeclass: EC2NodeClass | None) -> NodeClassView:
        """The view of ``nodeclass`` (or the defaults when None)."""
        if nodeclass is None:
            return cls()
        spec = nodeclass.spec
        mappings = tuple(
            (m.device_name, m.ebs.volume_size_bytes() if m.ebs else None, bool(m.root_volume))
            for m in spec.block_device_mappings or ()
        )
        efa_only = sum(
            1
            for nic in spec.network_interfaces or ()
            if nic.interface_type == "efa-only" and nic.network_card_index == 0
        )
        return cls(
            family=nodeclass.ami_family(),
            kubelet=spec.kubelet,
            block_device_mappings=mappings,
            instance_store_raid0=spec.instance_store_policy == "RAID0",
            efa_only_interfaces_on_card0=efa_only,
        )


def eni_limited_pods(
    info: Mapping[str, Any], *, reserved_enis: int = 0, efa_only_interfaces: int = 0
) -> int:
    """``usableENIs x (IPv4 per ENI - 1) + 2`` on the default network card (VPC CNI)."""
    network = info.get("NetworkInfo", {})
    default_card = network.get("DefaultNetworkCardIndex", 0)
    interfaces = network.get("MaximumNetworkInterfaces", 0)
    for card in network.get("NetworkCards", []):
        if card.get("NetworkCardIndex") == default_card:
            interfaces = card.get("MaximumNetworkInterfaces", interfaces)
    usable = int(interfaces) - reserved_enis - efa_only_interfaces
    if usable <= 0:
        return 0
    return usable * (int(network.get("Ipv4AddressesPerInterface", 1)) - 1) + 2


def pods(info: Mapping[str, Any], view: NodeClassView, settings: CapacitySettings) -> int:
    """The node's pod capacity (maxPods, else ENI limit or 110; then podsPerCore)."""
    flags = family_flags(view.family)
    kubelet = view.kubelet
    if kubelet is not None and kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif flags.supports_eni_limited_pod_density:
        count = eni_limited_pods(
            info,
            reserved_enis=settings.reserved_enis,
            efa_only_interfaces=view.efa_only_interfaces_on_card0,
        )
    else:
        count = DEFAULT_MAX_PODS
    if kubelet is not None and kubelet.pods_per_core and flags.pods_per_core_enabled:
        count = min(kubelet.pods_per_core * vcpus(info), count)
    return count


def vcpus(info: Mapping[str, Any]) -> int:
    """DefaultVCpus."""
    return int(info.get("VCpuInfo", {}).get("DefaultVCpus", 0))


def memory_mib(info: Mapping[str, Any]) -> int:
    """The EC2-advertised memory in MiB."""
    return int(info.get("MemoryInfo", {}).get("SizeInMiB", 0))


def node_memory_bytes(mib: int, arch: str, settings: CapacitySettings) -> int:
    """Memory the node reports: advertised MiB less the VM overhead (and 64 MiB on arm64)."""
    overhead = math.ceil(mib * settings.vm_memory_overhead_percent)
    adjustment = ARM64_MEMORY_ADJUSTMENT_MIB if arch == ARCH_ARM64 else 0
    return (mib - adjustment - overhead) * MI


def ephemeral_storage_bytes(info: Mapping[str, Any], view: NodeClassView) -> int:
    """The kubelet root volume (or instance-store RAID0) size in bytes."""
    if view.instance_store_raid0:
        total = info.get("InstanceStorageInfo", {}).get("TotalSizeInGB")
        if total is not None:
            return int(total) * 10**9
    default = _DEFAULT_EPHEMERAL_GI.get(view.family, 20) * GI
    mappings = view.block_device_mappings
    if mappings:
        for _device, size, root in mappings:
            if root and size is not None:
                return size
        if view.family is AMIFamily.CUSTOM:
            last = mappings[-1][1]
            return last if last is not None else default
        for device, size, _root in mappings:
            if device == _EPHEMERAL_DEVICE.get(view.family) and size is not None:
                return size
    return default


def extended_resources(info: Mapping[str, Any], view: NodeClassView) -> dict[str, int]:
    """GPU, accelerator, EFA (and Windows IPv4) counts, in whole units."""
    result: dict[str, int] = {}
    for gpu in info.get("GpuInfo", {}).get("Gpus", []):
        manufacturer = str(gpu.get("Manufacturer", "")).lower()
        resource = _GPU_RESOURCES.get(manufacturer)
        if resource is not None:
            result[resource] = result.get(resource, 0) + int(gpu.get("Count", 0))
    neuron = info.get("NeuronInfo", {}).get("NeuronDevices", [])
    if neuron:
        result[NEURON] = sum(int(d.get("Count", 0)) for d in neuron)
        result[NEURON_CORE] = sum(
            int(d.get("Count", 0)) * int(d.get("CoreInfo", {}).get("Count", 0)) for d in neuron
        )
    else:
        accelerators = info.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
        inferentia = sum(int(a.get("Count", 0)) for a in accelerators)
        if inferentia:
            result[NEURON] = inferentia
    efa = info.get("NetworkInfo", {}).get("EfaInfo", {}).get("MaximumEfaInterfaces")
    if efa:
        result[EFA] = int(efa)
    if view.family.is_windows:
        ipv4 = int(info.get("NetworkInfo", {}).get("Ipv4AddressesPerInterface", 1))
        result[PRIVATE_IPV4] = max(ipv4 - 1, 0)
    return result


def capacity(
    info: Mapping[str, Any],
    view: NodeClassView | None = None,
    settings: CapacitySettings | None = None,
) -> dict[str, int]:
    """The node capacity of one DescribeInstanceTypes entry, in milli-units."""
    view = view or NodeClassView()
    settings = settings or CapacitySettings()
    result = {
        CPU: vcpus(info) * MILLI,
        MEMORY: node_memory_bytes(memory_mib(info), arch_from_ec2(info), settings) * MILLI,
        PODS: pods(info, view, settings) * MILLI,
        EPHEMERAL_STORAGE: ephemeral_storage_bytes(info, view) * MILLI,
    }
    for name, count in extended_resources(info, view).items():
        result[name] = count * MILLI
    return result


def parse_volume_size(value: str) -> int:
    """Bytes of a ``volumeSize`` quantity (``20Gi``)."""
    return parse_quantity(value) // MILLI
