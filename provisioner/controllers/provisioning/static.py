"""Static NodePools (``spec.replicas``, Karpenter v1.8's ``StaticCapacity``): what to add or remove.

Pure decisions on a cache snapshot, shared by the ``provisioning.static`` reconciler and
``jointer plan``:

* :func:`static_plan`: for each static NodePool with fewer NodeClaims (running and deleting)
  than ``replicas``, the NodeClaims to create, bounded by ``limits.nodes`` (the only limit a
  static NodePool may have; counted against its NodeClaims not being deleted). Each carries
  every instance type the NodePool's requirements allow, cheapest first, as Karpenter's static
  NodeClaim template does; no pods.
* :func:`scale_down_candidates`: with more running NodeClaims than ``replicas``, which to delete,
  as Karpenter's ``static.deprovisioning`` picks them: NodeClaims not launched yet, then empty
  nodes (DaemonSet pods only), then the others with do-not-disrupt pods last, a higher
  ``karpenter.sh/deprovisioning-priority`` first, then the cheapest to disrupt. Karpenter does
  not apply disruption budgets to this scale-down; neither does Jointer.

Static NodePools are never consolidated (disruption skips them) and are left out of dynamic
provisioning; their nodes are existing capacity for pending pods like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cloudprovider.instancetype import InstanceType
from provisioner.apis.conditions import CONDITION_READY, STATUS_FALSE
from provisioner.apis.core import Pod
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.provisioning.offerings import (
    DaemonOverhead,
    PoolTemplate,
    enumerate_options,
    pool_template,
)
from provisioner.controllers.provisioning.plan import NodeClaimPlan
from provisioner.scheduling.quantity import parse_quantity
from provisioner.state.cluster import Snapshot

__all__ = [
    "ANNOTATION_DEPROVISIONING_PRIORITY",
    "MAX_INSTANCE_TYPES",
    "StaticPool",
    "scale_down_candidates",
    "static_plan",
    "static_pools",
]

ANNOTATION_DEPROVISIONING_PRIORITY: Final = "karpenter.sh/deprovisioning-priority"
MAX_INSTANCE_TYPES: Final = 600
"""Karpenter's ``MaxInstanceTypes``: how many instance types a NodeClaim lists at most."""

_MILLI: Final = 1000


@dataclass(frozen=True, slots=True)
class StaticPool:
    """One static NodePool and its NodeClaims.

    Attributes:
        nodepool: the NodePool.
        running: its NodeClaims not being deleted.
        deleting: how many of its NodeClaims are being deleted.
        node_limit: ``limits.nodes`` (None: unlimited).
    """

    nodepool: NodePool
    running: tuple[NodeClaim, ...]
    deleting: int
    node_limit: int | None

    @property
    def replicas(self) -> int:
        """``spec.replicas``."""
        return self.nodepool.spec.replicas or 0

    @property
    def to_create(self) -> int:
        """How many NodeClaims to add (0 when enough exist or ``limits.nodes`` is reached)."""
        missing = self.replicas - len(self.running) - self.deleting
        if self.node_limit is not None:
            missing = min(missing, self.node_limit - len(self.running))
        return max(missing, 0)

    @property
    def to_delete(self) -> int:
        """How many running NodeClaims are one too many."""
        return max(len(self.running) - self.replicas, 0)


def static_pools(snapshot: Snapshot) -> list[StaticPool]:
    """The valid static NodePools that are not being deleted, by name."""
    pools: list[StaticPool] = []
    for name in sorted(snapshot.nodepools):
        entry = snapshot.nodepools[name]
        nodepool = entry.nodepool
        if nodepool is None or not nodepool.is_static or entry.deleting:
            continue
        claims = [c for c in snapshot.node_claims.values() if c.nodepool_name == name]
        running = tuple(
            sorted(
                (c for c in claims if c.metadata.deletion_timestamp is None),
                key=lambda c: c.name,
            )
        )
        limit = nodepool.limits.get("nodes")
        pools.append(
            StaticPool(
                nodepool=nodepool,
                running=running,
                deleting=len(claims) - len(running),
                node_limit=parse_quantity(str(limit)) // _MILLI if limit is not None else None,
            )
        )
    return pools


def _ready(snapshot: Snapshot, name: str) -> bool:
    entry = snapshot.nodepools[name]
    ready = next((c for c in entry.conditions if c.get("type") == CONDITION_READY), None)
    return ready is None or ready.get("status") != STATUS_FALSE


def static_plan(
    snapshot: Snapshot,
    instance_types: Callable[[NodePool], Sequence[InstanceType]],
    *,
    region: str = "",
) -> list[tuple[NodeClaimPlan, PoolTemplate]]:
    """The NodeClaims to create for the static NodePools of ``snapshot`` (``Ready`` ones).

    ``instance_types`` is the NodePool's instance types (it may raise the cloud provider's
    error; the caller handles it). A NodePool with no instance type its requirements allow
    gets none.
    """
    planned: list[tuple[NodeClaimPlan, PoolTemplate]] = []
    daemons = DaemonOverhead.from_daemonsets(snapshot.daemonsets.values())
    for pool in static_pools(snapshot):
        count = pool.to_create
        if count == 0 or not _ready(snapshot, pool.nodepool.name):
            continue
        template = pool_template(pool.nodepool, instance_types(pool.nodepool))
        options = sorted(
            enumerate_options([template], daemons, region),
            key=lambda o: (o.price, o.instance_type.name, o.offering.zone),
        )
        if not options:
            continue
        names = tuple(dict.fromkeys(o.instance_type.name for o in options))[:MAX_INSTANCE_TYPES]
        cheapest = options[0]
        for index in range(count):
            claim = NodeClaimPlan(
                name=f"{pool.nodepool.name}-static-{len(pool.running) + pool.deleting + index}",
                node_pool=pool.nodepool.name,
                instance_types=names,
                instance_type=cheapest.instance_type.name,
                capacity_type=cheapest.offering.capacity_type,
                zone=cheapest.offering.zone,
                price_per_hour=cheapest.price,
                requests={},
                pods=(),
            )
            planned.append((claim, template))
    return planned


def _priority(claim: NodeClaim) -> int:
    try:
        return int(claim.metadata.annotations.get(ANNOTATION_DEPROVISIONING_PRIORITY, "0"))
    except ValueError:
        return 0


def scale_down_candidates(
    pool: StaticPool,
    pods_on: Mapping[str, Sequence[Pod]],
    *,
    is_daemon: Callable[[Pod], bool],
    do_not_disrupt: Callable[[Pod], bool],
) -> list[NodeClaim]:
    """The running NodeClaims of ``pool`` to delete, ``pool.to_delete`` of them.

    ``pods_on`` holds the pods of each NodeClaim (by NodeClaim name).
    """
    count = pool.to_delete
    if count == 0:
        return []
    unlaunched = sorted(
        (c for c in pool.running if not c.provider_id), key=lambda c: (-_priority(c), c.name)
    )
    chosen = unlaunched[:count]
    launched = [c for c in pool.running if c.provider_id]

    def key(claim: NodeClaim) -> tuple[int, int, int, int, str]:
        pods = [p for p in pods_on.get(claim.name, ()) if not is_daemon(p)]
        protected = any(do_not_disrupt(p) for p in pods_on.get(claim.name, ()))
        return (0 if not pods else 1, int(protected), -_priority(claim), len(pods), claim.name)

    chosen += sorted(launched, key=key)[: count - len(chosen)]
    return chosen
