"""Regression tests for planner bugs found by the independent plan checker."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.controllers.provisioning.scenario import (
    SMALL_CATALOG,
    _type,
    nodepool,
    pod,
    run_plan,
    tolerate,
)

GPU_POOL = nodepool(
    "gpu",
    requirements=[{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"}],
    taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
)


def _fraction_pod(name: str, cpu: str = "500m", fraction: str = "0.5") -> dict[str, Any]:
    return pod(
        name,
        namespace="ml",
        cpu=cpu,
        memory="1Gi",
        annotations={"gpu-fraction": fraction},
        tolerations=[tolerate("nvidia.com/gpu")],
    )


def test_fraction_only_pods_get_gpu_capacity(tmp_path: Path) -> None:
    """Bug: with no whole-GPU request anywhere, bins were built without GPU capacity."""
    run = run_plan([GPU_POOL, *(_fraction_pod(f"nb-{i}") for i in range(4))], tmp_path)
    assert run.violations == []
    assert len(run.placed()) == 4


def test_a_gpu_limit_without_request_is_packed_as_one_gpu(tmp_path: Path) -> None:
    """A container with only ``limits: {nvidia.com/gpu: 1}`` needs one GPU (limit = request)."""
    pods = []
    for i in range(2):
        manifest = pod(f"gpu-{i}", namespace="ml", tolerations=[tolerate("nvidia.com/gpu")])
        manifest["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        pods.append(manifest)
    run = run_plan([GPU_POOL, *pods], tmp_path)
    assert run.violations == []
    assert len(run.placed()) == 2
    for claim in run.plan["nodeClaims"]:
        if len(claim["pods"]) > 1:
            assert "g5.xlarge" not in claim["instanceTypes"]


def test_instance_types_of_a_fraction_claim_hold_its_fractions(tmp_path: Path) -> None:
    """Bug: a NodeClaim listed GPU types too small for the fractions packed on it."""
    catalog = copy.deepcopy(SMALL_CATALOG)
    catalog["instanceTypes"] = [
        _type("g5.xlarge", 16, 64, 58, 1.0, gpus=1),
        _type("g5.12xlarge", 48, 192, 234, 1.1, gpus=4),
    ]
    run = run_plan(
        [GPU_POOL, *(_fraction_pod(f"nb-{i}", cpu="2") for i in range(6))],
        tmp_path,
        catalog=catalog,
    )
    assert run.violations == []
    for claim in run.plan["nodeClaims"]:
        if len(claim["pods"]) > 2:
            assert "g5.xlarge" not in claim["instanceTypes"]


def test_zone_affinity_to_a_bound_pod_may_use_every_zone(tmp_path: Path) -> None:
    """Bug: carriers of a zone pod affinity had their offerings collapsed to one zone."""
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
    from tests.unit.controllers.provisioning.scenario import node  # noqa: PLC0415

    objects = [
        nodepool("default"),
        node("n-c", zone="us-east-1c", cpu="1", memory="1Gi"),
        pod("cache-0", labels={"app": "cache"}, node_name="n-c", cpu="500m", memory="256Mi"),
        pod("app-0", affinity=affinity, cpu="1"),
    ]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    assert run.claim_of("default/app-0")["zone"] == "us-east-1c"


def test_instance_types_stay_within_nodepool_limits(tmp_path: Path) -> None:
    """Bug: a NodeClaim listed instance types whose launch would break the NodePool limits."""
    objects = [nodepool("default", limits={"cpu": "4"}), pod("one", cpu="1")]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    (claim,) = run.plan["nodeClaims"]
    assert set(claim["instanceTypes"]) <= {"c6i.large", "c6i.xlarge", "m6i.xlarge", "g5.xlarge"}


def _gang(size: int, min_member: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        nodepool("default"),
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"resources": {"gpu": {"quota": -1, "limit": -1}}},
        },
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": min_member, "queue": "q"},
        },
    ]
    objects.extend(
        pod(
            f"m-{i}",
            cpu="1",
            labels={"kai.scheduler/queue": "q"},
            annotations={"pod-group-name": "pg"},
            scheduler="kai-scheduler",
        )
        for i in range(size)
    )
    return objects


def test_gang_member_with_a_missing_claim_blocks_the_whole_gang(tmp_path: Path) -> None:
    """Bug: the gang minimum was capped by the members left, so 3 of a gang of 4 were placed."""
    objects = _gang(4, 4)
    objects[-1]["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "gone"}}]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    assert run.placed() == {}
    reasons = run.unschedulable()
    assert "not found" in reasons["default/m-3"]
    assert all("pod group default/pg" in reasons[f"default/m-{i}"] for i in range(3))


def test_gang_member_that_fits_nowhere_blocks_the_whole_gang(tmp_path: Path) -> None:
    """Bug: the solver rejected the problem (ProblemError) when a gang lost a member class."""
    objects = _gang(3, 3)
    objects[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "500"
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    assert run.placed() == {}
    assert len(run.unschedulable()) == 3


def _apart(name: str) -> dict[str, Any]:
    """A 1-CPU pod that wants a node of its own (hostname anti-affinity to its app)."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "apart"}},
                }
            ]
        }
    }
    return pod(name, cpu="1", labels={"app": "apart"}, affinity=anti)


def test_limits_hold_whichever_listed_type_every_claim_launches(tmp_path: Path) -> None:
    """Bug (issue 17.2): each NodeClaim listed types up to the limit left by the *chosen*
    types of the others, so launching the largest of every listing broke the limit."""
    from tests.unit.controllers.provisioning.scenario import small_catalog  # noqa: PLC0415

    objects = [nodepool("default", limits={"cpu": "24"}), *(_apart(f"a-{i}") for i in range(4))]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    claims = run.plan["nodeClaims"]
    assert len(claims) == 4
    types = {t.name: t for t in small_catalog().instance_types}
    worst = sum(max(types[n].capacity["cpu"] for n in c["instanceTypes"]) for c in claims)
    assert worst <= 24_000
    assert all(len(c["instanceTypes"]) > 1 for c in claims)  # the slack is shared out


def test_rest_of_a_gang_joins_its_running_members_pool_and_zone(tmp_path: Path) -> None:
    """Bug (issue 17.6): with half a gang running on pool ``b`` in us-east-1c, the rest went
    to the heavier pool ``a`` in another zone."""
    from tests.unit.controllers.provisioning.scenario import node  # noqa: PLC0415

    objects = _gang(4, 4)
    objects[0] = nodepool("a", weight=10)
    objects.insert(1, nodepool("b"))
    full = node("n-b", pool="b", zone="us-east-1c", cpu="2", memory="4Gi")
    objects.append(full)
    for member in objects:
        if member["kind"] == "Pod" and member["metadata"]["name"] in ("m-0", "m-1"):
            member["spec"]["nodeName"] = "n-b"
            member["status"] = {"phase": "Running"}
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    for name in ("default/m-2", "default/m-3"):
        claim = run.claim_of(name)
        assert (claim["nodePool"], claim["zone"]) == ("b", "us-east-1c")
    from tests.plancheck import check_plan  # noqa: PLC0415
    from tests.unit.controllers.provisioning.scenario import small_catalog  # noqa: PLC0415

    moved = copy.deepcopy(run.plan)
    claim = next(c for c in moved["nodeClaims"] if "default/m-2" in c["pods"])
    claim["zone"] = "us-east-1a"
    found = check_plan(objects, small_catalog(), moved)
    assert any("gang default/pg: placed in several zones" in v for v in found), found


def test_fractions_on_an_existing_node_keep_their_devices(tmp_path: Path) -> None:
    """Bug (issue 17.5): two 0.6 fractions on two devices left "800 free on one device"
    (summed as if packed tightly), so a 0.7 fraction was placed where no device has room."""
    from tests.unit.controllers.provisioning.scenario import node  # noqa: PLC0415

    bound = []
    for i in range(2):
        manifest = _fraction_pod(f"run-{i}", fraction="0.6")
        manifest["spec"]["nodeName"] = "n-gpu"
        manifest["status"] = {"phase": "Running"}
        manifest["metadata"]["labels"] = {"runai-gpu-group": f"group-{i}"}
        bound.append(manifest)
    objects = [
        GPU_POOL,
        node("n-gpu", pool="gpu", cpu="16", memory="64Gi", gpu="2", instance_type="g5.12xlarge"),
        *bound,
        _fraction_pod("new", fraction="0.7"),
    ]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    assert run.placed()["ml/new"] != "n-gpu"


def _gpu_memory_catalog() -> dict[str, Any]:
    """g4dn (16 GiB devices) cheapest, g5 (22888 MiB devices) next, with Karpenter's label."""
    catalog = copy.deepcopy(SMALL_CATALOG)
    for entry in catalog["instanceTypes"]:
        if entry["name"].startswith("g5."):
            entry["labels"] = {"karpenter.k8s.aws/instance-gpu-memory": "22888"}
    g4dn = copy.deepcopy(next(t for t in catalog["instanceTypes"] if t["name"] == "g5.xlarge"))
    g4dn["name"] = "g4dn.xlarge"
    g4dn["labels"] = {"karpenter.k8s.aws/instance-gpu-memory": "16384"}
    for offering in g4dn["offerings"]:
        offering["price"] = round(offering["price"] / 2, 4)
    catalog["instanceTypes"].append(g4dn)
    return catalog


def _memory_pod(name: str, mib: int) -> dict[str, Any]:
    return pod(
        name,
        namespace="ml",
        cpu="500m",
        memory="1Gi",
        annotations={"gpu-memory": str(mib)},
        tolerations=[tolerate("nvidia.com/gpu")],
    )


@pytest.mark.parametrize("policy", ["jointer", "greedy"])
def test_gpu_memory_pods_take_their_share_of_a_device_by_its_memory(
    tmp_path: Path, policy: str
) -> None:
    """Two 7000 MiB pods share one 16 GiB device; a 20000 MiB pod needs a 22888 MiB one."""
    objects = [
        GPU_POOL,
        _memory_pod("small-0", 7000),
        _memory_pod("small-1", 7000),
        _memory_pod("large-0", 20000),
    ]
    run = run_plan(objects, tmp_path, catalog=_gpu_memory_catalog(), policy=policy)
    assert run.violations == [], run.violations
    assert run.claim_of("ml/small-0") is run.claim_of("ml/small-1")
    assert run.claim_of("ml/large-0")["instanceType"].startswith("g5.")
    if policy == "jointer":  # cheapest: the small pods share one 16 GiB device
        assert run.claim_of("ml/small-0")["instanceType"] == "g4dn.xlarge"


def test_a_reservation_pod_and_its_shared_device_count_as_one_gpu(tmp_path: Path) -> None:
    """Bug: a device hosting fractions was subtracted twice, once through its KAI reservation
    pod's ``nvidia.com/gpu: 1`` and once as a shared device, hiding a whole free GPU."""
    from tests.unit.controllers.provisioning.scenario import node  # noqa: PLC0415

    fraction = _fraction_pod("nb", fraction="0.5")
    fraction["spec"]["nodeName"] = "n-gpu"
    fraction["status"] = {"phase": "Running"}
    fraction["metadata"]["labels"] = {"runai-gpu-group": "group-0"}
    reservation = pod("gpu-reservation-n-gpu-abcde", namespace="kai-resource-reservation")
    reservation["metadata"]["labels"] = {
        "app": "kai-resource-reservation",
        "runai-gpu-group": "group-0",
    }
    reservation["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    reservation["spec"]["nodeName"] = "n-gpu"
    reservation["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    reservation["status"] = {"phase": "Running"}
    whole = []
    for i in range(3):
        manifest = pod(f"train-{i}", namespace="ml", tolerations=[tolerate("nvidia.com/gpu")])
        manifest["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        whole.append(manifest)
    objects = [
        GPU_POOL,
        node("n-gpu", pool="gpu", cpu="48", memory="192Gi", gpu="4", instance_type="g5.12xlarge"),
        fraction,
        reservation,
        *whole,
    ]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    assert {run.placed()[f"ml/train-{i}"] for i in range(3)} == {"n-gpu"}
