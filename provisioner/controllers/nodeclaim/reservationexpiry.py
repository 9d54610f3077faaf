"""``nodeclaim.capacityreservation.expiration``: drain Capacity Block nodes before EC2 reclaims.

EC2 starts terminating the instances of a Capacity Block for ML 30 minutes before its end time
(and warns 10 minutes before that). Karpenter (designs/capacity-blocks.md) does not wait for
the warning: from the block's ``endTime`` (the EC2NodeClass' ``status.capacityReservations``)
minus 40 minutes, every NodeClaim launched into the block (label
``karpenter.k8s.aws/capacity-reservation-id``) is deleted, so its pods are drained gracefully
and re-planned elsewhere while EC2 still lets them run. ODCRs (``reservationType: default``)
are left alone: their instances become ordinary on-demand ones when they end.

Before the delete, ``DisruptionReason=CapacityReservationExpiring`` is set and a ``Normal
CapacityReservationExpiring`` event is written on the NodeClaim; the delete is counted in
``karpenter_nodeclaims_disrupted_total{reason="capacity_reservation_expiring"}`` (Jointer's
reason and label value: Karpenter's design names none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from provisioner.apis import labels as wk
from provisioner.controllers.disruption.marks import set_disruption_reason
from provisioner.controllers.events import Event
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS
from provisioner.runtime.reconciler import Request, Result

__all__ = [
    "CAPACITY_RESERVATION_EXPIRING",
    "DRAIN_LEAD_TIME",
    "ReservationExpirationController",
    "drain_times",
]

NAME: Final = "nodeclaim.capacityreservation.expiration"
CAPACITY_RESERVATION_EXPIRING: Final = "CapacityReservationExpiring"
DRAIN_LEAD_TIME: Final = timedelta(minutes=40)
"""Karpenter drains a Capacity Block's nodes this long before its end time."""
CAPACITY_BLOCK: Final = "capacity-block"
RETRY: Final = timedelta(seconds=10)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def drain_times(nodeclasses: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """Capacity Block id -> when its nodes are drained, from the EC2NodeClasses' status.

    Entries without a readable ``endTime`` are skipped (nothing to drain for).
    """
    times: dict[str, datetime] = {}
    for nodeclass in nodeclasses:
        status = nodeclass.get("status") or {}
        reservations = status.get("capacityReservations") if isinstance(status, Mapping) else None
        for entry in reservations or []:
            if not isinstance(entry, Mapping) or entry.get("reservationType") != CAPACITY_BLOCK:
                continue
            end = _parse_time(entry.get("endTime"))
            ident = entry.get("id")
            if end is not None and isinstance(ident, str):
                times[ident] = end - DRAIN_LEAD_TIME
    return times


class ReservationExpirationController(ControllerBase):
    """Deletes the NodeClaims of Capacity Blocks that end within :data:`DRAIN_LEAD_TIME`.

    Args:
        ports: the shared ports.
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports) -> None:
        super().__init__(ports, NAME)

    def reconcile(self, request: Request) -> Result:
        """Drain what is due; requeue at the next block's drain time."""
        del request
        try:
            nodeclasses = self._kube.list(EC2_NODE_CLASSES).items
        except KubeApiError as error:
            self._log.error("listing ec2nodeclasses", error=str(error))
            return Result.after(RETRY)
        due = drain_times(nodeclasses)
        if not due:
            return Result.done()
        now = self._clock.now()
        wait: timedelta | None = None
        for claim in sorted(self._state.node_claims(), key=lambda c: c.name):
            reservation = claim.metadata.labels.get(wk.LABEL_CAPACITY_RESERVATION_ID)
            drain_at = due.get(reservation or "")
            if drain_at is None or claim.metadata.deletion_timestamp is not None:
                continue
            if now < drain_at:
                wait = min(wait or drain_at - now, drain_at - now)
                continue
            involved = {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": claim.name, "uid": claim.metadata.uid},
            }
            if not self._drain(claim.name, claim.metadata.uid, reservation or "", now):
                wait = RETRY
            else:
                self._events.publish(
                    Event(
                        involved,
                        "Normal",
                        CAPACITY_RESERVATION_EXPIRING,
                        f"Capacity Block {reservation} ends at "
                        f"{(drain_at + DRAIN_LEAD_TIME).isoformat()}; draining before EC2 "
                        "reclaims its instances",
                    )
                )
                self._metrics.nodeclaims_disrupted.labels(
                    reason="capacity_reservation_expiring",
                    nodepool=claim.nodepool_name or "",
                    capacity_type=claim.metadata.labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                    consolidation_policy="",
                    termination_mode="graceful",
                ).inc()
        return Result.after(wait) if wait is not None else Result.done()

    def _drain(self, name: str, uid: str | None, reservation: str, now: datetime) -> bool:
        set_disruption_reason(self._kube, name, CAPACITY_RESERVATION_EXPIRING, now=now)
        try:
            self._kube.delete(NODE_CLAIMS, name, uid=uid or None)
        except NotFoundError:
            return True
        except KubeApiError as error:
            self._log.error(
                "deleting nodeclaim of an expiring capacity reservation",
                NodeClaim={"name": name},
                error=str(error),
            )
            return False
        self._log.info(
            "deleting nodeclaim of an expiring capacity reservation",
            NodeClaim={"name": name},
            capacityReservation=reservation,
        )
        return True
