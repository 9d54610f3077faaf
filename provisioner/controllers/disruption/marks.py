"""The marks disruption leaves on objects, written under optimistic locking.

The ``karpenter.sh/disrupted:NoSchedule`` taint on Nodes and the ``DisruptionReason`` condition on
NodeClaims.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.controllers.nodeclaim.status import patch_claim_status, update_with_version
from provisioner.kube.protocol import JsonObject, KubeClient
from provisioner.kube.resource import NODES

__all__ = [
    "DISRUPTED_TAINT",
    "clear_disruption_reason",
    "set_disruption_reason",
    "taint_node",
    "untaint_node",
]

DISRUPTED_TAINT: dict[str, str] = {
    "key": wk.TAINT_DISRUPTED,
    "effect": wk.TAINT_EFFECT_NO_SCHEDULE,
}


def _taints(obj: JsonObject) -> list[dict[str, Any]]:
    return [dict(t) for t in (obj.get("spec") or {}).get("taints") or []]


def taint_node(kube: KubeClient, name: str, *, labels: dict[str, str] | None = None) -> bool:
    """Add the disrupted taint (and ``labels``) to the Node; False when it is gone."""

    def build(obj: JsonObject) -> dict[str, Any] | None:
        taints = _taints(obj)
        present = any(t.get("key") == wk.TAINT_DISRUPTED for t in taints)
        current = (obj.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in (labels or {}).items() if current.get(k) != v}
        if present and not missing:
            return None
        patch: dict[str, Any] = {}
        if not present:
            patch["spec"] = {"taints": [*taints, dict(DISRUPTED_TAINT)]}
        if missing:
            patch["metadata"] = {"labels": missing}
        return patch

    return update_with_version(kube, NODES, name, build) is not None


def untaint_node(kube: KubeClient, name: str) -> bool:
    """Remove the disrupted taint from the Node; False when it is gone."""

    def build(obj: JsonObject) -> dict[str, Any] | None:
        taints = _taints(obj)
        kept = [t for t in taints if t.get("key") != wk.TAINT_DISRUPTED]
        if len(kept) == len(taints):
            return None
        return {"spec": {"taints": kept}}

    return update_with_version(kube, NODES, name, build) is not None


def set_disruption_reason(kube: KubeClient, claim: str, reason: str, *, now: datetime) -> bool:
    """``DisruptionReason=True`` with ``reason`` on the NodeClaim; False when it is gone."""
    updated = patch_claim_status(
        kube,
        claim,
        lambda c: {
            "conditions": cond.set_true(
                c.status.conditions if c.status else (),
                cond.NODECLAIM_CONDITION_DISRUPTION_REASON,
                now=now,
                reason=reason,
            )
        },
        now=now,
    )
    return updated is not None


def clear_disruption_reason(kube: KubeClient, claim: str, *, now: datetime) -> None:
    """Remove the NodeClaim's ``DisruptionReason`` condition."""

    def mutate(current: Any) -> dict[str, Any] | None:
        conditions = current.status.conditions if current.status else ()
        cleared = cond.clear_condition(conditions, cond.NODECLAIM_CONDITION_DISRUPTION_REASON)
        return None if cleared is conditions or cleared == conditions else {"conditions": cleared}

    patch_claim_status(kube, claim, mutate, now=now)
