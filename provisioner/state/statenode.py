"""One node of the cluster as every controller sees it: a Node and its NodeClaim, joined once.

Karpenter's ``state.StateNode``. A state node is a registered Node (managed or not) joined to
the NodeClaim that launched it (by ``providerID``), or an in-flight NodeClaim that has no Node
yet. Every consumer (provisioning, disruption, nomination, interruption, metrics) reads these;
nobody joins Nodes to NodeClaims on their own.

What the planner needs is resolved here once:

* ``labels``: the Node's; before registration, the NodeClaim's single-valued requirements and
  labels (what the Node will carry).
* ``taints``: the Node's; a managed Node not yet initialized is seen without its startup and
  ephemeral taints, as it will be once initialized; before registration, the NodeClaim's taints.
* ``allocatable`` / ``capacity``: the Node's (a resource an uninitialized Node does not report
  yet, e.g. ``nvidia.com/gpu`` before the device plugin, comes from the NodeClaim); before
  registration, the NodeClaim's status; None while the NodeClaim has not been launched (the
  planner then takes the smallest of its instance types).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from provisioner.apis import conditions as cond
from provisioner.apis import labels as wk
from provisioner.apis.core import Node, Pod, Taint
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.scheduling.quantity import parse_quantity
from provisioner.scheduling.requirements import Requirements

__all__ = ["IN_FLIGHT_PREFIX", "StateNode", "join_state_nodes", "state_node"]

IN_FLIGHT_PREFIX: Final = "nodeclaim/"
"""How an in-flight NodeClaim is shown where a node name is expected (``kubectl``'s form)."""

_TERMINAL: Final = frozenset({"Succeeded", "Failed"})
_READY: Final = "Ready"


@dataclass(frozen=True, slots=True, kw_only=True)
class StateNode:
    """A Node and/or its NodeClaim, joined once by the cluster state.

    Attributes:
        node: the Node, once registered.
        claim: the NodeClaim (None for nodes Jointer does not manage).
        pods: the live (non-terminal) pods bound to the Node, sorted by key.
        nominated: keys of pending pods nominated to the NodeClaim.
        labels: the labels the node carries (or will carry).
        taints: the taints pods must tolerate (see the module docstring).
        allocatable: allocatable resources in milli-units, None while unknown.
        capacity: capacity in milli-units, None while unknown.
        instance_types: the instance types the NodeClaim allows (launch flexibility).
        initialized: the NodeClaim is ``Initialized`` (always True for unmanaged Nodes).
        node_initialized: the Node carries ``karpenter.sh/initialized=true``.
        deleting: the NodeClaim or the Node is being deleted (marked for deletion).
        unschedulable: the Node is cordoned.
        ready: the Node's ``Ready`` condition is True.
        instance_terminating: the NodeClaim's ``InstanceTerminating`` is True.
        tainted: the Node carries ``karpenter.sh/disrupted:NoSchedule``.
    """

    node: Node | None
    claim: NodeClaim | None
    pods: tuple[Pod, ...] = ()
    nominated: tuple[str, ...] = ()
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, int] | None = None
    capacity: Mapping[str, int] | None = None
    instance_types: tuple[str, ...] = ()
    initialized: bool = True
    node_initialized: bool = True
    deleting: bool = False
    unschedulable: bool = False
    ready: bool = False
    instance_terminating: bool = False
    tainted: bool = False

    @property
    def name(self) -> str:
        """The Node's name ("" before registration)."""
        return self.node.metadata.name if self.node is not None else ""

    @property
    def claim_name(self) -> str:
        """The NodeClaim's name ("" for unmanaged Nodes)."""
        return self.claim.name if self.claim is not None else ""

    @property
    def nodeclaim(self) -> NodeClaim:
        """The NodeClaim of a managed node.

        Raises:
            LookupError: the node is not managed.
        """
        if self.claim is None:
            raise LookupError(f"node {self.name} has no NodeClaim")
        return self.claim

    @property
    def key(self) -> str:
        """A name unique among state nodes: the Node's, else ``nodeclaim/<name>``."""
        return self.name or f"{IN_FLIGHT_PREFIX}{self.claim_name}"

    @property
    def pool(self) -> str:
        """Its NodePool ("" when none)."""
        if self.claim is not None and self.claim.nodepool_name:
            return self.claim.nodepool_name
        return self.labels.get(wk.LABEL_NODEPOOL, "")

    @property
    def managed(self) -> bool:
        """Whether a NodeClaim backs it."""
        return self.claim is not None

    @property
    def registered(self) -> bool:
        """Whether its Node exists."""
        return self.node is not None

    @property
    def zone(self) -> str:
        """Its zone label ("" when unknown)."""
        return self.labels.get(wk.LABEL_ZONE, "")


def _milli(values: Mapping[str, object] | None) -> dict[str, int]:
    return {name: parse_quantity(str(value)) for name, value in (values or {}).items()}


def _claim_requirements(claim: NodeClaim) -> Requirements:
    return Requirements.from_terms(
        [r.model_dump(by_alias=True, exclude_none=True) for r in claim.spec.requirements]
    )


def _node_taints(node: Node, claim: NodeClaim | None, initialized: bool) -> tuple[Taint, ...]:
    if initialized or claim is None:
        return tuple(node.spec.taints)
    startup = {(t.key, t.effect) for t in claim.spec.startup_taints}
    return tuple(
        t
        for t in node.spec.taints
        if (t.key, t.effect) not in startup
        and t.key not in wk.KNOWN_EPHEMERAL_TAINT_KEYS
        and wk.label_domain(t.key) != wk.READINESS_TAINT_DOMAIN
    )


def _node_allocatable(node: Node, claim: NodeClaim | None, initialized: bool) -> dict[str, int]:
    allocatable = _milli(node.status.allocatable)
    if initialized or claim is None or claim.status is None:
        return allocatable
    for name, value in _milli(claim.status.allocatable).items():
        if allocatable.get(name, 0) == 0:
            allocatable[name] = value
    return allocatable


def state_node(
    node: Node | None,
    claim: NodeClaim | None,
    pods: Sequence[Pod] = (),
    nominated: Sequence[str] = (),
) -> StateNode:
    """Join one Node and/or NodeClaim (at least one of them must be given)."""
    if node is None and claim is None:
        raise ValueError("a state node needs a Node or a NodeClaim")
    status = claim.status if claim is not None else None
    conditions = status.conditions if status is not None else ()
    requirements = _claim_requirements(claim) if claim is not None else None
    types = requirements.for_key(wk.LABEL_INSTANCE_TYPE) if requirements is not None else None
    allowed = types.values() if types is not None else None
    instance_types = tuple(sorted(allowed)) if allowed else ()
    claim_deleting = claim is not None and claim.metadata.deletion_timestamp is not None
    if node is not None:
        node_initialized = node.metadata.labels.get(wk.LABEL_INITIALIZED) == wk.TRUE
        labels: Mapping[str, str] = node.metadata.labels
        taints = _node_taints(node, claim, node_initialized)
        allocatable: Mapping[str, int] | None = _node_allocatable(node, claim, node_initialized)
        capacity: Mapping[str, int] | None = _milli(node.status.capacity) or (
            _milli(status.capacity) if status is not None else None
        )
        deleting = claim_deleting or node.metadata.deletion_timestamp is not None
        ready = any(c.type == _READY and c.status == "True" for c in node.status.conditions)
        tainted = any(t.key == wk.TAINT_DISRUPTED for t in node.spec.taints)
        unschedulable = bool(node.spec.unschedulable)
    else:
        assert claim is not None  # noqa: S101 - checked above
        assert requirements is not None  # noqa: S101
        node_initialized = False
        labels = {**requirements.labels(), **claim.metadata.labels}
        taints = tuple(claim.spec.taints)
        allocatable = _milli(status.allocatable) if status is not None else None
        capacity = _milli(status.capacity) if status is not None else None
        deleting, ready, tainted, unschedulable = claim_deleting, False, False, False
    return StateNode(
        node=node,
        claim=claim,
        pods=tuple(sorted(pods, key=lambda p: p.key)),
        nominated=tuple(sorted(nominated)),
        labels=labels,
        taints=taints,
        allocatable=allocatable or None,
        capacity=capacity or None,
        instance_types=instance_types,
        initialized=claim is None or cond.is_true(conditions, cond.NODECLAIM_CONDITION_INITIALIZED),
        node_initialized=node_initialized,
        deleting=deleting,
        unschedulable=unschedulable,
        ready=ready,
        instance_terminating=cond.is_true(
            conditions, cond.NODECLAIM_CONDITION_INSTANCE_TERMINATING
        ),
        tainted=tainted,
    )


def is_live(pod: Pod) -> bool:
    """Whether the pod still uses its node (not Succeeded or Failed)."""
    return pod.status is None or pod.status.phase not in _TERMINAL


def join_state_nodes(
    nodes: Iterable[Node],
    claims: Iterable[NodeClaim],
    pods: Iterable[Pod],
    nominations: Mapping[str, str] | None = None,
) -> dict[str, StateNode]:
    """Join Nodes to NodeClaims by ``providerID`` (Karpenter's rule), with their pods.

    Args:
        nodes: every Node.
        claims: every NodeClaim.
        pods: every pod (the live bound ones are attached to their Node).
        nominations: pending pod key to the NodeClaim it is nominated to.

    Returns:
        State nodes by :attr:`StateNode.key`, sorted by key.
    """
    claims = list(claims)
    by_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.spec.node_name and is_live(pod):
            by_node.setdefault(pod.spec.node_name, []).append(pod)
    nominated: dict[str, list[str]] = {}
    for pod_key, claim_name in (nominations or {}).items():
        nominated.setdefault(claim_name, []).append(pod_key)
    claim_by_provider = {c.provider_id: c for c in claims if c.provider_id}
    joined: set[str] = set()
    result: dict[str, StateNode] = {}
    for node in nodes:
        claim = claim_by_provider.get(node.spec.provider_id) if node.spec.provider_id else None
        if claim is not None:
            joined.add(claim.name)
        item = state_node(
            node,
            claim,
            by_node.get(node.metadata.name, ()),
            nominated.get(claim.name, ()) if claim is not None else (),
        )
        result[item.key] = item
    for claim in claims:
        if claim.name not in joined:
            item = state_node(None, claim, (), nominated.get(claim.name, ()))
            result[item.key] = item
    return dict(sorted(result.items()))
