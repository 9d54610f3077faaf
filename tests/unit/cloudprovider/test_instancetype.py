"""Neutral InstanceType/Offering helpers."""

from __future__ import annotations

import pytest

from cloudprovider.instancetype import InstanceType, Offering, Overhead, order_by_price


def make(name: str, *offerings: Offering) -> InstanceType:
    return InstanceType(
        name=name, labels={}, capacity={"cpu": 2000}, allocatable={"cpu": 1900}, offerings=offerings
    )


def test_cheapest_respects_availability_capacity_type_and_zone():
    it = make(
        "m5.large",
        Offering(zone="a", capacity_type="spot", price=0.01, available=False),
        Offering(zone="a", capacity_type="spot", price=0.03),
        Offering(zone="b", capacity_type="on-demand", price=0.09),
    )
    cheapest, on_demand = it.cheapest(), it.cheapest("on-demand")
    assert cheapest is not None
    assert cheapest.price == 0.03
    assert on_demand is not None
    assert on_demand.zone == "b"
    assert it.cheapest(zone="c") is None
    assert len(it.available_offerings()) == 2
    assert it.zones() == frozenset({"a", "b"})
    assert it.capacity_types(available_only=False) == frozenset({"spot", "on-demand"})


def test_instance_type_is_frozen_and_fits():
    it = make("m5.large")
    assert it.fits({"cpu": 1900})
    assert not it.fits({"cpu": 1901, "memory": 1})
    with pytest.raises(TypeError):
        it.capacity["cpu"] = 1  # type: ignore[index]


def test_order_by_price_puts_unlaunchable_last():
    cheap = make("a", Offering(zone="z", capacity_type="spot", price=0.1))
    dear = make("b", Offering(zone="z", capacity_type="spot", price=0.2))
    none = make("c", Offering(zone="z", capacity_type="spot", price=0.0, available=False))
    assert [it.name for it in order_by_price([none, dear, cheap])] == ["a", "b", "c"]


def test_overhead_total_and_with_available():
    overhead = Overhead(kube_reserved={"cpu": 70}, system_reserved={"cpu": 30, "memory": 5})
    assert overhead.total() == {"cpu": 100, "memory": 5}
    offering = Offering(zone="z", capacity_type="spot", price=1.0)
    assert not offering.with_available(False).available
