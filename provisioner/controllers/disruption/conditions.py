"""``nodeclaim.disruption``: the ``Consolidatable`` and ``Drifted`` conditions of NodeClaims.

Karpenter's ``c/nodeclaim/disruption`` for one NodeClaim per request:

* **Consolidatable**: True once ``consolidateAfter`` has passed since the last pod event on the
  node (``status.lastPodEventTime``, else initialization); removed while it has not (V(1)
  ``marking consolidatable`` / ``removing consolidatable status condition``). It requeues
  itself at the moment the node becomes consolidatable.
* **Drifted** (launched NodeClaims): ``NodePoolDrifted`` when the NodePool's template hash
  (same hash version) differs from the NodeClaim's ``karpenter.sh/nodepool-hash``,
  ``RequirementsDrifted`` when the NodeClaim's labels no longer satisfy the NodePool's
  requirements, else the cloud provider's reason (AWS ``AMIDrift``...), asked at most every
  5 minutes per NodeClaim. Removed when none applies (V(1) ``marking drifted`` / ``removing
  drifted status condition, not drifted``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from cloudprovider.adapters import claim_view
from cloudprovider.errors import CloudProviderError
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION, NodePool, nodepool_hash
from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.nodeclaim.status import patch_claim_status
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.requirements import RequirementError, Requirements

__all__ = ["NodeClaimDisruptionController", "drift_reason"]

NAME: Final = "nodeclaim.disruption"


def _static_drift(nodepool: NodePool, claim: NodeClaim) -> str | None:
    annotations = claim.metadata.annotations
    stored = annotations.get(wk.ANNOTATION_NODEPOOL_HASH)
    version = annotations.get(wk.ANNOTATION_NODEPOOL_HASH_VERSION)
    if stored is None or version != NODEPOOL_HASH_VERSION:
        return None
    return cond.REASON_NODEPOOL_DRIFTED if stored != nodepool_hash(nodepool) else None


def _requirements_drift(nodepool: NodePool, claim: NodeClaim) -> str | None:
    try:
        wanted = Requirements.from_terms(
            [r.model_dump(by_alias=True, exclude_none=True) for r in nodepool.requirements]
        )
    except RequirementError:
        return None
    have = Requirements.from_labels(claim.metadata.labels)
    problem = have.compatible(wanted, allow_undefined=wk.WELL_KNOWN_LABELS)
    return cond.REASON_REQUIREMENTS_DRIFTED if problem is not None else None


def drift_reason(nodepool: NodePool, claim: NodeClaim) -> str | None:
    """The NodeClaim's drift from its NodePool (static hash, then requirements), or None."""
    return _static_drift(nodepool, claim) or _requirements_drift(nodepool, claim)


class NodeClaimDisruptionController(ControllerBase):
    """Keeps ``Consolidatable`` and ``Drifted`` up to date on each NodeClaim.

    Args:
        ports: the shared ports (the cloud provider tells provider drift).
        config: disruption settings (drift interval).
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        config: DisruptionConfig | None = None,
    ) -> None:
        super().__init__(ports, NAME)
        self._config = config or DisruptionConfig()
        self._provider_drift: dict[str, tuple[datetime, str | None]] = {}
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        """Recompute both conditions for the NodeClaim ``request.name``."""
        claim = self._state.node_claim(request.name)
        if claim is None or claim.metadata.deletion_timestamp is not None:
            with self._lock:
                self._provider_drift.pop(request.name, None)
            return Result.done()
        entry = self._state.nodepool(claim.nodepool_name or "")
        nodepool = entry.nodepool if entry is not None else None
        if nodepool is None:
            return Result.done()
        now = self._clock.now()
        consolidatable_at = self._consolidatable_at(claim, nodepool)
        consolidatable = consolidatable_at is not None and consolidatable_at <= now
        drift, recheck = self._drift(claim, nodepool, now)
        self._write(claim, consolidatable=consolidatable, drift=drift, now=now)
        delays = [recheck] if recheck is not None else []
        if consolidatable_at is not None and consolidatable_at > now:
            delays.append(consolidatable_at - now)
        return Result.after(min(delays)) if delays else Result.done()

    @staticmethod
    def _consolidatable_at(claim: NodeClaim, nodepool: NodePool) -> datetime | None:
        after = nodepool.consolidate_after
        status = claim.status
        if after is None or status is None:
            return None
        initialized = cond.get_condition(status.conditions, cond.NODECLAIM_CONDITION_INITIALIZED)
        if initialized is None or initialized.status != cond.STATUS_TRUE:
            return None
        since = max(t for t in (status.last_pod_event_time, initialized.last_transition_time) if t)
        return since + after

    def _drift(
        self, claim: NodeClaim, nodepool: NodePool, now: datetime
    ) -> tuple[str | None, timedelta | None]:
        conditions = claim.status.conditions if claim.status else ()
        if not cond.is_true(conditions, cond.NODECLAIM_CONDITION_LAUNCHED):
            return None, None
        reason = drift_reason(nodepool, claim)
        if reason is not None:
            return reason, self._config.drift_interval
        with self._lock:
            cached = self._provider_drift.get(claim.name)
        if cached is not None and now - cached[0] < self._config.drift_interval:
            return cached[1], cached[0] + self._config.drift_interval - now
        try:
            provider = self._cloud.is_drifted(claim_view(claim))
        except CloudProviderError as error:
            self._log.error("checking drift", NodeClaim={"name": claim.name}, error=str(error))
            provider = None
        with self._lock:
            self._provider_drift[claim.name] = (now, provider)
        return provider, self._config.drift_interval

    def _write(
        self, claim: NodeClaim, *, consolidatable: bool, drift: str | None, now: datetime
    ) -> None:
        conditions = claim.status.conditions if claim.status else ()
        was_consolidatable = cond.is_true(conditions, cond.NODECLAIM_CONDITION_CONSOLIDATABLE)
        current_drift = cond.get_condition(conditions, cond.NODECLAIM_CONDITION_DRIFTED)
        drift_now = current_drift.reason if current_drift is not None else None
        if was_consolidatable == consolidatable and drift_now == drift:
            return

        def mutate(fresh: NodeClaim) -> Mapping[str, Any] | None:
            updated = fresh.status.conditions if fresh.status else ()
            if consolidatable:
                updated = cond.set_true(updated, cond.NODECLAIM_CONDITION_CONSOLIDATABLE, now=now)
            else:
                updated = cond.clear_condition(updated, cond.NODECLAIM_CONDITION_CONSOLIDATABLE)
            if drift is not None:
                updated = cond.set_true(
                    updated, cond.NODECLAIM_CONDITION_DRIFTED, now=now, reason=drift
                )
            else:
                updated = cond.clear_condition(updated, cond.NODECLAIM_CONDITION_DRIFTED)
            return {"conditions": updated}

        patch_claim_status(self._kube, claim.name, mutate, now=now)
        name = {"NodeClaim": {"name": claim.name}}
        if consolidatable and not was_consolidatable:
            self._log.debug("marking consolidatable", **name)
        elif was_consolidatable and not consolidatable:
            self._log.debug("removing consolidatable status condition", **name)
        if drift is not None and drift_now != drift:
            self._log.debug("marking drifted", reason=drift, **name)
        elif drift is None and drift_now is not None:
            self._log.debug("removing drifted status condition, not drifted", **name)
