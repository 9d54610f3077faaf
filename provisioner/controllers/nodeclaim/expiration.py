"""``nodeclaim.expiration``: NodeClaims older than ``expireAfter`` are deleted (forceful).

Karpenter's ``c/nodeclaim/expiration``: at ``creationTimestamp + spec.expireAfter`` the NodeClaim
is deleted regardless of budgets, ``do-not-disrupt`` and PDBs (V(1) ``deleting expired
nodeclaim``, ``karpenter_nodeclaims_disrupted_total{reason="expired"}``). It is not a disruption
method: nothing is launched first. Drain still honours PDBs and protected pods until the
NodeClaim's ``terminationGracePeriod``. Before the delete, ``DisruptionReason=Expired`` is set so
the reason is visible on the deleted NodeClaim.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from provisioner.apis import labels as wk
from provisioner.controllers.disruption.marks import set_disruption_reason
from provisioner.controllers.nodeclaim.status import get_claim
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["EXPIRED", "ExpirationController"]

NAME: Final = "nodeclaim.expiration"
EXPIRED: Final = "Expired"
_CONSOLIDATION_POLICY_UNKNOWN: Final = ""
RETRY: Final = timedelta(seconds=10)


class ExpirationController(ControllerBase):
    """Deletes NodeClaims past their ``expireAfter``.

    Args:
        ports: the shared ports.
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports) -> None:
        super().__init__(ports, NAME)

    def reconcile(self, request: Request) -> Result:
        """Delete the NodeClaim ``request.name`` if it expired; else requeue at its expiry."""
        claim = get_claim(self._kube, request.name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            return Result.done()
        expire_after = claim.expire_after
        created = claim.metadata.creation_timestamp
        if expire_after is None or created is None:
            return Result.done()
        now = self._clock.now()
        expires = created + expire_after
        if now < expires:
            return Result.after(expires - now)
        set_disruption_reason(self._kube, claim.name, EXPIRED, now=now)
        try:
            self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
        except NotFoundError:
            return Result.done()
        except KubeApiError as error:
            self._log.error(
                "deleting expired nodeclaim", NodeClaim={"name": claim.name}, error=str(error)
            )
            return Result.after(RETRY)
        self._log.debug(
            "deleting expired nodeclaim",
            NodeClaim={"name": claim.name},
            NodePool={"name": claim.nodepool_name or ""},
            expireAfter=str(expire_after),
        )
        mode = "eventual" if claim.termination_grace_period is not None else "forceful"
        self._metrics.nodeclaims_disrupted.labels(
            reason="expired",
            nodepool=claim.nodepool_name or "",
            capacity_type=claim.metadata.labels.get(wk.LABEL_CAPACITY_TYPE, ""),
            consolidation_policy=_CONSOLIDATION_POLICY_UNKNOWN,
            termination_mode=mode,
        ).inc()
        return Result.done()
