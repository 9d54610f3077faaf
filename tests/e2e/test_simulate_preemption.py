"""Priority preemption in the simulated kube-scheduler (what keeps headroom placeholders useful)."""

from __future__ import annotations

from provisioner.kube.resource import NODES, PODS, PRIORITY_CLASSES
from tests.e2e.test_simulate_cluster import Cluster, make_node, make_pod


def priority_class(name: str, value: int, *, default: bool = False) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }


def placeholders(cluster: Cluster, count: int) -> None:
    cluster.kube.create(PRIORITY_CLASSES, priority_class("headroom", -10))
    for index in range(count):
        cluster.kube.create(
            PODS,
            make_pod(f"hold-{index}", cpu="1", priorityClassName="headroom"),
            namespace="default",
        )
    cluster.settle()


def test_a_pod_preempts_lower_priority_placeholders_and_binds_at_once() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="4"))
    placeholders(cluster, 4)
    assert len(cluster.bound()) == 4
    cluster.kube.create(PODS, make_pod("app", cpu="2"), namespace="default")
    cluster.settle()
    bound = cluster.bound()
    assert bound["app"] == "n"
    assert len([name for name in bound if name.startswith("hold-")]) == 2  # only what was needed
    preempted = cluster.events("Preempted")
    assert len(preempted) == 2
    uid = cluster.pod("app")["metadata"]["uid"]
    assert {e["message"] for e in preempted} == {f"Preempted by pod {uid} on node n"}


def test_equal_priority_is_never_preempted() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="2"))
    for name in ("a", "b"):
        cluster.kube.create(PODS, make_pod(name, cpu="1"), namespace="default")
    cluster.settle()
    cluster.kube.create(PODS, make_pod("c", cpu="1"), namespace="default")
    cluster.settle()
    assert sorted(cluster.bound()) == ["a", "b"]
    assert cluster.events("Preempted") == []


def test_preemption_policy_never_waits() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="2"))
    placeholders(cluster, 2)
    cluster.kube.create(
        PODS, make_pod("polite", cpu="1", preemptionPolicy="Never"), namespace="default"
    )
    cluster.settle()
    assert "polite" not in cluster.bound()


def test_the_global_default_class_sets_the_priority_of_pods_without_one() -> None:
    cluster = Cluster()
    cluster.kube.create(PRIORITY_CLASSES, priority_class("low", -5, default=True))
    cluster.kube.create(PRIORITY_CLASSES, priority_class("high", 100))
    cluster.kube.create(NODES, make_node("n", cpu="1"))
    cluster.kube.create(PODS, make_pod("plain", cpu="1"), namespace="default")
    cluster.settle()
    cluster.kube.create(
        PODS, make_pod("urgent", cpu="1", priorityClassName="high"), namespace="default"
    )
    cluster.settle()
    assert cluster.bound() == {"urgent": "n"}
