"""The ``provisioning.static`` reconciler: exactly ``spec.replicas`` NodeClaims per static NodePool.

Per NodePool (on its changes and its NodeClaims', and every minute): too few NodeClaims (running
and deleting) → create the missing ones (:func:`~provisioner.controllers.provisioning.static.
static_plan`, within ``limits.nodes``: Info ``nodepool node limit reached`` otherwise); too many
running → delete the surplus as Karpenter's ``static.deprovisioning`` does (Info
``deprovisioning nodeclaims to satisfy replica count``); the termination controller drains them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from cloudprovider.errors import CloudProviderError
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.apis.core import Pod
from provisioner.apis.errors import ApiValidationError
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption.facts import is_daemon_pod
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.controller import nodeclaim_body
from provisioner.controllers.provisioning.static import (
    scale_down_candidates,
    static_plan,
    static_pools,
)
from provisioner.kube.errors import KubeApiError, NotFoundError
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.podgroups.protection import has_active_do_not_disrupt
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.resources import format_resource_list
from provisioner.state.cluster import Snapshot

__all__ = ["NAME", "RESYNC", "StaticCapacityController"]

NAME: Final = "provisioning.static"
RESYNC: Final = timedelta(minutes=1)
LIMIT_REQUEUE: Final = timedelta(seconds=30)


class StaticCapacityController(ControllerBase):
    """Keeps each static NodePool at ``spec.replicas`` NodeClaims.

    Args:
        ports: what the controller acts through.
        region: the region label value for templates.
    """

    name: Final = NAME

    def __init__(self, *, ports: Ports, region: str = "") -> None:
        super().__init__(ports, NAME)
        self._region = region

    def reconcile(self, request: Request) -> Result:
        """Converge the NodePool ``request.name``."""
        if not self._state.synced:
            return Result.after(timedelta(seconds=1))
        entry = self._state.nodepool(request.name)
        if entry is None or entry.nodepool is None or not entry.nodepool.is_static:
            # a dynamic (or malformed, or gone) NodePool: nothing to converge, and a snapshot
            # joins every node and pod; its next change brings the NodePool back here
            return Result.done()
        now = self._clock.now()
        snapshot = self._state.snapshot(now)
        pool = next((p for p in static_pools(snapshot) if p.nodepool.name == request.name), None)
        if pool is None:
            return Result.done()
        if pool.to_delete:
            self._scale_down(snapshot, request.name, now)
            return Result.after(RESYNC)
        missing = pool.replicas - len(pool.running) - pool.deleting
        if missing > 0 and pool.to_create == 0:
            self._log.info("nodepool node limit reached", NodePool={"name": request.name})
            return Result.after(LIMIT_REQUEUE)
        if missing > 0:
            self._scale_up(snapshot, request.name)
        return Result.after(RESYNC)

    def _instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        ref = nodepool.node_class_ref
        return self._cloud.get_instance_types(
            NodePoolRef(
                name=nodepool.name,
                node_class=NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group),
            )
        )

    def _scale_up(self, snapshot: Snapshot, name: str) -> None:
        only = snapshot.nodepools[name]
        narrowed = dataclasses.replace(snapshot, nodepools={name: only})
        try:
            planned = static_plan(narrowed, self._instance_types, region=self._region)
        except CloudProviderError as error:
            self._log.error(
                "failed to resolve instance types", NodePool={"name": name}, error=str(error)
            )
            return
        nodepool = only.nodepool
        if nodepool is None:
            return
        if not planned:
            self._log.info(
                "skipping, nodepool requirements filtered out all instance types",
                NodePool={"name": name},
            )
        for claim, template in planned:
            try:
                body = nodeclaim_body(claim, nodepool, template, [])
                created = self._kube.create(NODE_CLAIMS, body)
            except (KubeApiError, ApiValidationError) as error:
                self._log.error("creating nodeclaim", NodePool={"name": name}, error=str(error))
                return
            self._state.apply_object(created)
            self._log.info(
                "created nodeclaim",
                NodePool={"name": name},
                NodeClaim={"name": str(created["metadata"]["name"])},
                requests=format_resource_list(claim.requests),
                **{"instance-types": ", ".join(claim.instance_types[:5])},
            )
            self._metrics.nodeclaims_created.labels(
                reason="provisioned", nodepool=name, min_values_relaxed="false"
            ).inc()

    def _scale_down(self, snapshot: Snapshot, name: str, now: datetime) -> None:
        pool = next(p for p in static_pools(snapshot) if p.nodepool.name == name)
        pods_on: dict[str, list[Pod]] = {}
        for state in snapshot.state_nodes.values():
            if state.claim is not None and state.claim.nodepool_name == name:
                pods_on[state.claim.name] = list(state.pods)
        chosen = scale_down_candidates(
            pool,
            pods_on,
            is_daemon=is_daemon_pod,
            do_not_disrupt=lambda pod: has_active_do_not_disrupt(pod, now),
        )
        self._log.info(
            "deprovisioning nodeclaims to satisfy replica count",
            NodePool={"name": name},
            current=len(pool.running),
            desired=pool.replicas,
            **{"deprovision-count": len(chosen)},
        )
        for claim in chosen:
            try:
                self._kube.delete(NODE_CLAIMS, claim.name)
            except NotFoundError:
                continue
            except KubeApiError as error:
                self._log.error(
                    "deleting nodeclaim", NodeClaim={"name": claim.name}, error=str(error)
                )
                continue
            self._log.debug("deleting nodeclaim", NodeClaim={"name": claim.name})
