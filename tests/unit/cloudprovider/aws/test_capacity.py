"""Capacity and allocatable against Karpenter's published check values (karpenter-aws.md §2.3)."""

from __future__ import annotations

from typing import Any

import pytest

from cloudprovider.aws.capacity import CapacitySettings, NodeClassView, capacity, eni_limited_pods
from cloudprovider.aws.nodeclass import AMIFamily, KubeletConfiguration
from cloudprovider.aws.overhead import allocatable, overhead
from provisioner.scheduling.quantity import parse_quantity

q = parse_quantity


def resolve(
    info: dict[str, Any],
    view: NodeClassView | None = None,
    settings: CapacitySettings | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    cap = capacity(info, view, settings)
    return cap, allocatable(cap, overhead(cap, view, eni_pods=eni_limited_pods(info)))


def test_m5_large_matches_karpenter_defaults(ec2_types):
    cap, alloc = resolve(ec2_types["m5.large"])
    assert cap == {
        "cpu": q("2"),
        "memory": q("7577Mi"),
        "pods": q("29"),
        "ephemeral-storage": q("20Gi"),
    }
    assert alloc == {
        "cpu": q("1930m"),
        "memory": q("6903Mi"),
        "pods": q("29"),
        "ephemeral-storage": q("17Gi"),
    }


def test_g5_xlarge_matches_karpenter_defaults(ec2_types):
    cap, alloc = resolve(ec2_types["g5.xlarge"])
    assert cap["nvidia.com/gpu"] == q("1")
    assert alloc["cpu"] == q("3920m")
    assert alloc["memory"] == q("14162Mi")
    assert alloc["pods"] == q("58")
    assert alloc["ephemeral-storage"] == q("17Gi")


def test_max_pods_changes_pods_but_not_kube_reserved_memory_on_al2023(ec2_types):
    # AL2/AL2023 size kube-reserved memory from the ENI limit, whatever maxPods says.
    view = NodeClassView(kubelet=KubeletConfiguration(max_pods=20))
    cap, alloc = resolve(ec2_types["m5.large"], view)
    assert cap["pods"] == alloc["pods"] == q("20")
    assert alloc["memory"] == q("6903Mi")


def test_max_pods_changes_kube_reserved_memory_on_bottlerocket(ec2_types):
    default = resolve(ec2_types["m5.large"], NodeClassView(family=AMIFamily.BOTTLEROCKET))[1]
    view = NodeClassView(family=AMIFamily.BOTTLEROCKET, kubelet=KubeletConfiguration(max_pods=20))
    _, alloc = resolve(ec2_types["m5.large"], view)
    assert alloc["pods"] == q("20")
    # 9 fewer pods x 11 MiB
    assert alloc["memory"] - default["memory"] == q("99Mi")


def test_pods_per_core_caps_pods(ec2_types):
    view = NodeClassView(kubelet=KubeletConfiguration(pods_per_core=4))
    cap, _ = resolve(ec2_types["m5.large"], view)
    assert cap["pods"] == q("8")


def test_pods_per_core_is_ignored_on_bottlerocket(ec2_types):
    view = NodeClassView(
        family=AMIFamily.BOTTLEROCKET, kubelet=KubeletConfiguration(pods_per_core=4)
    )
    cap, _ = resolve(ec2_types["m5.large"], view)
    assert cap["pods"] == q("29")


def test_windows_uses_110_pods_and_50gi_root(ec2_types):
    cap, _ = resolve(ec2_types["m5.large"], NodeClassView(family=AMIFamily.WINDOWS2022))
    assert cap["pods"] == q("110")
    assert cap["ephemeral-storage"] == q("50Gi")
    assert cap["vpc.amazonaws.com/PrivateIPv4Address"] == q("9")


def test_raid0_uses_instance_store_in_decimal_gb(ec2_types):
    cap, alloc = resolve(ec2_types["g5.xlarge"], NodeClassView(instance_store_raid0=True))
    assert cap["ephemeral-storage"] == q("250G")
    assert alloc["ephemeral-storage"] == q("250G") - q("1Gi") - q("25G")


def test_raid0_without_instance_store_falls_back_to_root_volume(ec2_types):
    cap, _ = resolve(ec2_types["m5.large"], NodeClassView(instance_store_raid0=True))
    assert cap["ephemeral-storage"] == q("20Gi")


@pytest.mark.parametrize(
    ("mappings", "family", "expected"),
    [
        pytest.param((("/dev/xvda", 100 * 2**30, False),), AMIFamily.AL2023, "100Gi", id="xvda"),
        pytest.param(
            (("/dev/xvda", 100 * 2**30, False), ("/dev/xvdb", 300 * 2**30, True)),
            AMIFamily.AL2023,
            "300Gi",
            id="root-volume-wins",
        ),
        pytest.param((("/dev/xvdz", 7 * 2**30, False),), AMIFamily.AL2023, "20Gi", id="other"),
        pytest.param(
            (("/dev/a", 5 * 2**30, False), ("/dev/b", 9 * 2**30, False)),
            AMIFamily.CUSTOM,
            "9Gi",
            id="custom-last",
        ),
        pytest.param((("/dev/xvdb", 60 * 2**30, False),), AMIFamily.BOTTLEROCKET, "60Gi", id="br"),
    ],
)
def test_ephemeral_storage_from_block_device_mappings(ec2_types, mappings, family, expected):
    view = NodeClassView(family=family, block_device_mappings=mappings)
    cap, _ = resolve(ec2_types["m5.large"], view)
    assert cap["ephemeral-storage"] == q(expected)


def test_system_and_kube_reserved_are_subtracted(ec2_types):
    kubelet = KubeletConfiguration(
        system_reserved={"cpu": "100m", "memory": "100Mi", "pid": "100"},
        kube_reserved={"cpu": "200m"},
    )
    _, alloc = resolve(ec2_types["m5.large"], NodeClassView(kubelet=kubelet))
    assert alloc["cpu"] == q("2") - q("200m") - q("100m")
    assert alloc["memory"] == q("6903Mi") - q("100Mi")


@pytest.mark.parametrize(
    ("eviction", "memory", "storage"),
    [
        pytest.param({"memory.available": "500Mi"}, q("6503Mi"), q("17Gi"), id="absolute"),
        pytest.param({"memory.available": "100%"}, q("7003Mi"), q("17Gi"), id="disabled"),
        pytest.param({"nodefs.available": "5%"}, q("6903Mi"), q("18Gi"), id="pct"),
    ],
)
def test_eviction_hard_overrides_thresholds(ec2_types, eviction, memory, storage):
    view = NodeClassView(kubelet=KubeletConfiguration(eviction_hard=eviction))
    _, alloc = resolve(ec2_types["m5.large"], view)
    assert alloc["memory"] == memory
    assert alloc["ephemeral-storage"] == storage


def test_eviction_soft_is_not_counted(ec2_types):
    kubelet = KubeletConfiguration(
        eviction_soft={"memory.available": "1Gi"},
        eviction_soft_grace_period={"memory.available": "1m"},
    )
    _, alloc = resolve(ec2_types["m5.large"], NodeClassView(kubelet=kubelet))
    assert alloc["memory"] == q("6903Mi")


def test_vm_memory_overhead_is_a_setting(ec2_types):
    cap, _ = resolve(ec2_types["m5.large"], settings=CapacitySettings(vm_memory_overhead_percent=0))
    assert cap["memory"] == q("8Gi")


def test_arm64_loses_64mi_more(ec2_types):
    cap, _ = resolve(ec2_types["m6g.large"])
    assert cap["memory"] == q("8192Mi") - q("615Mi") - q("64Mi")


def test_reserved_enis_reduce_pods(ec2_types):
    cap, _ = resolve(ec2_types["m5.large"], settings=CapacitySettings(reserved_enis=1))
    assert cap["pods"] == q("20")


def test_accelerators_and_efa_capacity(ec2_types):
    inf2, _ = resolve(ec2_types["inf2.xlarge"])
    assert inf2["aws.amazon.com/neuron"] == q("1")
    assert inf2["aws.amazon.com/neuroncore"] == q("2")
    p4d, _ = resolve(ec2_types["p4d.24xlarge"])
    assert p4d["nvidia.com/gpu"] == q("8")
    assert p4d["vpc.amazonaws.com/efa"] == q("4")
    assert p4d["pods"] == q("737")
