"""The provisioning reconciler (Karpenter's ``provisioner`` singleton and its pod trigger).

1. Pod events call :meth:`ProvisioningController.trigger` (``provisioner.trigger.pod``): a
   provisionable pod opens or extends the batch (:mod:`batcher`).
2. The driver runs :meth:`ProvisioningController.reconcile` (singleton ``Request()``) when the
   returned requeue says so; nothing happens until the cache is synced and the batch closed.
3. The step takes **all** provisionable pods: it builds a ``ClusterView`` from the cache, where
   nominated pods count as placed on their NodeClaim and in-flight NodeClaims count as capacity,
   plans, and creates one NodeClaim per planned node (intent persisted before any launch);
   the NodeClaims of one gang are created as a unit (all, or none left behind).
4. Pods get ``Nominated`` events and are remembered for the nomination window, so the next
   batch never buys twice for them; pods that cannot be helped get ``FailedScheduling``.
5. While provisionable pods remain un-nominated, it runs again every 10 s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from prometheus_client import Gauge
from structlog.typing import FilteringBoundLogger

from cloudprovider.errors import CloudProviderError, NodeClassNotReadyError
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import NodeClassRef, NodePoolRef
from provisioner.apis import labels as wk
from provisioner.apis.base import parse_object, to_wire
from provisioner.apis.conditions import CONDITION_READY, STATUS_FALSE, not_ready_cause
from provisioner.apis.core import Pod, is_terminal
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION, NodePool, nodepool_hash
from provisioner.controllers.events import failed_scheduling, nominated
from provisioner.controllers.ports import ControllerBase, Ports
from provisioner.controllers.provisioning.batcher import Batcher
from provisioner.controllers.provisioning.buffers import BUFFER_KIND, buffer_pods, resolve_all
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.flavors import (
    choose_flavors,
    openmodels,
    with_flavor_rejections,
)
from provisioner.controllers.provisioning.offerings import (
    OptionsMemo,
    PoolTemplate,
    pool_template,
)
from provisioner.controllers.provisioning.overlays import apply_overlays
from provisioner.controllers.provisioning.plan import NodeClaimPlan, Plan
from provisioner.controllers.provisioning.planner import PlannerConfig, plan
from provisioner.controllers.provisioning.podfacts import PodError, pod_facts
from provisioner.controllers.provisioning.reasons import UnavailablePool
from provisioner.controllers.provisioning.requested import (
    CLAIM_ANNOTATION,
    CLAIM_PODS_ANNOTATION,
    requested,
)
from provisioner.controllers.provisioning.viewpods import (
    ViewPods,
    derive_view_pods,
    view_pods,
    with_extras,
)
from provisioner.controllers.statemetrics import OfferingGauges
from provisioner.kube.errors import KubeApiError
from provisioner.kube.protocol import JsonObject
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.podgroups import build_context, detect_group, karpenter_ignore_reason, provreq
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirement
from provisioner.scheduling.resources import format_resource_list
from provisioner.state.cluster import NOMINATION_WINDOW, Nomination, Snapshot

__all__ = [
    "BUFFER_REQUEUE",
    "NOT_SYNCED_REQUEUE",
    "POD_REQUEUE",
    "BatchObserver",
    "InstanceTypeLookup",
    "PoolSet",
    "ProvisioningController",
    "ResolvedPools",
    "bind_buffer_pods",
    "build_view",
    "decide",
    "is_provisionable",
    "nodeclaim_body",
    "ready_nodepools",
    "resolve_pools",
    "unavailable_pools",
    "with_buffer_pods",
]

NAME: Final = "provisioner"
POD_REQUEUE: Final = timedelta(seconds=10)
"""Karpenter's ``provisioner.trigger.pod`` requeue for pods still provisionable."""
NOT_SYNCED_REQUEUE: Final = timedelta(seconds=1)
BUFFER_REQUEUE: Final = timedelta(seconds=30)
"""How often CapacityBuffers are looked at again (Karpenter re-evaluates them every 30 s)."""
_BUFFER_BATCH: Final = "capacitybuffers"
SHOWN_NAMES: Final = 5


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


def without_preferences(pod: Pod) -> Pod:
    """``pod`` without preferred (anti-)affinities and ``ScheduleAnyway`` spreads.

    ``PREFERENCE_POLICY=Ignore``: Karpenter then neither tries nor relaxes preferences.
    """
    spec = pod.spec
    spreads = tuple(
        c for c in spec.topology_spread_constraints if c.when_unsatisfiable != "ScheduleAnyway"
    )
    affinity = spec.affinity
    if affinity is not None:
        update: dict[str, Any] = {}
        for name in ("node_affinity", "pod_affinity", "pod_anti_affinity"):
            part = getattr(affinity, name)
            if part is not None and part.preferred_during_scheduling_ignored_during_execution:
                update[name] = part.model_copy(
                    update={"preferred_during_scheduling_ignored_during_execution": ()}
                )
        affinity = affinity.model_copy(update=update) if update else affinity
    if affinity is spec.affinity and len(spreads) == len(spec.topology_spread_constraints):
        return pod
    new_spec = spec.model_copy(
        update={"affinity": affinity, "topology_spread_constraints": spreads}
    )
    return pod.model_copy(update={"spec": new_spec})


def build_view(
    snapshot: Snapshot,
    pools: Sequence[PoolTemplate],
    *,
    region: str = "",
    ignore_preferences: bool = False,
    unavailable: Sequence[UnavailablePool] = (),
    extra_pods: Sequence[Pod] = (),
    options_memo: OptionsMemo | None = None,
    derived_from: Snapshot | None = None,
    touched: Collection[str] | None = None,
) -> ClusterView:
    """The planner's view of a cache snapshot.

    The view's nodes are the snapshot's state nodes (registered Nodes and in-flight
    NodeClaims); a nominated pod appears bound to the state node of its NodeClaim, so its
    capacity is spent there. ProvisioningRequests add their virtual pods (:mod:`requested`):
    pending ones to plan, placeholders holding booked room; ``extra_pods`` are added pending.
    With ``ignore_preferences`` every pod loses its preferences; ``options_memo`` keeps the
    enumerated offerings for later views over the same pools and DaemonSets.

    ``derived_from`` (with ``options_memo``) names the snapshot ``snapshot`` was made from by
    replacing or leaving out some pods, keeping the others in order (a rescheduling
    simulation's): the view's pods are then derived from that snapshot's, kept in the memo,
    looking only at the pods that differ (the same view, built in time proportional to them);
    ``touched``, when known, holds every key whose pod was replaced or left out.
    """
    context = build_context(snapshot.group_objects)
    asked = requested(snapshot, context)
    viewed = _view_pods(snapshot, ignore_preferences, options_memo, (derived_from, touched))
    extras = tuple(
        without_preferences(pod) if ignore_preferences else pod
        for pod in (*asked.placeholders, *asked.pending, *extra_pods)
    )
    pods = (*viewed.pods, *extras) if extras else viewed.pods
    index = with_extras(viewed.index, pods, extras)
    detector = None
    if options_memo is not None:
        detector = options_memo.detect
        for memo in (detector, options_memo.facts, options_memo.requests, options_memo.pending):
            memo.bound(len(pods))
    groups = dataclasses.replace(
        context,
        pods=tuple(pods),
        priority_classes=dict(snapshot.priority_classes),
        detector=detector,
    )
    return ClusterView(
        pods=pods,
        pod_index=index,
        nodes=tuple(snapshot.state_nodes.values()),
        pools=tuple(pools),
        daemonsets=tuple(snapshot.daemonsets.values()),
        claims=dict(snapshot.pvcs),
        volumes=dict(snapshot.pvs),
        storage_classes=dict(snapshot.storage_classes),
        groups=groups,
        region=region,
        unavailable=tuple(unavailable),
        options_memo=options_memo,
    )


def _view_pods(
    snapshot: Snapshot,
    ignore_preferences: bool,
    memo: OptionsMemo | None,
    derivation: tuple[Snapshot | None, Collection[str] | None],
) -> ViewPods:
    """The snapshot's pods as :func:`build_view` shows them (derived when it can be)."""
    derived_from, touched = derivation
    target = _nomination_targets(snapshot)
    if ignore_preferences:
        return view_pods(snapshot.pods, target, without_preferences)
    if memo is not None and derived_from is not None:
        base, places = memo.base_pods(
            derived_from,
            lambda: view_pods(derived_from.pods, _nomination_targets(derived_from)),
        )
        derived = derive_view_pods(base, places, snapshot.pods, target, touched)
        if derived is not None:
            return derived
    return view_pods(snapshot.pods, target)


def _nomination_targets(snapshot: Snapshot) -> dict[str, str]:
    """The state node each nominated pod counts on, by pod key."""
    return {pod: state.key for state in snapshot.state_nodes.values() for pod in state.nominated}


InstanceTypeLookup = Callable[[NodePool], Sequence[InstanceType]]
"""The instance types of a NodePool (raises ``CloudProviderError`` when it has none now)."""

PoolSet = Mapping[str, tuple[NodePool, PoolTemplate]]
"""Ready NodePools with their planning templates, by name."""


class ResolvedPools(dict[str, tuple[NodePool, PoolTemplate]]):
    """The ready NodePools with their templates, by name (a :data:`PoolSet`).

    Attributes:
        unresolved: the ready-looking NodePools whose instance types could not be resolved,
            with why (``NodeClassReady=False: EC2NodeClass "x" not found``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.unresolved: dict[str, str] = {}


def resolve_pools(
    snapshot: Snapshot, instance_types: InstanceTypeLookup, log: FilteringBoundLogger
) -> ResolvedPools:
    """The ready NodePools with their instance types, NodeOverlays applied.

    A NodePool whose instance types cannot be resolved is left out (logged, and kept in
    ``unresolved`` with why).
    """
    overlays = list(snapshot.overlays.values())
    pools = ResolvedPools()
    for nodepool in ready_nodepools(snapshot):
        try:
            types = instance_types(nodepool)
        except CloudProviderError as error:
            log.error(  # noqa: TRY400 - Karpenter's message, no traceback
                "ignoring nodepool, not ready", NodePool={"name": nodepool.name}, error=str(error)
            )
            cause = str(error)
            if isinstance(error, NodeClassNotReadyError):
                cause = f"NodeClassReady=False: {cause}"
            pools.unresolved[nodepool.name] = cause
            continue
        if not types:
            log.info("skipping, no resolved instance types found", NodePool={"name": nodepool.name})
            pools.unresolved[nodepool.name] = "no resolved instance types found"
            continue
        adjusted = apply_overlays(types, overlays, pool=nodepool.name)
        pools[nodepool.name] = (nodepool, pool_template(nodepool, adjusted))
    if not pools:
        log.info("no dynamic nodepools found")
    return pools


def decide(
    snapshot: Snapshot,
    pools: PoolSet,
    *,
    planner: PlannerConfig,
    region: str = "",
    extra_pods: Sequence[Pod] = (),
    options_memo: OptionsMemo | None = None,
) -> Plan:
    """One provisioning batch's decision: what to launch and where pods go, nothing done yet.

    The provisioning controller acts on this; `jointer plan` prints it. Both call it on a
    cache snapshot (the controller's, or one loaded from manifests). llmaz model pods are
    planned on their first usable flavor (:mod:`flavors`). ``extra_pods`` are planned too (a
    check-capacity request's pods, with no pools). ``options_memo`` keeps the offerings (and
    what planning derives from them) for the next batch over the same NodePools; the plan is
    the same with or without it.

    Raises:
        PodError: for a pod or DaemonSet whose spec cannot be read.
    """
    view = build_view(
        with_buffer_pods(snapshot),
        [template for _, template in pools.values()],
        region=region,
        ignore_preferences=planner.ignore_preferences,
        unavailable=unavailable_pools(snapshot, pools),
        extra_pods=extra_pods,
        options_memo=options_memo,
    )
    choice = choose_flavors(view, openmodels(snapshot.group_objects))
    return with_flavor_rejections(plan(choice.view, planner), choice)


def with_buffer_pods(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with the virtual pods of every CapacityBuffer, pending.

    The planner places them with the real pods: into existing room first, else on new
    NodeClaims (the buffer's room is bought).
    """
    virtual = buffer_pods(resolve_all(snapshot.group_objects))
    if not virtual:
        return snapshot
    return dataclasses.replace(snapshot, pods={**snapshot.pods, **{p.key: p for p in virtual}})


def bind_buffer_pods(snapshot: Snapshot, planner: PlannerConfig) -> tuple[Snapshot, list[str]]:
    """``snapshot`` with the CapacityBuffers' virtual pods put into the room there is.

    Each virtual pod that fits the free capacity of a node (or an in-flight NodeClaim) is
    bound there (nominated, for a NodeClaim), first fit, before any pending real pod; the
    keys of those that fit nowhere are returned. Disruption sees the bound ones as pods that
    need room, so buffer room is never consolidated away.
    """
    virtual = buffer_pods(resolve_all(snapshot.group_objects))
    if not virtual:
        return snapshot, []
    placed = {
        k: p for k, p in snapshot.pods.items() if p.spec.node_name or k in snapshot.nominations
    }
    trial = dataclasses.replace(snapshot, pods={**placed, **{p.key: p for p in virtual}})
    result = plan(build_view(trial, []), dataclasses.replace(planner, policy="greedy"))
    pods = dict(snapshot.pods)
    nominations = dict(snapshot.nominations)
    unbound: list[str] = []
    target = {key: p.name for p in result.existing_nodes for key in p.pods}
    for pod in virtual:
        state = snapshot.state_nodes.get(target.get(pod.key, ""))
        if state is None:
            unbound.append(pod.key)
            continue
        if state.name:
            spec = pod.spec.model_copy(update={"node_name": state.name})
            pods[pod.key] = pod.model_copy(update={"spec": spec})
        elif state.claim is not None:
            pods[pod.key] = pod
            nominations[pod.key] = Nomination(
                pod=pod.key,
                pod_uid=pod.metadata.uid,
                node_claim=state.claim.name,
                until=datetime.max.replace(tzinfo=UTC),
            )
    bound = dataclasses.replace(snapshot, nominations=nominations)
    return bound.with_changes(pods=pods), unbound


def unavailable_pools(snapshot: Snapshot, pools: PoolSet) -> list[UnavailablePool]:
    """The readable NodePools of ``snapshot`` not in ``pools`` (static ones aside), with why.

    Why comes from the NodePool's status (``NodeClassReady=False: ...``), its deletion, or
    what resolving its instance types said (:class:`ResolvedPools`). A NodePool that does not
    validate is left out: its own condition and event name the field.
    """
    unresolved = pools.unresolved if isinstance(pools, ResolvedPools) else {}
    found: list[UnavailablePool] = []
    for name in sorted(snapshot.nodepools):
        entry = snapshot.nodepools[name]
        # an unreadable NodePool has its own condition and event; `jointer plan` refuses it
        if name in pools or entry.nodepool is None or entry.nodepool.is_static:
            continue
        if entry.deleting:
            cause = "NodePool is being deleted"
        else:
            cause = (
                not_ready_cause(entry.conditions)
                or unresolved.get(name)
                or "no resolved instance types found"
            )
        found.append(UnavailablePool(name, cause, pool_template(entry.nodepool, ())))
    return found


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
    # a reservation is zonal: a reserved NodeClaim is pinned to it and its zone
    pin_zone = bool(claim.zone) and (bool(claim.reservation_id) or _pins_zone(pods))
    if claim.reservation_id:
        replaced.append(wk.LABEL_CAPACITY_RESERVATION_ID)
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
    if claim.min_values_relaxed:  # BestEffort: each minValues lowered to what the launch keeps
        for term in terms:
            if "minValues" in term and term.get("values"):
                term["minValues"] = min(int(term["minValues"]), len(term["values"]))
    terms.append(
        {
            "key": wk.LABEL_CAPACITY_TYPE,
            "operator": "In",
            "values": _capacity_types(claim, pool, pods),
        }
    )
    if pin_zone:
        terms.append({"key": wk.LABEL_ZONE, "operator": "In", "values": [claim.zone]})
    if claim.reservation_id:
        terms.append(
            {
                "key": wk.LABEL_CAPACITY_RESERVATION_ID,
                "operator": "In",
                "values": [claim.reservation_id],
            }
        )
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
                **nodepool.spec.template.metadata.annotations,
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
    if claim.min_values_relaxed:
        body["metadata"]["annotations"][wk.ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED] = "true"
    parse_object(NodeClaim, body, kind="NodeClaim")
    return body


def _mark_request(body: dict[str, Any], virtual: Sequence[Pod]) -> None:
    """Annotate a NodeClaim planned for a ProvisioningRequest's pods with it and their count."""
    if not virtual:
        return
    pod = virtual[0]
    name = pod.metadata.labels.get(provreq.VIRTUAL_LABEL, "")
    annotations = body["metadata"]["annotations"]
    annotations[CLAIM_ANNOTATION] = f"{pod.metadata.namespace or 'default'}/{name}"
    annotations[CLAIM_PODS_ANNOTATION] = str(len(virtual))


# --- gangs -----------------------------------------------------------------------------------


def launch_units(claims: Sequence[NodeClaimPlan]) -> list[list[NodeClaimPlan]]:
    """The plan's NodeClaims grouped into launch units, in plan order.

    NodeClaims that carry members of one gang (directly or through a NodeClaim shared with
    another gang) form one unit; every other NodeClaim is a unit of its own.
    """
    parent = list(range(len(claims)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for index, claim in enumerate(claims):
        for gang in claim.gangs:
            other = first.setdefault(gang, index)
            parent[root(index)] = root(other)
    units: dict[int, list[NodeClaimPlan]] = {}
    for index, claim in enumerate(claims):
        units.setdefault(root(index), []).append(claim)
    return list(units.values())


def gang_unit_id(groups: Sequence[str], names: Sequence[str], now: datetime) -> str:
    """A label-safe id for one gang launch unit (distinct for every batch that plans it)."""
    text = "|".join([*groups, *names, now.isoformat()])
    return "g-" + hashlib.sha256(text.encode()).hexdigest()[:16]


# --- the reconciler --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    pools: PoolSet
    snapshot: Snapshot
    virtual: Mapping[str, Pod] = dataclasses.field(default_factory=dict)
    """ProvisioningRequests' pending virtual pods by key."""

    def pod(self, key: str) -> Pod | None:
        """A pod of the batch, real or virtual."""
        return self.snapshot.pods.get(key) or self.virtual.get(key)


BatchObserver = Callable[[Snapshot, PoolSet, Plan], None]
"""Sees each batch's decision (tests compare it with `jointer plan` on the same state)."""


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
        self._batches = 0
        self._offerings = OfferingGauges(ports.metrics)
        self._options_memo = OptionsMemo()
        self.observer: BatchObserver | None = None
        """Called with every batch's snapshot, pools and decision before it is acted on."""

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
            if not waiting and self._buffer_room_missing(now):
                self.batcher.trigger(_BUFFER_BATCH, now)
            elif not waiting:
                return self._idle()
        if not self.batcher.ready(now):
            return Result.after(self.batcher.wait(now) or timedelta(0))
        self.batcher.close()
        remaining = self.schedule(now)
        return Result.after(POD_REQUEUE) if remaining else self._idle()

    def _idle(self) -> Result:
        """Done, or back in 30 s while there are CapacityBuffers to keep room for."""
        if self._state.has_kind(BUFFER_KIND):
            return Result.after(BUFFER_REQUEUE)
        return Result.done()

    def _buffer_room_missing(self, now: datetime) -> bool:
        """Whether a CapacityBuffer's virtual pod fits no existing or in-flight capacity."""
        if not self._state.has_kind(BUFFER_KIND):
            return False
        _, unbound = bind_buffer_pods(self._state.snapshot(now), self._planner)
        return bool(unbound)

    def _waiting_pods(self, now: datetime) -> list[Pod]:
        nominations = self._state.nominations(now)
        waiting = [
            p for p in self._state.pods() if is_provisionable(p) and p.key not in nominations
        ]
        objects, _ = self._state.group_objects()
        if any(o.get("kind") == "ProvisioningRequest" for o in objects):
            waiting.extend(requested(self._state.snapshot(now)).pending)
        return waiting

    def _instance_types(self, nodepool: NodePool) -> Sequence[InstanceType]:
        ref = NodePoolRef(name=nodepool.name, node_class=_node_class_ref(nodepool))
        return self._cloud.get_instance_types(ref)

    def pools(self, snapshot: Snapshot) -> dict[str, tuple[NodePool, PoolTemplate]]:
        """The ready NodePools with their instance types from the cloud provider.

        The offering gauges are set from the instance types resolved.
        """
        resolved: list[Sequence[InstanceType]] = []

        def lookup(nodepool: NodePool) -> Sequence[InstanceType]:
            resolved.append(self._instance_types(nodepool))
            return resolved[-1]

        pools = resolve_pools(snapshot, lookup, self._log)
        self._offerings.observe(resolved)
        return pools

    def schedule(self, now: datetime) -> int:
        """Plan for every provisionable pod and create the NodeClaims.

        Returns:
            How many provisionable pods are still without capacity or nomination.
        """
        snapshot = self._state.snapshot(now)
        step = _Step(self.pools(snapshot), snapshot, requested(snapshot).pods)
        started = self._clock.monotonic()
        depth = self._queue_depth(snapshot)
        try:
            result = decide(
                snapshot,
                step.pools,
                planner=self._planner,
                region=self._region,
                options_memo=self._options_memo,
            )
        except PodError as error:
            self._log.error("could not schedule pod", error=str(error))
            return 1
        if self.observer is not None:
            self.observer(snapshot, step.pools, result)
        depth.set(len(result.unschedulable))
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
        self._nominate_existing(result, snapshot, now)
        self._book_existing(result, step)
        failed = self._create_all(result, step, now)
        real = 0
        for unschedulable in result.unschedulable:
            pod = snapshot.pods.get(unschedulable.pod)
            if pod is not None:  # a CapacityBuffer's virtual pod is not in the snapshot
                real += 1
                self._events.publish(failed_scheduling(pod, unschedulable.reason))
        return real + failed

    def _queue_depth(self, snapshot: Snapshot) -> Gauge:
        """Set ``karpenter_scheduler_queue_depth`` to the batch's pods under a new scheduling id.

        Karpenter drops the previous ids of the controller first; the gauge returned is set
        again to the pods left in the queue once the batch is decided.
        """
        self._batches += 1
        scheduling_id = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{NAME}/{self._batches}"))
        gauge = self._metrics.queue_depth
        for labels in list(gauge._metrics):  # noqa: SLF001 - DeletePartialMatch{controller}
            if labels[0] == NAME:
                gauge.remove(*labels)
        pending = [
            pod
            for key, pod in snapshot.pods.items()
            if not pod.spec.node_name and key not in snapshot.nominations and is_provisionable(pod)
        ]
        series = gauge.labels(controller=NAME, scheduling_id=scheduling_id)
        series.set(len(pending))
        return series

    def _book_existing(self, result: Plan, step: _Step) -> None:
        """Annotate the NodeClaims a ProvisioningRequest's pods were placed on (its booking).

        A NodeClaim already holding another active request's pods is left to that one.
        """
        if not step.virtual:
            return
        held = requested(step.snapshot).booked
        for placement in result.existing_nodes:
            state = step.snapshot.state_nodes.get(placement.name)
            virtual = [step.virtual[k] for k in placement.pods if k in step.virtual]
            if state is None or state.claim is None or not virtual:
                continue
            body: dict[str, Any] = {"metadata": {"annotations": {}}}
            _mark_request(body, virtual)
            key = body["metadata"]["annotations"][CLAIM_ANNOTATION]
            if held.get(state.claim_name, key) != key:
                continue
            try:
                patched = self._kube.merge_patch(NODE_CLAIMS, state.claim_name, body)
            except KubeApiError as error:
                self._log.error(
                    "booking nodeclaim", NodeClaim={"name": state.claim_name}, error=str(error)
                )
                continue
            self._state.apply_object(patched)

    def _nominate_existing(self, result: Plan, snapshot: Snapshot, now: datetime) -> None:
        for placement in result.existing_nodes:
            state = snapshot.state_nodes.get(placement.name)
            if state is None or state.claim is None:
                continue
            if not state.registered:
                pods = [k for k in placement.pods if snapshot.pods.get(k) is not None]
                self._log.info("computed unready node(s) will fit pod(s)", nodes=1, pods=len(pods))
            for key in placement.pods:
                pod = snapshot.pods.get(key)
                if pod is not None:
                    self._nominate(pod, state.claim.name, state.name, now)

    def _nominate(self, pod: Pod, claim: str, node: str, now: datetime) -> None:
        self._state.nominate(pod, claim, until=now + self._window)
        self._events.publish(nominated(pod, claim, node))

    def _create_all(self, result: Plan, step: _Step, now: datetime) -> int:
        failed = 0
        for unit in launch_units(result.node_claims):
            if len(unit) == 1 and not unit[0].gangs:
                created = self._create(unit[0], step)
                if created is None:
                    failed += len(unit[0].pods)
                else:
                    self._nominate_claim(unit[0], created, step, now)
                continue
            failed += self._create_gang(unit, step, now)
        return failed

    def _create_gang(self, unit: Sequence[NodeClaimPlan], step: _Step, now: datetime) -> int:
        """Create a gang's NodeClaims as one unit: all of them, or none left behind.

        Each carries the unit's id (``jointer.dev/gang``) and size; pods are nominated only
        once every NodeClaim exists, so a failure part way leaves them pending, whole.
        """
        groups = sorted({gang for claim in unit for gang in claim.gangs})
        unit_id = gang_unit_id(groups, [claim.name for claim in unit], now)
        marks = {
            "label": unit_id,
            wk.ANNOTATION_GANG_SIZE: str(len(unit)),
            wk.ANNOTATION_GANG_GROUPS: ",".join(groups),
        }
        created: list[tuple[NodeClaimPlan, str]] = []
        for claim in unit:
            name = self._create(claim, step, gang=marks)
            if name is None:
                self._log.error(
                    "deleting gang nodeclaims, not all could be created",
                    gang=unit_id,
                    groups=",".join(groups),
                    created=len(created),
                    size=len(unit),
                )
                for _, sibling in created:
                    self._delete_claim(sibling)
                return sum(len(c.pods) for c in unit)
            created.append((claim, name))
        for claim, name in created:
            self._nominate_claim(claim, name, step, now)
        return 0

    def _delete_claim(self, name: str) -> None:
        try:
            self._kube.delete(NODE_CLAIMS, name)
        except KubeApiError as error:
            self._log.error("deleting nodeclaim", NodeClaim={"name": name}, error=str(error))

    def _nominate_claim(self, claim: NodeClaimPlan, name: str, step: _Step, now: datetime) -> None:
        for key in claim.pods:
            pod = step.snapshot.pods.get(key)
            if pod is not None:
                self._nominate(pod, name, "", now)

    def _create(
        self, claim: NodeClaimPlan, step: _Step, *, gang: Mapping[str, str] | None = None
    ) -> str | None:
        """Create the NodeClaim for ``claim``; its name, or None when it was not created."""
        nodepool, template = step.pools[claim.node_pool]
        pods = [p for p in (step.pod(k) for k in claim.pods) if p is not None]
        exceeded = self._limit_exceeded(nodepool)
        if exceeded is not None:
            self._log.error(
                "creating nodeclaim, resource usage exceeds limit",
                NodePool={"name": nodepool.name},
                resource=exceeded,
            )
            return None
        body = nodeclaim_body(claim, nodepool, template, pods)
        if gang is not None:
            metadata = body["metadata"]
            metadata["labels"][wk.LABEL_GANG] = gang["label"]
            metadata["annotations"].update({k: v for k, v in gang.items() if k != "label"})
        _mark_request(body, [step.virtual[k] for k in claim.pods if k in step.virtual])
        try:
            created = self._kube.create(NODE_CLAIMS, body)
        except KubeApiError as error:
            self._log.error(
                "creating nodeclaim", NodePool={"name": nodepool.name}, error=str(error)
            )
            return None
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
            reason="provisioned",
            nodepool=nodepool.name,
            min_values_relaxed=str(claim.min_values_relaxed).lower(),
        ).inc()
        return name

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
            capacity = status.capacity if status is not None else None
            for key, value in (capacity or {}).items():
                usage[key] = usage.get(key, 0) + parse_quantity(str(value))
        for key, limit in nodepool.limits.items():
            if usage.get(key, 0) > parse_quantity(str(limit)):
                return key
        return None
