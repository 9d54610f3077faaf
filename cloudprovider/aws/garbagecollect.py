"""Garbage collection of leaked instances: this cluster's, without a NodeClaim, past a grace.

A crash between CreateFleet and the NodeClaim status write, or a NodeClaim deleted by hand, leaves
an instance nobody manages. :class:`InstanceGarbageCollector` lists the cluster's instances
(``CloudProvider.list_claims`` only ever returns instances carrying this cluster's tags) and
terminates those whose provider id no NodeClaim references and that are older than
:data:`LEAKED_INSTANCE_GRACE` (so a launch in flight is never collected). Karpenter requeues
every 10 s for 20 runs, then every 2 minutes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from cloudprovider.errors import NodeClaimNotFoundError
from cloudprovider.protocol import CloudNodeClaim, CloudProvider

__all__ = [
    "FAST_REQUEUE",
    "FAST_RUNS",
    "LEAKED_INSTANCE_GRACE",
    "SLOW_REQUEUE",
    "InstanceGarbageCollector",
    "leaked",
]

# A launch writes the provider id within seconds; 30 s keeps in-flight launches safe.
LEAKED_INSTANCE_GRACE: Final = timedelta(seconds=30)
FAST_REQUEUE: Final = timedelta(seconds=10)
FAST_RUNS: Final = 20
SLOW_REQUEUE: Final = timedelta(minutes=2)


def leaked(
    claims: Collection[CloudNodeClaim],
    known_provider_ids: Collection[str],
    now: datetime,
    grace: timedelta = LEAKED_INSTANCE_GRACE,
) -> list[CloudNodeClaim]:
    """The instances no NodeClaim references, launched at least ``grace`` ago."""
    return [
        claim
        for claim in claims
        if claim.provider_id not in known_provider_ids
        and claim.state != "shutting-down"
        and claim.created_at is not None
        and now - claim.created_at >= grace
    ]


@dataclass(slots=True)
class InstanceGarbageCollector:
    """Terminates leaked instances through the CloudProvider (never another cluster's)."""

    cloud: CloudProvider
    runs: int = 0

    def reconcile(
        self, known_provider_ids: Collection[str], now: datetime
    ) -> tuple[list[str], timedelta]:
        """Terminate leaked instances; return their provider ids and when to run again."""
        collected = []
        for claim in leaked(self.cloud.list_claims(), known_provider_ids, now):
            try:
                self.cloud.delete(claim.provider_id)
            except NodeClaimNotFoundError:
                continue
            collected.append(claim.provider_id)
        self.runs += 1
        return collected, FAST_REQUEUE if self.runs < FAST_RUNS else SLOW_REQUEUE
