"""What one disruption pass knows about the cluster, computed once from a cache snapshot.

:class:`ClusterFacts` joins Nodes to NodeClaims (by providerID), lists each node's live pods,
and answers the protection questions disruption and drain ask about pods:

* ``karpenter.sh/do-not-disrupt`` (``"true"`` or an unexpired duration), GPU reservation pods and
  non-preemptible work (KAI, Volcano, the Workload API, operator-listed PriorityClasses) —
  :meth:`ClusterFacts.protection`;
* PodDisruptionBudgets — :class:`PdbLimits` (exactly one budget, and it allows the eviction);
* gangs — :meth:`ClusterFacts.gang_of` and :meth:`ClusterFacts.gang_blocker`: a gang moves only
  as a whole, so one protected member protects every member, and the members together must fit
  in their budgets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from provisioner.apis import labels as wk
from provisioner.apis.core import Pod, PodDisruptionBudget, is_terminal
from provisioner.apis.nodepool import NodePool
from provisioner.kube.selector import LabelSelector, from_label_selector
from provisioner.podgroups import (
    PodGroupRef,
    ProvisioningContext,
    build_context,
    group_info,
    has_active_do_not_disrupt,
    is_gpu_reservation_pod,
    is_non_preemptible,
)
from provisioner.state.cluster import Snapshot
from provisioner.state.statenode import StateNode

__all__ = [
    "ClusterFacts",
    "PdbLimits",
    "is_daemon_pod",
    "is_drainable",
    "is_mirror_pod",
    "is_reschedulable",
    "tolerates_disrupted",
]

_READY: Final = "Ready"


def is_daemon_pod(pod: Pod) -> bool:
    """Owned by an ``apps`` DaemonSet."""
    return any(
        o.kind == "DaemonSet" and o.api_version.startswith("apps/")
        for o in pod.metadata.owner_references
    )


def is_mirror_pod(pod: Pod) -> bool:
    """A static pod's mirror (owned by its Node)."""
    return any(o.kind == "Node" for o in pod.metadata.owner_references)


def tolerates_disrupted(pod: Pod) -> bool:
    """Whether the pod tolerates ``karpenter.sh/disrupted:NoSchedule`` (it is left in place)."""
    for toleration in pod.spec.tolerations:
        if toleration.effect not in {"", wk.TAINT_EFFECT_NO_SCHEDULE}:
            continue
        if not toleration.key:
            if toleration.operator == "Exists":
                return True
            continue
        if toleration.key == wk.TAINT_DISRUPTED and (
            toleration.operator == "Exists" or not toleration.value
        ):
            return True
    return False


def is_drainable(pod: Pod) -> bool:
    """What drain evicts: live, not terminating, not a mirror pod, not tolerating the taint."""
    return (
        not is_terminal(pod)
        and pod.metadata.deletion_timestamp is None
        and not is_mirror_pod(pod)
        and not tolerates_disrupted(pod)
    )


def is_reschedulable(pod: Pod) -> bool:
    """What must find a new home when its node goes (Karpenter's ``IsReschedulable``)."""
    return is_drainable(pod) and not is_daemon_pod(pod)


def _healthy(pod: Pod) -> bool:
    if pod.metadata.deletion_timestamp is not None or pod.status is None:
        return False
    return any(c.type == _READY and c.status == "True" for c in pod.status.conditions)


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


@dataclass(slots=True)
class _Budget:
    key: str
    selector: LabelSelector
    namespace: str
    allowed: int
    desired: int
    healthy: int


_LabelKey = tuple[str, frozenset[tuple[str, str]]]


def _label_key(pod: Pod) -> _LabelKey:
    return (pod.metadata.namespace or "default", frozenset((pod.metadata.labels or {}).items()))


class PdbLimits:
    """How many more pods each PodDisruptionBudget lets go now (Karpenter's ``pdb.Limits``).

    The budget is computed from the cached pods as the eviction API does; a budget whose status
    reports fewer allowed disruptions wins (its controller may know better).
    """

    def __init__(self, pdbs: Iterable[PodDisruptionBudget], pods: Iterable[Pod]) -> None:
        # pods grouped by (namespace, labels): a selector is matched once per distinct group
        groups: dict[_LabelKey, list[Pod]] = {}
        for pod in pods:
            if not is_terminal(pod):
                groups.setdefault(_label_key(pod), []).append(pod)
        self._budgets: list[_Budget] = []
        self._covering: dict[_LabelKey, list[str]] = {key: [] for key in groups}
        for pdb in pdbs:
            namespace = pdb.metadata.namespace or "default"
            raw = pdb.spec.selector
            selector = from_label_selector(
                raw.model_dump(by_alias=True, exclude_none=True) if raw is not None else None
            )
            key = f"{namespace}/{pdb.metadata.name}"
            selected = []
            for group, members in groups.items():
                if group[0] == namespace and selector.matches(members[0].metadata.labels):
                    selected.extend(members)
                    self._covering[group].append(key)
            healthy = sum(1 for p in selected if _healthy(p))
            spec = pdb.spec
            if spec.min_available is not None:
                desired = _scaled(spec.min_available, len(selected))
            elif spec.max_unavailable is not None:
                desired = max(0, len(selected) - _scaled(spec.max_unavailable, len(selected)))
            else:
                desired = len(selected)
            allowed = max(0, healthy - desired)
            if pdb.status.disruptions_allowed is not None and pdb.status.expected_pods:
                allowed = min(allowed, pdb.status.disruptions_allowed)
            self._budgets.append(
                _Budget(
                    key=key,
                    selector=selector,
                    namespace=namespace,
                    allowed=allowed,
                    desired=desired,
                    healthy=healthy,
                )
            )
        self._by_key = {b.key: b for b in self._budgets}

    def covering(self, pod: Pod) -> list[str]:
        """The keys of the budgets that select ``pod``."""
        group = _label_key(pod)
        keys = self._covering.get(group)
        if keys is None:
            keys = [
                b.key
                for b in self._budgets
                if b.namespace == group[0] and b.selector.matches(pod.metadata.labels)
            ]
            self._covering[group] = keys
        return list(keys)

    def blocking(self, pods: Sequence[Pod]) -> list[str]:
        """Budgets that would refuse evicting all of ``pods`` now (empty: they may all go).

        A pod under more than one budget cannot be evicted (the API answers 500); a budget
        refuses when more of its healthy pods would go than it allows (an unhealthy pod may go
        while the budget is met, ``unhealthyPodEvictionPolicy: IfHealthyBudget``).
        """
        by_budget: dict[str, list[Pod]] = {}
        blocked: list[str] = []
        for pod in pods:
            keys = self.covering(pod)
            if len(keys) > 1:
                blocked.extend(k for k in keys if k not in blocked)
                continue
            for key in keys:
                by_budget.setdefault(key, []).append(pod)
        for key, members in by_budget.items():
            budget = self._by_key[key]
            healthy = sum(1 for p in members if _healthy(p))
            refused = healthy > budget.allowed or (healthy == 0 and budget.healthy < budget.desired)
            if refused and key not in blocked:
                blocked.append(key)
        return blocked


GangKey = str
"""``ecosystem/namespace/name`` of a gang."""


@dataclass(slots=True)
class ClusterFacts:
    """The managed nodes, their pods and the protection rules at one moment.

    Attributes:
        snapshot: the cache snapshot the facts come from.
        now: when the snapshot was taken.
        nodes: managed nodes by NodeClaim name.
        pools: valid NodePools by name.
        context: pod-group objects with every pod (gang membership, preemptibility).
        nominated: NodeClaims a pending pod is nominated to.
        non_preemptible_classes: operator-listed non-preemptible PriorityClasses.
    """

    snapshot: Snapshot
    now: datetime
    nodes: dict[str, StateNode]
    pools: dict[str, NodePool]
    context: ProvisioningContext
    nominated: frozenset[str]
    non_preemptible_classes: frozenset[str]
    _gangs: dict[str, GangKey | None] = field(default_factory=dict)
    _members: dict[GangKey, tuple[str, ...]] = field(default_factory=dict)
    _node_of_pod: dict[str, str] | None = None
    _pods_on: dict[str, list[str]] | None = None
    _positions: dict[str, int] | None = None
    _pdbs: PdbLimits | None = None

    @classmethod
    def build(
        cls,
        snapshot: Snapshot,
        now: datetime,
        non_preemptible_classes: frozenset[str],
        *,
        detector: Callable[[Pod], PodGroupRef | None] | None = None,
    ) -> ClusterFacts:
        """Join the snapshot's Nodes, NodeClaims and pods.

        ``detector`` is ``detect_group`` or a memo of it (a controller reading the same pods
        pass after pass).
        """
        nodes = {
            state.claim.name: state
            for state in snapshot.state_nodes.values()
            if state.claim is not None and state.claim.nodepool_name
        }
        pools = {
            name: entry.nodepool
            for name, entry in snapshot.nodepools.items()
            if entry.nodepool is not None
        }
        context = dataclasses.replace(
            build_context(snapshot.group_objects),
            pods=tuple(snapshot.pods.values()),
            priority_classes=dict(snapshot.priority_classes),
            detector=detector,
        )
        return cls(
            snapshot=snapshot,
            now=now,
            nodes=nodes,
            pools=pools,
            context=context,
            nominated=frozenset(n.node_claim for n in snapshot.nominations.values()),
            non_preemptible_classes=non_preemptible_classes,
        )

    @property
    def node_of_pod(self) -> dict[str, str]:
        """Node name of every bound live pod, by pod key (worked out on first use)."""
        if self._node_of_pod is None:
            self._node_of_pod = {  # the snapshot's pods are keyed by Pod.key
                key: pod.spec.node_name
                for key, pod in self.snapshot.pods.items()
                if pod.spec.node_name and not is_terminal(pod)
            }
        return self._node_of_pod

    def pods_on(self, node: str) -> list[str]:
        """The keys of every pod whose ``spec.nodeName`` is ``node``, in snapshot order.

        Terminal pods too; indexed on first use.
        """
        if self._pods_on is None:
            self._pods_on = {}
            for key, pod in self.snapshot.pods.items():
                if pod.spec.node_name:
                    self._pods_on.setdefault(pod.spec.node_name, []).append(key)
        return self._pods_on.get(node, [])

    def in_snapshot_order(self, keys: Iterable[str]) -> list[str]:
        """Those of ``keys`` that are snapshot pods, in snapshot order (indexed on first use)."""
        if self._positions is None:
            self._positions = {key: i for i, key in enumerate(self.snapshot.pods)}
        positions = self._positions
        return sorted((key for key in keys if key in positions), key=positions.__getitem__)

    @property
    def pdbs(self) -> PdbLimits:
        """The PodDisruptionBudget limits (worked out on first use: a drain rarely needs them)."""
        if self._pdbs is None:
            self._pdbs = PdbLimits(self.snapshot.pdbs.values(), self.snapshot.pods.values())
        return self._pdbs

    # -- pods ---------------------------------------------------------------------------------

    def protection(self, pod: Pod) -> str | None:
        """Why the pod itself must never be disrupted (a DisruptionBlocked message), or None."""
        if has_active_do_not_disrupt(pod, self.now):
            return f'Pod has "{wk.ANNOTATION_DO_NOT_DISRUPT}" annotation (Pod={pod.key})'
        if is_gpu_reservation_pod(pod):
            return f"Pod is a GPU reservation pod (Pod={pod.key})"
        reason = is_non_preemptible(pod, self.context, self.non_preemptible_classes)
        if reason is not None:
            return f"Pod is non-preemptible: {reason} (Pod={pod.key})"
        return None

    def pdb_blocker(self, pods: Sequence[Pod]) -> str | None:
        """A DisruptionBlocked message when budgets would refuse evicting ``pods``."""
        if not self.snapshot.pdbs:  # no budget: nothing refuses (and nothing to index)
            return None
        blocking = self.pdbs.blocking([p for p in pods if is_drainable(p)])
        if not blocking:
            return None
        return f"Pdb prevents pod evictions (PodDisruptionBudget=[{', '.join(blocking)}])"

    # -- gangs --------------------------------------------------------------------------------

    def gang_of(self, pod: Pod) -> GangKey | None:
        """The gang the pod belongs to (a group of minimum at least 2), or None."""
        if pod.key in self._gangs:
            return self._gangs[pod.key]
        ref = self.context.group_of(pod)
        key: GangKey | None = None
        if ref is not None:
            gid = "/".join(ref.group_id)
            if gid not in self._members:
                info = group_info(ref, self.context)
                self._members[gid] = info.members if info.is_gang else ()
            key = gid if self._members[gid] else None
        self._gangs[pod.key] = key
        return key

    def gang_members(self, gang: GangKey) -> list[Pod]:
        """The live members of ``gang`` (bound or pending)."""
        pods = self.snapshot.pods
        return [pods[k] for k in self._members.get(gang, ()) if k in pods]

    def gang_blocker(self, gang: GangKey) -> str | None:
        """Why the gang cannot move as a whole now (a protected member, budgets), or None."""
        members = self.gang_members(gang)
        for member in members:
            reason = self.protection(member)
            if reason is not None:
                return f"Pod group {gang} cannot move: {reason}"
        bound = [m for m in members if m.spec.node_name]
        blocker = self.pdb_blocker(bound)
        if blocker is not None:
            return f"Pod group {gang} cannot move: {blocker}"
        return None
