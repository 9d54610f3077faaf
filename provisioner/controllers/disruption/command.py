"""A disruption command: which nodes go, what replaces them, and how Karpenter prints it.

``<Reason>/<id>: <delete|replace>: nodepools=[a,b]: [n1, n2] -> [1 replacement] (savings: $0.12)``
is the ``command`` field of Info ``disrupting node(s)`` and of the consolidation events.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from provisioner.apis.core import Pod
from provisioner.controllers.disruption.candidates import Candidate
from provisioner.controllers.provisioning.plan import NodeClaimPlan

__all__ = ["Command", "Decision", "Replacement", "command_id"]


class Decision(StrEnum):
    """What a command does (the ``decision`` metric label)."""

    DELETE = "delete"
    REPLACE = "replace"


def command_id(candidates: Sequence[str], now: datetime) -> str:
    """A UUID-shaped id, stable for the same candidates at the same moment (reproducible runs)."""
    digest = hashlib.sha256(f"{','.join(candidates)}@{now.isoformat()}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


@dataclass(slots=True, kw_only=True)
class Replacement:
    """A NodeClaim a command launches before its candidates go.

    Attributes:
        plan: the planned NodeClaim.
        instance_types: the instance types it may launch as (cheapest first).
        capacity_types: the capacity types it may launch as.
        price: its expected hourly price.
        pods: the displaced pods it is planned for.
        name: the created NodeClaim's name ("" until created).
        initialized: whether it has become ``Initialized``.
    """

    plan: NodeClaimPlan
    instance_types: tuple[str, ...]
    capacity_types: tuple[str, ...]
    price: float
    pods: tuple[Pod, ...] = ()
    name: str = ""
    initialized: bool = False


@dataclass(slots=True, kw_only=True)
class Command:
    """One disruption decision.

    Attributes:
        id: the command's id.
        reason: ``Empty``, ``Drifted`` or ``Underutilized`` (budgets and conditions).
        consolidation_type: ``empty``, ``single``, ``multi`` or ``""`` (metric label).
        candidates: the nodes that go.
        replacements: what is launched first.
        moving: other pods that move with the candidates (gang members on nodes that stay).
        created_at: when it was computed.
        validate: whether it waits for the 15 s validation before it runs.
    """

    id: str
    reason: str
    consolidation_type: str
    candidates: tuple[Candidate, ...]
    replacements: list[Replacement] = field(default_factory=list)
    moving: tuple[Pod, ...] = ()
    created_at: datetime
    validate: bool = True

    @property
    def decision(self) -> Decision:
        """``replace`` when it launches anything, else ``delete``."""
        return Decision.REPLACE if self.replacements else Decision.DELETE

    @property
    def source_price(self) -> float:
        """The candidates' hourly price."""
        return sum(c.price for c in self.candidates)

    @property
    def savings(self) -> float:
        """Candidates' price minus replacements' price."""
        return self.source_price - sum(r.price for r in self.replacements)

    @property
    def pools(self) -> list[str]:
        """The candidates' NodePools, in order, without repeats."""
        return list(dict.fromkeys(c.pool for c in self.candidates))

    @property
    def pod_count(self) -> int:
        """Pods that must find a new home."""
        return sum(len(c.reschedulable) for c in self.candidates) + len(self.moving)

    def __str__(self) -> str:
        sources = ", ".join(c.name for c in self.candidates)
        head = f"{self.reason}/{self.id}: {self.decision}: nodepools=[{','.join(self.pools)}]"
        if self.replacements:
            plural = "replacement" if len(self.replacements) == 1 else "replacements"
            return (
                f"{head}: [{sources}] -> [{len(self.replacements)} {plural}] "
                f"(savings: ${self.savings:.2f})"
            )
        return f"{head}: [{sources}] (savings: ${self.savings:.2f})"

    def for_node(self, candidate: Candidate) -> str:
        """The command from one candidate's point of view (Karpenter's ``StringForNode``)."""
        if len(self.candidates) == 1:
            return str(self)
        return (
            f"{self.decision}: [{candidate.name}] "
            f"(part of {len(self.candidates)}-node consolidation)"
        )

    def log_fields(self) -> Mapping[str, Any]:
        """The fields of Info ``disrupting node(s)``."""
        return {
            "command": str(self),
            "decision": str(self.decision),
            "disrupted-node-count": len(self.candidates),
            "replacement-node-count": len(self.replacements),
            "pod-count": self.pod_count,
            "disrupted-nodes": [
                {
                    "Node": {"name": c.name},
                    "NodeClaim": {"name": c.claim_name},
                    "instance-type": c.instance_type,
                    "capacity-type": c.capacity_type,
                }
                for c in self.candidates
            ],
            "replacement-nodes": [
                {
                    "capacity-type": r.capacity_types[0] if r.capacity_types else "",
                    "instance-types": ", ".join(r.instance_types[:5]),
                }
                for r in self.replacements
            ],
        }
