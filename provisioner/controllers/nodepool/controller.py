"""NodePool controllers: ``nodepool.readiness`` (validation and readiness) and ``nodepool.counter``.

Readiness, per NodePool:

1. A NodePool that does not validate gets ``ValidationSucceeded=False`` with the message naming
   the field, ``Ready=False`` and a ``Warning`` event; the provisioner skips it while every other
   NodePool keeps being served.
2. Otherwise ``ValidationSucceeded=True``; ``NodeClassReady`` follows whether the cloud provider
   can resolve the pool's instance types (a ``Warning NodeClassNotReady`` event when it turns
   False, naming the cause); ``Ready`` is computed from both.

Counter: ``status.resources`` (capacity of the pool's live NodeClaims plus ``nodes``) and
``status.nodes``, and the ``karpenter_nodepools_usage``/``_limit`` gauges.

Both write ``status`` only, with a merge patch, and only when it changed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from cloudprovider.errors import CloudProviderError
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.apis import conditions as cond
from provisioner.apis.base import to_wire
from provisioner.apis.conditions import Condition
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.events import nodepool_invalid, nodepool_not_ready, object_ref
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.kube.errors import KubeApiError
from provisioner.kube.resource import NODE_POOLS
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.resources import format_resource_list
from provisioner.state.cluster import ClusterState, NodePoolEntry

__all__ = ["NodePoolController", "pool_usage"]

NAME: Final = "nodepool.readiness"
REASON_VALIDATION_FAILED: Final = "NodePoolValidationFailed"
REASON_NODECLASS_NOT_READY: Final = "NodeClassNotReady"
NODECLASS_RECHECK: Final = timedelta(minutes=1)
"""How often a NodePool whose NodeClass is not ready is looked at again."""


def pool_usage(state: ClusterState, nodepool: str) -> tuple[dict[str, int], int]:
    """Capacity held by a NodePool's live NodeClaims (milli-units, with ``nodes``), and count."""
    usage: dict[str, int] = {}
    count = 0
    for claim in state.node_claims():
        if claim.nodepool_name != nodepool or claim.metadata.deletion_timestamp is not None:
            continue
        count += 1
        capacity = claim.status.capacity if claim.status else None
        for key, value in (capacity or {}).items():
            usage[key] = usage.get(key, 0) + parse_quantity(str(value))
    usage["nodes"] = count * 1000
    return usage, count


class NodePoolController(ControllerBase):
    """Keeps each NodePool's conditions and status resources current.

    Args:
        ports: what the controller acts through (cache, API, cloud, clock, logs, metrics,
            events).
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
    ) -> None:
        super().__init__(ports, NAME)

    def reconcile(self, request: Request) -> Result:
        """Validate the NodePool ``request.name``, set its conditions and count its usage."""
        entry = self._state.nodepool(request.name)
        if entry is None:
            return Result.done()
        now = self._clock.now()
        current = cond.parse_conditions(entry.conditions)
        conditions = current
        result = Result.done()
        if entry.nodepool is None:
            message = entry.error or "invalid"
            conditions = cond.set_false(
                conditions,
                cond.NODEPOOL_CONDITION_VALIDATION_SUCCEEDED,
                now=now,
                reason=REASON_VALIDATION_FAILED,
                message=message,
                observed_generation=entry.generation or None,
            )
            self._events.publish(nodepool_invalid(self._ref(entry), message))
            self._log.error(
                "nodepool validation failed", NodePool={"name": entry.name}, error=message
            )
        else:
            conditions = cond.set_true(
                conditions,
                cond.NODEPOOL_CONDITION_VALIDATION_SUCCEEDED,
                now=now,
                observed_generation=entry.generation or None,
            )
            conditions, result = self._node_class_ready(entry.nodepool, conditions)
            self._announce_not_ready(entry, current, conditions)
        conditions = cond.set_root_condition(
            conditions,
            cond.NODEPOOL_READY_DEPENDENTS,
            now=now,
            observed_generation=entry.generation or None,
        )
        status: dict[str, Any] = {}
        if conditions != current:
            status["conditions"] = [to_wire(c) for c in conditions]
        status.update(self._counter(entry))
        if status:
            try:
                self._kube.patch_status(NODE_POOLS, entry.name, {"status": status})
            except KubeApiError as error:
                self._log.error(
                    "patching nodepool status", NodePool={"name": entry.name}, error=str(error)
                )
                return Result.after(timedelta(seconds=10))
        return result

    def _announce_not_ready(
        self,
        entry: NodePoolEntry,
        before: tuple[Condition, ...],
        after: tuple[Condition, ...],
    ) -> None:
        """A Warning event when ``NodeClassReady`` turns False (or its message changes)."""
        was = cond.get_condition(before, cond.NODEPOOL_CONDITION_NODE_CLASS_READY)
        now = cond.get_condition(after, cond.NODEPOOL_CONDITION_NODE_CLASS_READY)
        if now is None or now.status != cond.STATUS_FALSE:
            return
        if was is not None and was.status == now.status and was.message == now.message:
            return
        cause = f"{now.type}={now.status}: {now.message}" if now.message else f"{now.type}=False"
        self._events.publish(nodepool_not_ready(self._ref(entry), cause))
        self._log.error("nodepool not ready", NodePool={"name": entry.name}, reason=cause)

    def _ref(self, entry: NodePoolEntry) -> dict[str, Any]:
        return object_ref("NodePool", entry.name, api_version="karpenter.sh/v1", uid=entry.uid)

    def _node_class_ready(
        self, nodepool: NodePool, conditions: tuple[Condition, ...]
    ) -> tuple[tuple[Condition, ...], Result]:
        now = self._clock.now()
        ref = nodepool.node_class_ref
        try:
            self._cloud.get_instance_types(
                NodePoolRef(
                    name=nodepool.name,
                    node_class=NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group),
                )
            )
        except CloudProviderError as error:
            return (
                cond.set_false(
                    conditions,
                    cond.NODEPOOL_CONDITION_NODE_CLASS_READY,
                    now=now,
                    reason=REASON_NODECLASS_NOT_READY,
                    message=str(error)[:1000],
                ),
                Result.after(NODECLASS_RECHECK),
            )
        return (
            cond.set_true(conditions, cond.NODEPOOL_CONDITION_NODE_CLASS_READY, now=now),
            Result.done(),
        )

    def _counter(self, entry: NodePoolEntry) -> dict[str, Any]:
        """``nodepool.counter``: status.resources and status.nodes, when they changed."""
        usage, count = pool_usage(self._state, entry.name)
        for resource, amount in usage.items():
            self._metrics.nodepool_usage.labels(nodepool=entry.name, resource_type=resource).set(
                amount / 1000
            )
        if entry.nodepool is not None:
            for resource, limit in entry.nodepool.limits.items():
                self._metrics.nodepool_limit.labels(
                    nodepool=entry.name, resource_type=resource
                ).set(parse_quantity(str(limit)) / 1000)
        resources = format_resource_list({k: v for k, v in usage.items() if k != "nodes"})
        resources["nodes"] = str(count)
        if dict(entry.resources) == resources and entry.nodes == count:
            return {}
        return {"resources": resources, "nodes": count}
