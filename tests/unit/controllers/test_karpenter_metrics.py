"""Karpenter's metrics observed where Karpenter observes them, on the full controller assembly.

Cloud provider calls (decorator), the provisioner's queue depth, the ``metrics.node`` and
``metrics.pod`` state gauges and the ``cloudprovider.metrics`` offering gauges.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from cloudprovider.errors import CreateError, InsufficientCapacityError, NodeClaimNotFoundError
from cloudprovider.fake import FakeCloudProvider
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.controllers.cloudmetrics import MetricsCloudProvider, for_controller
from provisioner.controllers.metrics import Metrics
from provisioner.kube.resource import NODE_POOLS, NODES, PODS
from provisioner.runtime.clock import FakeClock
from tests.unit.controllers.harness import TYPES, Harness, nodepool, pending_pod

DURATION = "karpenter_cloudprovider_duration_seconds_count"
ERRORS = "karpenter_cloudprovider_errors_total"
QUEUE = "karpenter_scheduler_queue_depth"


@pytest.fixture
def h() -> Harness:
    harness = Harness(assembled=True)
    harness.create(NODE_POOLS, nodepool())
    harness.run()
    return harness


def samples(h: Harness, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(s.labels), s.value)
        for family in h.registry.collect()
        for s in family.samples
        if s.name == name
    ]


def launch(h: Harness, *pods: str, cpu: str = "500m") -> list[dict[str, Any]]:
    for name in pods:
        h.create(PODS, pending_pod(name, cpu=cpu))
    h.run(2)
    return h.claims()


# -- karpenter_cloudprovider_* ----------------------------------------------------------------


def test_each_controller_call_is_timed_under_its_controller_and_karpenters_method(h):
    launch(h, "web-0")
    assert h.metric(DURATION, controller="provisioner", method="GetInstanceTypes", provider="fake")
    assert h.metric(DURATION, controller="nodeclaim.lifecycle", method="Create", provider="fake")
    unlabelled = [labels for labels, _ in samples(h, DURATION) if not labels["controller"]]
    assert unlabelled == []


def test_a_failed_call_counts_its_karpenter_error_type(h):
    h.cloud.next_create_error = InsufficientCapacityError("no capacity")
    launch(h, "web-0")
    assert (
        h.metric(
            ERRORS,
            controller="nodeclaim.lifecycle",
            method="Create",
            provider="fake",
            error="InsufficientCapacityError",
        )
        == 1
    )


def test_unknown_errors_have_an_empty_error_label_and_calls_are_timed_anyway():
    clock = FakeClock()
    registry = CollectorRegistry()
    fake = FakeCloudProvider(instance_types=list(TYPES), clock=clock.now)
    cloud = for_controller(MetricsCloudProvider(fake, metrics=Metrics(registry), clock=clock), "x")
    fake.next_get_error = CreateError("boom")
    fake.next_delete_error = NodeClaimNotFoundError("gone")
    for call in (lambda: cloud.get("aws:///a/i-1"), lambda: cloud.delete("aws:///a/i-1")):
        with pytest.raises(Exception):  # noqa: B017 - re-raised unchanged
            call()
    labels = {"controller": "x", "provider": "fake"}
    errors = "karpenter_cloudprovider_errors_total"
    assert registry.get_sample_value(errors, {**labels, "method": "Get", "error": ""}) == 1
    found = registry.get_sample_value(
        errors, {**labels, "method": "Delete", "error": "NodeClaimNotFoundError"}
    )
    assert found == 1
    assert registry.get_sample_value(DURATION, {**labels, "method": "Get"}) == 1


def test_decorating_twice_still_counts_each_call_once():
    clock = FakeClock()
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    fake = FakeCloudProvider(instance_types=list(TYPES), clock=clock.now)
    once = MetricsCloudProvider(fake, metrics=metrics, clock=clock)
    twice = MetricsCloudProvider(once, metrics=metrics, clock=clock, controller="c")
    twice.get_instance_types(NodePoolRef(name="p", node_class=NodeClassRef(name="default")))
    labels = {"controller": "c", "method": "GetInstanceTypes", "provider": "fake"}
    assert registry.get_sample_value(DURATION, labels) == 1


# -- karpenter_scheduler_queue_depth ------------------------------------------------------------


def test_queue_depth_is_the_batchs_pods_then_those_left_unscheduled(h):
    seen: list[list[tuple[dict[str, str], float]]] = []
    h.manager.provisioner.observer = lambda *_: seen.append(samples(h, QUEUE))
    launch(h, "web-0", "web-1")
    h.create(PODS, pending_pod("huge", cpu="64"))
    h.run(2)
    assert [[value for _, value in batch] for batch in seen] == [[2.0], [1.0]]
    ((labels, value),) = samples(h, QUEUE)  # one scheduling id: the last batch's
    assert labels["controller"] == "provisioner"
    assert labels["scheduling_id"] == seen[-1][0][0]["scheduling_id"]
    assert labels["scheduling_id"] != seen[0][0][0]["scheduling_id"]
    assert value == 1  # the pod nothing fits stays in the queue


# -- metrics.node / metrics.pod -----------------------------------------------------------------


def register(h: Harness) -> tuple[dict[str, Any], str]:
    (claim,) = launch(h, "web-0", cpu="1")
    node = h.kubelet(claim)
    h.run(1)
    name = str(node["metadata"]["name"])
    h.bind("web-0", name)
    h.run(5)
    return claim, name


def node_series(h: Harness, metric: str, node: str) -> dict[str, float]:
    return {
        labels["resource_type"]: value
        for labels, value in samples(h, metric)
        if labels["node_name"] == node
    }


def test_node_gauges_are_karpenters_and_go_with_the_node(h):
    _, name = register(h)
    allocatable = node_series(h, "karpenter_nodes_allocatable", name)
    assert allocatable["cpu"] == pytest.approx(1.9)  # c.large: 2 cores less 100m
    assert allocatable["memory"] == 4 * 1024**3 - 1024**3 // 2
    assert node_series(h, "karpenter_nodes_total_pod_requests", name)["cpu"] == 1
    assert node_series(h, "karpenter_nodes_system_overhead", name)["cpu"] == pytest.approx(0.1)
    (labels, _), *_ = [s for s in samples(h, "karpenter_nodes_allocatable") if s[0]["node_name"]]
    assert labels["managed"] == "true"
    assert labels["nodepool"] == "default"
    assert labels["instance_type"] == "c.large"
    percent = h.metric("karpenter_cluster_utilization_percent", resource_type="cpu")
    assert percent == pytest.approx(100 / 1.9)
    h.kube.delete(NODES, name)
    h.run(5)
    assert node_series(h, "karpenter_nodes_allocatable", name) == {}
    assert samples(h, "karpenter_nodes_current_lifetime_seconds") == []


def test_daemonset_pods_count_as_daemon_requests(h):
    _, name = register(h)
    daemon = pending_pod("agent", cpu="100m")
    daemon["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u"}
    ]
    daemon["spec"]["nodeName"] = name
    h.create(PODS, daemon)
    h.run(5)
    assert node_series(h, "karpenter_nodes_total_daemon_requests", name)["cpu"] == 0.1
    assert node_series(h, "karpenter_nodes_total_pod_requests", name)["cpu"] == 1.1


def test_pod_state_is_labelled_with_its_node_and_removed_with_the_pod(h):
    _, name = register(h)
    states = {labels["name"]: labels for labels, _ in samples(h, "karpenter_pods_state")}
    assert states["web-0"]["node"] == name
    assert states["web-0"]["scheduled"] == "true"
    assert states["web-0"]["nodepool"] == "default"
    assert states["web-0"]["managed"] == "true"
    assert states["web-0"]["instance_type"] == "c.large"
    h.create(PODS, pending_pod("waiting", cpu="64"))
    h.run(5)
    states = {labels["name"]: labels for labels, _ in samples(h, "karpenter_pods_state")}
    assert states["waiting"]["scheduled"] == "false"
    assert states["waiting"]["phase"] == "Pending"
    assert states["waiting"]["managed"] == "false"
    h.kube.delete(PODS, "web-0", namespace="default")
    h.run(5)
    names = {labels["name"] for labels, _ in samples(h, "karpenter_pods_state")}
    assert names == {"waiting"}


# -- offering gauges ---------------------------------------------------------------------------


def test_offering_gauges_follow_the_instance_types_the_provisioner_resolves(h):
    labels = {"instance_type": "c.large", "capacity_type": "on-demand", "zone": "zone-a"}
    price = "karpenter_cloudprovider_instance_type_offering_price_estimate"
    available = "karpenter_cloudprovider_instance_type_offering_available"
    launch(h, "web-0")
    assert h.metric(price, **labels) == 0.085
    assert h.metric(available, **labels) == 1
    spot = {**labels, "capacity_type": "spot", "zone": "zone-b"}
    assert h.metric(price, **spot) == pytest.approx(0.085 / 2.9)
    h.cloud.mark_unavailable("on-demand", "c.large", "zone-a")
    launch(h, "web-1")
    assert h.metric(available, **labels) == 0
    assert h.metric(price, **labels) == 0.085
    h.cloud.instance_types = [t for t in h.cloud.instance_types if t.name != "c.large"]
    launch(h, "web-2")
    assert [s for s in samples(h, available) if s[0]["instance_type"] == "c.large"] == []
    assert [s for s in samples(h, price) if s[0]["instance_type"] == "c.large"] == []
