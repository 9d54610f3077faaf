"""The cluster as one planning step sees it: typed objects, indexed once.

The provisioning controller fills a :class:`ClusterView` from its state cache; `jointer plan`
fills it from manifest files. Everything downstream is the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.apis.core import (
    DaemonSet,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from provisioner.controllers.provisioning.offerings import OptionsMemo, PoolTemplate
from provisioner.controllers.provisioning.reasons import UnavailablePool
from provisioner.controllers.provisioning.viewpods import PodIndex, index_pods
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
        pod_index: where the pods are (bound by node, pending), when the view's builder
            knows; it is used only while it indexes this very ``pods`` object, and worked
            out on first use otherwise.
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
    pod_index: PodIndex | None = field(default=None, compare=False, repr=False)

    def pool(self, name: str) -> PoolTemplate | None:
        """The pool template called ``name``, if it is ready."""
        return next((p for p in self.pools if p.name == name), None)

    def _indexed(self) -> PodIndex:
        index = self.pod_index
        if index is None or index.pods is not self.pods:
            index = index_pods(self.pods)
            object.__setattr__(self, "pod_index", index)  # a cache of what ``pods`` holds
        return index

    def bound_pods(self) -> Mapping[str, Sequence[Pod]]:
        """Non-terminal pods bound to a node, by node name (read-only)."""
        return self._indexed().bound

    def pending_pods(self) -> Sequence[Pod]:
        """Non-terminal pods not bound to a node, not being deleted (read-only)."""
        return self._indexed().pending
