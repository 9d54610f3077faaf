"""The CloudProvider contract, run against every implementation.

FakeCloudProvider and AwsCloudProvider on moto; the contract is what the core relies on
(cloudprovider/protocol.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from cloudprovider.errors import InsufficientCapacityError, NodeClaimNotFoundError
from cloudprovider.fake import FakeCloudProvider
from cloudprovider.protocol import CloudNodeClaim, CloudProvider, NodeClassRef, NodePoolRef
from tests.aws.harness import AwsEnv, make_request


@dataclass
class Harness:
    provider: CloudProvider
    ice_everywhere: Callable[[], None]
    make_type_unavailable: Callable[[str], None]
    settle_termination: Callable[[CloudNodeClaim], None]


def _fake(request: pytest.FixtureRequest) -> Harness:
    catalog = request.getfixturevalue("test_catalog")
    fake = FakeCloudProvider(instance_types=list(catalog.instance_types))

    def unavailable(name: str) -> None:
        for instance_type in fake.instance_types:
            if instance_type.name == name:
                for offering in instance_type.offerings:
                    fake.mark_unavailable(offering.capacity_type, name, offering.zone)

    return Harness(fake, fake.mark_all_unavailable, unavailable, lambda _claim: None)


def _aws(request: pytest.FixtureRequest) -> Harness:
    aws: AwsEnv = request.getfixturevalue("aws")

    def ice() -> None:
        aws.faults.ice_on("spot")
        aws.faults.ice_on("on-demand")

    def unavailable(name: str) -> None:
        for instance_type in aws.catalog.instance_types:
            if instance_type.name == name:
                for offering in instance_type.offerings:
                    aws.provider.unavailable.mark_unavailable(
                        offering.capacity_type, name, offering.zone
                    )

    def settle(claim: CloudNodeClaim) -> None:
        aws.ec2.terminate_instances(InstanceIds=[claim.instance_id])

    return Harness(aws.provider, ice, unavailable, settle)


@pytest.fixture(params=[pytest.param(_fake, id="fake"), pytest.param(_aws, id="aws")])
def harness(request: pytest.FixtureRequest) -> Harness:
    factory: Any = request.param
    result: Harness = factory(request)
    return result


NODEPOOL = NodePoolRef(name="default", node_class=NodeClassRef(name="default"))


def test_get_after_create_returns_the_created_claim(harness: Harness):
    created = harness.provider.create(make_request(instance_types=("m5.large", "c5.large")))

    got = harness.provider.get(created.provider_id)

    assert got.provider_id == created.provider_id
    assert got.instance_type == created.instance_type
    assert got.zone == created.zone
    assert got.capacity_type == created.capacity_type
    assert created.instance_type in {"m5.large", "c5.large"}


def test_create_is_idempotent_per_nodeclaim(harness: Harness):
    first = harness.provider.create(make_request())

    again = harness.provider.create(make_request())

    assert again.provider_id == first.provider_id
    assert [c.provider_id for c in harness.provider.list_claims()] == [first.provider_id]


def test_delete_of_a_gone_instance_raises_not_found(harness: Harness):
    claim = harness.provider.create(make_request())
    harness.provider.delete(claim.provider_id)
    harness.settle_termination(claim)

    with pytest.raises(NodeClaimNotFoundError):
        harness.provider.delete(claim.provider_id)
    with pytest.raises(NodeClaimNotFoundError):
        harness.provider.get(claim.provider_id)
    assert harness.provider.list_claims() == []


def test_get_instance_types_includes_types_without_available_offerings(harness: Harness):
    harness.make_type_unavailable("m5.large")

    types = {t.name: t for t in harness.provider.get_instance_types(NODEPOOL)}

    assert "m5.large" in types
    assert not types["m5.large"].has_available_offering()
    assert types["c5.large"].has_available_offering()


def test_insufficient_capacity_everywhere_raises_insufficient_capacity(harness: Harness):
    harness.ice_everywhere()

    with pytest.raises(InsufficientCapacityError):
        harness.provider.create(make_request(instance_types=("m5.large",)))

    assert harness.provider.list_claims() == []


def test_requirements_no_type_satisfies_raise_insufficient_capacity(harness: Harness):
    with pytest.raises(InsufficientCapacityError):
        harness.provider.create(make_request(instance_types=("no-such.type",)))
