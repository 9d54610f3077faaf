"""The HTTP endpoints on 127.0.0.1, port 0: /metrics, /healthz, /readyz."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from provisioner.app.server import Endpoints
from provisioner.kube.resource import NODE_POOLS, PODS
from tests.unit.app.test_driver import World
from tests.unit.controllers.harness import nodepool, pending_pod


def get(port: int, path: str, accept: str | None = None) -> tuple[int, str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path, headers={"Accept": accept} if accept else {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        connection.close()


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def endpoints(world: World) -> Iterator[Endpoints]:
    with Endpoints(
        registry=world.registry,
        readiness={"informers": lambda: world.driver.synced},
        metrics_port=0,
        health_port=0,
        host="127.0.0.1",
    ) as served:
        yield served


def test_metrics_expose_the_injected_registry_after_a_creation(world, endpoints):
    world.kube.create(NODE_POOLS, nodepool())
    world.driver.start_sync()
    world.kube.create(PODS, pending_pod("web-0"), namespace="default")
    world.advance(2)
    assert len(world.claims()) == 1
    status, content_type, body = get(endpoints.metrics_port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    assert (
        'karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",'
        'reason="provisioned"} 1.0'
    ) in body
    assert "controller_runtime_reconcile_total" in body


def test_metrics_speak_openmetrics_when_asked(endpoints):
    status, content_type, body = get(
        endpoints.metrics_port, "/metrics", accept="application/openmetrics-text; version=1.0.0"
    )
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")


def test_healthz_answers_while_the_process_serves(endpoints):
    assert get(endpoints.health_port, "/healthz")[::2] == (200, "ok")


def test_readyz_is_503_before_the_informers_synced_and_200_after(world, endpoints):
    status, _, body = get(endpoints.health_port, "/readyz")
    assert status == 503
    assert "[-]informers failed" in body
    world.driver.start_sync()
    assert get(endpoints.health_port, "/readyz")[::2] == (200, "ok")


def test_a_check_that_raises_counts_as_failing():
    def broken() -> bool:
        raise RuntimeError("no answer")

    with Endpoints(
        registry=CollectorRegistry(),
        readiness={"leader": lambda: True, "broken": broken},
        metrics_port=0,
        health_port=0,
        host="127.0.0.1",
    ) as served:
        status, _, body = get(served.health_port, "/readyz")
    assert status == 503
    assert body.splitlines()[:2] == ["[+]leader ok", "[-]broken failed"]


def test_unknown_paths_are_404_and_ports_are_separate(endpoints):
    assert endpoints.metrics_port != endpoints.health_port
    assert get(endpoints.metrics_port, "/nope")[0] == 404
    assert get(endpoints.metrics_port, "/healthz")[0] == 404
    assert get(endpoints.health_port, "/metrics")[0] == 404


def test_one_port_serves_everything_when_both_ports_are_equal():
    registry = CollectorRegistry()
    Counter("jointer_test_total", "a test counter", registry=registry).inc()
    probe = Endpoints(
        registry=registry, readiness={}, metrics_port=0, health_port=0, host="127.0.0.1"
    )
    port = probe.metrics_port
    probe.stop()  # free a port to reuse it for both endpoints
    with Endpoints(
        registry=registry, readiness={}, metrics_port=port, health_port=port, host="127.0.0.1"
    ) as served:
        assert served.metrics_port == served.health_port == port
        assert "jointer_test_total 1.0" in get(port, "/metrics")[2]
        assert get(port, "/healthz")[0] == 200
        assert get(port, "/readyz")[0] == 200


def test_a_port_in_use_is_an_os_error(endpoints):
    with pytest.raises(OSError, match="in use"):
        Endpoints(
            registry=CollectorRegistry(),
            readiness={},
            metrics_port=0,
            health_port=endpoints.health_port,
            host="127.0.0.1",
        )
