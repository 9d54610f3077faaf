"""Events of disruption, the command queue and drain, with Karpenter's reasons and messages.

Constructors return :class:`~provisioner.controllers.events.Event` values for the shared
:class:`~provisioner.controllers.events.EventRecorder` (Karpenter's
``c/disruption/events`` and ``c/node/termination/terminator/events``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from provisioner.apis.core import Node, Pod
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.events import DEFAULT_DEDUPE, Event, object_ref, pod_ref
from provisioner.kube.protocol import JsonObject

__all__ = [
    "blocked",
    "claim_ref",
    "consolidation_candidate",
    "consolidation_rejected",
    "evicted",
    "failed_draining",
    "launching",
    "node_ref",
    "nodepool_blocked",
    "pod_deleted_for_grace_period",
    "terminating",
    "termination_grace_period_expiring",
    "unconsolidatable",
    "waiting_on_readiness",
]

UNCONSOLIDATABLE_DEDUPE: Final = timedelta(minutes=15)
NODEPOOL_BLOCKED_DEDUPE: Final = timedelta(minutes=1)
DRAIN_DEDUPE: Final = timedelta(seconds=30)


def node_ref(node: Node) -> JsonObject:
    """A Node as events name it."""
    return object_ref("Node", node.metadata.name, api_version="v1", uid=node.metadata.uid)


def claim_ref(claim: NodeClaim) -> JsonObject:
    """A NodeClaim as events name it."""
    return object_ref(
        "NodeClaim", claim.name, api_version="karpenter.sh/v1", uid=claim.metadata.uid
    )


def _pair(
    node: Node | None,
    claim: NodeClaim | None,
    reason: str,
    message: str,
    dedupe: timedelta | None = None,
) -> list[Event]:
    refs = [node_ref(node) if node is not None else None]
    refs.append(claim_ref(claim) if claim is not None else None)
    return [
        Event(involved, "Normal", reason, message, dedupe or DEFAULT_DEDUPE)
        for involved in refs
        if involved is not None
    ]


def blocked(node: Node | None, claim: NodeClaim | None, message: str) -> list[Event]:
    """Node and NodeClaim ``DisruptionBlocked`` (``Pod has "karpenter.sh/do-not-disrupt" ...``)."""
    return _pair(node, claim, "DisruptionBlocked", message)


def nodepool_blocked(nodepool: NodePool, reason: str) -> Event:
    """NodePool ``DisruptionBlocked``: no allowed disruptions for ``reason``."""
    return Event(
        object_ref(
            "NodePool", nodepool.name, api_version="karpenter.sh/v1", uid=nodepool.metadata.uid
        ),
        "Normal",
        "DisruptionBlocked",
        f"No allowed disruptions for disruption reason {reason} due to blocking budget",
        NODEPOOL_BLOCKED_DEDUPE,
    )


def unconsolidatable(node: Node | None, claim: NodeClaim | None, message: str) -> list[Event]:
    """Node and NodeClaim ``Unconsolidatable`` (15 min dedupe)."""
    return _pair(node, claim, "Unconsolidatable", message, UNCONSOLIDATABLE_DEDUPE)


def consolidation_candidate(
    node: Node | None, claim: NodeClaim | None, command: str, savings: float
) -> list[Event]:
    """``ConsolidationCandidate``: ``Consolidation candidate: <cmd> (savings: $X.XX)``."""
    message = f"Consolidation candidate: {command} (savings: ${savings:.2f})"
    return _pair(node, claim, "ConsolidationCandidate", message)


def consolidation_rejected(
    node: Node | None, claim: NodeClaim | None, command: str, reason: str
) -> list[Event]:
    """``ConsolidationRejected`` after a failed validation (``budget|scheduling|churn``)."""
    message = f"Consolidation rejected ({reason}): {command}"
    return _pair(node, claim, "ConsolidationRejected", message)


def launching(claim: NodeClaim, reason: str) -> Event:
    """NodeClaim ``DisruptionLaunching``: ``Launching NodeClaim: <Reason>``."""
    return Event(
        claim_ref(claim), "Normal", "DisruptionLaunching", f"Launching NodeClaim: {reason}"
    )


def waiting_on_readiness(claim: NodeClaim) -> Event:
    """NodeClaim ``DisruptionWaitingReadiness``."""
    return Event(
        claim_ref(claim),
        "Normal",
        "DisruptionWaitingReadiness",
        "Waiting on readiness to continue disruption",
    )


def terminating(node: Node | None, claim: NodeClaim, reason: str) -> list[Event]:
    """``DisruptionTerminating``: ``Disrupting Node: <Reason>`` / ``Disrupting NodeClaim: ...``."""
    events = []
    if node is not None:
        events.append(
            Event(node_ref(node), "Normal", "DisruptionTerminating", f"Disrupting Node: {reason}")
        )
    events.append(
        Event(
            claim_ref(claim), "Normal", "DisruptionTerminating", f"Disrupting NodeClaim: {reason}"
        )
    )
    return events


def evicted(pod: Pod, reason: str) -> Event:
    """Pod ``Evicted``: ``Evicted pod: <Underutilized|Empty|Drifted|Forceful Termination>``."""
    return Event(pod_ref(pod), "Normal", "Evicted", f"Evicted pod: {reason}")


def pod_deleted_for_grace_period(pod: Pod, grace_seconds: int, deadline: str) -> Event:
    """Pod ``Disrupted``: deleted at the node's terminationGracePeriod (bypasses PDBs)."""
    own = pod.spec.termination_grace_period_seconds
    return Event(
        pod_ref(pod),
        "Normal",
        "Disrupted",
        f"Deleting the pod to accommodate the terminationTime {deadline} of the node. The pod was "
        f"granted {grace_seconds} seconds of grace-period of its {own} "
        "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt "
        "annotation.",
    )


def failed_draining(node: Node, error: str) -> Event:
    """Node ``Warning FailedDraining``: ``Failed to drain node, <err>``."""
    return Event(
        node_ref(node), "Warning", "FailedDraining", f"Failed to drain node, {error}", DRAIN_DEDUPE
    )


def termination_grace_period_expiring(
    node: Node | None, claim: NodeClaim, deadline: str
) -> list[Event]:
    """``Warning TerminationGracePeriodExpiring``: ``All pods will be deleted by <time>``."""
    message = f"All pods will be deleted by {deadline}"
    events = [Event(claim_ref(claim), "Warning", "TerminationGracePeriodExpiring", message)]
    if node is not None:
        events.append(Event(node_ref(node), "Warning", "TerminationGracePeriodExpiring", message))
    return events
