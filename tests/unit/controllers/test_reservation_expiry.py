"""``nodeclaim.capacityreservation.expiration``: Capacity Block nodes drain before its end."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog

from provisioner.controllers.nodeclaim.reservationexpiry import (
    ReservationExpirationController,
    drain_times,
)
from provisioner.controllers.ports import Ports
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS
from provisioner.runtime.reconciler import Request
from tests.unit.controllers.harness import Harness

BLOCK = "cr-0b10c4000000000001"
ODCR = "cr-0dc4000000000000002"


def claim(name: str, reservation: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "reserved",
                "karpenter.k8s.aws/capacity-reservation-id": reservation,
            },
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}
            ],
        },
    }


def test_drain_times_are_40_minutes_before_each_blocks_end() -> None:
    status = {
        "capacityReservations": [
            {"id": BLOCK, "reservationType": "capacity-block", "endTime": "2026-01-01T12:00:00Z"},
            {"id": ODCR, "reservationType": "default", "endTime": "2026-01-01T12:00:00Z"},
            {"id": "cr-1", "reservationType": "capacity-block"},  # no end: nothing to drain for
        ]
    }
    (when,) = drain_times([{"status": status}]).items()
    assert when[0] == BLOCK
    assert when[1].isoformat() == "2026-01-01T11:20:00+00:00"


def test_the_nodeclaims_of_a_block_are_deleted_at_its_drain_time_and_an_odcrs_are_kept() -> None:
    h = Harness()
    end = h.clock.now() + timedelta(minutes=50)
    h.create(
        EC2_NODE_CLASSES,
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {},
        },
    )
    reservations = [
        {"id": rid, "reservationType": kind, "endTime": end.isoformat()}
        for rid, kind in ((BLOCK, "capacity-block"), (ODCR, "default"))
    ]
    h.kube.patch_status(EC2_NODE_CLASSES, "gpu", {"status": {"capacityReservations": reservations}})
    h.create(NODE_CLAIMS, claim("gpu-block", BLOCK))
    h.create(NODE_CLAIMS, claim("gpu-odcr", ODCR))

    controller = ReservationExpirationController(
        ports=Ports(
            state=h.manager.state,
            kube=h.kube,
            cloud=h.cloud,
            clock=h.clock,
            logger=structlog.get_logger(),
            metrics=h.manager.metrics,
            events=h.manager.events,
        )
    )

    result = controller.reconcile(Request())
    assert result.requeue_after == timedelta(minutes=10)  # at end - 40 min
    assert sorted(c["metadata"]["name"] for c in h.claims()) == ["gpu-block", "gpu-odcr"]

    h.clock.set(end - timedelta(minutes=40))
    assert controller.reconcile(Request()).requeue_after is None
    assert [c["metadata"]["name"] for c in h.claims()] == ["gpu-odcr"]  # no finalizer here
    (event,) = h.events("CapacityReservationExpiring")
    assert BLOCK in event["message"]
    assert (
        h.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="capacity_reservation_expiring",
            nodepool="default",
            capacity_type="reserved",
            consolidation_policy="",
            termination_mode="graceful",
        )
        == 1.0
    )
