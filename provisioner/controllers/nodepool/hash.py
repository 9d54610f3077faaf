"""``nodepool.hash``: the drift-hash annotations of NodePools and of their NodeClaims.

Karpenter's ``nodepool.hash`` controller (and AWS ``nodeclass.hash``), per NodePool:

1. Each live NodeClaim of the pool whose ``karpenter.sh/nodepool-hash-version`` is not
   Jointer's (:data:`~provisioner.apis.nodepool.NODEPOOL_HASH_VERSION`) — one Karpenter
   launched — is **re-stamped**: the version, and the pool's current hash unless the claim is
   already ``Drifted``. The cloud provider does the same for its NodeClass hash
   (:meth:`~cloudprovider.protocol.CloudProvider.restamp`). A hash of another version is never
   compared, so taking over Karpenter's NodeClaims drifts none of them.
2. The NodePool is annotated with its current hash and Jointer's version, as Karpenter does;
   Karpenter, started again, sees a version that is not its own and re-stamps the claims back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from cloudprovider.adapters import claim_view
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION, NodePool, nodepool_hash, restamp
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["NodePoolHashController", "claim_restamp"]

NAME: Final = "nodepool.hash"


def claim_restamp(
    nodepool: NodePool, claim: NodeClaim, provider: Mapping[str, str]
) -> dict[str, str]:
    """The annotations to re-stamp on ``claim`` (the pool's and the provider's ``provider``)."""
    conditions = claim.status.conditions if claim.status else ()
    drifted = cond.get_condition(conditions, cond.NODECLAIM_CONDITION_DRIFTED) is not None
    changes = restamp(
        claim.metadata.annotations,
        hash_key=wk.ANNOTATION_NODEPOOL_HASH,
        version_key=wk.ANNOTATION_NODEPOOL_HASH_VERSION,
        current_hash=nodepool_hash(nodepool),
        version=NODEPOOL_HASH_VERSION,
        drifted=drifted,
    )
    changes.update(provider)
    return changes


class NodePoolHashController(ControllerBase):
    """Re-stamps the NodeClaims of a NodePool stamped under another hash version.

    Args:
        ports: the shared ports (the cloud provider re-stamps its NodeClass hash).
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports) -> None:
        super().__init__(ports, NAME)

    def reconcile(self, request: Request) -> Result:
        """Re-stamp the claims of the NodePool ``request.name``, then annotate the pool."""
        entry = self._state.nodepool(request.name)
        nodepool = entry.nodepool if entry is not None else None
        if nodepool is None or entry is None or entry.deleting:
            return Result.done()
        for claim in self._state.node_claims():
            if claim.nodepool_name != nodepool.name or claim.metadata.deletion_timestamp:
                continue
            self._restamp(nodepool, claim)
        wanted = {
            wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(nodepool),
            wk.ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
        }
        current = nodepool.metadata.annotations
        if any(current.get(k) != v for k, v in wanted.items()):
            try:
                self._kube.merge_patch(
                    NODE_POOLS, nodepool.name, {"metadata": {"annotations": wanted}}
                )
            except NotFoundError:
                return Result.done()
        return Result.done()

    def _restamp(self, nodepool: NodePool, claim: NodeClaim) -> None:
        conditions = claim.status.conditions if claim.status else ()
        drifted = cond.get_condition(conditions, cond.NODECLAIM_CONDITION_DRIFTED) is not None
        provider = self._cloud.restamp(claim_view(claim), drifted=drifted)
        changes = claim_restamp(nodepool, claim, provider)
        if not changes:
            return
        try:
            self._kube.merge_patch(NODE_CLAIMS, claim.name, {"metadata": {"annotations": changes}})
        except NotFoundError:
            return
        except KubeApiError as error:
            self._log.error("re-stamping hash", NodeClaim={"name": claim.name}, error=str(error))
            return
        self._log.debug(
            "re-stamped nodeclaim hash", NodeClaim={"name": claim.name}, annotations=changes
        )
