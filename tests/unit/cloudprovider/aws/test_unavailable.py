"""The ICE cache: 3-minute marks keyed capacityType:instanceType:zone, sequence numbers."""

from __future__ import annotations

from cloudprovider.aws.unavailable import UnavailableOfferings, offering_key
from cloudprovider.instancetype import InstanceType, Offering


class Timer:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_marks_expire_after_three_minutes_and_remarking_resets():
    timer = Timer()
    cache = UnavailableOfferings(timer=timer)

    cache.mark_unavailable("spot", "m5.large", "us-east-1a")
    timer.now = 100
    cache.mark_unavailable("spot", "m5.large", "us-east-1a")
    timer.now = 279

    assert cache.is_unavailable("spot", "m5.large", "us-east-1a")
    assert not cache.is_unavailable("on-demand", "m5.large", "us-east-1a")
    timer.now = 280
    assert not cache.is_unavailable("spot", "m5.large", "us-east-1a")


def test_capacity_type_marks_cover_every_offering():
    cache = UnavailableOfferings(timer=Timer())

    cache.mark_capacity_type_unavailable("spot")

    assert cache.is_unavailable("spot", "anything", "anywhere")


def test_sequence_numbers_grow_per_type():
    cache = UnavailableOfferings(timer=Timer())

    before = cache.sequence_number("m5.large")
    cache.mark_unavailable("spot", "m5.large", "a")

    assert cache.sequence_number("m5.large") == before + 1
    assert cache.sequence_number("c5.large") == 0


def test_apply_marks_offerings_unavailable_without_dropping_them():
    cache = UnavailableOfferings(timer=Timer())
    cache.mark_unavailable("spot", "m5.large", "a")
    instance_type = InstanceType(
        name="m5.large",
        labels={},
        capacity={},
        allocatable={},
        offerings=(
            Offering(zone="a", capacity_type="spot", price=1.0),
            Offering(zone="a", capacity_type="on-demand", price=2.0),
        ),
    )

    (result,) = cache.apply([instance_type])

    assert [o.available for o in result.offerings] == [False, True]
    assert offering_key("spot", "m5.large", "a") == "spot:m5.large:a"


def test_apply_returns_types_without_marked_offerings_as_they_are():
    timer = Timer()
    cache = UnavailableOfferings(timer=timer)
    cache.mark_unavailable("spot", "m5.large", "a")
    cache.mark_capacity_type_unavailable("reserved")
    marked, untouched = (
        InstanceType(
            name=name,
            labels={},
            capacity={},
            allocatable={},
            offerings=(
                Offering(zone="a", capacity_type="spot", price=1.0),
                Offering(zone="b", capacity_type="reserved", price=0.0, available=False),
            ),
        )
        for name in ("m5.large", "c5.large")
    )

    result = cache.apply([marked, untouched])

    assert result[1] is untouched  # nothing to change: no copy (passes run over every type)
    assert [o.available for o in result[0].offerings] == [False, False]
    timer.now = 1000  # every mark expired
    again = cache.apply([marked, untouched])
    assert again[0] is marked
    assert again[1] is untouched


def test_cleanup_and_flush():
    timer = Timer()
    cache = UnavailableOfferings(timer=timer)
    cache.mark_unavailable("spot", "m5.large", "a")
    timer.now = 1000
    cache.cleanup()
    cache.mark_unavailable("spot", "c5.large", "a")
    cache.flush()

    assert not cache.is_unavailable("spot", "c5.large", "a")
