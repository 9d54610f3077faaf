"""The cluster as one planning step sees it: typed objects, indexed once.

The provisioning controller fills a :class:`ClusterView` from its state cache; `jointer plan`
fills it from manifest files. Everything downstream is the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.apis.core import (
    TERMINAL_PHASES,
    DaemonSet,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    is_terminal,
)
from provisioner.controllers.provisioning.offerings import OptionsMemo, PoolTemplate
from provisioner.controllers.provisioning.reasons import UnavailablePool
from provisioner.podgroups import ProvisioningContext, build_context
from provisioner.state.statenode import StateNode

__all__ = ["ClusterView"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """Everything one planning step reads.

    Attributes:
        pods: every pod (pending and bound).
        nodes: the cluster's state nodes: registered Nodes (joined to their NodeClaims) and
            in-flight NodeClaims. A pod bound to one has ``spec.nodeName`` set to its
            :attr:`~provisioner.state.statenode.StateNode.key` (nominated pods included).
        pools: ready NodePools with their instance types.
        daemonsets: DaemonSets (per-node overhead).
        claims: PersistentVolumeClaims by ``namespace/name``.
        volumes: PersistentVolumes by name.
        storage_classes: StorageClasses by name.
        groups: pod-group objects (PodGroups, Queues, Workloads, ...) for admission rules.
        region: the region, for the ``topology.kubernetes.io/region`` label.
        unavailable: the NodePools not planned on (not ready, unreadable, without instance
            types), with why; named in the reasons of the pods they might have taken.
        options_memo: where a run of planning steps over the same pools and DaemonSets
            (a disruption pass's simulations) keeps the offerings it enumerated.
        leaving: state nodes a simulation takes out of ``nodes`` whose NodeClaims still exist
            (disruption candidates, interrupted or deleting nodes): nothing is placed on
            them, but their capacity counts against their NodePool's limits until they are
            gone, so a replacement never takes a NodePool above its limits.
    """

    pods: Sequence[Pod]
    nodes: Sequence[StateNode] = ()
    pools: Sequence[PoolTemplate] = ()
    daemonsets: Sequence[DaemonSet] = ()
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: Mapping[str, StorageClass] = field(default_factory=dict)
    groups: ProvisioningContext = field(default_factory=lambda: build_context(()))
    region: str = ""
    unavailable: Sequence[UnavailablePool] = ()
    options_memo: OptionsMemo | None = field(default=None, compare=False, repr=False)
    leaving: Sequence[StateNode] = ()

    def pool(self, name: str) -> PoolTemplate | None:
        """The pool template called ``name``, if it is ready."""
        return next((p for p in self.pools if p.name == name), None)

    def bound_pods(self) -> dict[str, list[Pod]]:
        """Non-terminal pods bound to a node, by node name."""
        result: dict[str, list[Pod]] = {}
        for pod in self.pods:
            node = pod.spec.node_name
            if node and (pod.status is None or pod.status.phase not in TERMINAL_PHASES):
                result.setdefault(node, []).append(pod)
        return result

    def pending_pods(self) -> list[Pod]:
        """Non-terminal pods not bound to a node, not being deleted."""
        return [
            pod
            for pod in self.pods
            if not pod.spec.node_name
            and not is_terminal(pod)
            and pod.metadata.deletion_timestamp is None
        ]
