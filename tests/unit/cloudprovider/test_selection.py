"""``compatible_candidates``: the offerings a launch may use, equal to checking every label."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudprovider.instancetype import InstanceType, Offering
from cloudprovider.selection import Candidate, compatible_candidates, offering_labels
from provisioner.apis import labels as wk
from provisioner.scheduling.requirements import Requirements
from tests.strategies import requirements_for

ZONE, CAPACITY = wk.LABEL_ZONE, wk.LABEL_CAPACITY_TYPE
RESERVATION, RESERVATION_TYPE = wk.LABEL_CAPACITY_RESERVATION_ID, wk.LABEL_CAPACITY_RESERVATION_TYPE
KEYS = (ZONE, CAPACITY, RESERVATION, RESERVATION_TYPE, "arch", "team")
VALUES = ("a", "b", "1", "2")

offerings = st.builds(
    Offering,
    zone=st.sampled_from(VALUES),
    capacity_type=st.sampled_from(VALUES),
    price=st.sampled_from((0.1, 0.2, 0.3)),
    available=st.booleans(),
    reservation_id=st.none() | st.sampled_from(VALUES),
    reservation_type=st.none() | st.sampled_from(VALUES),
)


@st.composite
def instance_types(draw: st.DrawFn, index: int) -> InstanceType:
    # a type's own labels may even carry an offering key: the offering's value wins
    labels = draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
    cpu = draw(st.sampled_from((1000, 2000, 4000)))
    return InstanceType(
        name=f"t{index}",
        labels=labels,
        capacity={"cpu": cpu},
        allocatable={"cpu": cpu},
        offerings=tuple(draw(st.lists(offerings, max_size=4))),
    )


catalogs = st.integers(min_value=0, max_value=5).flatmap(
    lambda n: st.tuples(*(instance_types(i) for i in range(n)))
)
requirement_sets = st.lists(st.sampled_from(KEYS).flatmap(requirements_for), max_size=4).map(
    Requirements
)


def by_every_label(
    types: tuple[InstanceType, ...],
    requirements: Requirements,
    requests: dict[str, int],
    available_only: bool,
) -> list[Candidate]:
    """The definition: an offering's full labels meet every requirement on a key they define."""
    found = [
        Candidate(it, o)
        for it in types
        if it.fits(requests)
        for o in it.offerings
        if (o.available or not available_only)
        and all(
            r.has(labels[k])
            for labels in [offering_labels(it, o)]
            for k, r in requirements.items()
            if k in labels
        )
    ]
    return sorted(
        found,
        key=lambda c: (c.offering.price, c.instance_type.name, c.offering.zone),
    )


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    types=catalogs,
    requirements=requirement_sets,
    cpu=st.sampled_from((0, 1500, 3000)),
    available_only=st.booleans(),
)
def test_candidates_equal_a_check_of_every_label(
    types: tuple[InstanceType, ...],
    requirements: Requirements,
    cpu: int,
    available_only: bool,
) -> None:
    requests = {"cpu": cpu}
    got = compatible_candidates(types, requirements, requests, available_only=available_only)
    want = by_every_label(types, requirements, requests, available_only)
    assert sorted(map(repr, got)) == sorted(map(repr, want))
    prices = [c.offering.price for c in got]
    assert prices == sorted(prices)


def test_a_reserved_offering_is_matched_by_its_capacity_type_and_reservation() -> None:
    reserved = Offering(
        zone="a",
        capacity_type="reserved",
        price=0.1,
        reservation_id="cr-1",
        reservation_type="default",
    )
    plain = Offering(zone="a", capacity_type="on-demand", price=0.2)
    it = InstanceType(
        name="m5.large",
        labels={"arch": "amd64"},
        capacity={"cpu": 2000},
        allocatable={"cpu": 2000},
        offerings=(reserved, plain),
    )
    wanted = Requirements.from_labels({CAPACITY: "reserved"})
    assert [c.offering for c in compatible_candidates([it], wanted, {})] == [reserved]
    # a key an offering does not set does not restrict it: only the other reservation goes
    other = Requirements.from_labels({RESERVATION: "cr-2"})
    assert [c.offering for c in compatible_candidates([it], other, {})] == [plain]
    arm = Requirements.from_labels({"arch": "arm64"})
    assert compatible_candidates([it], arm, {}) == []
    anything = compatible_candidates([it], Requirements.from_labels({}), {})
    assert [c.offering for c in anything] == [reserved, plain]
