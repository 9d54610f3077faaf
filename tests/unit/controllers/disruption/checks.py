"""Invariants checked after every step of a :class:`World` run."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from provisioner.apis.base import parse_object
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption.budgets import allowed_disruptions
from provisioner.kube.resource import NODE_CLAIMS, NODES
from tests.unit.controllers.disruption.world import World


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return str(c["status"])
    return None


class BudgetCheck:
    """At no instant do more nodes of a pool disrupt than its budgets allow (for ``reason``).

    Disrupting = the NodeClaim is being deleted or the Node carries ``karpenter.sh/disrupted``;
    nodes count while initialized and their instance is not terminating.
    """

    def __init__(self, reason: str = "Underutilized") -> None:
        self.reason = reason
        self.peak: dict[str, int] = defaultdict(int)
        self.steps = 0

    def __call__(self, world: World) -> None:
        self.steps += 1
        nodes = {n["spec"].get("providerID"): n for n in world.raw(NODES)}
        counted: dict[str, int] = defaultdict(int)
        disrupting: dict[str, int] = defaultdict(int)
        for claim in world.raw(NODE_CLAIMS):
            pool = claim["metadata"]["labels"].get("karpenter.sh/nodepool", "")
            node = nodes.get((claim.get("status") or {}).get("providerID"))
            if node is None or _condition(claim, "Initialized") != "True":
                continue
            if _condition(claim, "InstanceTerminating") == "True":
                continue
            counted[pool] += 1
            tainted = any(
                t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or []
            )
            if claim["metadata"].get("deletionTimestamp") or tainted:
                disrupting[pool] += 1
        for pool, count in disrupting.items():
            nodepool = parse_object(NodePool, world.nodepool_obj(pool), kind="NodePool")
            allowed = allowed_disruptions(nodepool, counted[pool], self.reason, world.clock.now())
            assert count <= allowed, (
                f"{count} nodes of {pool} disrupting, budget allows {allowed} of {counted[pool]}"
            )
            self.peak[pool] = max(self.peak[pool], count)
