"""Targeted planning scenarios, each checked by the independent plan checker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.controllers.provisioning.scenario import (
    ZONES,
    node,
    nodepool,
    pod,
    run_plan,
    tolerate,
    zone_spread,
)

GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
GPU_POOL_REQ = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"}]
CPU_POOL_REQ = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]


def _queue(name: str, gpu_quota: int, gpu_limit: int = -1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "parentQueue": "default-parent-queue",
            "resources": {"gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1}},
        },
    }


def _kai_group(
    name: str, namespace: str, min_member: int, queue: str, **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, **extra},
        "spec": {"minMember": min_member, "queue": queue, "priorityClassName": "train"},
    }


def _kai_pod(name: str, group: str, namespace: str = "ml", **kwargs: Any) -> dict[str, Any]:
    annotations = {"pod-group-name": group, **kwargs.pop("annotations", {})}
    return pod(
        name,
        namespace=namespace,
        labels={"kai.scheduler/queue": "team-a", "app": group},
        annotations=annotations,
        tolerations=[tolerate("nvidia.com/gpu")],
        scheduler="kai-scheduler",
        **kwargs,
    )


def _clean(run: Any) -> None:
    assert run.violations == [], run.violations


# --- gangs -------------------------------------------------------------------------------------


def test_kai_gang_of_eight_gpu_pods_is_placed_whole_in_one_zone_and_pool(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT]),
        _queue("team-a", 16),
        _kai_group("pg-train", "ml", 8, "team-a"),
        *(_kai_pod(f"train-{i}", "pg-train", cpu="4", memory="16Gi", gpu="1") for i in range(8)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    placed = run.placed()
    assert len(placed) == 8
    claims = [run.claim_of(f"ml/train-{i}") for i in range(8)]
    assert len({c["zone"] for c in claims}) == 1
    assert len({c["nodePool"] for c in claims}) == 1


def test_kai_gang_that_exceeds_the_gpu_limit_is_unschedulable_whole(tmp_path: Path) -> None:
    objects = [
        nodepool(
            "gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT], limits={"nvidia.com/gpu": "4"}
        ),
        _queue("team-a", 16),
        _kai_group("pg-train", "ml", 8, "team-a"),
        *(_kai_pod(f"train-{i}", "pg-train", cpu="4", memory="16Gi", gpu="1") for i in range(8)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.plan["nodeClaims"] == []
    reasons = run.unschedulable()
    assert len(reasons) == 8
    assert all("pod group" in r and "ml/pg-train" in r for r in reasons.values()), reasons


def test_over_quota_kai_group_is_ignored(tmp_path: Path) -> None:
    group = _kai_group("pg-sweep", "team-b", 2, "team-b")
    group["spec"]["priorityClassName"] = "inference"
    objects = [
        nodepool("gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT]),
        _queue("team-b", 0, 0),
        group,
        *(
            _kai_pod(f"sweep-{i}", "pg-sweep", namespace="team-b", cpu="2", memory="4Gi", gpu="1")
            for i in range(2)
        ),
    ]
    for obj in objects[3:]:
        obj["metadata"]["labels"]["kai.scheduler/queue"] = "team-b"
    run = run_plan(objects, tmp_path)
    _clean(run)
    ignored = run.ignored()
    assert set(ignored) == {"team-b/sweep-0", "team-b/sweep-1"}
    assert all("quota" in r for r in ignored.values())


def test_incomplete_gang_is_ignored(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT]),
        _queue("team-a", 16),
        _kai_group("pg-half", "ml", 4, "team-a"),
        *(_kai_pod(f"half-{i}", "pg-half", cpu="2", memory="4Gi", gpu="1") for i in range(2)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert set(run.ignored()) == {"ml/half-0", "ml/half-1"}
    assert run.plan["nodeClaims"] == []


def test_gang_topology_none_may_span_zones(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT]),
        _queue("team-a", 16),
        _kai_group("pg-wide", "ml", 3, "team-a", annotations={"jointer.dev/gang-topology": "none"}),
        *(
            _kai_pod(
                f"wide-{i}",
                "pg-wide",
                cpu="2",
                memory="4Gi",
                gpu="1",
                spreads=[zone_spread("pg-wide")],
            )
            for i in range(3)
        ),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    zones = {run.claim_of(f"ml/wide-{i}")["zone"] for i in range(3)}
    assert len(zones) == 3


def test_fractional_gpu_pods_share_devices(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=GPU_POOL_REQ, taints=[GPU_TAINT]),
        _queue("team-a", 16),
        *(
            pod(
                f"nb-{i}",
                namespace="ml",
                cpu="500m",
                memory="1Gi",
                labels={"kai.scheduler/queue": "team-a"},
                annotations={"gpu-fraction": "0.5"},
                tolerations=[tolerate("nvidia.com/gpu")],
                scheduler="kai-scheduler",
            )
            for i in range(4)
        ),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert len(run.placed()) == 4
    # 0.5 x 4 is two GPUs' worth: two g5.xlarge (1.006 each) beat one g5.12xlarge (5.672)
    assert run.plan["costPerHour"] <= 2 * 1.006 + 1e-6


# --- topology ----------------------------------------------------------------------------------


def test_zone_spread_counts_bound_pods(tmp_path: Path) -> None:
    objects: list[dict[str, Any]] = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-a", zone="us-east-1a", cpu="2", memory="4Gi"),
        node("n-b", zone="us-east-1b", cpu="2", memory="4Gi"),
        *(
            pod(f"web-b{i}", labels={"app": "web"}, node_name=n, cpu="1500m", memory="1Gi")
            for i, n in enumerate(["n-a", "n-b"])
        ),
        *(
            pod(f"web-{i}", labels={"app": "web"}, spreads=[zone_spread("web")], cpu="1")
            for i in range(4)
        ),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    zones = [run.claim_of(f"default/web-{i}")["zone"] for i in range(4)]
    # 1a and 1b already hold one: the next pods go to 1c first
    assert zones.count("us-east-1c") == 2
    assert zones.count("us-east-1a") == 1
    assert zones.count("us-east-1b") == 1


def test_hostname_anti_affinity_one_pod_per_node(tmp_path: Path) -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "db"}},
                }
            ]
        }
    }
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        *(pod(f"db-{i}", labels={"app": "db"}, affinity=anti, cpu="250m") for i in range(3)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert len({run.placed()[f"default/db-{i}"] for i in range(3)}) == 3


def test_zone_pod_affinity_co_locates(tmp_path: Path) -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "topology.kubernetes.io/zone",
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                }
            ]
        }
    }
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-b", zone="us-east-1b", cpu="1", memory="1Gi"),
        pod("cache-0", labels={"app": "cache"}, node_name="n-b", cpu="500m", memory="256Mi"),
        *(pod(f"app-{i}", labels={"app": "app"}, affinity=affinity, cpu="1") for i in range(2)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert {run.claim_of(f"default/app-{i}")["zone"] for i in range(2)} == {"us-east-1b"}


# --- volumes -----------------------------------------------------------------------------------


def _pvc(
    name: str, *, volume: str | None = None, storage_class: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def test_claim_bound_to_zonal_volume_pins_the_zone(tmp_path: Path) -> None:
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-0"},
        "spec": {
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": ["us-east-1b"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    }
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        volume,
        _pvc("data", volume="pv-0"),
        pod("db-0", claims=["data"]),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.claim_of("default/db-0")["zone"] == "us-east-1b"


def test_wait_for_first_consumer_allowed_topologies(tmp_path: Path) -> None:
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3-c"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [
            {
                "matchLabelExpressions": [
                    {"key": "topology.kubernetes.io/zone", "values": ["us-east-1c"]}
                ]
            }
        ],
    }
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        storage_class,
        _pvc("scratch", storage_class="gp3-c"),
        pod("job-0", claims=["scratch"]),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.claim_of("default/job-0")["zone"] == "us-east-1c"


def test_missing_claim_makes_the_pod_unschedulable(tmp_path: Path) -> None:
    objects = [nodepool("default", requirements=CPU_POOL_REQ), pod("orphan", claims=["gone"])]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert "persistentvolumeclaim default/gone not found" in run.unschedulable()["default/orphan"]


# --- pools -------------------------------------------------------------------------------------


def test_higher_weight_pool_is_preferred_even_when_dearer(tmp_path: Path) -> None:
    objects = [
        nodepool(
            "cheap",
            requirements=[
                *CPU_POOL_REQ,
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ],
        ),
        nodepool(
            "reserved",
            weight=50,
            requirements=[
                *CPU_POOL_REQ,
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        ),
        *(pod(f"web-{i}", cpu="1") for i in range(3)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert {c["nodePool"] for c in run.plan["nodeClaims"]} == {"reserved"}


def test_weight_falls_through_when_the_heavier_pool_cannot_take_the_pod(tmp_path: Path) -> None:
    objects = [
        nodepool("general", requirements=CPU_POOL_REQ),
        nodepool(
            "tainted",
            weight=50,
            requirements=CPU_POOL_REQ,
            taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        ),
        pod("plain", cpu="1"),
        pod("tolerant", cpu="1", tolerations=[tolerate("dedicated")]),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.claim_of("default/plain")["nodePool"] == "general"
    assert run.claim_of("default/tolerant")["nodePool"] == "tainted"


def test_nodepool_cpu_limit_caps_new_capacity(tmp_path: Path) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ, limits={"cpu": "8"}),
        node("n-a", cpu="4", memory="16Gi"),
        pod("busy", node_name="n-a", cpu="3500m"),
        *(pod(f"w-{i}", cpu="1500m", memory="1Gi") for i in range(6)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    cpu = sum(int(c["instanceType"].split(".")[1] != "large") for c in run.plan["nodeClaims"])
    assert cpu >= 0  # the checker proves the limit; some pods must be left over
    assert run.unschedulable(), "4 cpu of room cannot hold 6 x 1.5 cpu"


def test_daemonset_overhead_is_counted(tmp_path: Path) -> None:
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "a",
                            "image": "a:1",
                            "resources": {"requests": {"cpu": "600m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }
    objects = [nodepool("default", requirements=CPU_POOL_REQ), daemonset, pod("big", cpu="1500m")]
    run = run_plan(objects, tmp_path)
    _clean(run)
    claim = run.claim_of("default/big")
    # 1.5 cpu + 0.6 cpu overhead exceeds c6i.large's 1.9 cpu allocatable
    assert "c6i.large" not in claim["instanceTypes"]
    assert claim["requests"]["cpu"] == "2100m"


def test_existing_node_absorbs_pods_before_buying(tmp_path: Path) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-a", cpu="4", memory="16Gi"),
        pod("running", node_name="n-a", cpu="1"),
        *(pod(f"p-{i}", cpu="1") for i in range(3)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.plan["nodeClaims"] == []
    assert run.plan["existingNodes"] == [
        {"name": "n-a", "pods": ["default/p-0", "default/p-1", "default/p-2"]}
    ]


def test_in_flight_nodeclaim_absorbs_pods(tmp_path: Path) -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": "default",
            },
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["m6i.2xlarge"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        },
    }
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        claim,
        *(pod(f"p-{i}", cpu="2") for i in range(3)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.plan["nodeClaims"] == []
    assert run.plan["existingNodes"][0]["name"] == "nodeclaim/default-abcde"


def _in_flight(name: str, types: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
            ],
        },
    }


def test_an_in_flight_nodeclaim_of_many_instance_types_counts_as_its_smallest(
    tmp_path: Path,
) -> None:
    """Not launched yet, it may become any listed type: room is the smallest one's."""
    claim = _in_flight("default-fghij", ["m6i.2xlarge", "m6i.xlarge", "m6i.4xlarge"])
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        claim,
        *(pod(f"p-{i}", cpu="1") for i in range(5)),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    [placement] = run.plan["existingNodes"]
    assert placement["name"] == "nodeclaim/default-fghij"
    # m6i.xlarge: 4 vCPU, 3920m allocatable -> three 1-CPU pods; the rest need new capacity
    assert len(placement["pods"]) == 3
    assert sum(len(c["pods"]) for c in run.plan["nodeClaims"]) == 2


def test_a_nominated_pod_stays_on_its_in_flight_nodeclaim(tmp_path: Path) -> None:
    """`status.nominatedNodeName` naming a NodeClaim is the provisioner's nomination."""
    claim = _in_flight("default-fghij", ["m6i.xlarge"])
    nominated = pod("p-0", cpu="3")
    nominated["status"]["nominatedNodeName"] = "default-fghij"
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        claim,
        nominated,
        pod("p-1", cpu="3"),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.plan["existingNodes"] == []
    assert [c["pods"] for c in run.plan["nodeClaims"]] == [["default/p-1"]]


def test_taints_are_respected_on_new_and_existing_nodes(tmp_path: Path) -> None:
    taint = {"key": "team", "value": "blue", "effect": "NoSchedule"}
    objects = [
        nodepool("blue", requirements=CPU_POOL_REQ, taints=[taint], weight=10),
        nodepool("open", requirements=CPU_POOL_REQ),
        node("n-blue", pool="blue", taints=[taint]),
        pod("red", cpu="1"),
        pod(
            "blue-0",
            cpu="1",
            tolerations=[
                {"key": "team", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}
            ],
        ),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.placed()["default/blue-0"] == "n-blue"
    assert run.claim_of("default/red")["nodePool"] == "open"


def test_hostname_pinned_pod_is_ignored(tmp_path: Path) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        pod("pinned", node_selector={"kubernetes.io/hostname": "ip-1-2-3-4"}),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert "hostname" in run.ignored()["default/pinned"]


@pytest.mark.parametrize("zone", ZONES)
def test_node_selector_zone(tmp_path: Path, zone: str) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        pod("z", node_selector={"topology.kubernetes.io/zone": zone}),
    ]
    run = run_plan(objects, tmp_path)
    _clean(run)
    assert run.claim_of("default/z")["zone"] == zone


@pytest.mark.parametrize("policy", ["jointer", "greedy"])
def test_zonally_spread_pods_fall_through_a_limited_heavier_pool_that_cannot_keep_the_spread(
    tmp_path: Path, policy: str
) -> None:
    """The heavier pool has room for one small node only: it cannot hold a 3-zone spread, so
    the pods go to the lighter pool (Karpenter tries the next NodePool pod by pod)."""
    cpu_only = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
    objects = [
        nodepool("reserved", requirements=cpu_only, limits={"cpu": "2"}, weight=50),
        nodepool("general", requirements=cpu_only),
        *(
            pod(f"web-{i}", cpu="1", labels={"app": "web"}, spreads=[zone_spread("web")])
            for i in range(9)
        ),
    ]
    run = run_plan(objects, tmp_path, policy=policy)
    _clean(run)
    assert run.unschedulable() == {}
    assert len(run.placed()) == 9
