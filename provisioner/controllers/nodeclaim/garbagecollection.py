"""``nodeclaim.garbagecollection``: no NodeClaim without an instance, no instance without a claim.

1. A launched NodeClaim whose instance is gone (``CloudProvider.get`` raises
   ``NodeClaimNotFoundError``) is deleted (reason ``garbage_collected``).
2. An instance the provider lists as this cluster's, with no NodeClaim by providerID or by name
   and older than 30 s (a launch may still be recording itself), is terminated.

It runs only once the cache is synced, every :data:`GC_INTERVAL`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from cloudprovider.errors import CloudProviderError, NodeClaimNotFoundError
from cloudprovider.protocol import CloudNodeClaim
from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.runtime.reconciler import Request, Result

__all__ = ["GC_INTERVAL", "ORPHAN_MIN_AGE", "GarbageCollectionController"]

NAME: Final = "nodeclaim.garbagecollection"
GC_INTERVAL: Final = timedelta(minutes=2)
"""Karpenter's garbage collection period."""
ORPHAN_MIN_AGE: Final = timedelta(seconds=30)
"""An instance younger than this may belong to a launch still writing its NodeClaim status."""
LAUNCHED_MIN_AGE: Final = timedelta(seconds=10)
"""A claim launched more recently than this is not checked (the cloud may lag its own create)."""
NOT_SYNCED_REQUEUE: Final = timedelta(seconds=1)


class GarbageCollectionController(ControllerBase):
    """Deletes NodeClaims without instances and instances without NodeClaims.

    Args:
        ports: what the controller acts through (cache, API, cloud, clock, logs, metrics,
            events).
        interval: how often to run.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        interval: timedelta = GC_INTERVAL,
    ) -> None:
        super().__init__(ports, NAME)
        self._interval = interval

    def reconcile(self, request: Request) -> Result:
        """One garbage-collection pass."""
        del request
        if not self._state.synced:
            return Result.after(NOT_SYNCED_REQUEUE)
        try:
            instances = self._cloud.list_claims()
        except CloudProviderError as error:
            self._log.error("listing instances", error=str(error))
            return Result.after(self._interval)
        claims = self._state.node_claims()
        self._collect_instances(instances, claims)
        self._collect_claims({i.provider_id for i in instances}, claims)
        return Result.after(self._interval)

    def _collect_instances(self, instances: list[CloudNodeClaim], claims: list[NodeClaim]) -> None:
        now = self._clock.now()
        provider_ids = {c.provider_id for c in claims if c.provider_id}
        names = {c.name for c in claims}
        for instance in instances:
            if instance.provider_id in provider_ids or (instance.name and instance.name in names):
                continue
            if instance.created_at is not None and now - instance.created_at < ORPHAN_MIN_AGE:
                continue
            try:
                self._cloud.delete(instance.provider_id)
            except NodeClaimNotFoundError:
                continue
            except CloudProviderError as error:
                self._log.error(
                    "garbage collecting instance",
                    **{"provider-id": instance.provider_id},
                    error=str(error),
                )
                continue
            self._log.info(
                "garbage collected instance",
                **{"provider-id": instance.provider_id, "instance-type": instance.instance_type},
                NodeClaim={"name": instance.name},
            )

    def _collect_claims(self, live: set[str], claims: list[NodeClaim]) -> None:
        now = self._clock.now()
        for claim in claims:
            provider_id = claim.provider_id
            if not provider_id or provider_id in live or claim.metadata.deletion_timestamp:
                continue
            conditions = claim.status.conditions if claim.status else ()
            launched = cond.get_condition(conditions, cond.NODECLAIM_CONDITION_LAUNCHED)
            if launched is None or now - launched.last_transition_time < LAUNCHED_MIN_AGE:
                continue
            try:
                self._cloud.get(provider_id)
            except NodeClaimNotFoundError:
                pass
            except CloudProviderError:
                continue
            else:
                continue
            try:
                self._kube.delete(NODE_CLAIMS, claim.name, uid=claim.metadata.uid or None)
            except KubeApiError:
                continue
            self._log.info(
                "garbage collecting nodeclaim with no cloudprovider representation",
                NodeClaim={"name": claim.name},
                **{"provider-id": provider_id},
            )
            self._metrics.nodeclaims_disrupted.labels(
                reason="garbage_collected",
                nodepool=claim.nodepool_name or "",
                capacity_type=claim.metadata.labels.get(wk.LABEL_CAPACITY_TYPE, ""),
                consolidation_policy="",
                termination_mode="forceful",
            ).inc()
