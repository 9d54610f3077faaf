"""NodeOverlays adjust offering prices and extended-resource capacity, highest weight first."""

import pytest

from cloudprovider.instancetype import InstanceType, Offering
from provisioner.apis.base import parse_object
from provisioner.apis.nodeoverlay import NodeOverlay
from provisioner.controllers.provisioning.overlays import apply_overlays


def _type(name: str, family: str) -> InstanceType:
    return InstanceType(
        name=name,
        labels={"karpenter.k8s.aws/instance-family": family},
        capacity={"cpu": 4000},
        allocatable={"cpu": 3900},
        offerings=(
            Offering(zone="us-east-1a", capacity_type="spot", price=1.0),
            Offering(zone="us-east-1a", capacity_type="on-demand", price=2.0),
        ),
    )


def _overlay(name: str, weight: int | None = None, **spec) -> NodeOverlay:
    overlay_spec = {"requirements": spec.pop("requirements"), **spec}
    if weight is not None:
        overlay_spec["weight"] = weight
    body = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": overlay_spec,
    }
    return parse_object(NodeOverlay, body, kind="NodeOverlay")


FAMILY_G5 = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}]
SPOT = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]


def test_price_adjustment_applies_to_matching_offerings_only():
    types = apply_overlays(
        [_type("g5.xlarge", "g5"), _type("m5.xlarge", "m5")],
        [_overlay("cheaper-spot", requirements=SPOT, priceAdjustment="-50%")],
        pool="default",
    )
    g5, m5 = types
    assert [o.price for o in g5.offerings] == [pytest.approx(0.5), 2.0]
    assert [o.price for o in m5.offerings] == [pytest.approx(0.5), 2.0]


def test_highest_weight_overlay_decides_the_price():
    overlays = [
        _overlay("low", 1, requirements=FAMILY_G5, price="9.0"),
        _overlay("high", 10, requirements=FAMILY_G5, price="3.0"),
    ]
    (g5,) = apply_overlays([_type("g5.xlarge", "g5")], overlays, pool="default")
    assert {o.price for o in g5.offerings} == {3.0}


def test_capacity_overlay_adds_extended_resources_to_capacity_and_allocatable():
    overlay = _overlay("time-slicing", requirements=FAMILY_G5, capacity={"nvidia.com/gpu": "4"})
    g5, m5 = apply_overlays(
        [_type("g5.xlarge", "g5"), _type("m5.xlarge", "m5")], [overlay], pool="default"
    )
    assert g5.capacity["nvidia.com/gpu"] == 4000
    assert g5.allocatable["nvidia.com/gpu"] == 4000
    assert "nvidia.com/gpu" not in m5.allocatable


def test_no_overlays_returns_the_same_types():
    types = [_type("g5.xlarge", "g5")]
    assert apply_overlays(types, [], pool="default") == tuple(types)
