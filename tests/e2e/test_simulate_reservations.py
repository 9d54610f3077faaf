"""Capacity reservations end to end (issue 19 item 4): the bundled ``gang-on-reservation``
scenario on the simulated account, whose EC2 answers DescribeCapacityReservations and launches
into the reservation a launch template targets.
"""

from __future__ import annotations

import pytest

from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS
from tests.e2e.conftest import bundled, bundled_variant, events, run, shortened

pytestmark = pytest.mark.usefixtures("test_catalog")

RESERVATION = "cr-0a1b2c3d4e5f60001"
RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"


def test_an_8_pod_gpu_gang_uses_the_odcr_before_any_on_demand() -> None:
    report, simulation = run(shortened(bundled("gang-on-reservation"), 15 * 60))

    gang = [p for p in report["pods"] if p["podGroup"] == "research/pg-pretrain"]
    assert len(gang) == 8
    assert gang[0]["scheduledAt"] is not None
    assert {p["scheduledAt"] for p in gang} == {gang[0]["scheduledAt"]}  # placed whole
    launches = sorted(report["ec2Instances"], key=lambda i: (i["launchedAt"], i["id"]))
    assert [(i["instanceType"], i["capacityType"]) for i in launches] == [
        ("p5.48xlarge", "reserved"),
        ("p5.48xlarge", "reserved"),
        ("p5.48xlarge", "on-demand"),  # the later job: the reservation is full
    ]
    assert all(i["zone"] == "us-east-1a" and i["pricePerHour"] == 0.0 for i in launches[:2])
    reserved_claims = {i["nodeClaim"] for i in launches[:2]}
    reserved_nodes = {c["node"] for c in report["nodeClaims"] if c["name"] in reserved_claims}
    assert {p["node"] for p in gang} == reserved_nodes

    kube = simulation.world.kube
    claims = {c["metadata"]["name"]: c for c in kube.list(NODE_CLAIMS).items}
    for name in reserved_claims:
        claim = claims[name]
        assert claim["metadata"]["labels"][RESERVATION_ID] == RESERVATION
        assert claim["metadata"]["labels"]["karpenter.sh/capacity-type"] == "reserved"
        pinned = {r["key"]: r["values"] for r in claim["spec"]["requirements"]}
        assert pinned[RESERVATION_ID] == [RESERVATION]
        assert pinned["karpenter.sh/capacity-type"] == ["reserved"]
    status = kube.get(EC2_NODE_CLASSES, "reserved")["status"]
    assert [r["id"] for r in status["capacityReservations"]] == [RESERVATION]
    assert status["capacityReservations"][0]["instanceType"] == "p5.48xlarge"


def test_a_capacity_block_is_drained_40_minutes_before_its_end() -> None:
    block = "    type: capacity-block\n    endsAfter: 50m\n    instanceMatchCriteria: targeted\n"
    scenario = bundled_variant(
        "gang-on-reservation", ("    instanceMatchCriteria: targeted\n", block)
    )
    report, _ = run(shortened(scenario, 22 * 60))

    blocks = [i for i in report["ec2Instances"] if i["capacityType"] == "reserved"]
    assert len(blocks) == 2
    drained = {
        c["name"]: c for c in report["nodeClaims"] if c["name"] in {i["nodeClaim"] for i in blocks}
    }
    # drained from 10m (50m - 40m), before EC2 reclaims the block at 20m (50m - 30m)
    assert all(c["deletionReason"] == "CapacityReservationExpiring" for c in drained.values())
    assert all(600 <= c["deletedAt"] < 1200 for c in drained.values())
    assert all(i["terminatedAt"] is not None and i["terminatedAt"] < 1200 for i in blocks)
    assert len(events(report, "CapacityReservationExpiring")) == 2
