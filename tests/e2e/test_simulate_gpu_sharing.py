"""KAI's GPU sharing in the simulated scheduler: fractions bind to a device with room, and each
shared device holds one reservation pod (``pod-groups.md`` §9)."""

from __future__ import annotations

from typing import Any

from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import NODES, PODS
from provisioner.simulation.gpushare import GPU_GROUP, RESERVATION_NAMESPACE
from tests.e2e.test_simulate_cluster import Cluster, make_node, make_pod


def fraction_pod(name: str, value: str, *, key: str = "gpu-fraction", **extra: str) -> JsonObject:
    return make_pod(name, metadata={"annotations": {key: value, **extra}})


def reservations(cluster: Cluster) -> list[JsonObject]:
    return [p for p in cluster.pods() if p["metadata"]["namespace"] == RESERVATION_NAMESPACE]


def group(cluster: Cluster, name: str) -> Any:
    return cluster.pod(name)["metadata"]["labels"].get(GPU_GROUP)


def test_a_fraction_binds_only_to_a_gpu_node() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("cpu", cpu="8"))
    cluster.kube.create(PODS, fraction_pod("f", "0.5"), namespace="default")
    cluster.settle()
    assert cluster.bound() == {}
    cluster.kube.create(NODES, make_node("gpu", gpus="1"))
    cluster.settle()
    assert cluster.bound()["f"] == "gpu"
    pod = cluster.pod("f")
    assert pod["metadata"]["annotations"]["received-resource-type"] == "Fraction"
    assert group(cluster, "f")


def test_fractions_share_a_device_and_one_reservation_pod_holds_it() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("gpu", cpu="8", gpus="2"))
    for name in ("a", "b", "c"):
        cluster.kube.create(PODS, fraction_pod(name, "0.5"), namespace="default")
    cluster.settle()
    assert set(cluster.bound()) >= {"a", "b", "c"}
    assert group(cluster, "a") == group(cluster, "b") != group(cluster, "c")
    held = reservations(cluster)
    assert len(held) == 2
    for pod in held:
        assert pod["metadata"]["name"].startswith("gpu-reservation-gpu-")
        assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
        assert pod["metadata"]["labels"]["app"] == "kai-resource-reservation"
        assert pod["spec"]["nodeName"] == "gpu"
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {"nvidia.com/gpu": "1"}
    assert {p["metadata"]["labels"][GPU_GROUP] for p in held} == {
        group(cluster, "a"),
        group(cluster, "c"),
    }
    assert sorted(p["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"] for p in held) == [
        "0",
        "1",
    ]


def test_a_fraction_needs_room_on_one_device_not_in_total() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("gpu", cpu="8", gpus="2"))
    for name in ("a", "b"):
        cluster.kube.create(PODS, fraction_pod(name, "0.6"), namespace="default")
    cluster.settle()
    cluster.kube.create(PODS, fraction_pod("c", "0.6"), namespace="default")
    cluster.settle()
    held = sorted(p["metadata"]["name"] for p in reservations(cluster))
    assert sorted(cluster.bound()) == ["a", "b", *held]
    assert group(cluster, "a") != group(cluster, "b")
    assert cluster.pod("c")["spec"].get("nodeName") is None  # 0.8 free in all, 0.4 per device


def test_whole_gpu_pods_and_fractions_do_not_share_a_device() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("gpu", cpu="8", gpus="1"))
    cluster.kube.create(PODS, fraction_pod("f", "0.25"), namespace="default")
    cluster.settle()
    whole = make_pod("w")
    whole["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cluster.kube.create(PODS, whole, namespace="default")
    cluster.settle()
    assert cluster.bound().get("f") == "gpu"
    assert "w" not in cluster.bound()


def test_gpu_memory_is_read_against_the_node_device_memory() -> None:
    cluster = Cluster()
    labels = {"karpenter.k8s.aws/instance-gpu-memory": "8192"}
    cluster.kube.create(NODES, make_node("small", gpus="1", labels=labels))
    cluster.kube.create(PODS, fraction_pod("big", "10000", key="gpu-memory"), namespace="default")
    cluster.kube.create(PODS, fraction_pod("m1", "4096", key="gpu-memory"), namespace="default")
    cluster.kube.create(PODS, fraction_pod("m2", "4096", key="gpu-memory"), namespace="default")
    cluster.settle()
    assert cluster.bound().get("m1") == cluster.bound().get("m2") == "small"
    assert group(cluster, "m1") == group(cluster, "m2")
    assert "big" not in cluster.bound()


def test_the_reservation_pod_goes_when_the_last_fraction_on_its_device_does() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("gpu", cpu="8", gpus="1"))
    for name in ("a", "b"):
        cluster.kube.create(PODS, fraction_pod(name, "0.5"), namespace="default")
    cluster.settle()
    assert len(reservations(cluster)) == 1
    cluster.kube.delete(PODS, "a", namespace="default", grace_period_seconds=0)
    cluster.settle()
    assert len(reservations(cluster)) == 1
    cluster.kube.delete(PODS, "b", namespace="default", grace_period_seconds=0)
    cluster.settle()
    assert reservations(cluster) == []
    # the device is whole again
    whole = make_pod("w")
    whole["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    cluster.kube.create(PODS, whole, namespace="default")
    cluster.settle()
    assert cluster.bound() == {"w": "gpu"}
