"""FakeCloudProvider: the in-memory CloudProvider the core's tests use (knobs, recorded calls)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cloudprovider.errors import (
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from cloudprovider.fake import FakeCloudProvider
from cloudprovider.instancetype import InstanceType, Offering
from cloudprovider.protocol import CloudProvider, LaunchRequest, NodeClassRef, NodePoolRef
from provisioner.apis.labels import LABEL_CAPACITY_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from provisioner.scheduling.requirements import Requirements

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _type(name: str, cpu: int, price: float) -> InstanceType:
    return InstanceType(
        name=name,
        labels={"node.kubernetes.io/instance-type": name},
        capacity={"cpu": cpu, "pods": 110_000},
        allocatable={"cpu": cpu - 100, "pods": 110_000},
        offerings=(
            Offering(zone="zone-a", capacity_type="on-demand", price=price),
            Offering(zone="zone-a", capacity_type="spot", price=price / 3),
            Offering(zone="zone-b", capacity_type="on-demand", price=price),
        ),
    )


@pytest.fixture
def fake() -> FakeCloudProvider:
    return FakeCloudProvider(
        instance_types=[_type("small", 2000, 0.1), _type("large", 8000, 0.4)],
        clock=lambda: NOW,
    )


def _request(name: str = "np-1", **requirements: list[str]) -> LaunchRequest:
    terms = [
        {"key": k.replace("__", "/").replace("_", "-"), "operator": "In", "values": v}
        for k, v in requirements.items()
    ]
    return LaunchRequest(
        name=name,
        uid=f"uid-{name}",
        nodepool="np",
        node_class=NodeClassRef(name="default"),
        requirements=Requirements.from_terms(terms),
        requests={"cpu": 1000},
    )


def test_fake_satisfies_the_protocol(fake: FakeCloudProvider):
    provider: CloudProvider = fake
    assert provider.name == "fake"


def test_create_picks_the_cheapest_compatible_offering_and_records_the_call(
    fake: FakeCloudProvider,
):
    claim = fake.create(_request())

    assert (claim.instance_type, claim.zone, claim.capacity_type) == ("small", "zone-a", "spot")
    assert claim.labels[LABEL_ZONE] == "zone-a"
    assert claim.labels[LABEL_CAPACITY_TYPE] == "spot"
    assert claim.labels[LABEL_NODEPOOL] == "np"
    assert claim.created_at == NOW
    assert fake.create_calls == [_request()]
    assert fake.created == {claim.provider_id: claim}


def test_create_honours_requirements_and_requests(fake: FakeCloudProvider):
    request = LaunchRequest(
        name="big",
        uid="u",
        nodepool="np",
        node_class=NodeClassRef(name="default"),
        requirements=Requirements.from_terms(
            [
                {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                {"key": LABEL_ZONE, "operator": "In", "values": ["zone-b"]},
            ]
        ),
        requests={"cpu": 4000},
    )

    claim = fake.create(request)

    assert (claim.instance_type, claim.zone, claim.capacity_type) == (
        "large",
        "zone-b",
        "on-demand",
    )


def test_next_create_error_is_raised_once(fake: FakeCloudProvider):
    fake.next_create_error = CreateError("boom", reason="Unauthorized")

    with pytest.raises(CreateError):
        fake.create(_request())
    assert fake.create(_request()).instance_type == "small"


def test_marked_unavailable_offerings_are_skipped_and_reported(fake: FakeCloudProvider):
    fake.mark_unavailable("spot", "small", "zone-a")

    claim = fake.create(_request())
    types = {
        t.name: t
        for t in fake.get_instance_types(
            NodePoolRef(name="np", node_class=NodeClassRef(name="default"))
        )
    }

    assert (claim.instance_type, claim.capacity_type) == ("small", "on-demand")
    assert not types["small"].offerings[1].available


def test_all_unavailable_raises_insufficient_capacity(fake: FakeCloudProvider):
    fake.mark_all_unavailable()

    with pytest.raises(InsufficientCapacityError):
        fake.create(_request())


def test_unknown_node_class_is_not_ready(fake: FakeCloudProvider):
    fake.node_classes = {"other"}

    with pytest.raises(NodeClassNotReadyError):
        fake.create(_request())
    with pytest.raises(NodeClassNotReadyError):
        fake.get_instance_types(NodePoolRef(name="np", node_class=NodeClassRef(name="default")))


def test_get_delete_and_list(fake: FakeCloudProvider):
    claim = fake.create(_request())

    assert fake.get(claim.provider_id) == claim
    assert fake.list_claims() == [claim]
    fake.delete(claim.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        fake.delete(claim.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        fake.get(claim.provider_id)
    assert fake.delete_calls == [claim.provider_id, claim.provider_id]
    assert fake.get_calls == [claim.provider_id, claim.provider_id]


def test_one_shot_errors_for_get_delete_list(fake: FakeCloudProvider):
    claim = fake.create(_request())
    fake.next_get_error = RuntimeError("get")
    fake.next_delete_error = RuntimeError("delete")
    fake.next_list_error = RuntimeError("list")

    for call in (
        lambda: fake.get(claim.provider_id),
        lambda: fake.delete(claim.provider_id),
        fake.list_claims,
    ):
        with pytest.raises(RuntimeError):
            call()
    assert fake.get(claim.provider_id) == claim
    assert fake.list_claims() == [claim]


def test_drifted_knob_and_reset(fake: FakeCloudProvider):
    claim = fake.create(_request())
    fake.drifted = "AMIDrift"

    assert fake.is_drifted(claim) == "AMIDrift"
    fake.reset()
    assert fake.is_drifted(claim) is None
    assert fake.created == {}
    assert fake.create_calls == []
