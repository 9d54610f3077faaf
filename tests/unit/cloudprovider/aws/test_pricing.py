"""On-demand table, GetProducts parsing, spot prices and the spot estimate."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from cloudprovider.aws.pricing import (
    IMPLAUSIBLE_SPOT_FRACTION,
    SPOT_ESTIMATE_FRACTION,
    PricingProvider,
    UnsupportedRegionError,
    load_on_demand_table,
    pricing_endpoint_region,
)


class FakePricing:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = list(pages)
        self.calls: list[dict[str, Any]] = []

    def get_products(self, **kwargs):
        self.calls.append(kwargs)
        return self.pages.pop(0) if self.pages else {"PriceList": []}


class FakeSpot:
    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.entries = entries

    def describe_spot_price_history(self, **kwargs):
        return {"SpotPriceHistory": self.entries}


def product(instance_type: str, price: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type}},
            "terms": {
                "OnDemand": {"x": {"priceDimensions": {"y": {"pricePerUnit": {"USD": price}}}}}
            },
        }
    )


def test_builtin_table_has_the_four_regions():
    table = load_on_demand_table()
    assert set(table) == {"us-east-1", "cn-north-1", "us-gov-east-1", "us-gov-west-1"}
    assert table["us-east-1"]["m5.large"] == pytest.approx(0.096)


def test_unknown_region_is_an_error():
    with pytest.raises(UnsupportedRegionError, match="eu-west-9"):
        PricingProvider("eu-west-9")


def test_get_products_paginates_and_replaces_prices():
    client = FakePricing(
        [
            {"PriceList": [product("m5.large", "0.5")], "NextToken": "t"},
            {"PriceList": [product("m5.xlarge", "0.0000000000")]},
        ]
    )
    provider = PricingProvider("us-east-1", pricing_client=client)
    assert provider.refresh_on_demand() == 1
    assert provider.on_demand_price("m5.large") == 0.5
    assert client.calls[1]["NextToken"] == "t"
    filters = {f["Field"]: f["Value"] for f in client.calls[0]["Filters"]}
    assert filters["regionCode"] == "us-east-1"
    assert filters["operatingSystem"] == "Linux"
    assert filters["capacitystatus"] == "Used"


def test_spot_price_is_estimated_when_missing_or_fake():
    moto_like = FakeSpot(
        [{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.00001"}]
    )
    provider = PricingProvider("us-east-1", spot_client=moto_like)
    provider.refresh_spot(datetime(2025, 1, 1, tzinfo=UTC))
    spot = provider.spot_price("m5.large", "us-east-1a")
    assert spot is not None
    assert spot.estimated
    assert spot.price == pytest.approx(0.096 * SPOT_ESTIMATE_FRACTION)


def test_plausible_spot_price_is_used():
    observed = 0.096 * (IMPLAUSIBLE_SPOT_FRACTION + 0.3)
    client = FakeSpot(
        [
            {
                "InstanceType": "m5.large",
                "AvailabilityZone": "us-east-1a",
                "SpotPrice": "0.5",
                "Timestamp": datetime(2024, 1, 1, tzinfo=UTC),
            },
            {
                "InstanceType": "m5.large",
                "AvailabilityZone": "us-east-1a",
                "SpotPrice": str(observed),
                "Timestamp": datetime(2025, 1, 1, tzinfo=UTC),
            },
        ]
    )
    provider = PricingProvider("us-east-1", spot_client=client)
    provider.refresh_spot()
    spot = provider.spot_price("m5.large", "us-east-1a")
    assert spot is not None
    assert not spot.estimated
    assert spot.price == pytest.approx(observed)


def test_unpriced_type_has_no_spot_estimate():
    assert PricingProvider("us-east-1").spot_price("nope.large", "us-east-1a") is None


def test_refresh_if_stale_follows_the_ttl():
    now = [0.0]
    client = FakePricing([])
    provider = PricingProvider("us-east-1", pricing_client=client, timer=lambda: now[0])
    provider.refresh_if_stale()
    calls = len(client.calls)
    now[0] = 3600.0
    provider.refresh_if_stale()
    assert len(client.calls) == calls
    now[0] = 13 * 3600.0
    provider.refresh_if_stale()
    assert len(client.calls) > calls


@pytest.mark.parametrize(
    ("region", "endpoint"),
    [
        ("us-west-2", "us-east-1"),
        ("eu-west-1", "eu-central-1"),
        ("ap-northeast-1", "ap-south-1"),
        ("cn-north-1", "cn-northwest-1"),
    ],
)
def test_pricing_endpoint_region(region, endpoint):
    assert pricing_endpoint_region(region) == endpoint
