"""Planning onto capacity reservations: reserved offerings come first, within their count."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.unit.controllers.provisioning.scenario import SMALL_CATALOG, nodepool, pod, run_plan

GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
RESERVATION = "cr-0a1b2c3d4e5f60001"
ALLOW_RESERVED = {
    "key": "karpenter.sh/capacity-type",
    "operator": "In",
    "values": ["reserved", "on-demand"],
}
P4D = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p4d.24xlarge"]}


def catalog(count: int, zone: str = "us-east-1b") -> dict[str, Any]:
    """The small catalog plus an ODCR of ``count`` p4d.24xlarge in ``zone``."""
    data = copy.deepcopy(SMALL_CATALOG)
    p4d = next(t for t in data["instanceTypes"] if t["name"] == "p4d.24xlarge")
    p4d["offerings"].append(
        {
            "zone": zone,
            "capacityType": "reserved",
            "price": 32.77 / 10_000_000,
            "reservationID": RESERVATION,
            "reservationType": "default",
            "reservationCapacity": count,
        }
    )
    return data


def gang(size: int, gpus: str) -> list[dict[str, Any]]:
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"minMember": size},
    }
    members = [
        pod(
            f"train-{i}",
            namespace="ml",
            cpu="8",
            memory="64Gi",
            gpu=gpus,
            labels={"scheduling.x-k8s.io/pod-group": "train"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
        )
        for i in range(size)
    ]
    return [group, *members]


def test_a_gang_is_placed_whole_on_a_reservation_that_fits_it(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=[P4D, ALLOW_RESERVED], taints=[GPU_TAINT]),
        *gang(8, "2"),  # 16 GPUs: two p4d.24xlarge
    ]
    run = run_plan(objects, tmp_path, catalog=catalog(2))
    assert run.violations == []
    claims = run.plan["nodeClaims"]
    assert [(c["capacityType"], c["zone"]) for c in claims] == [("reserved", "us-east-1b")] * 2
    assert {c["capacityReservationID"] for c in claims} == {RESERVATION}
    assert sorted(p for c in claims for p in c["pods"]) == sorted(f"ml/train-{i}" for i in range(8))


def test_a_reservation_is_used_up_to_its_count_then_on_demand(tmp_path: Path) -> None:
    objects = [
        nodepool("gpu", requirements=[P4D, ALLOW_RESERVED], taints=[GPU_TAINT]),
        *gang(8, "2"),
    ]
    run = run_plan(objects, tmp_path, catalog=catalog(1))
    assert run.violations == []
    claims = run.plan["nodeClaims"]
    assert sorted(c["capacityType"] for c in claims) == ["on-demand", "reserved"]
    assert {c["zone"] for c in claims} == {"us-east-1b"}  # the gang stays in one zone


def test_a_nodepool_that_does_not_allow_reserved_never_uses_a_reservation(tmp_path: Path) -> None:
    on_demand = {**ALLOW_RESERVED, "values": ["on-demand"]}
    objects = [nodepool("gpu", requirements=[P4D, on_demand], taints=[GPU_TAINT]), *gang(4, "2")]
    run = run_plan(objects, tmp_path, catalog=catalog(2))
    assert [c["capacityType"] for c in run.plan["nodeClaims"]] == ["on-demand"]


def test_an_in_flight_nodeclaim_pinned_to_the_reservation_holds_its_room(tmp_path: Path) -> None:
    in_flight = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "gpu-abcde", "labels": {"karpenter.sh/nodepool": "gpu"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "taints": [GPU_TAINT],
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["p4d.24xlarge"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]},
                {
                    "key": "karpenter.k8s.aws/capacity-reservation-id",
                    "operator": "In",
                    "values": [RESERVATION],
                },
            ],
        },
    }
    big = [
        pod(
            f"solo-{i}",
            cpu="60",
            memory="64Gi",
            gpu="8",
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
        )
        for i in range(2)
    ]
    pool = nodepool("gpu", requirements=[P4D, ALLOW_RESERVED], taints=[GPU_TAINT])
    run = run_plan([pool, in_flight, *big], tmp_path, catalog=catalog(1))
    assert len(run.plan["existingNodes"][0]["pods"]) == 1  # one pod waits for the claim
    assert [c["capacityType"] for c in run.plan["nodeClaims"]] == ["on-demand"]
    alone = run_plan([pool, *big], tmp_path, catalog=catalog(1))
    assert sorted(c["capacityType"] for c in alone.plan["nodeClaims"]) == ["on-demand", "reserved"]
