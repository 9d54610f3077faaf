"""The simulated kube-scheduler and workload controllers on the in-memory API (no AWS)."""

from __future__ import annotations

import random
from typing import Any

from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import (
    DAEMON_SETS,
    DEPLOYMENTS,
    JOBS,
    NODES,
    PODS,
    REPLICA_SETS,
    Resource,
)
from provisioner.simulation.kinds import resource_for_kind
from provisioner.simulation.objects import condition
from provisioner.simulation.scheduler import Scheduler
from provisioner.simulation.timeline import Timeline
from provisioner.simulation.workloads import Workloads

KAI_POD_GROUP = resource_for_kind("scheduling.run.ai/v2alpha2", "PodGroup")
KAI_QUEUE = resource_for_kind("scheduling.run.ai/v2", "Queue")


class Cluster:
    def __init__(self) -> None:
        self.timeline = Timeline()
        self.kube = InMemoryKube(clock=self.timeline.clock.now)
        self.groups: set[Resource] = set()
        self.scheduler = Scheduler(
            timeline=self.timeline, kube=self.kube, group_resources=lambda: self.groups
        )
        self.workloads = Workloads(timeline=self.timeline, kube=self.kube, rng=random.Random(1))  # noqa: S311
        self.kube.subscribe(self.scheduler.observe)
        self.kube.subscribe(self.workloads.observe)

    def settle(self, until: float | None = None) -> None:
        self.timeline.run_until(self.timeline.now if until is None else until)

    def pod(self, name: str, namespace: str = "default") -> JsonObject:
        return self.kube.get(PODS, name, namespace=namespace)

    def pods(self) -> list[JsonObject]:
        return self.kube.list(PODS).items

    def bound(self) -> dict[str, str]:
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in self.pods()
            if p["spec"].get("nodeName")
        }

    def events(self, reason: str) -> list[JsonObject]:
        return [
            e
            for e in self.kube.list(resource_for_kind("v1", "Event")).items
            if e["reason"] == reason
        ]


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    ready: bool = True,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    gpus: str | None = None,
) -> JsonObject:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = gpus
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def make_pod(name: str, *, cpu: str = "1", namespace: str = "default", **spec: Any) -> JsonObject:
    metadata = spec.pop("metadata", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


# --- the scheduler ------------------------------------------------------------------------------


def test_a_pod_is_bound_to_a_ready_node_that_fits() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("small", cpu="1"))
    cluster.kube.create(NODES, make_node("big", cpu="8"))
    cluster.kube.create(PODS, make_pod("p", cpu="2"), namespace="default")
    cluster.settle()
    pod = cluster.pod("p")
    assert pod["spec"]["nodeName"] == "big"
    assert condition(pod, "PodScheduled")["status"] == "True"  # type: ignore[index]
    assert [e["message"] for e in cluster.events("Scheduled")] == [
        "Successfully assigned default/p to big"
    ]


def test_requests_already_bound_count_against_the_node() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="2500m"))
    for name in ("a", "b"):
        cluster.kube.create(PODS, make_pod(name, cpu="1"), namespace="default")
    cluster.settle()
    cluster.kube.create(PODS, make_pod("c", cpu="1"), namespace="default")
    cluster.settle()
    assert sorted(cluster.bound()) == ["a", "b"]
    assert "1 Insufficient resources" in condition(cluster.pod("c"), "PodScheduled")["message"]  # type: ignore[index]


def test_unschedulable_pods_get_the_condition_and_one_event() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("not-ready", ready=False))
    cluster.kube.create(
        NODES, make_node("tainted", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    )
    cluster.kube.create(NODES, make_node("labelled", labels={"tier": "web"}))
    cluster.kube.create(PODS, make_pod("p", nodeSelector={"tier": "batch"}), namespace="default")
    cluster.settle()
    pod = cluster.pod("p")
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert scheduled["message"] == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were not ready or not schedulable."
    )
    cluster.kube.create(NODES, make_node("other"))
    cluster.settle()
    assert len(cluster.events("FailedScheduling")) == 1


def _parked_cluster() -> Cluster:
    """A full 2-CPU node (pod ``a``) and pod ``c`` parked as unschedulable."""
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="2"))
    cluster.kube.create(PODS, make_pod("a", cpu="2"), namespace="default")
    cluster.settle()
    cluster.kube.create(PODS, make_pod("c", cpu="1"), namespace="default")
    cluster.settle()
    assert cluster.bound() == {"a": "n"}
    assert cluster.scheduler.attempts == 2
    return cluster


def test_an_unschedulable_pod_waits_for_an_event_that_may_let_it_fit() -> None:
    cluster = _parked_cluster()
    cluster.kube.create(PODS, make_pod("d", cpu="1"), namespace="default")
    cluster.settle()
    assert cluster.scheduler.attempts == 3  # d tried, c still parked
    cluster.kube.patch_status(PODS, "a", {"status": {"phase": "Running"}}, namespace="default")
    cluster.kube.merge_patch(
        PODS, "d", {"metadata": {"annotations": {"x": "y"}}}, namespace="default"
    )
    cluster.settle()
    assert cluster.scheduler.attempts == 3  # neither frees room nor changes c or d's spec
    cluster.kube.delete(PODS, "a", namespace="default")
    cluster.settle()
    assert cluster.bound() == {"c": "n", "d": "n"}


def test_a_finished_pod_a_new_node_or_a_changed_pod_unparks() -> None:
    cluster = _parked_cluster()
    cluster.kube.create(NODES, make_node("full", cpu="500m"))
    cluster.settle()
    assert cluster.scheduler.attempts == 3
    cluster.kube.merge_patch(PODS, "c", {"metadata": {"labels": {"l": "v"}}}, namespace="default")
    cluster.settle()
    assert cluster.scheduler.attempts == 4
    cluster.kube.patch_status(PODS, "a", {"status": {"phase": "Succeeded"}}, namespace="default")
    cluster.settle()
    assert cluster.bound() == {"a": "n", "c": "n"}


def _attempts_at(cluster: Cluster, start: float, *offsets: float) -> list[int]:
    """The scheduler's attempt count after settling at each ``start + offset``, in turn."""
    counts = []
    for offset in offsets:
        cluster.settle(start + offset)
        counts.append(cluster.scheduler.attempts)
    return counts


def test_a_parked_pod_is_tried_again_after_five_minutes() -> None:
    cluster = _parked_cluster()
    assert _attempts_at(cluster, cluster.timeline.now, 299, 301, 602) == [2, 3, 4]


def test_a_pod_parked_again_after_an_event_is_retried_five_minutes_later() -> None:
    cluster = _parked_cluster()
    start = cluster.timeline.now
    cluster.settle(start + 100)
    cluster.kube.create(NODES, make_node("full", cpu="500m"))  # unparks: c tried again
    assert _attempts_at(cluster, start, 100, 399, 401) == [3, 3, 4]


def test_the_nominated_node_is_preferred() -> None:
    cluster = Cluster()
    for name in ("a-node", "b-node"):
        cluster.kube.create(NODES, make_node(name))
    claims = resource_for_kind("karpenter.sh/v1", "NodeClaim")
    cluster.kube.create(
        claims, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "nc"}}
    )
    cluster.kube.patch_status(claims, "nc", {"status": {"nodeName": "b-node"}})
    pod = cluster.kube.create(
        PODS,
        {**make_pod("p"), "spec": {**make_pod("p")["spec"], "schedulingGates": [{"name": "x"}]}},
        namespace="default",
    )
    cluster.kube.create_event(
        pod, reason="Nominated", message="Pod should schedule on: nodeclaim/nc"
    )
    cluster.kube.merge_patch(PODS, "p", {"spec": {"schedulingGates": None}}, namespace="default")
    cluster.settle()
    assert cluster.bound() == {"p": "b-node"}


def _gang(cluster: Cluster, size: int, *, minimum: int, gpus: str = "1", queue: str = "q") -> None:
    cluster.groups |= {KAI_POD_GROUP, KAI_QUEUE}
    cluster.kube.create(
        KAI_POD_GROUP,
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"},
            "spec": {"minMember": minimum, "queue": queue},
        },
        namespace="ml",
    )
    for index in range(size):
        pod = make_pod(
            f"w-{index}",
            cpu="1",
            namespace="ml",
            metadata={"annotations": {"pod-group-name": "pg"}},
            schedulerName="kai-scheduler",
        )
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = gpus
        cluster.kube.create(PODS, pod, namespace="ml")


def test_a_gang_is_bound_whole_or_not_at_all() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("g1", gpus="2"))
    _gang(cluster, 3, minimum=3)
    cluster.settle()
    assert cluster.bound() == {}
    messages = {condition(p, "PodScheduled")["message"] for p in cluster.pods()}  # type: ignore[index]
    assert messages == {
        "pod group ml/pg: 2 of the 3 members it needs can be placed; waiting for the whole gang"
    }
    cluster.kube.create(NODES, make_node("g2", gpus="1"))
    cluster.settle()
    assert sorted(cluster.bound().values()) == ["g1", "g1", "g2"]


def test_a_kai_group_over_its_queue_quota_is_not_bound() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("g1", gpus="4"))
    cluster.kube.create(
        KAI_QUEUE,
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"resources": {"gpu": {"quota": 0, "limit": 0}}},
        },
    )
    _gang(cluster, 2, minimum=2)
    cluster.settle()
    assert cluster.bound() == {}
    assert {condition(p, "PodScheduled")["message"] for p in cluster.pods()} == {  # type: ignore[index]
        "pod group ml/pg is over its queue quota limit"
    }


# --- workload controllers ---------------------------------------------------------------------


def _deployment(replicas: int) -> JsonObject:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": make_pod("x")["spec"]},
        },
    }


def test_a_deployment_gets_a_replica_set_and_its_pods() -> None:
    cluster = Cluster()
    cluster.kube.create(DEPLOYMENTS, _deployment(3), namespace="default")
    cluster.settle()
    (replica_set,) = cluster.kube.list(REPLICA_SETS).items
    assert replica_set["spec"]["replicas"] == 3
    assert replica_set["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    pods = cluster.pods()
    assert len(pods) == 3
    assert all(
        p["metadata"]["name"].startswith(replica_set["metadata"]["name"] + "-") for p in pods
    )
    assert all(p["metadata"]["labels"]["app"] == "web" for p in pods)


def test_scaling_down_removes_unbound_pods_first() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n", cpu="1"))
    cluster.kube.create(DEPLOYMENTS, _deployment(3), namespace="default")
    cluster.settle()
    assert len(cluster.bound()) == 1
    cluster.kube.merge_patch(DEPLOYMENTS, "web", {"spec": {"replicas": 1}}, namespace="default")
    cluster.settle()
    pods = cluster.pods()
    assert len(pods) == 1
    assert pods[0]["spec"].get("nodeName") == "n"


def test_deleting_a_deployment_collects_its_replica_set_and_pods() -> None:
    cluster = Cluster()
    cluster.kube.create(DEPLOYMENTS, _deployment(2), namespace="default")
    cluster.settle()
    cluster.kube.delete(DEPLOYMENTS, "web", namespace="default")
    cluster.settle()
    assert cluster.kube.list(REPLICA_SETS).items == []
    assert cluster.pods() == []


def test_a_job_runs_parallelism_pods_until_its_completions() -> None:
    cluster = Cluster()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"parallelism": 2, "completions": 3, "template": {"spec": make_pod("x")["spec"]}},
    }
    cluster.kube.create(JOBS, job, namespace="default")
    cluster.settle()
    assert len(cluster.pods()) == 2
    for _ in range(3):
        running = [p for p in cluster.pods() if p["status"].get("phase") == "Pending"]
        cluster.kube.patch_status(
            PODS,
            running[0]["metadata"]["name"],
            {"status": {"phase": "Succeeded"}},
            namespace="default",
        )
        cluster.settle()
    pods = cluster.pods()
    assert len(pods) == 3
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert all(p["spec"]["restartPolicy"] == "Never" for p in pods)
    finished = cluster.kube.get(JOBS, "j", namespace="default")
    assert condition(finished, "Complete")["status"] == "True"  # type: ignore[index]
    assert finished["status"]["succeeded"] == 3


def test_a_daemonset_runs_one_bound_pod_per_admitting_node() -> None:
    cluster = Cluster()
    cluster.kube.create(NODES, make_node("n1"))
    cluster.kube.create(NODES, make_node("n2", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    cluster.kube.create(
        NODES,
        make_node(
            "n3",
            ready=False,
            taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}],
        ),
    )
    daemon = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": make_pod("x", cpu="100m")["spec"],
            }
        },
    }
    cluster.kube.create(DAEMON_SETS, daemon, namespace="kube-system")
    cluster.settle()
    assert sorted(cluster.bound().values()) == ["n1", "n3"]
