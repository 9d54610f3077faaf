"""The result of one planning step and its two renderings (`spec/plan.md`).

A :class:`Plan` says which new NodeClaims to create (with every instance type each one
accepts, cheapest first), which pods land on existing capacity, which pods cannot be helped
and why, and which pods were deliberately ignored (their scheduler is holding them back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from provisioner.scheduling.resources import format_resource_list

__all__ = [
    "ExistingNodePlacement",
    "IgnoredPod",
    "NodeClaimPlan",
    "Plan",
    "SolverReport",
    "UnschedulablePod",
    "render_table",
]

API_VERSION: Final = "jointer.dev/v1alpha1"
PRICE_DIGITS: Final = 6
ALSO_SHOWN: Final = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeClaimPlan:
    """One NodeClaim the provisioner would create."""

    name: str
    node_pool: str
    instance_types: tuple[str, ...]
    instance_type: str
    capacity_type: str
    zone: str
    price_per_hour: float
    requests: Mapping[str, int]
    pods: tuple[str, ...]
    min_values_relaxed: bool = False
    gangs: tuple[str, ...] = ()
    """The gangs (pod-group ids) whose members it carries: launched all together or not at all."""
    reservation_id: str | None = None
    """The capacity reservation a ``reserved`` NodeClaim launches into."""

    def to_json(self) -> dict[str, Any]:
        """The ``nodeClaims[]`` entry of plan.md."""
        return {
            "name": self.name,
            "nodePool": self.node_pool,
            "instanceTypes": list(self.instance_types),
            "instanceType": self.instance_type,
            "capacityType": self.capacity_type,
            "zone": self.zone,
            "pricePerHour": round(self.price_per_hour, PRICE_DIGITS),
            "requests": format_resource_list(self.requests),
            "pods": list(self.pods),
            **({"capacityReservationID": self.reservation_id} if self.reservation_id else {}),
        }


@dataclass(frozen=True, slots=True)
class ExistingNodePlacement:
    """Pending pods that fit on an existing node or in-flight NodeClaim."""

    name: str
    pods: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The ``existingNodes[]`` entry of plan.md."""
        return {"name": self.name, "pods": list(self.pods)}


@dataclass(frozen=True, slots=True)
class UnschedulablePod:
    """A pending pod no capacity can be bought for, with the reason."""

    pod: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The ``unschedulable[]`` entry of plan.md."""
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class IgnoredPod:
    """A pending pod deliberately not planned for (its scheduler holds it back)."""

    pod: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The ``ignored[]`` entry of plan.md."""
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SolverReport:
    """How the plan was found: ``OPTIMAL``, ``FEASIBLE`` or ``GREEDY``, and the wall time."""

    status: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The ``solver`` entry of plan.md."""
        return {"status": self.status, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The outcome of one planning step."""

    node_claims: tuple[NodeClaimPlan, ...] = ()
    existing_nodes: tuple[ExistingNodePlacement, ...] = ()
    unschedulable: tuple[UnschedulablePod, ...] = ()
    ignored: tuple[IgnoredPod, ...] = ()
    lower_bound_per_hour: float = 0.0
    solver: SolverReport = field(default_factory=lambda: SolverReport("OPTIMAL", 0.0))
    static_node_claims: tuple[NodeClaimPlan, ...] = ()
    """NodeClaims that bring static NodePools up to ``spec.replicas`` (no pods; `jointer plan`)."""

    @property
    def cost_per_hour(self) -> float:
        """Sum of the new NodeClaims' hourly prices."""
        return sum(claim.price_per_hour for claim in self.node_claims)

    def to_json(self) -> dict[str, Any]:
        """The plan document of plan.md."""
        cost = round(self.cost_per_hour, PRICE_DIGITS)
        document = {
            "apiVersion": API_VERSION,
            "kind": "Plan",
            "nodeClaims": [claim.to_json() for claim in self.node_claims],
            "existingNodes": [node.to_json() for node in self.existing_nodes],
            "unschedulable": [pod.to_json() for pod in self.unschedulable],
            "ignored": [pod.to_json() for pod in self.ignored],
            "costPerHour": cost,
            "lowerBoundPerHour": min(round(self.lower_bound_per_hour, PRICE_DIGITS), cost),
            "solver": self.solver.to_json(),
        }
        if self.static_node_claims:
            document["staticNodeClaims"] = [claim.to_json() for claim in self.static_node_claims]
        return document


def render_table(plan: Plan) -> str:
    """A human summary of ``plan`` for a terminal."""
    lines: list[str] = []
    header = (
        "NODECLAIM",
        "NODEPOOL",
        "INSTANCE TYPE",
        "CAPACITY",
        "ZONE",
        "$/HOUR",
        "PODS",
        "ALSO",
    )
    rows = [
        (
            claim.name,
            claim.node_pool,
            claim.instance_type,
            claim.capacity_type,
            claim.zone,
            f"{claim.price_per_hour:.4f}",
            str(len(claim.pods)),
            _also(claim.instance_types, claim.instance_type),
        )
        for claim in plan.node_claims
    ]
    lines.extend(_columns([header, *rows]))
    lines.append("")
    placed_existing = sum(len(node.pods) for node in plan.existing_nodes)
    placed_new = sum(len(claim.pods) for claim in plan.node_claims)
    lines.append(
        f"{len(plan.node_claims)} new nodeclaim(s) for {placed_new} pod(s), "
        f"{placed_existing} pod(s) on existing capacity, "
        f"{len(plan.unschedulable)} unschedulable, {len(plan.ignored)} ignored"
    )
    lines.append(
        f"cost ${plan.cost_per_hour:.4f}/hour, lower bound ${plan.lower_bound_per_hour:.4f}/hour, "
        f"solver {plan.solver.status} in {plan.solver.seconds:.2f}s"
    )
    lines.extend(f"unschedulable {pod.pod}: {pod.reason}" for pod in plan.unschedulable)
    lines.extend(f"ignored {pod.pod}: {pod.reason}" for pod in plan.ignored)
    lines.extend(
        f"static {claim.name}: NodePool {claim.node_pool}, {claim.instance_type} "
        f"{claim.capacity_type} ${claim.price_per_hour:.4f}/hour"
        f" (also {_also(claim.instance_types, claim.instance_type)})"
        for claim in plan.static_node_claims
    )
    return "\n".join(lines)


def _also(instance_types: tuple[str, ...], chosen: str) -> str:
    others = [name for name in instance_types if name != chosen]
    if not others:
        return "-"
    shown = ", ".join(others[:ALSO_SHOWN])
    if len(others) <= ALSO_SHOWN:
        return shown
    return f"{shown} and {len(others) - ALSO_SHOWN} other(s)"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
