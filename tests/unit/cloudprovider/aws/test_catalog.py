"""The catalog file format (spec/catalog.md) and the built-in catalog."""

from __future__ import annotations

from typing import Any

import pytest

from cloudprovider.aws.catalog import builtin_catalog, catalog_to_wire, read_catalog
from cloudprovider.aws.nodeclass import parse_nodeclass
from cloudprovider.aws.pricing import UnsupportedRegionError
from provisioner.apis.errors import ApiValidationError
from provisioner.scheduling.quantity import parse_quantity as q

SPEC_EXAMPLE: dict[str, Any] = {
    "apiVersion": "jointer.dev/v1alpha1",
    "kind": "InstanceCatalog",
    "region": "us-east-1",
    "instanceTypes": [
        {
            "name": "g5.xlarge",
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-family": "g5",
                "karpenter.k8s.aws/instance-gpu-name": "a10g",
                "karpenter.k8s.aws/instance-gpu-count": "1",
            },
            "capacity": {
                "cpu": "4",
                "memory": "16Gi",
                "pods": "58",
                "ephemeral-storage": "20Gi",
                "nvidia.com/gpu": "1",
            },
            "allocatable": {
                "cpu": "3920m",
                "memory": "14162Mi",
                "pods": "58",
                "ephemeral-storage": "17Gi",
                "nvidia.com/gpu": "1",
            },
            "offerings": [
                {
                    "zone": "us-east-1a",
                    "capacityType": "on-demand",
                    "price": 1.006,
                    "available": True,
                },
                {"zone": "us-east-1a", "capacityType": "spot", "price": 0.3921, "available": True},
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def builtin():
    return builtin_catalog("us-east-1")


def test_spec_example_reads_and_allocatable_computed_equals_given():
    given = read_catalog(SPEC_EXAMPLE).get("g5.xlarge")
    without: dict[str, Any] = {**SPEC_EXAMPLE["instanceTypes"][0]}
    del without["allocatable"]
    computed = read_catalog({**SPEC_EXAMPLE, "instanceTypes": [without]}).get("g5.xlarge")
    assert given is not None
    assert computed is not None
    assert computed.allocatable == given.allocatable
    assert given.capacity["memory"] == q("15155Mi")
    cheapest = given.cheapest()
    assert cheapest is not None
    assert cheapest.price == 0.3921


def test_missing_labels_are_filled_from_name_and_capacity():
    entry = {"name": "m6g.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}}
    it = read_catalog({"region": "us-east-1", "instanceTypes": [entry]}).get("m6g.large")
    assert it is not None
    assert it.labels["node.kubernetes.io/instance-type"] == "m6g.large"
    assert it.labels["karpenter.k8s.aws/instance-family"] == "m6g"
    assert it.labels["karpenter.k8s.aws/instance-cpu"] == "2"
    assert it.labels["kubernetes.io/arch"] == "arm64"
    assert it.offerings == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"zones": []}, "InstanceCatalog us-east-1: zones: unknown field", id="top"),
        pytest.param(
            {"instanceTypes": [{"name": "x", "capacity": {}, "gpu": 1}]},
            "instanceTypes[0].gpu: unknown field",
            id="type",
        ),
        pytest.param(
            {"instanceTypes": [{"name": "x"}]},
            "instanceTypes[0].capacity: required value",
            id="capacity",
        ),
        pytest.param(
            {"instanceTypes": [{"name": "x", "capacity": {"cpu": "lots"}}]},
            "instanceTypes[0].capacity: cpu:",
            id="quantity",
        ),
        pytest.param(
            {
                "instanceTypes": [
                    {
                        "name": "x",
                        "capacity": {},
                        "offerings": [{"zone": "a", "capacityType": "cheap", "price": 1}],
                    }
                ]
            },
            "instanceTypes[0].offerings[0].capacityType",
            id="ct",
        ),
        pytest.param(
            {
                "instanceTypes": [
                    {
                        "name": "x",
                        "capacity": {},
                        "offerings": [{"zone": "a", "capacityType": "spot", "price": 1, "bid": 2}],
                    }
                ]
            },
            "offerings[0].bid: unknown field",
            id="offering",
        ),
    ],
)
def test_bad_catalog_names_the_field(change, message):
    with pytest.raises(ApiValidationError, match=None) as caught:
        read_catalog({**SPEC_EXAMPLE, **change})
    assert message in str(caught.value)


def test_builtin_catalog_check_values(builtin):
    assert len(builtin.instance_types) >= 500
    m5 = builtin.get("m5.large")
    assert m5 is not None
    assert m5.allocatable == {
        "cpu": q("1930m"),
        "memory": q("6903Mi"),
        "pods": q("29"),
        "ephemeral-storage": q("17Gi"),
    }
    g5 = builtin.get("g5.xlarge")
    assert g5 is not None
    assert g5.labels["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert g5.allocatable["nvidia.com/gpu"] == q("1")
    assert all(it.offerings for it in builtin.instance_types)
    assert not any(it.name.startswith("a1.") for it in builtin.instance_types)
    spot = g5.cheapest("spot")
    assert spot is not None
    assert spot.price_estimated


def test_wire_round_trip(builtin):
    wire = catalog_to_wire(builtin)
    assert wire["apiVersion"] == "jointer.dev/v1alpha1"
    assert wire["kind"] == "InstanceCatalog"
    g5 = next(t for t in wire["instanceTypes"] if t["name"] == "g5.xlarge")
    assert g5["capacity"]["memory"] == "16Gi"
    assert g5["allocatable"]["memory"] == "14162Mi"
    again = read_catalog(wire)
    assert catalog_to_wire(again) == wire
    again_g5, built_g5 = again.get("g5.xlarge"), builtin.get("g5.xlarge")
    assert again_g5 is not None
    assert built_g5 is not None
    assert again_g5.allocatable == built_g5.allocatable


def test_nodeclass_max_pods_changes_the_catalog():
    nodeclass = parse_nodeclass(
        {
            "metadata": {"name": "pods20"},
            "spec": {
                "role": "r",
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
                "kubelet": {"maxPods": 20},
            },
        }
    )
    m5 = builtin_catalog("us-east-1", nodeclass=nodeclass).get("m5.large")
    assert m5 is not None
    assert m5.allocatable["pods"] == q("20")
    # Bottlerocket sizes kube-reserved memory from the pod count: 9 pods x 11Mi more memory.
    assert m5.allocatable["memory"] == q("6903Mi") + q("99Mi")


@pytest.mark.parametrize("region", ["eu-west-9", "cn-north-1"])
def test_builtin_catalog_unknown_region(region):
    with pytest.raises(UnsupportedRegionError, match=region):
        builtin_catalog(region)


def test_capacity_is_karpenters_after_vm_overhead_and_the_file_keeps_ec2s() -> None:
    """Issue 17.4: the instance type (so status.capacity and limits) carries memory after the
    VM overhead (m5.large 7577Mi); the file keeps what EC2 advertises (8Gi) and round-trips."""

    catalog = builtin_catalog("us-east-1")
    m5 = catalog.get("m5.large")
    assert m5 is not None
    assert m5.capacity["memory"] == 7577 * 2**20 * 1000
    wire = catalog_to_wire(catalog)
    entry = next(t for t in wire["instanceTypes"] if t["name"] == "m5.large")
    assert entry["capacity"]["memory"] == "8Gi"
    again = read_catalog(wire).get("m5.large")
    assert again is not None
    assert dict(again.capacity) == dict(m5.capacity)
    assert dict(again.allocatable) == dict(m5.allocatable)
