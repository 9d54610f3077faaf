"""``node.termination``: the ``karpenter.sh/termination`` finalizer (minimal; drain comes later).

For a NodeClaim being deleted, in order (each step returns when it wants to run again):

1. Its Node, if any, is deleted (a Node deleted on its own makes its NodeClaim be deleted).
2. The Node is drained — :meth:`TerminationController.drain` is the seam where eviction tiers,
   PDBs and terminationGracePeriod will go; today it reports drained at once.
3. The Node's finalizer is removed (Info ``deleted node``).
4. The instance is terminated through ``CloudProvider.delete`` until the provider says it is
   gone (``NodeClaimNotFoundError``).
5. The NodeClaim's finalizer is removed (Info ``deleted nodeclaim``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from structlog.typing import FilteringBoundLogger

from cloudprovider.errors import CloudProviderError, NodeClaimNotFoundError
from cloudprovider.protocol import CloudProvider
from provisioner.apis import labels as wk
from provisioner.apis.core import Node
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.nodeclaim.status import get_claim, update_with_version
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.protocol import JsonObject, KubeClient
from provisioner.kube.resource import NODE_CLAIMS, NODES
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Request, Result
from provisioner.state.cluster import ClusterState

__all__ = ["INSTANCE_POLL", "TerminationController"]

NAME: Final = "node.termination"
INSTANCE_POLL: Final = timedelta(seconds=5)
"""How often to ask whether a terminating instance is gone."""
DELETE_RETRY: Final = timedelta(seconds=10)


def _without_finalizer(obj: JsonObject) -> dict[str, Any] | None:
    finalizers = list(obj.get("metadata", {}).get("finalizers") or [])
    if wk.FINALIZER_TERMINATION not in finalizers:
        return None
    finalizers.remove(wk.FINALIZER_TERMINATION)
    return {"metadata": {"finalizers": finalizers or None}}


class TerminationController:
    """Finishes the deletion of NodeClaims (and their Nodes) that carry the finalizer.

    Args:
        state: the cluster state cache.
        kube: the Kubernetes port.
        cloud: the cloud provider.
        clock: the injected clock.
        logger: a structlog logger.
        metrics: the metrics.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        state: ClusterState,
        kube: KubeClient,
        cloud: CloudProvider,
        clock: Clock,
        logger: FilteringBoundLogger,
        metrics: Metrics,
    ) -> None:
        self._state = state
        self._kube = kube
        self._cloud = cloud
        self._clock = clock
        self._log = logger.bind(controller=NAME)
        self._metrics = metrics

    def reconcile(self, request: Request) -> Result:
        """Advance the termination of the NodeClaim ``request.name``."""
        claim = get_claim(self._kube, request.name)
        if claim is None:
            return Result.done()
        node = self._node_of(claim)
        if claim.metadata.deletion_timestamp is None:
            if node is not None and node.metadata.deletion_timestamp is not None:
                self._delete_claim(claim)
            return Result.done()
        if wk.FINALIZER_TERMINATION not in claim.metadata.finalizers:
            return Result.done()
        if node is not None:
            waiting = self._terminate_node(node)
            if waiting is not None:
                return waiting
        waiting = self._terminate_instance(claim)
        if waiting is not None:
            return waiting
        if update_with_version(self._kube, NODE_CLAIMS, claim.name, _without_finalizer):
            self._log.info("deleted nodeclaim", NodeClaim={"name": claim.name})
            self._record_terminated(claim)
        return Result.done()

    def drain(self, node: Node) -> Result | None:
        """Evict the Node's pods; None once drained, else when to look again.

        The seam for Karpenter's drain (taint, eviction tiers, PDBs, TGP): not implemented yet.
        """
        del node
        return None

    def _node_of(self, claim: NodeClaim) -> Node | None:
        name = claim.status.node_name if claim.status else None
        node = self._state.node(name) if name else None
        if node is None and claim.provider_id:
            node = self._state.node_for_provider_id(claim.provider_id)
        return node

    def _delete_claim(self, claim: NodeClaim) -> None:
        try:
            self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
        except KubeApiError:
            return

    def _terminate_node(self, node: Node) -> Result | None:
        name = node.metadata.name
        if node.metadata.deletion_timestamp is None:
            try:
                self._kube.delete(NODES, name)
            except NotFoundError:
                return None
            except KubeApiError:
                return Result.after(DELETE_RETRY)
        drained = self.drain(node)
        if drained is not None:
            return drained
        if update_with_version(self._kube, NODES, name, _without_finalizer) is not None:
            self._log.info("deleted node", Node={"name": name})
            self._metrics.nodes_terminated.labels(
                nodepool=node.metadata.labels.get(wk.LABEL_NODEPOOL, ""),
                zone=node.metadata.labels.get(wk.LABEL_ZONE, ""),
            ).inc()
        return None

    def _terminate_instance(self, claim: NodeClaim) -> Result | None:
        provider_id = claim.provider_id
        if not provider_id:
            return None
        try:
            self._cloud.delete(provider_id)
        except NodeClaimNotFoundError:
            return None
        except CloudProviderError as error:
            self._log.error(
                "terminating instance", NodeClaim={"name": claim.name}, error=str(error)
            )
            return Result.after(DELETE_RETRY)
        try:
            self._cloud.get(provider_id)
        except NodeClaimNotFoundError:
            return None
        except CloudProviderError:
            return Result.after(INSTANCE_POLL)
        return Result.after(INSTANCE_POLL)

    def _record_terminated(self, claim: NodeClaim) -> None:
        labels = claim.metadata.labels
        self._metrics.nodeclaims_terminated.labels(
            nodepool=labels.get(wk.LABEL_NODEPOOL, ""),
            capacity_type=labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            zone=labels.get(wk.LABEL_ZONE, ""),
        ).inc()
        deleted = claim.metadata.deletion_timestamp
        if deleted is not None:
            self._metrics.nodeclaim_termination_duration.labels(
                nodepool=labels.get(wk.LABEL_NODEPOOL, "")
            ).observe(max((self._clock.now() - deleted).total_seconds(), 0.0))
