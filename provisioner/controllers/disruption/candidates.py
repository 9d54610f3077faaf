"""Disruption candidates: the managed nodes that may be disrupted now, and what it would cost.

Karpenter's ``NewCandidate`` plus Jointer's protections. A node is a candidate when:

1. it is managed (a NodeClaim of a valid, dynamic NodePool), its NodeClaim is ``Initialized``,
   neither is being deleted, and it is not already part of a running disruption;
2. no pending pod is nominated to its NodeClaim (``Node is nominated for a pending pod``);
3. the Node is not annotated ``karpenter.sh/do-not-disrupt: "true"``;
4. none of its pods is protected: an active ``karpenter.sh/do-not-disrupt`` pod (DaemonSet and
   mirror pods count), a GPU reservation pod, non-preemptible work;
5. every pod drain would evict is under at most one PodDisruptionBudget that allows it now;
6. every gang with a member on the node can move as a whole: no member is protected and the
   members' budgets let all of them go at once (they are evicted together).

Anything else publishes ``DisruptionBlocked`` on the Node and NodeClaim. Costs follow Karpenter:
``EvictionCost = clamp(1 + deletionCost/2^27 + priority/2^25, -10, 10)``; the disruption cost is
the sum over the node's pods scaled by the lifetime left; the reschedule cost is
``1 + sum(max(0, EvictionCost))`` over the reschedulable pods; ``SavingsRatio = price /
RescheduleDisruptionCost``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.core import Pod
from provisioner.apis.nodepool import NodePool
from provisioner.apis.podmemo import PerPod
from provisioner.controllers.disruption import events as ev
from provisioner.controllers.disruption.facts import (
    ClusterFacts,
    GangKey,
    is_reschedulable,
)
from provisioner.controllers.disruption.rescheduling import PoolCatalog
from provisioner.controllers.events import Event
from provisioner.controllers.provisioning.requested import requested
from provisioner.state.statenode import StateNode

__all__ = [
    "Candidate",
    "build_candidates",
    "consolidatable_at",
    "eviction_cost",
    "gang_pods",
]

_DELETION_COST_SCALE: Final = 2.0**27
_PRIORITY_SCALE: Final = 2.0**25
_MAX_COST: Final = 10.0


def eviction_cost(pod: Pod) -> float:
    """Karpenter's ``EvictionCost``: 1, moved by deletion cost and priority, within [-10, 10]."""
    cost = 1.0
    raw = pod.metadata.annotations.get(wk.ANNOTATION_POD_DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += float(raw) / _DELETION_COST_SCALE
    if pod.spec.priority is not None:
        cost += pod.spec.priority / _PRIORITY_SCALE
    return max(-_MAX_COST, min(cost, _MAX_COST))


def _lifetime_remaining(state: StateNode, now: datetime) -> float:
    expire_after = state.nodeclaim.expire_after
    created = state.nodeclaim.metadata.creation_timestamp
    if expire_after is None or created is None or expire_after <= timedelta(0):
        return 1.0
    left = (created + expire_after - now) / expire_after
    return max(0.0, min(left, 1.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A node disruption may act on.

    Attributes:
        state: the node.
        nodepool: its NodePool.
        instance_type: ``node.kubernetes.io/instance-type``.
        zone: ``topology.kubernetes.io/zone``.
        capacity_type: ``karpenter.sh/capacity-type``.
        price: the hourly price of its offering (0 when unknown).
        price_known: whether the offering was found.
        reschedulable: the pods that must find a new home.
        gangs: the gangs with members on the node (they move as a whole).
        disruption_cost: Karpenter's disruption cost (lower goes first in multi-node).
        reschedule_cost: ``1 + sum(max(0, EvictionCost))`` over the reschedulable pods.
        consolidatable: ``consolidateAfter`` has passed since the last pod event.
        drifted_at: when the NodeClaim became ``Drifted`` (None: not drifted).
    """

    state: StateNode
    nodepool: NodePool
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    price_known: bool
    reschedulable: tuple[Pod, ...]
    gangs: frozenset[GangKey]
    disruption_cost: float
    reschedule_cost: float
    consolidatable: bool
    drifted_at: datetime | None

    @property
    def name(self) -> str:
        """The Node's name."""
        return self.state.name

    @property
    def claim_name(self) -> str:
        """The NodeClaim's name."""
        return self.state.nodeclaim.name

    @property
    def pool(self) -> str:
        """The NodePool's name."""
        return self.nodepool.name

    @property
    def savings_ratio(self) -> float:
        """Price per unit of disruption (higher goes first)."""
        return self.price / self.reschedule_cost

    @property
    def is_empty(self) -> bool:
        """No pod would need a new home."""
        return not self.reschedulable


def consolidatable_at(state: StateNode, nodepool: NodePool) -> datetime | None:
    """When the node becomes (or became) consolidatable; None when it never does.

    ``consolidateAfter`` counts from the last pod event on the node (``status.lastPodEventTime``),
    or from initialization when no pod event was recorded.
    """
    after = nodepool.consolidate_after
    if after is None:
        return None
    status = state.nodeclaim.status
    last = status.last_pod_event_time if status is not None else None
    initialized = cond.get_condition(
        status.conditions if status else (), cond.NODECLAIM_CONDITION_INITIALIZED
    )
    since = max(
        (t for t in (last, initialized.last_transition_time if initialized else None) if t),
        default=None,
    )
    return since + after if since is not None else None


def _node_blocker(
    state: StateNode,
    facts: ClusterFacts,
    in_flight: Callable[[str], bool],
    booked: Mapping[str, str],
) -> str | None:
    if not state.initialized or state.node is None:
        return "Node isn't initialized"
    if state.deleting or in_flight(state.nodeclaim.name):
        return "Node is being deleted"
    if state.nodeclaim.name in facts.nominated:
        return "Node is nominated for a pending pod"
    request = booked.get(state.nodeclaim.name)
    if request is not None:
        return f"Node is booked by ProvisioningRequest {request}"
    if state.node.metadata.annotations.get(wk.ANNOTATION_DO_NOT_DISRUPT) == wk.TRUE:
        return f'Disruption is blocked through the "{wk.ANNOTATION_DO_NOT_DISRUPT}" annotation'
    return None


def _pod_blocker(state: StateNode, facts: ClusterFacts) -> tuple[str | None, frozenset[GangKey]]:
    gangs: set[GangKey] = set()
    for pod in state.pods:
        reason = facts.protection(pod)
        if reason is not None:
            return reason, frozenset()
        gang = facts.gang_of(pod)
        if gang is not None:
            gangs.add(gang)
    for pod in state.pods:
        blocker = facts.pdb_blocker([pod])
        if blocker is not None:
            return blocker, frozenset()
    for gang in sorted(gangs):
        blocker = facts.gang_blocker(gang)
        if blocker is not None:
            return blocker, frozenset()
    return None, frozenset(gangs)


def build_candidates(
    facts: ClusterFacts,
    catalog: PoolCatalog,
    *,
    in_flight: Callable[[str], bool],
    publish: Callable[[Event], object] | None = None,
    memo: PerPod[tuple[bool, float]] | None = None,
) -> list[Candidate]:
    """Every node that may be disrupted now, with its costs; blocked nodes get an event.

    Args:
        facts: the cluster.
        catalog: the NodePools and instance types (for prices).
        in_flight: whether a NodeClaim is already part of a running disruption.
        publish: receives ``DisruptionBlocked`` events.
        memo: what was read of each pod object before (kept by the caller across passes).
    """
    now = facts.now
    if memo is None:
        memo = PerPod()
    memo.bound(len(facts.snapshot.pods))
    candidates: list[Candidate] = []
    booked = requested(facts.snapshot, facts.context).booked
    for state in sorted(facts.nodes.values(), key=lambda s: s.nodeclaim.name):
        nodepool = facts.pools.get(state.pool)
        if nodepool is None or nodepool.is_static:
            continue
        blocker = _node_blocker(state, facts, in_flight, booked)
        gangs: frozenset[GangKey] = frozenset()
        if blocker is None:
            blocker, gangs = _pod_blocker(state, facts)
        if blocker is not None:
            quiet = state.node is None or state.deleting or in_flight(state.nodeclaim.name)
            if publish is not None and not quiet:
                for event in ev.blocked(state.node, state.nodeclaim, blocker):
                    publish(event)
            continue
        candidates.append(
            _candidate(state, nodepool=nodepool, gangs=gangs, catalog=catalog, now=now, memo=memo)
        )
    return candidates


def _pod_costs(pod: Pod) -> tuple[bool, float]:
    """Whether the pod must be rescheduled when its node goes, and its eviction cost."""
    return is_reschedulable(pod), eviction_cost(pod)


def _candidate(
    state: StateNode,
    *,
    nodepool: NodePool,
    gangs: frozenset[GangKey],
    catalog: PoolCatalog,
    now: datetime,
    memo: PerPod[tuple[bool, float]],
) -> Candidate:
    labels = state.labels
    instance_type = labels.get(wk.LABEL_INSTANCE_TYPE, "")
    zone = labels.get(wk.LABEL_ZONE, "")
    capacity_type = labels.get(wk.LABEL_CAPACITY_TYPE, "")
    price = catalog.price(nodepool.name, instance_type, zone, capacity_type)
    costs = [memo.get(p, _pod_costs) for p in state.pods]
    reschedulable = tuple(p for p, (moves, _) in zip(state.pods, costs, strict=True) if moves)
    lifetime = _lifetime_remaining(state, now)
    disruption_cost = sum(cost for _, cost in costs) * lifetime
    reschedule_cost = 1.0 + sum(max(0.0, cost) for moves, cost in costs if moves)
    ready_at = consolidatable_at(state, nodepool)
    conditions = state.nodeclaim.status.conditions if state.nodeclaim.status else ()
    drifted = cond.get_condition(conditions, cond.NODECLAIM_CONDITION_DRIFTED)
    return Candidate(
        state=state,
        nodepool=nodepool,
        instance_type=instance_type,
        zone=zone,
        capacity_type=capacity_type,
        price=price or 0.0,
        price_known=price is not None,
        reschedulable=reschedulable,
        gangs=gangs,
        disruption_cost=disruption_cost,
        reschedule_cost=reschedule_cost,
        consolidatable=ready_at is not None and ready_at <= now,
        drifted_at=(
            drifted.last_transition_time
            if drifted is not None and drifted.status == cond.STATUS_TRUE
            else None
        ),
    )


def gang_pods(candidates: Sequence[Candidate], facts: ClusterFacts) -> list[Pod]:
    """Members of the candidates' gangs bound to other nodes (they move with the candidates)."""
    names = {c.name for c in candidates}
    moving: dict[str, Pod] = {}
    for gang in sorted({g for c in candidates for g in c.gangs}):
        for member in facts.gang_members(gang):
            node = member.spec.node_name
            if node and node not in names and is_reschedulable(member):
                moving[member.key] = member
    return [moving[k] for k in sorted(moving)]
