"""The catalog built from EC2 over the real boto3 HTTP path against moto's server on 127.0.0.1."""

from __future__ import annotations

import logging
from typing import Any, cast

import boto3
import pytest
from moto.server import ThreadedMotoServer

from cloudprovider.aws.catalog import Catalog, Ec2InstanceTypeClient, Ec2InstanceTypeProvider
from cloudprovider.aws.pricing import PricingProvider, SpotPriceClient
from provisioner.scheduling.quantity import parse_quantity as q

pytestmark = pytest.mark.aws


class CountingClient:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []

    def describe_instance_types(self, **kwargs: Any) -> Any:
        self.calls.append("types")
        return self.client.describe_instance_types(**kwargs)

    def describe_instance_type_offerings(self, **kwargs: Any) -> Any:
        self.calls.append("offerings")
        return self.client.describe_instance_type_offerings(**kwargs)


@pytest.fixture(scope="module")
def built():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with pytest.MonkeyPatch.context() as mp:
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            mp.setenv(key, "testing")
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://{host}:{port}")
            pricing = PricingProvider("us-east-1", spot_client=cast("SpotPriceClient", ec2))
            pricing.refresh_spot()
            client = CountingClient(ec2)
            provider = Ec2InstanceTypeProvider(
                cast("Ec2InstanceTypeClient", client), pricing, timer=lambda: 0.0
            )
            catalog = provider.catalog()
            provider.catalog()  # cached: no further EC2 calls
            yield catalog, client.calls
        finally:
            server.stop()


def test_catalog_covers_at_least_500_types_with_gpus(built):
    catalog, _ = built
    assert isinstance(catalog, Catalog)
    assert len(catalog.instance_types) >= 500
    gpu_types = [it for it in catalog.instance_types if "nvidia.com/gpu" in it.capacity]
    assert len(gpu_types) >= 20
    assert all(it.offerings for it in catalog.instance_types)


def test_check_values_over_http(built):
    catalog, _ = built
    m5 = catalog.get("m5.large")
    assert m5 is not None
    assert m5.allocatable == {
        "cpu": q("1930m"),
        "memory": q("6903Mi"),
        "pods": q("29"),
        "ephemeral-storage": q("17Gi"),
    }
    g5 = catalog.get("g5.xlarge")
    assert g5 is not None
    assert g5.allocatable["cpu"] == q("3920m")
    assert g5.allocatable["memory"] == q("14162Mi")
    assert g5.allocatable["pods"] == q("58")
    assert g5.allocatable["nvidia.com/gpu"] == q("1")
    assert g5.labels["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert g5.zones() <= {f"us-east-1{z}" for z in "abcdef"}


def test_moto_spot_prices_are_replaced_by_marked_estimates(built):
    catalog, _ = built
    m5 = catalog.get("m5.large")
    assert m5 is not None
    spot = m5.cheapest("spot")
    on_demand = m5.cheapest("on-demand")
    assert spot is not None
    assert on_demand is not None
    assert spot.price_estimated
    assert 0 < spot.price < on_demand.price


def test_ec2_is_read_once_while_cached(built):
    _, calls = built
    assert calls.count("types") >= 1
    assert calls.count("offerings") >= 1
    assert len(calls) == calls.count("types") + calls.count("offerings")
    # second catalog() call hit the cache
    assert calls.count("types") == 1
