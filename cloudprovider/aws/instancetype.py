"""EC2 instance types as provider-neutral :class:`~cloudprovider.instancetype.InstanceType`.

One DescribeInstanceTypes entry (boto3's dict shape), the zones DescribeInstanceTypeOfferings
lists for it, the prices and the EC2NodeClass in force give labels (``labels``), capacity
(``capacity``), overhead and allocatable (``overhead``) and offerings (zone x capacity type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from cloudprovider.aws import labels as aws_labels
from cloudprovider.aws.capacity import (
    CapacitySettings,
    NodeClassView,
    capacity,
    eni_limited_pods,
)
from cloudprovider.aws.nodeclass import AMIFamily
from cloudprovider.aws.overhead import allocatable, overhead
from cloudprovider.aws.pricing import PricingProvider
from cloudprovider.instancetype import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    InstanceType,
    Offering,
)

__all__ = [
    "EC2_FIELDS",
    "compact_info",
    "is_supported",
    "resolve_instance_type",
    "resolve_instance_types",
]

SUPPORTED_ARCHITECTURES: Final = frozenset({"x86_64", "arm64"})
_CAPACITY_TYPES: Final = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT)

# The DescribeInstanceTypes fields Jointer reads (top level -> nested keys kept, None = all).
EC2_FIELDS: Final[Mapping[str, tuple[str, ...] | None]] = {
    "InstanceType": None,
    "BareMetal": None,
    "Hypervisor": None,
    "SupportedUsageClasses": None,
    "SupportedVirtualizationTypes": None,
    "VCpuInfo": ("DefaultVCpus", "DefaultCores"),
    "MemoryInfo": None,
    "ProcessorInfo": ("SupportedArchitectures", "Manufacturer", "SustainedClockSpeedInGhz"),
    "EbsInfo": ("EbsOptimizedInfo",),
    "InstanceStorageInfo": ("TotalSizeInGB", "NvmeSupport"),
    "GpuInfo": ("Gpus",),
    "NeuronInfo": ("NeuronDevices",),
    "InferenceAcceleratorInfo": ("Accelerators",),
    "NetworkInfo": (
        "DefaultNetworkCardIndex",
        "MaximumNetworkInterfaces",
        "Ipv4AddressesPerInterface",
        "NetworkCards",
        "EncryptionInTransitSupported",
        "EfaInfo",
    ),
}
_CARD_FIELDS: Final = ("NetworkCardIndex", "MaximumNetworkInterfaces", "BaselineBandwidthInGbps")


def compact_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only the fields of a DescribeInstanceTypes entry that Jointer reads."""
    result: dict[str, Any] = {}
    for key, nested in EC2_FIELDS.items():
        if key not in info:
            continue
        value = info[key]
        if nested is not None and isinstance(value, Mapping):
            value = {k: value[k] for k in nested if k in value}
        result[key] = value
    network = result.get("NetworkInfo")
    if network and "NetworkCards" in network:
        network["NetworkCards"] = [
            {k: card[k] for k in _CARD_FIELDS if k in card} for card in network["NetworkCards"]
        ]
    ebs = result.get("EbsInfo", {}).get("EbsOptimizedInfo")
    if ebs is not None:
        result["EbsInfo"]["EbsOptimizedInfo"] = {
            k: ebs[k] for k in ("MaximumBandwidthInMbps",) if k in ebs
        }
    return result


def is_supported(info: Mapping[str, Any], family: AMIFamily = AMIFamily.AL2023) -> bool:
    """Karpenter's discovery filter: HVM, x86_64 or arm64, and no ``a1`` on AL2023."""
    if "hvm" not in info.get("SupportedVirtualizationTypes", ["hvm"]):
        return False
    architectures = set(info.get("ProcessorInfo", {}).get("SupportedArchitectures", []))
    if not architectures & SUPPORTED_ARCHITECTURES:
        return False
    return not (family is AMIFamily.AL2023 and str(info["InstanceType"]).startswith("a1."))


def _offerings(
    info: Mapping[str, Any], zones: Iterable[str], pricing: PricingProvider
) -> tuple[Offering, ...]:
    name = str(info["InstanceType"])
    usage = set(info.get("SupportedUsageClasses", _CAPACITY_TYPES))
    on_demand = pricing.on_demand_price(name)
    result: list[Offering] = []
    for zone in sorted(zones):
        if CAPACITY_TYPE_ON_DEMAND in usage and on_demand is not None:
            result.append(
                Offering(zone=zone, capacity_type=CAPACITY_TYPE_ON_DEMAND, price=on_demand)
            )
        spot = pricing.spot_price(name, zone) if CAPACITY_TYPE_SPOT in usage else None
        if spot is not None:
            result.append(
                Offering(
                    zone=zone,
                    capacity_type=CAPACITY_TYPE_SPOT,
                    price=spot.price,
                    price_estimated=spot.estimated,
                )
            )
    return tuple(result)


def resolve_instance_type(
    info: Mapping[str, Any],
    *,
    zones: Iterable[str],
    pricing: PricingProvider,
    view: NodeClassView | None = None,
    settings: CapacitySettings | None = None,
) -> InstanceType:
    """The neutral instance type for one DescribeInstanceTypes entry.

    Offerings are the zones x the supported capacity types that have a price; a type without
    any price has no offerings (Karpenter marks such offerings unavailable).
    """
    view = view or NodeClassView()
    settings = settings or CapacitySettings()
    labels = aws_labels.labels_from_ec2(info, os="windows" if view.family.is_windows else "linux")
    labels[aws_labels.REGION] = pricing.region
    node_capacity = capacity(info, view, settings)
    node_overhead = overhead(node_capacity, view, eni_pods=eni_limited_pods(info))
    return InstanceType(
        name=str(info["InstanceType"]),
        labels=labels,
        capacity=node_capacity,
        overhead=node_overhead,
        allocatable=allocatable(node_capacity, node_overhead),
        offerings=_offerings(info, zones, pricing),
    )


def resolve_instance_types(
    infos: Iterable[Mapping[str, Any]],
    zones_by_type: Mapping[str, Iterable[str]],
    *,
    pricing: PricingProvider,
    view: NodeClassView | None = None,
    settings: CapacitySettings | None = None,
) -> tuple[InstanceType, ...]:
    """Every supported type offered in at least one zone, sorted by name."""
    view = view or NodeClassView()
    result = [
        resolve_instance_type(
            info,
            zones=zones_by_type[str(info["InstanceType"])],
            pricing=pricing,
            view=view,
            settings=settings,
        )
        for info in infos
        if is_supported(info, view.family) and zones_by_type.get(str(info["InstanceType"]))
    ]
    return tuple(sorted(result, key=lambda it: it.name))
