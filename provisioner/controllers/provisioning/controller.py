"""The provisioning reconciler (Karpenter's ``provisioner`` singleton and its pod trigger).

1. Pod events call :meth:`ProvisioningController.trigger` (``provisioner.trigger.pod``): a
   provisionable pod opens or extends the batch (:mod:`batcher`).
2. The driver runs :meth:`ProvisioningController.reconcile` (singleton ``Request()``) when the
   returned requeue says so; nothing happens until the cache is synced and the batch closed.
3. The step takes **all** provisionable pods: it builds a ``ClusterView`` from the cache, where
   nominated pods count as placed on their NodeClaim and in-flight NodeClaims count as capacity,
   plans, and creates one NodeClaim per planned node (intent persisted before any launch).
4. Pods get ``Nominated`` events and are remembered for the nomination window, so the next
   batch never buys twice for them; pods that cannot be helped get ``FailedScheduling``.
5. While provisionable pods remain un-nominated, it runs again every 10 s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from cloudprovider.errors import CloudProviderError
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.conditions import CONDITION_READY, STATUS_FALSE
from provisioner.apis.core import Node, NodeSpec, NodeStatus, ObjectMeta, Pod, Taint, is_terminal
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION, NodePool, nodepool_hash
from provisioner.controllers.events import failed_scheduling, nominated
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.batcher import Batcher
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.offerings import (
    DaemonOverhead,
    PoolTemplate,
    pool_template,
)
from provisioner.controllers.provisioning.plan import NodeClaimPlan, Plan
from provisioner.controllers.provisioning.planner import PlannerConfig, plan
from provisioner.controllers.provisioning.podfacts import PodError, pod_facts
from provisioner.kube.errors import KubeApiError
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.podgroups import build_context, detect_group, karpenter_ignore_reason
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirement, Requirements
from provisioner.scheduling.resources import format_resource_list, subtract
from provisioner.state.cluster import NOMINATION_WINDOW, Snapshot

__all__ = [
    "NOT_SYNCED_REQUEUE",
    "POD_REQUEUE",
    "ProvisioningController",
    "build_view",
    "is_provisionable",
    "nodeclaim_body",
    "ready_nodepools",
]

NAME: Final = "provisioner"
POD_REQUEUE: Final = timedelta(seconds=10)
"""Karpenter's ``provisioner.trigger.pod`` requeue for pods still provisionable."""
NOT_SYNCED_REQUEUE: Final = timedelta(seconds=1)
SHOWN_NAMES: Final = 5
SYNTHETIC_PREFIX: Final = "nodeclaim/"
MIN_VALUES_RELAXED: Final = "false"


def is_provisionable(pod: Pod) -> bool:
    """Karpenter's ``IsProvisionable`` (plus scheduling gates): a pod the provisioner may help."""
    return (
        not is_terminal(pod)
        and pod.metadata.deletion_timestamp is None
        and karpenter_ignore_reason(pod) is None
    )


def _names(items: Sequence[str]) -> str:
    """Karpenter's list rendering: ``a, b, c, d, e and N other(s)``."""
    shown = ", ".join(items[:SHOWN_NAMES])
    rest = len(items) - SHOWN_NAMES
    return f"{shown} and {rest} other(s)" if rest > 0 else shown


def ready_nodepools(snapshot: Snapshot) -> list[NodePool]:
    """NodePools the provisioner may use: valid, not deleting, not static, not ``Ready=False``."""
    pools = []
    for entry in snapshot.nodepools.values():
        if entry.nodepool is None or entry.deleting or entry.nodepool.is_static:
            continue
        ready = next((c for c in entry.conditions if c.get("type") == CONDITION_READY), None)
        if ready is not None and ready.get("status") == STATUS_FALSE:
            continue
        pools.append(entry.nodepool)
    return sorted(pools, key=lambda p: (-p.weight, p.name))


def _node_class_ref(nodepool: NodePool) -> NodeClassRef:
    ref = nodepool.node_class_ref
    return NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group)


def _nodeclass_label(nodepool: NodePool) -> str:
    ref = nodepool.node_class_ref
    if ref.group == wk.AWS_API_GROUP and ref.kind == "EC2NodeClass":
        return wk.LABEL_EC2NODECLASS
    return f"{ref.group}/{ref.kind.lower()}"


# --- the view --------------------------------------------------------------------------------


def _resources(values: Mapping[str, object] | None) -> dict[str, int]:
    return {name: parse_quantity(str(value)) for name, value in (values or {}).items()}


def _min_resources(lists: Iterable[Mapping[str, int]]) -> dict[str, int]:
    result: dict[str, int] | None = None
    for resources in lists:
        if result is None:
            result = dict(resources)
        else:
            result = {k: min(v, resources.get(k, 0)) for k, v in result.items()}
    return result or {}


def _claim_types(claim: NodeClaim, pool: PoolTemplate | None) -> list[InstanceType]:
    if pool is None:
        return []
    allowed = Requirements.from_terms(
        [r.model_dump(by_alias=True, exclude_none=True) for r in claim.spec.requirements]
    ).for_key(wk.LABEL_INSTANCE_TYPE)
    return [t for t in pool.instance_types if allowed.has(t.name)]


def _in_flight_node(
    claim: NodeClaim, pool: PoolTemplate | None, daemons: DaemonOverhead
) -> Node | None:
    """An in-flight NodeClaim as the node it will become (conservatively its smallest type)."""
    requirements = Requirements.from_terms(
        [r.model_dump(by_alias=True, exclude_none=True) for r in claim.spec.requirements]
    )
    labels = {**requirements.labels(), **claim.metadata.labels}
    status = claim.status
    taints = tuple(
        Taint(key=t.key, value=t.value or "", effect=t.effect) for t in claim.spec.taints
    )
    if status is not None and status.allocatable:
        allocatable = _resources(status.allocatable)
        capacity = _resources(status.capacity) or allocatable
    else:
        types = _claim_types(claim, pool)
        if not types:
            return None
        allocatable = _min_resources(t.allocatable for t in types)
        capacity = _min_resources(t.capacity for t in types)
    overhead = daemons.requests_for(labels, [])
    allocatable = {k: max(v, 0) for k, v in subtract(allocatable, overhead).items()}
    return Node(
        metadata=ObjectMeta(name=f"{SYNTHETIC_PREFIX}{claim.name}", labels=labels),
        spec=NodeSpec(taints=taints),
        status=NodeStatus(
            allocatable={k: f"{v}m" for k, v in allocatable.items()},
            capacity={k: f"{v}m" for k, v in capacity.items()},
        ),
    )


def _uninitialized_view(node: Node, claim: NodeClaim | None) -> Node:
    """A managed node not yet initialized, as it will be once initialized.

    Its startup and ephemeral taints are left out, and its allocatable is the NodeClaim's
    where the node does not report a resource yet (a GPU device plugin registers
    ``nvidia.com/gpu`` only after start-up), as Karpenter does until initialization.
    """
    if node.metadata.labels.get(wk.LABEL_INITIALIZED) == wk.TRUE or claim is None:
        return node
    startup = {(t.key, t.effect) for t in claim.spec.startup_taints}
    kept = tuple(
        t
        for t in node.spec.taints
        if (t.key, t.effect) not in startup
        and t.key not in wk.KNOWN_EPHEMERAL_TAINT_KEYS
        and wk.label_domain(t.key) != wk.READINESS_TAINT_DOMAIN
    )
    claimed = claim.status.allocatable if claim.status is not None else None
    missing = {
        name: value
        for name, value in (claimed or {}).items()
        if name not in node.status.allocatable
        or _resources({name: node.status.allocatable[name]})[name] == 0
    }
    if len(kept) == len(node.spec.taints) and not missing:
        return node
    update: dict[str, object] = {"spec": node.spec.model_copy(update={"taints": kept})}
    if missing:
        allocatable = {**node.status.allocatable, **missing}
        update["status"] = node.status.model_copy(update={"allocatable": allocatable})
    return node.model_copy(update=update)


def build_view(
    snapshot: Snapshot, pools: Sequence[PoolTemplate], *, region: str = ""
) -> tuple[ClusterView, dict[str, str]]:
    """The planner's view of the cache.

    Nominated pods appear bound to their NodeClaim (its Node when registered, else a stand-in
    node for the in-flight claim), so their capacity is spent; in-flight NodeClaims appear as
    nodes with their smallest instance type's capacity; managed nodes not yet initialized
    appear without their startup and ephemeral taints.

    Returns:
        The view and a map from view node names to NodeClaim names.
    """
    by_pool = {p.name: p for p in pools}
    daemons = DaemonOverhead.from_daemonsets(snapshot.daemonsets.values())
    claim_of_node: dict[str, str] = {}
    claims_by_provider = {
        c.provider_id: c for c in snapshot.node_claims.values() if c.provider_id is not None
    }
    nodes: list[Node] = []
    registered_claims: dict[str, str] = {}
    for node in snapshot.nodes.values():
        claim = claims_by_provider.get(node.spec.provider_id) if node.spec.provider_id else None
        if claim is not None:
            claim_of_node[node.metadata.name] = claim.name
            registered_claims[claim.name] = node.metadata.name
        nodes.append(_uninitialized_view(node, claim))
    for claim in snapshot.node_claims.values():
        if claim.metadata.deletion_timestamp is not None or claim.name in registered_claims:
            continue
        stand_in = _in_flight_node(claim, by_pool.get(claim.nodepool_name or ""), daemons)
        if stand_in is not None:
            nodes.append(stand_in)
            claim_of_node[stand_in.metadata.name] = claim.name
            registered_claims[claim.name] = stand_in.metadata.name
    pods: list[Pod] = []
    for key, pod in snapshot.pods.items():
        nomination = snapshot.nominations.get(key)
        target = registered_claims.get(nomination.node_claim) if nomination else None
        if target is not None and not pod.spec.node_name:
            spec = pod.spec.model_copy(update={"node_name": target})
            pods.append(pod.model_copy(update={"spec": spec}))
        else:
            pods.append(pod)
    groups = dataclasses.replace(
        build_context(snapshot.group_objects),
        pods=tuple(pods),
        priority_classes=dict(snapshot.priority_classes),
    )
    view = ClusterView(
        pods=tuple(pods),
        nodes=tuple(nodes),
        node_claims=(),
        pools=tuple(pools),
        daemonsets=tuple(snapshot.daemonsets.values()),
        claims=dict(snapshot.pvcs),
        volumes=dict(snapshot.pvs),
        storage_classes=dict(snapshot.storage_classes),
        groups=groups,
        region=region,
    )
    return view, claim_of_node


# --- the NodeClaim ---------------------------------------------------------------------------


def _pins_zone(pods: Sequence[Pod]) -> bool:
    """Whether the plan's zone is a constraint, not a price choice (gang, topology, volumes)."""
    cache: dict[str, Any] = {}
    for pod in pods:
        if detect_group(pod) is not None:
            return True
        try:
            facts = pod_facts(pod, cache=cache)
        except PodError:
            return True
        keys = [t.topology_key for t in facts.spreads]
        keys += [t.topology_key for t in (*facts.affinities, *facts.anti_affinities)]
        if facts.claims or wk.LABEL_ZONE in keys:
            return True
        if any(wk.LABEL_ZONE in alternative for alternative in facts.signature.alternatives):
            return True
    return False


def _allows(pods: Sequence[Pod], key: str, value: str) -> bool:
    cache: dict[str, Any] = {}
    for pod in pods:
        try:
            alternatives = pod_facts(pod, cache=cache).signature.alternatives
        except PodError:
            return False
        if not any(a.for_key(key).has(value) for a in alternatives):
            return False
    return True


def _capacity_types(claim: NodeClaimPlan, pool: PoolTemplate, pods: Sequence[Pod]) -> list[str]:
    """The plan's capacity type, plus on-demand as spot's fallback when everything allows it."""
    types = [claim.capacity_type]
    if (
        claim.capacity_type == wk.CAPACITY_TYPE_SPOT
        and pool.requirements.for_key(wk.LABEL_CAPACITY_TYPE).has(wk.CAPACITY_TYPE_ON_DEMAND)
        and _allows(pods, wk.LABEL_CAPACITY_TYPE, wk.CAPACITY_TYPE_ON_DEMAND)
    ):
        types.append(wk.CAPACITY_TYPE_ON_DEMAND)
    return types


def _requirements(
    claim: NodeClaimPlan, nodepool: NodePool, pool: PoolTemplate, pods: Sequence[Pod]
) -> list[dict[str, Any]]:
    replaced = [wk.LABEL_INSTANCE_TYPE, wk.LABEL_CAPACITY_TYPE]
    pin_zone = bool(claim.zone) and _pins_zone(pods)
    if pin_zone:
        replaced.append(wk.LABEL_ZONE)
    nodeclass = Requirement.from_operator(
        _nodeclass_label(nodepool), "In", [nodepool.node_class_ref.name]
    )
    base = pool.requirements.without(*replaced).add(nodeclass)
    terms: list[dict[str, Any]] = [dict(t) for t in base.to_dicts()]
    type_min = pool.requirements.for_key(wk.LABEL_INSTANCE_TYPE).min_values
    type_term: dict[str, Any] = {
        "key": wk.LABEL_INSTANCE_TYPE,
        "operator": "In",
        "values": list(claim.instance_types),
    }
    if type_min is not None:
        type_term["minValues"] = type_min
    terms.append(type_term)
    terms.append(
        {
            "key": wk.LABEL_CAPACITY_TYPE,
            "operator": "In",
            "values": _capacity_types(claim, pool, pods),
        }
    )
    if pin_zone:
        terms.append({"key": wk.LABEL_ZONE, "operator": "In", "values": [claim.zone]})
    return sorted(terms, key=lambda t: str(t["key"]))


def nodeclaim_body(
    claim: NodeClaimPlan, nodepool: NodePool, pool: PoolTemplate, pods: Sequence[Pod]
) -> JsonObject:
    """The NodeClaim Karpenter would create for ``claim`` (validated before it is returned).

    Raises:
        ApiValidationError: the body does not validate as a NodeClaim.
    """
    template = nodepool.spec.template.spec
    labels = {
        **nodepool.template_labels,
        wk.LABEL_NODEPOOL: nodepool.name,
        _nodeclass_label(nodepool): nodepool.node_class_ref.name,
    }
    spec: dict[str, Any] = {
        "requirements": _requirements(claim, nodepool, pool, pods),
        "resources": {"requests": format_resource_list(claim.requests)},
        "nodeClassRef": to_wire(template.node_class_ref),
        "expireAfter": template.expire_after,
    }
    if template.taints:
        spec["taints"] = [to_wire(t) for t in template.taints]
    if template.startup_taints:
        spec["startupTaints"] = [to_wire(t) for t in template.startup_taints]
    if template.termination_grace_period is not None:
        spec["terminationGracePeriod"] = template.termination_grace_period
    body: JsonObject = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "generateName": f"{nodepool.name}-",
            "labels": labels,
            "annotations": {
                wk.ANNOTATION_NODEPOOL_HASH: nodepool_hash(nodepool),
                wk.ANNOTATION_NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION,
            },
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": nodepool.name,
                    "uid": nodepool.metadata.uid,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": [wk.FINALIZER_TERMINATION],
        },
        "spec": spec,
    }
    parse_object(NodeClaim, body, kind="NodeClaim")
    return body


# --- the reconciler --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    pools: dict[str, tuple[NodePool, PoolTemplate]]
    snapshot: Snapshot


class ProvisioningController(ControllerBase):
    """The ``provisioner`` singleton: batch, plan, create NodeClaims, nominate.

    Args:
        ports: what the controller acts through (cache, API, cloud, clock, logs, metrics,
            events).
        batcher: the batch window.
        planner: planner settings.
        region: the region label value for templates.
        nomination_window: how long a nomination holds.
    """

    name: Final = NAME

    def __init__(
        self,
        *,
        ports: Ports,
        batcher: Batcher | None = None,
        planner: PlannerConfig | None = None,
        region: str = "",
        nomination_window: timedelta = NOMINATION_WINDOW,
    ) -> None:
        super().__init__(ports, NAME)
        self.batcher = batcher or Batcher()
        self._planner = planner or PlannerConfig()
        self._region = region
        self._window = nomination_window

    # -- triggers -----------------------------------------------------------------------------

    def trigger(self, pod: Pod) -> bool:
        """``provisioner.trigger.pod``: add a provisionable, un-nominated pod to the batch.

        Returns:
            Whether the batch changed (the driver should re-ask :meth:`next_run`).
        """
        now = self._clock.now()
        if not is_provisionable(pod) or pod.key in self._state.nominations(now):
            return False
        return self.batcher.trigger(pod.metadata.uid or pod.key, now)

    def next_run(self) -> timedelta | None:
        """How long until the provisioner wants to run (None: no batch open)."""
        return self.batcher.wait(self._clock.now())

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, request: Request) -> Result:
        """Run one provisioning step when the batch has closed."""
        del request
        if not self._state.synced:
            return Result.after(NOT_SYNCED_REQUEUE)
        now = self._clock.now()
        if not self.batcher.is_open:
            waiting = self._waiting_pods(now)
            for pod in waiting:
                self.batcher.trigger(pod.metadata.uid or pod.key, now)
            if not waiting:
                return Result.done()
        if not self.batcher.ready(now):
            return Result.after(self.batcher.wait(now) or timedelta(0))
        self.batcher.close()
        remaining = self.schedule(now)
        return Result.after(POD_REQUEUE) if remaining else Result.done()

    def _waiting_pods(self, now: datetime) -> list[Pod]:
        nominations = self._state.nominations(now)
        return [p for p in self._state.pods() if is_provisionable(p) and p.key not in nominations]

    def _pools(self, snapshot: Snapshot) -> dict[str, tuple[NodePool, PoolTemplate]]:
        pools: dict[str, tuple[NodePool, PoolTemplate]] = {}
        for nodepool in ready_nodepools(snapshot):
            ref = NodePoolRef(name=nodepool.name, node_class=_node_class_ref(nodepool))
            try:
                types = self._cloud.get_instance_types(ref)
            except CloudProviderError as error:
                self._log.error(
                    "ignoring nodepool, not ready",
                    NodePool={"name": nodepool.name},
                    error=str(error),
                )
                continue
            if not types:
                self._log.info(
                    "skipping, no resolved instance types found", NodePool={"name": nodepool.name}
                )
                continue
            pools[nodepool.name] = (nodepool, pool_template(nodepool, types))
        if not pools:
            self._log.info("no dynamic nodepools found")
        return pools

    def schedule(self, now: datetime) -> int:
        """Plan for every provisionable pod and create the NodeClaims.

        Returns:
            How many provisionable pods are still without capacity or nomination.
        """
        snapshot = self._state.snapshot(now)
        step = _Step(self._pools(snapshot), snapshot)
        templates = [template for _, template in step.pools.values()]
        view, claim_of_node = build_view(snapshot, templates, region=self._region)
        started = self._clock.monotonic()
        try:
            result = plan(view, self._planner)
        except PodError as error:
            self._log.error("could not schedule pod", error=str(error))
            return 1
        duration = self._clock.monotonic() - started
        self._metrics.scheduling_duration.labels(controller=NAME).observe(result.solver.seconds)
        self._metrics.plan_cost.set(result.cost_per_hour)
        self._metrics.plan_lower_bound.set(result.lower_bound_per_hour)
        self._metrics.ignored_pods.set(len(result.ignored))
        self._metrics.unschedulable_pods.labels(controller=NAME).set(len(result.unschedulable))
        if result.node_claims:
            placed = [pod for claim in result.node_claims for pod in claim.pods]
            self._log.info(
                "found provisionable pod(s)",
                Pods=_names(placed),
                duration=f"{max(duration, result.solver.seconds):.3f}s",
            )
            self._log.info(
                "computed new nodeclaim(s) to fit pod(s)",
                nodeclaims=len(result.node_claims),
                pods=len(placed),
            )
        self._nominate_existing(result, claim_of_node, snapshot, now)
        failed = self._create_all(result, step, now)
        for unschedulable in result.unschedulable:
            pod = snapshot.pods.get(unschedulable.pod)
            if pod is not None:
                self._events.publish(failed_scheduling(pod, unschedulable.reason))
        return len(result.unschedulable) + failed

    def _nominate_existing(
        self, result: Plan, claim_of_node: Mapping[str, str], snapshot: Snapshot, now: datetime
    ) -> None:
        for placement in result.existing_nodes:
            claim = claim_of_node.get(placement.name)
            if claim is None:
                continue
            node = "" if placement.name.startswith(SYNTHETIC_PREFIX) else placement.name
            if node == "":
                pods = [k for k in placement.pods if snapshot.pods.get(k) is not None]
                self._log.info("computed unready node(s) will fit pod(s)", nodes=1, pods=len(pods))
            for key in placement.pods:
                pod = snapshot.pods.get(key)
                if pod is not None:
                    self._nominate(pod, claim, node, now)

    def _nominate(self, pod: Pod, claim: str, node: str, now: datetime) -> None:
        self._state.nominate(pod, claim, until=now + self._window)
        self._events.publish(nominated(pod, claim, node))

    def _create_all(self, result: Plan, step: _Step, now: datetime) -> int:
        failed = 0
        for claim in result.node_claims:
            if not self._create(claim, step, now):
                failed += len(claim.pods)
        return failed

    def _create(self, claim: NodeClaimPlan, step: _Step, now: datetime) -> bool:
        nodepool, template = step.pools[claim.node_pool]
        pods = [p for p in (step.snapshot.pods.get(k) for k in claim.pods) if p is not None]
        exceeded = self._limit_exceeded(nodepool)
        if exceeded is not None:
            self._log.error(
                "creating nodeclaim, resource usage exceeds limit",
                NodePool={"name": nodepool.name},
                resource=exceeded,
            )
            return False
        body = nodeclaim_body(claim, nodepool, template, pods)
        try:
            created = self._kube.create(NODE_CLAIMS, body)
        except KubeApiError as error:
            self._log.error(
                "creating nodeclaim", NodePool={"name": nodepool.name}, error=str(error)
            )
            return False
        name = str(created["metadata"]["name"])
        self._state.apply_object(created)
        self._log.info(
            "created nodeclaim",
            NodePool={"name": nodepool.name},
            NodeClaim={"name": name},
            requests=format_resource_list(claim.requests),
            **{"instance-types": _names(list(claim.instance_types))},
        )
        self._metrics.nodeclaims_created.labels(
            reason="provisioned", nodepool=nodepool.name, min_values_relaxed=MIN_VALUES_RELAXED
        ).inc()
        for pod in pods:
            self._nominate(pod, name, "", now)
        return True

    def _limit_exceeded(self, nodepool: NodePool) -> str | None:
        """Karpenter's strict create-time check: a limit the pool's usage already exceeds."""
        if nodepool.spec.limits is None:
            return None
        usage: dict[str, int] = {}
        for claim in self._state.node_claims():
            if claim.nodepool_name != nodepool.name or claim.metadata.deletion_timestamp:
                continue
            usage["nodes"] = usage.get("nodes", 0) + 1000
            status = claim.status
            for key, value in _resources(status.capacity if status else None).items():
                usage[key] = usage.get(key, 0) + value
        for key, limit in nodepool.limits.items():
            if usage.get(key, 0) > parse_quantity(str(limit)):
                return key
        return None
