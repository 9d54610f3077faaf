"""Where would the pods go? The scheduling simulation behind every disruption decision.

Karpenter's ``SimulateScheduling``: plan the pods of the nodes being removed against the cluster
*without* those nodes, with the same planner the provisioner uses
(:func:`~provisioner.controllers.provisioning.planner.plan` over
:func:`~provisioner.controllers.provisioning.controller.build_view`):

1. The removed nodes, and the nodes already leaving (deleting, or part of a running command), are
   taken out of the view; their reschedulable pods become pending. Pending pods of the cluster
   stay pending, nominated pods stay on their NodeClaims.
2. Pods that must move together with them (the other members of a gang) become pending too.
3. Nodes that are not initialized yet (and in-flight NodeClaims) are fenced off for pending pods:
   Karpenter never consolidates onto capacity that is not ready (``would schedule against
   uninitialized nodeclaim``).
4. The result says which new NodeClaims the displaced pods need; a displaced pod that cannot be
   placed makes the move impossible.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from structlog.typing import FilteringBoundLogger

from cloudprovider.errors import CloudProviderError
from cloudprovider.instancetype import InstanceType
from cloudprovider.protocol import CloudProvider, NodeClassRef, NodePoolRef
from provisioner.apis import labels as wk
from provisioner.apis.core import Pod, Taint
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption.facts import ClusterFacts, is_reschedulable
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.controller import (
    build_view,
    nodeclaim_body,
    ready_nodepools,
)
from provisioner.controllers.provisioning.flavors import (
    Displaced,
    choose_flavors,
    openmodels,
    with_flavor_rejections,
)
from provisioner.controllers.provisioning.offerings import (
    OptionsMemo,
    PoolTemplate,
    pool_template,
)
from provisioner.controllers.provisioning.plan import NodeClaimPlan, Plan
from provisioner.controllers.provisioning.planner import (
    NewCapacityLimit,
    PlannerConfig,
    plan_moves,
)
from provisioner.controllers.provisioning.podfacts import PodError
from provisioner.kube.protocol import JsonObject
from provisioner.state.cluster import Snapshot
from provisioner.state.statenode import StateNode, join_state_nodes

__all__ = [
    "CatalogCache",
    "PoolCatalog",
    "Simulation",
    "load_catalog",
    "replacement_body",
    "simulate",
]

_FENCE: Final = Taint(key=wk.TAINT_DISRUPTED, value="", effect=wk.TAINT_EFFECT_NO_SCHEDULE)


@dataclass(frozen=True, slots=True)
class PoolCatalog:
    """The NodePools with their instance types, loaded once per disruption pass.

    Attributes:
        pools: every valid, dynamic NodePool with its planning template.
        ready: the names of the pools replacements may be launched in.
        region: the region label value for templates.
        options: the offerings the pass's simulations enumerated (reused while the templates
            and DaemonSets are the same objects).
    """

    pools: Mapping[str, tuple[NodePool, PoolTemplate]]
    ready: frozenset[str]
    region: str = ""
    options: OptionsMemo = field(default_factory=OptionsMemo, compare=False, repr=False)
    _by_name: dict[str, dict[str, InstanceType]] = field(
        default_factory=dict, compare=False, repr=False
    )
    """Each pool's instance types by name, indexed on first use (prices are read per node)."""

    def templates(self) -> list[PoolTemplate]:
        """Templates of the ready pools (what the planner may buy)."""
        return [template for name, (_, template) in self.pools.items() if name in self.ready]

    def instance_type(self, pool: str, name: str) -> InstanceType | None:
        """The instance type ``name`` of ``pool``."""
        index = self._by_name.get(pool)
        if index is None:
            entry = self.pools.get(pool)
            if entry is None:
                return None
            index = {}
            for instance_type in entry[1].instance_types:
                index.setdefault(instance_type.name, instance_type)  # the first, as listed
            self._by_name[pool] = index
        return index.get(name)

    def price(self, pool: str, name: str, zone: str, capacity_type: str) -> float | None:
        """The hourly price of one offering (available or not), None when unknown."""
        instance_type = self.instance_type(pool, name)
        if instance_type is None:
            return None
        return next(
            (
                o.price
                for o in instance_type.offerings
                if o.zone == zone and o.capacity_type == capacity_type
            ),
            None,
        )


def load_catalog(
    facts: ClusterFacts, cloud: CloudProvider, *, region: str, log: FilteringBoundLogger
) -> PoolCatalog:
    """Resolve every NodePool's instance types once (failures leave the pool out)."""
    ready = {p.name for p in ready_nodepools(facts.snapshot)}
    pools: dict[str, tuple[NodePool, PoolTemplate]] = {}
    for name, nodepool in sorted(facts.pools.items()):
        if nodepool.is_static:
            continue
        ref = nodepool.node_class_ref
        problem: str | None = None
        try:
            types = cloud.get_instance_types(
                NodePoolRef(
                    name=name,
                    node_class=NodeClassRef(name=ref.name, kind=ref.kind, group=ref.group),
                )
            )
        except CloudProviderError as error:
            problem = str(error)
            types = []
        if problem is not None:
            log.error("resolving instance types", NodePool={"name": name}, error=problem)
            ready.discard(name)
            continue
        pools[name] = (nodepool, pool_template(nodepool, types))
    return PoolCatalog(pools=pools, ready=frozenset(ready & set(pools)), region=region)


def _catalog_key(facts: ClusterFacts) -> tuple[object, ...]:
    ready = {p.name for p in ready_nodepools(facts.snapshot)}
    return tuple(
        (name, entry.generation, entry.uid, entry.deleting, name in ready)
        for name, entry in sorted(facts.snapshot.nodepools.items())
    )


class CatalogCache:
    """Reuses the NodePools' instance types between disruption passes for ``ttl``.

    Resolving instance types can be expensive (the AWS provider rebuilds offerings); a catalog
    is reused while no NodePool changed (name, generation, readiness) and ``ttl`` has not passed,
    so capacity changes (insufficient-capacity marks) are seen within ``ttl``.

    Args:
        cloud: the cloud provider.
        region: the region label value for templates.
        ttl: how long a catalog is reused.
    """

    def __init__(self, cloud: CloudProvider, *, region: str, ttl: timedelta) -> None:
        self._cloud = cloud
        self._region = region
        self._ttl = ttl
        self._cached: tuple[tuple[object, ...], datetime, PoolCatalog] | None = None

    def invalidate(self) -> None:
        """Forget the cached catalog (capacity changed: a launch failed)."""
        self._cached = None

    def get(self, facts: ClusterFacts, log: FilteringBoundLogger) -> PoolCatalog:
        """The catalog for ``facts`` (loaded, or reused)."""
        key = _catalog_key(facts)
        cached = self._cached
        if cached is not None and cached[0] == key and facts.now - cached[1] < self._ttl:
            return cached[2]
        catalog = load_catalog(facts, self._cloud, region=self._region, log=log)
        if cached is not None:
            catalog = _carried_over(cached[2], catalog)
        self._cached = (key, facts.now, catalog)
        return catalog


def _carried_over(old: PoolCatalog, new: PoolCatalog) -> PoolCatalog:
    """``new`` keeping ``old``'s template objects where they are equal, and its memo.

    A reload after the TTL usually resolves the same instance types and offerings: keeping
    the equal templates' objects keeps the offerings memo (and all the planner derived from
    it) valid; any template that differs (a NodePool edit, an offering marked unavailable)
    is a new object, and the memo enumerates again. A reload equal to ``old`` in everything
    is ``old`` itself, so that what is keyed on the catalog's identity (the disruption pass's
    simulation outcomes) stays valid across Karpenter's 5-minute recheck of an unchanged
    cluster.
    """
    if new == old:
        return old
    pools: dict[str, tuple[NodePool, PoolTemplate]] = {}
    for name, (nodepool, template) in new.pools.items():
        known = old.pools.get(name)
        kept = known[1] if known is not None and known[1] == template else template
        pools[name] = (nodepool, kept)
    return dataclasses.replace(new, pools=pools, options=old.options)


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulation:
    """The outcome of moving pods off some nodes.

    Attributes:
        displaced: the pods that must move (keys), with their current objects.
        new_claims: the new NodeClaims the displaced pods need (claims holding only other
            pending pods are the provisioner's business and left out).
        failure: why the pods cannot all move, or None.
    """

    displaced: Mapping[str, Pod]
    new_claims: tuple[NodeClaimPlan, ...] = ()
    failure: str | None = None
    plan: Plan | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Whether every displaced pod found a place."""
        return self.failure is None


def _as_pending(pod: Pod) -> Pod:
    return pod.model_copy(
        update={"spec": pod.spec.model_copy(update={"node_name": ""}), "status": None}
    )


def _fence(view: ClusterView) -> ClusterView:
    """Keep pending pods off capacity that is not initialized (in-flight or starting nodes)."""
    nodes = []
    for state in view.nodes:
        fenced = state.managed and not (state.registered and state.initialized)
        if fenced and not any(t.key == _FENCE.key for t in state.taints):
            nodes.append(dataclasses.replace(state, taints=(*state.taints, _FENCE)))
        else:
            nodes.append(state)
    return dataclasses.replace(view, nodes=tuple(nodes))


def _without(
    snapshot: Snapshot,
    removed_nodes: Collection[str],
    removed_claims: Collection[str],
    pods: Mapping[str, Pod],
    moving: Collection[str],
) -> Snapshot:
    """``snapshot.with_changes`` for a simulation, joining again only the state nodes it changes.

    The state nodes of the rest of the cluster are kept as they are (re-joining every node for
    every simulation dominated a pass at thousands of nodes); the nodes that lose a moving pod
    are joined again without it.
    """
    nodes = {k: v for k, v in snapshot.nodes.items() if k not in removed_nodes}
    claims = {k: v for k, v in snapshot.node_claims.items() if k not in removed_claims}
    nominations = {
        k: n for k, n in snapshot.nominations.items() if n.node_claim in claims and k in pods
    }
    touched = {
        snapshot.pods[k].spec.node_name
        for k in moving
        if k in snapshot.pods and snapshot.pods[k].spec.node_name
    }
    state_nodes: dict[str, StateNode] = {}
    for key, state in snapshot.state_nodes.items():
        if state.name in removed_nodes or (state.claim_name and state.claim_name in removed_claims):
            if state.name in removed_nodes or state.node is None:
                continue
            # a kept Node whose NodeClaim goes is joined again, unmanaged
            touched.add(state.name)
        if state.name in touched or any(p not in pods for p in state.nominated):
            rejoined = join_state_nodes(
                [state.node] if state.node is not None else [],
                [state.claim] if state.claim is not None and state.claim.name in claims else [],
                [p for p in state.pods if p.key in pods and p.key not in moving],
                {k: n.node_claim for k, n in nominations.items()},
            )
            state_nodes.update(rejoined)
            continue
        state_nodes[key] = state
    return dataclasses.replace(
        snapshot,
        pods=pods,
        nodes=nodes,
        node_claims=claims,
        nominations=nominations,
        state_nodes=dict(sorted(state_nodes.items())),
    )


def simulate(
    facts: ClusterFacts,
    catalog: PoolCatalog,
    removed: Sequence[StateNode],
    *,
    planner: PlannerConfig,
    leaving: Collection[str] = (),
    moving: Sequence[Pod] = (),
    keep_flavor: bool = True,
    pending: bool = True,
    one_replacement: bool = False,
    limit: NewCapacityLimit | None = None,
) -> Simulation:
    """Plan the pods of ``removed`` (and ``moving``) against the cluster without them.

    Args:
        facts: the cluster.
        catalog: the NodePools and instance types.
        removed: the nodes that go away.
        planner: the planner settings.
        leaving: NodeClaims already going away (their pods are pending, not required to fit).
        moving: other pods that must move with them (gang members on nodes that stay).
        keep_flavor: llmaz model pods may not move to a later flavor than the one they are on
            (unless their NodePool allows it); without it they take their first usable flavor.
        pending: plan the cluster's pending pods, and those of the ``leaving`` nodes, too
            (Karpenter's ``SimulateScheduling``, so that a move never takes the room they
            need); without it they are left out (nominated pods stay) and the new NodeClaims
            are sized for the displaced pods only (an interruption's replacements: the
            provisioner places the others, once).
        one_replacement: judge the optimiser's plan and the greedy ones it started from as
            a consolidation does (``_for_consolidation``) and keep the best; without it the
            optimiser's plan is kept.
        limit: the only new capacity the displaced pods may take (``plan_moves``).
    """
    snapshot = facts.snapshot
    removed_claims = {s.nodeclaim.name for s in removed} | set(leaving)
    removed_nodes = {
        facts.nodes[c].name for c in removed_claims if c in facts.nodes and facts.nodes[c].name
    }
    required_nodes = {s.name for s in removed if s.name}
    moving_keys = {p.key for p in moving}
    pods, displaced, touched = _split(
        facts,
        catalog.options,
        removed_nodes=removed_nodes,
        required_nodes=required_nodes,
        moving_keys=moving_keys,
        pending=pending,
    )
    if not displaced:
        return Simulation(displaced={})
    sub = _without(snapshot, removed_nodes, removed_claims, pods, moving_keys)
    try:
        view = build_view(
            sub,
            catalog.templates(),
            region=catalog.region,
            ignore_preferences=planner.ignore_preferences,
            options_memo=catalog.options,
            derived_from=snapshot,
            touched=touched,
        )
        view = dataclasses.replace(view, leaving=_still_held(facts, removed_claims))
        choice = choose_flavors(
            _fence(view),
            openmodels(snapshot.group_objects),
            displaced=_flavor_moves(facts, displaced) if keep_flavor else None,
        )
        plans = plan_moves(choice.view, planner, displaced, limit=limit)
    except PodError as error:
        return Simulation(displaced=displaced, failure=str(error))
    if not one_replacement:
        plans = plans[:1]
    outcomes = [_outcome(displaced, with_flavor_rejections(p, choice), facts, limit) for p in plans]
    return min(outcomes, key=_for_consolidation)


def _split(
    facts: ClusterFacts,
    memo: OptionsMemo,
    *,
    removed_nodes: Collection[str],
    required_nodes: Collection[str],
    moving_keys: Collection[str],
    pending: bool,
) -> tuple[dict[str, Pod], dict[str, Pod], list[str] | None]:
    """The simulation's pods (snapshot order), the displaced ones, by key, and the touched keys.

    The pods of the removed nodes and the moving ones become pending copies (the same copy
    in every simulation of the pass, so what is read from it is read once); those that cannot
    be rescheduled are left out. With ``pending`` every other pod stays as it is, so only the
    removed nodes' pods are looked at, and they are the only ones that can differ from the
    snapshot's (the touched keys; None without ``pending``).
    """
    snapshot = facts.snapshot
    displaced: dict[str, Pod] = {}
    if pending:
        touched = set(moving_keys)
        for node in removed_nodes:
            touched.update(facts.pods_on(node))
        pods = dict(snapshot.pods)
        keys = facts.in_snapshot_order(touched)
    else:
        pods, keys = {}, list(snapshot.pods)
    for key in keys:
        pod = snapshot.pods[key]
        node = pod.spec.node_name
        if key in moving_keys or node in removed_nodes:
            if not pending and key not in moving_keys and node not in required_nodes:
                continue  # a leaving node's pods: its own replacement or the provisioner's
            if key in moving_keys or is_reschedulable(pod):
                pods[key] = memo.pending.get(pod, _as_pending)
                if key in moving_keys or node in required_nodes:
                    displaced[key] = pod
            else:
                pods.pop(key, None)
            continue
        if not pending and not node and key not in snapshot.nominations:
            continue
        pods[key] = pod
    return pods, displaced, keys if pending else None


def _for_consolidation(simulation: Simulation) -> tuple[bool, int, float]:
    """How well a simulation serves a consolidation (lower is better).

    Every pod moved first; then no new node (a delete), one (a replace) or more (no command:
    a command takes one replacement); then the cheapest new nodes. Ties keep the first
    (the optimiser's plan).
    """
    claims = simulation.new_claims
    return (not simulation.ok, min(len(claims), 2), sum(c.price_per_hour for c in claims))


def _still_held(facts: ClusterFacts, claims: Collection[str]) -> tuple[StateNode, ...]:
    """The managed nodes of ``claims``: out of the simulation, still held until they are gone."""
    return tuple(facts.nodes[name] for name in sorted(claims) if name in facts.nodes)


def _flavor_moves(facts: ClusterFacts, displaced: Mapping[str, Pod]) -> dict[str, Displaced]:
    """The llmaz model pods a move displaces, with the node they leave.

    A pod may take a later flavor only when that node's NodePool says
    ``jointer.dev/flavor-downgrade: allowed``.
    """
    by_name = {state.name: state for state in facts.snapshot.state_nodes.values() if state.name}
    moves: dict[str, Displaced] = {}
    for key, pod in displaced.items():
        state = by_name.get(pod.spec.node_name)
        if state is None or not pod.metadata.labels.get(wk.LABEL_LLMAZ_MODEL_NAME):
            continue
        nodepool = facts.pools.get(state.pool)
        annotations = nodepool.metadata.annotations if nodepool is not None else {}
        allowed = annotations.get(wk.ANNOTATION_FLAVOR_DOWNGRADE) == wk.FLAVOR_DOWNGRADE_ALLOWED
        moves[key] = Displaced(state.labels, downgrade=allowed)
    return moves


def _outcome(
    displaced: Mapping[str, Pod],
    result: Plan,
    facts: ClusterFacts,
    limit: NewCapacityLimit | None = None,
) -> Simulation:
    problems = {u.pod: u.reason for u in result.unschedulable}
    problems.update({i.pod: i.reason for i in result.ignored})
    for placement in result.existing_nodes:
        state = facts.snapshot.state_nodes.get(placement.name)
        uninitialized = state is not None and state.managed and not state.initialized
        claim = state.claim_name if state is not None else ""
        if uninitialized and any(p in displaced for p in placement.pods):
            return Simulation(
                displaced=displaced,
                failure=f"would schedule against uninitialized nodeclaim/{claim}",
                plan=result,
            )
    for key in sorted(displaced):
        if key in problems:
            failure = f"pod {key} cannot be rescheduled: {problems[key]}"
            if limit is not None and problems[key] == limit.reason:
                failure = limit.reason  # it could move, but only to capacity no command takes
            return Simulation(
                displaced=displaced,
                failure=failure,
                plan=result,
            )
    new_claims = tuple(c for c in result.node_claims if any(p in displaced for p in c.pods))
    return Simulation(displaced=displaced, new_claims=new_claims, plan=result)


def replacement_body(
    claim: NodeClaimPlan,
    catalog: PoolCatalog,
    pods: Sequence[Pod],
    *,
    instance_types: Sequence[str] | None = None,
    capacity_types: Sequence[str] | None = None,
) -> JsonObject:
    """The NodeClaim to launch for a planned replacement (the provisioner's shape).

    Args:
        claim: the planned NodeClaim.
        catalog: the NodePools.
        pods: the pods it is for (zone pinning, capacity-type fallback).
        instance_types: restrict the instance types (cheaper than what it replaces).
        capacity_types: restrict the capacity types (consolidation forces one).

    Raises:
        ApiValidationError: the body does not validate.
    """
    nodepool, template = catalog.pools[claim.node_pool]
    if instance_types is not None:
        claim = dataclasses.replace(claim, instance_types=tuple(instance_types))
    body = nodeclaim_body(claim, nodepool, template, pods)
    if capacity_types is not None:
        requirements: list[dict[str, Any]] = body["spec"]["requirements"]
        for term in requirements:
            if term["key"] == wk.LABEL_CAPACITY_TYPE:
                term["values"] = list(capacity_types)
    return body
