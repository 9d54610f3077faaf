"""From a cluster view to a solver problem: the heart of one planning step.

1. Judge every pending pod (Karpenter's provisionability rules plus the pod-group admission
   rules); the ones their scheduler holds back are *ignored*.
2. Read each provisionable pod's scheduling facts once per signature; match signatures against
   every concrete option (NodePool x instance type x offering) and every existing node.
3. Collapse identical pods into classes (same requests, same allowed capacity, same gang, same
   topology membership), so the problem grows with the number of workloads, not pods.
4. Express gangs, topology spreads, pod (anti-)affinity and NodePool limits as solver
   constraints, and prune offerings that another one dominates for the same classes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Final

import numpy as np
import numpy.typing as npt

from cloudprovider.instancetype import InstanceType
from provisioner.apis import labels as wk
from provisioner.apis.core import Pod, Taint
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.offerings import (
    SCHEDULING_EFFECTS,
    DaemonOverhead,
    Option,
    OptionsMemo,
    enumerate_options,
)
from provisioner.controllers.provisioning.podfacts import (
    AffinityTerm,
    PodError,
    PodFacts,
    RequestsCache,
    SelectorKey,
    Signature,
    SpreadTerm,
    pod_facts,
    selector_matches,
)
from provisioner.controllers.provisioning.reasons import Explainer
from provisioner.controllers.provisioning.units import capacity_units, demand_units, to_micros
from provisioner.podgroups import (
    FractionError,
    PodGroupInfo,
    detect_group,
    gpu_fraction_milli,
    gpu_memory_mib,
    group_info,
    is_gpu_reservation_pod,
    provisionable_verdicts,
    scaling_pod_original,
)
from provisioner.scheduling.affinity import AffinityError, NodeSelectorTerm
from provisioner.scheduling.requirements import Requirement, Requirements
from provisioner.scheduling.resources import (
    fits,
    format_resource_list,
    requests_of,
    subtract,
    with_pod_slot,
)
from provisioner.scheduling.taints import untolerated
from provisioner.state.statenode import StateNode
from solver.problem import (
    GPU_MILLI,
    Affinity,
    AntiAffinity,
    BinType,
    CoLocation,
    ExistingBin,
    Gang,
    PodClass,
    PoolLimit,
    Problem,
    SpreadConstraint,
    TopologyConstraint,
    TopologyKey,
)

__all__ = ["Build", "ExistingRoom", "build_problem", "existing_room"]

GPU: Final = "nvidia.com/gpu"
NODES: Final = "nodes"
RUNAI_GPU_GROUP: Final = "runai-gpu-group"
"""The label KAI puts on a fractional pod it binds: the id of the device it shares."""
_HOSTNAME_KEYS: Final = (wk.LABEL_HOSTNAME,)
_NO_VOLUME_REQUIREMENTS: Final = (Requirements(),)
"""What a pod without volume constraints adds (immutable, shared by every such pod)."""


@dataclass(slots=True)
class Build:
    """A solver problem plus everything needed to map its solution back to pods and nodes."""

    problem: Problem
    options: dict[str, Option]
    class_pods: dict[str, list[PodFacts]]
    class_allowed: dict[str, frozenset[str]]
    gangs: dict[str, PodGroupInfo]
    class_carries: dict[str, frozenset[str]] = field(default_factory=dict)
    ignored: list[tuple[str, str]] = field(default_factory=list)
    unschedulable: list[tuple[str, str]] = field(default_factory=list)
    explainer: Explainer = field(default_factory=lambda: Explainer((), ()))
    """Words the reasons of pods that get no capacity (NodePools, requirements, limits)."""
    narrowed: dict[str, str] = field(default_factory=dict)
    """Classes whose new capacity a rescheduling simulation narrowed (``planner.plan_moves``),
    with the reason their pods get when left without a place."""
    shared: dict[object, object] | None = None
    """Where the planner may keep what it derives from ``options`` alone for later builds
    over the same option objects (a disruption pass); None when they are this build's own."""


def _charge_reservations(options: list[Option], nodes: Sequence[StateNode]) -> list[Option]:
    """Reserved options less what in-flight NodeClaims pinned to their reservation will take.

    A launched instance is already counted by the cloud provider; a NodeClaim created but not
    yet launched is not, so it is charged here (options of a full reservation are dropped).
    """
    pending: dict[str, int] = defaultdict(int)
    for state in nodes:
        claim = state.claim
        if state.node is not None or claim is None or state.deleting or claim.provider_id:
            continue
        reservation = state.labels.get(wk.LABEL_CAPACITY_RESERVATION_ID)
        if reservation:
            pending[reservation] += 1
    if not pending:
        return options
    charged: list[Option] = []
    for option in options:
        offering = option.offering
        taken = pending.get(offering.reservation_id or "", 0)
        if taken and offering.reservation_capacity is not None:
            left = offering.reservation_capacity - taken
            if left <= 0:
                continue
            charged.append(replace(option, offering=replace(offering, reservation_capacity=left)))
        else:
            charged.append(option)
    return charged


@dataclass(slots=True)
class _Pending:
    facts: PodFacts
    alternatives: tuple[Requirements, ...]
    compat_key: tuple[Signature, tuple[Requirements, ...]]
    fraction: int = 0
    gang: str | None = None
    topology: set[str] = field(default_factory=set)
    carries: set[str] = field(default_factory=set)


_SetsKey = tuple[tuple[frozenset[str], ...], frozenset[int], tuple[str, ...]]


@dataclass(slots=True)
class _Derived:
    """What :func:`build_problem` computes from one memo's offerings, kept across builds.

    A disruption pass plans many times against the same offerings (the same
    :class:`~provisioner.controllers.provisioning.offerings.Option` objects); everything here
    is a function of those offerings and the key it is filed under, so a later build takes
    it instead of computing it again. Existing nodes are filed under the identity of their
    state node and bound pods (immutable, held here): the template and DaemonSets they are
    read with are the memo's own.
    """

    device_memories: list[int] | None = None
    by_id: dict[str, Option] | None = None
    """The offerings by id (shared by the builds: never changed)."""
    fit_index: _FitIndex | None = None
    compatible: dict[tuple[Signature, tuple[Requirements, ...]], frozenset[str]] = field(
        default_factory=dict
    )
    fitting: dict[object, frozenset[str]] = field(default_factory=dict)
    interned: dict[frozenset[str], frozenset[str]] = field(default_factory=dict)
    bin_types: dict[_SetsKey, tuple[tuple[BinType, ...], dict[frozenset[str], frozenset[str]]]] = (
        field(default_factory=dict)
    )
    existing: dict[
        tuple[int, tuple[int, ...]], tuple[StateNode, tuple[Pod, ...], _ExistingNode | None]
    ] = field(default_factory=dict)
    planner: dict[object, object] = field(default_factory=dict)
    """:attr:`Build.shared`: the planner's own (launch-target indexes)."""

    def size(self) -> int:
        """The entries of the largest table (existing nodes are bounded by the cluster)."""
        return max(
            len(self.compatible),
            len(self.fitting),
            len(self.interned),
            len(self.bin_types),
            len(self.planner),
        )


DERIVED_LIMIT: Final = 4096
"""Entries a memo's :class:`_Derived` table may hold before it starts again (the memo can live
for hours while the offerings stay equal; the workloads' shapes may not)."""


def _derived(memo: OptionsMemo) -> _Derived:
    """The memo's :class:`_Derived` (a new one after the offerings were enumerated again)."""
    derived = memo.derived
    if not isinstance(derived, _Derived) or derived.size() > DERIVED_LIMIT:
        derived = _Derived()
        memo.derived = derived
    return derived


def build_problem(view: ClusterView) -> Build:
    """Build the solver problem for the pending pods of ``view``.

    Raises:
        PodError: for a pod or DaemonSet whose spec cannot be read (names the object and field).
    """
    memo = view.options_memo
    if memo is not None:
        daemons, offered = memo.get(view.pools, view.daemonsets, view.region)
    else:
        daemons = DaemonOverhead.from_daemonsets(view.daemonsets)
        offered = enumerate_options(view.pools, daemons, view.region)
    options = _charge_reservations(offered, view.nodes)
    derived = _derived(memo) if memo is not None and options is offered else None
    options_by_id = _by_id(options, derived)
    build = Build(
        problem=Problem(bin_types=(), classes=()),
        options=options_by_id,
        class_pods={},
        class_allowed={},
        gangs={},
        explainer=Explainer(view.pools, options, view.unavailable),
        shared=derived.planner if derived is not None else None,
    )
    pending = _provisionable(view, build, derived)
    bound = view.bound_pods()
    existing = _existing_bins(view, daemons, bound, derived)
    compat = _Compatibility(options, existing, derived)
    allowed: dict[str, frozenset[str]] = {}
    allowed_existing: dict[str, frozenset[str]] = {}
    for item in pending:
        allowed[item.facts.key], allowed_existing[item.facts.key] = compat.allowed(item.compat_key)
    topology, colocations = _topology(view, bound, pending, allowed, options_by_id, existing)
    gangs = _gangs(view, bound, pending, build)
    _anchor_gangs(gangs, pending, allowed, allowed_existing, options_by_id, existing)
    classes = _classes(
        pending,
        allowed=allowed,
        allowed_existing=allowed_existing,
        options=options_by_id,
        existing=existing,
        build=build,
        derived=derived,
    )
    classes, gangs = _drop_short_gangs(classes, gangs, build)
    classes, affinity = _affinities(colocations, classes, options_by_id, existing, build)
    topology.extend(affinity)
    resource_names = sorted({name for c in classes for name in c.demand})
    if GPU not in resource_names and any(c.gpu_fraction_milli for c in classes):
        # fractions consume whole free devices from capacity[GPU]: it must be passed on
        resource_names = sorted([*resource_names, GPU])
    bin_types, classes = _bin_types(classes, options_by_id, resource_names, topology, derived)
    build.problem = Problem(
        bin_types=bin_types,
        classes=tuple(classes),
        existing=tuple(_solver_existing(bin_, resource_names) for bin_ in existing.values()),
        gangs=tuple(gangs),
        topology=tuple(topology),
        limits=tuple(_limits(view, resource_names)),
        pool_weights={pool.name: pool.weight for pool in view.pools},
        gpu_resource=GPU,
    )
    return build


def _by_id(options: Sequence[Option], derived: _Derived | None) -> dict[str, Option]:
    """The options by id (kept in ``derived``, whose options are always the same)."""
    if derived is None:
        return {o.id: o for o in options}
    if derived.by_id is None:
        derived.by_id = {o.id: o for o in options}
    return derived.by_id


# --- provisionability ------------------------------------------------------------------------


def _provisionable(view: ClusterView, build: Build, derived: _Derived | None) -> list[_Pending]:
    pending_pods = view.pending_pods()
    device_memories_ = _known_device_memories(build, derived)
    verdicts = provisionable_verdicts(pending_pods, view.groups)
    keys = [_key(pod) for pod in pending_pods]
    pending_keys = set(keys)
    read_facts = _facts_reader(view)
    ignore_reasons: dict[Signature, str | None] = {}
    combined: dict[tuple[Signature, tuple[Requirements, ...]], tuple[Requirements, ...]] = {}
    result: list[_Pending] = []
    for pod, key in zip(pending_pods, keys, strict=True):
        verdict = verdicts.get(key)
        if verdict is not None and not verdict.provisionable:
            build.ignored.append((key, verdict.reason))
            continue
        original = scaling_pod_original(pod)
        if original is not None and original in pending_keys:
            build.ignored.append((key, f"KAI scaling pod standing in for {original}"))
            continue
        facts = read_facts(pod)
        if facts.signature not in ignore_reasons:
            ignore_reasons[facts.signature] = _karpenter_ignore_reason(facts)
        reason = ignore_reasons[facts.signature]
        if reason is not None:
            build.ignored.append((key, reason))
            continue
        volume_alternatives, volume_problem = _volume_requirements(view, facts)
        if volume_problem is not None:
            build.unschedulable.append((key, volume_problem))
            continue
        compat_key = (facts.signature, volume_alternatives)
        alternatives = combined.get(compat_key)
        if alternatives is None:
            alternatives = _combine(facts.signature.alternatives, volume_alternatives)
            combined[compat_key] = alternatives
        try:
            memory = gpu_memory_mib(pod)
            device = _device_memory(device_memories_, memory)
            fraction = gpu_fraction_milli(pod, device)
        except FractionError as error:
            raise PodError(str(error)) from error
        if memory is not None:
            # only devices that hold the memory asked for; the share is the smallest's
            volume_alternatives = _combine(volume_alternatives, (_holds_memory(memory),))
            compat_key = (facts.signature, volume_alternatives)
            alternatives = _combine(facts.signature.alternatives, volume_alternatives)
        item = _Pending(facts, alternatives, compat_key)
        if fraction is not None:
            item = _with_fraction(item, *fraction)
        if verdict is not None and verdict.group is not None:
            item.gang = "/".join(verdict.group.group_id)
        result.append(item)
    return result


def _facts_reader(view: ClusterView) -> Callable[[Pod], PodFacts]:
    """:func:`pod_facts` for one planning step (remembered per pod object in the view's memo)."""
    cache: dict[str, Signature] = {}
    requests_cache: RequestsCache = {}

    def facts_of(pod: Pod) -> PodFacts:
        return pod_facts(pod, cache=cache, requests_cache=requests_cache)

    memo = view.options_memo
    return facts_of if memo is None else partial(memo.facts.get, compute=facts_of)


def _known_device_memories(build: Build, derived: _Derived | None) -> list[int]:
    """:func:`_device_memories` of the build's options (kept in ``derived``)."""
    if derived is None:
        return _device_memories(build.options.values())
    if derived.device_memories is None:
        derived.device_memories = _device_memories(build.options.values())
    return derived.device_memories


def _key(pod: Pod) -> str:
    return f"{pod.metadata.namespace or 'default'}/{pod.metadata.name}"


def _device_memories(options: Iterable[Option]) -> list[int]:
    """The distinct per-GPU memories (MiB) of the GPU offerings, ascending."""
    found: set[int] = set()
    for option in options:
        value = option.labels.get(wk.LABEL_INSTANCE_GPU_MEMORY)
        if value is not None and value.isdigit() and option.capacity.get(GPU, 0) > 0:
            found.add(int(value))
    return sorted(found)


def _device_memory(memories: Sequence[int], wanted: int | None) -> int | None:
    """The smallest device memory that holds ``wanted`` MiB, None if none does.

    A ``gpu-memory`` pod's share is counted on that device: the largest share it can take on
    any device it may get, so the packing never overcommits a larger one.
    """
    if wanted is None:
        return None
    return next((m for m in memories if m >= wanted), None)


def _holds_memory(wanted: int) -> Requirements:
    return Requirements(
        [Requirement.from_operator(wk.LABEL_INSTANCE_GPU_MEMORY, "Gt", [str(wanted - 1)])]
    )


def _karpenter_ignore_reason(facts: PodFacts) -> str | None:
    """Karpenter's validation rules that make it ignore a pod (karpenter-behaviour §2).

    They read only the pod's signature (``uses_hostname`` derives from it).
    """
    pools = [alternative.get(wk.LABEL_NODEPOOL) for alternative in facts.signature.alternatives]
    if pools and all(r is not None and r.allow_absent and r.any() is None for r in pools):
        return "configured to not run on a Karpenter provisioned node"
    if facts.uses_hostname:
        return (
            "pod requires a specific hostname (kubernetes.io/hostname); "
            "Karpenter provisions no capacity for it"
        )
    return None


def _with_fraction(item: _Pending, milli: int, devices: int) -> _Pending:
    if milli >= GPU_MILLI or devices > 1:
        # a whole device (or a fraction on several devices): reserve whole GPUs
        whole = devices * 1000
        requests = dict(item.facts.requests)
        requests[GPU] = requests.get(GPU, 0) + whole
        facts = _replace_requests(item.facts, requests)
        return _Pending(facts, item.alternatives, item.compat_key)
    return _Pending(item.facts, item.alternatives, item.compat_key, fraction=milli)


def _replace_requests(facts: PodFacts, requests: Mapping[str, int]) -> PodFacts:
    return replace(facts, requests=requests)


# --- volumes ---------------------------------------------------------------------------------


def _volume_requirements(
    view: ClusterView, facts: PodFacts
) -> tuple[tuple[Requirements, ...], str | None]:
    alternatives: tuple[Requirements, ...] = _NO_VOLUME_REQUIREMENTS
    for claim_name in facts.claims:
        claim = view.claims.get(f"{facts.namespace}/{claim_name}")
        if claim is None:
            return (), f"persistentvolumeclaim {facts.namespace}/{claim_name} not found"
        if claim.metadata.deletion_timestamp is not None:
            return (), f"persistentvolumeclaim {facts.namespace}/{claim_name} is being deleted"
        terms: tuple[Requirements, ...] | None = None
        if claim.spec.volume_name:
            volume = view.volumes.get(claim.spec.volume_name)
            if volume is None:
                return (), f"persistentvolume {claim.spec.volume_name} not found"
            required = volume.spec.node_affinity.required if volume.spec.node_affinity else None
            if required is not None:
                try:
                    terms = tuple(
                        NodeSelectorTerm.from_dict(t.model_dump(by_alias=True)).to_requirements(
                            ignore_match_fields=True
                        )
                        for t in required.node_selector_terms
                    )
                except AffinityError as error:
                    return (), f"persistentvolume {claim.spec.volume_name}: {error}"
        else:
            storage_class = view.storage_classes.get(claim.spec.storage_class_name or "")
            if storage_class is not None and storage_class.allowed_topologies:
                terms = tuple(
                    Requirements.from_terms(
                        [
                            {"key": e.key, "operator": "In", "values": list(e.values)}
                            for e in term.match_label_expressions
                        ]
                    )
                    for term in storage_class.allowed_topologies
                )
        if terms:
            alternatives = _combine(alternatives, terms)
    return alternatives, None


def _combine(
    left: Sequence[Requirements], right: Sequence[Requirements]
) -> tuple[Requirements, ...]:
    combined = [a.union(b) for a in left for b in right]
    return tuple(r for r in combined if r.is_satisfiable())


# --- compatibility ---------------------------------------------------------------------------


@dataclass(slots=True)
class _ExistingNode:
    id: str
    zone: str
    pool: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    remaining: dict[str, int]
    gpus_free: tuple[int, ...]
    hostname: str


class _Compatibility:
    """Which options and existing nodes each scheduling signature may use (cached)."""

    def __init__(
        self,
        options: Sequence[Option],
        existing: Mapping[str, _ExistingNode],
        derived: _Derived | None = None,
    ) -> None:
        self._options = options
        self._existing = existing
        self._cache: dict[object, tuple[frozenset[str], frozenset[str]]] = {}
        self._compatible = derived.compatible if derived is not None else {}

    def allowed(
        self, key: tuple[Signature, tuple[Requirements, ...]]
    ) -> tuple[frozenset[str], frozenset[str]]:
        """Option ids and existing node ids the signature may use."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        signature, volumes = key
        alternatives = _combine(signature.alternatives, volumes)
        options = self._compatible.get(key)
        if options is None:
            options = self._compatible_options(signature, alternatives)
            self._compatible[key] = options
        existing = frozenset(
            node.id
            for node in self._existing.values()
            if untolerated(signature.tolerations, node.taints, SCHEDULING_EFFECTS) is None
            and any(a.matches(node.labels) for a in alternatives)
        )
        result = (options, existing)
        self._cache[key] = result
        return result

    def _compatible_options(
        self, signature: Signature, alternatives: Sequence[Requirements]
    ) -> frozenset[str]:
        tolerated: dict[str, bool] = {}
        allowed: list[Option] = []
        for option in self._options:
            pool = option.pool.name
            if pool not in tolerated:
                tolerated[pool] = (
                    untolerated(signature.tolerations, option.pool.taints, SCHEDULING_EFFECTS)
                    is None
                )
            if tolerated[pool] and any(a.matches(option.labels) for a in alternatives):
                allowed.append(option)
        for preference in signature.preferred:
            preferred = [o for o in allowed if preference.matches(o.labels)]
            if preferred:
                allowed = preferred
        return frozenset(o.id for o in allowed)


# --- existing capacity -----------------------------------------------------------------------


def _existing_bins(
    view: ClusterView,
    daemons: DaemonOverhead,
    bound: Mapping[str, Sequence[Pod]],
    derived: _Derived | None = None,
) -> dict[str, _ExistingNode]:
    """Existing nodes and in-flight NodeClaims (state nodes) with what they have left.

    ``bound`` is ``view.bound_pods()`` (by state node key). With ``derived`` a state node
    with the same bound pods as in an earlier build is taken from there.
    """
    known = derived.existing if derived is not None else None
    memo = view.options_memo
    requests: Callable[[Pod], Mapping[str, int]] = (
        _slot_requests if memo is None else partial(memo.requests.get, compute=_slot_requests)
    )
    if known is not None and len(known) > 2 * len(view.nodes) + _EXISTING_SLACK:
        known.clear()  # older snapshots' nodes: start again
    nodes: dict[str, _ExistingNode] = {}
    for state in view.nodes:
        if state.deleting or state.unschedulable:
            continue
        pods = bound.get(state.key, [])
        key = (id(state), tuple(map(id, pods))) if known is not None else None
        if known is not None and key is not None:
            hit = known.get(key)
            if hit is not None:
                if hit[2] is not None:
                    nodes[hit[2].id] = hit[2]
                continue
        resolved = _resolved(view, state, daemons)
        node_bin = None
        if resolved is not None:
            labels, allocatable = resolved
            node_bin = _node_bin(state, labels, allocatable, pods, requests)
            nodes[node_bin.id] = node_bin
        if known is not None and key is not None:
            known[key] = (state, tuple(pods), node_bin)
    return nodes


@dataclass(frozen=True, slots=True)
class ExistingRoom:
    """What an existing node or in-flight NodeClaim has left for pending pods.

    Attributes:
        id: the state node key.
        labels: its labels (an in-flight NodeClaim's known ones).
        taints: its scheduling taints.
        remaining: its free allocatable in milli-units (whole GPUs only).
    """

    id: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    remaining: Mapping[str, int]


def existing_room(view: ClusterView, daemons: DaemonOverhead) -> list[ExistingRoom]:
    """The room the planner sees on the view's state nodes (as :func:`build_problem` does)."""
    nodes = _existing_bins(view, daemons, view.bound_pods())
    return [
        ExistingRoom(n.id, dict(n.labels), n.taints, dict(n.remaining))
        for _, n in sorted(nodes.items())
    ]


def _resolved(
    view: ClusterView, state: StateNode, daemons: DaemonOverhead
) -> tuple[dict[str, str], dict[str, int]] | None:
    """The labels and allocatable of a state node; None when they cannot be known.

    A registered Node reports its own (its DaemonSet pods are bound to it). An in-flight
    NodeClaim has its launched allocatable, or else the smallest of its instance types, and
    its DaemonSet pods are still to come, so their requests are taken off.
    """
    labels = dict(state.labels)
    if state.registered:
        return labels, dict(state.allocatable or {})
    allocatable = dict(state.allocatable) if state.allocatable is not None else None
    if allocatable is None:
        types = _claim_types(view, state)
        if not types:
            return None
        allocatable = _smallest(t.allocatable for t in types)
        if len(types) == 1:
            labels = {**types[0].labels, **labels}
    overhead = daemons.requests_for(labels, state.taints)
    return labels, {k: max(v, 0) for k, v in subtract(allocatable, overhead).items()}


def _claim_types(view: ClusterView, state: StateNode) -> list[InstanceType]:
    """The instance types an in-flight NodeClaim may launch as (those its pool still has)."""
    pool = view.pool(state.pool)
    if pool is None or not state.instance_types:
        return []
    allowed = set(state.instance_types)
    return [t for t in pool.instance_types if t.name in allowed]


def _smallest(lists: Iterable[Mapping[str, int]]) -> dict[str, int]:
    result: dict[str, int] | None = None
    for values in lists:
        if result is None:
            result = dict(values)
        else:
            result = {k: min(v, values.get(k, 0)) for k, v in result.items()}
    return result or {}


def _largest(lists: Iterable[Mapping[str, int]]) -> dict[str, int]:
    result: dict[str, int] = {}
    for values in lists:
        for name, value in values.items():
            result[name] = max(result.get(name, 0), value)
    return result


def _slot_requests(pod: Pod) -> Mapping[str, int]:
    """The pod's requests with its pod slot."""
    return with_pod_slot(requests_of(pod))


def _node_bin(
    state: StateNode,
    labels: dict[str, str],
    allocatable: Mapping[str, int],
    pods: Sequence[Pod],
    pod_requests: Callable[[Pod], Mapping[str, int]] = _slot_requests,
) -> _ExistingNode:
    if state.name:
        labels.setdefault(wk.LABEL_HOSTNAME, state.name)
    used: dict[str, int] = {}
    for pod in pods:
        for name, amount in pod_requests(pod).items():
            used[name] = used.get(name, 0) + amount
    remaining = {name: max(amount, 0) for name, amount in subtract(allocatable, used).items()}
    shared = _shared_devices(pods)
    # a shared device whose KAI reservation pod is bound was already subtracted (gpu: 1)
    reserved = sum(1 for pod in pods if is_gpu_reservation_pod(pod))
    whole_free = max(remaining.get(GPU, 0) // 1000 - max(len(shared) - reserved, 0), 0)
    remaining[GPU] = whole_free * 1000
    devices = allocatable.get(GPU, 0) // 1000
    partial = sorted((GPU_MILLI - use for use in shared if use < GPU_MILLI), reverse=True)
    gpus_free = (1000,) * whole_free + tuple(partial[: max(devices - whole_free, 0)])
    taints = tuple(
        Taint(key=t.key, value=t.value, effect=t.effect)  # timeAdded is not kept
        for t in state.taints
        if t.effect in SCHEDULING_EFFECTS
    )
    return _ExistingNode(
        id=state.key,
        zone=labels.get(wk.LABEL_ZONE, ""),
        pool=state.pool,
        labels=labels,
        taints=taints,
        remaining=remaining,
        gpus_free=gpus_free,
        hostname=state.name,
    )


def _shared_devices(pods: Sequence[Pod]) -> list[int]:
    """The share taken on each device hosting fractions of ``pods`` (milli-GPU per device).

    Pods KAI has bound carry their device in the ``runai-gpu-group`` label: those of one group
    share one device. Pods without it are each counted on devices of their own, which never
    overstates the room left (fractions packed tightly would).
    """
    groups: dict[str, int] = defaultdict(int)
    alone: list[int] = []
    for pod in pods:
        fraction = _safe_fraction(pod)
        if fraction is None:
            continue
        milli, count = fraction
        group = (pod.metadata.labels or {}).get(RUNAI_GPU_GROUP)
        if group and count == 1:
            groups[group] += milli
        else:
            alone.extend([milli] * count)
    return [*(min(use, GPU_MILLI) for _, use in sorted(groups.items())), *alone]


def _safe_fraction(pod: Pod) -> tuple[int, int] | None:
    try:
        fraction = gpu_fraction_milli(pod, None)
    except FractionError:
        return None
    if fraction is None or fraction[0] >= GPU_MILLI:
        return None
    return fraction


def _solver_existing(node: _ExistingNode, names: Sequence[str]) -> ExistingBin:
    return ExistingBin(
        id=node.id,
        zone=node.zone,
        pool=node.pool,
        remaining=capacity_units(node.remaining, names),
        gpu_free_milli=node.gpus_free,
    )


# --- gangs -----------------------------------------------------------------------------------


def _gangs(
    view: ClusterView,
    bound: Mapping[str, Sequence[Pod]],
    pending: Sequence[_Pending],
    build: Build,
) -> list[Gang]:
    """Gangs among the pending pods; members of groups that are not gangs lose their gang id."""
    members: dict[str, list[_Pending]] = defaultdict(list)
    for item in pending:
        if item.gang is not None:
            members[item.gang].append(item)
    if not members:  # most batches: no gang member pending, nothing to index
        return []
    node_of = {_key(pod): node for node, pods in bound.items() for pod in pods}
    state_nodes = {state.key: state for state in view.nodes}
    gangs: list[Gang] = []
    for gang_id, items in sorted(members.items()):
        ref = detect_group(items[0].facts.pod)
        info = group_info(ref, view.groups) if ref is not None else None
        if info is None or not info.is_gang:
            for item in items:
                item.gang = None
            continue
        build.gangs[gang_id] = info
        running = [node_of[m] for m in info.members if m in node_of]
        # never capped by the pending members present: members lost to a volume problem or
        # a missing fit must not shrink the gang (rule 6); _drop_short_gangs handles that
        minimum = max(1, (info.min_count or 1) - len(running))
        pool, zone = _running_domain(running, state_nodes)
        gangs.append(
            Gang(
                gang_id,
                minimum,
                same_pool=True,
                same_zone=info.same_zone,
                pool=pool,
                zone=zone if info.same_zone else None,
            )
        )
    return gangs


def _running_domain(
    nodes: Sequence[str], state_nodes: Mapping[str, StateNode]
) -> tuple[str | None, str | None]:
    """The NodePool and zone of a gang's running (bound or nominated) members, if any.

    Members split over several (placed before Jointer, or by hand) give the most common one.
    """
    pools: dict[str, int] = defaultdict(int)
    zones: dict[str, int] = defaultdict(int)
    for node in nodes:
        state = state_nodes.get(node)
        if state is None:
            continue
        if state.pool:
            pools[state.pool] += 1
        if state.zone:
            zones[state.zone] += 1

    def most(counts: Mapping[str, int]) -> str | None:
        return min(counts, key=lambda k: (-counts[k], k)) if counts else None

    return most(pools), most(zones)


def _anchor_gangs(  # noqa: PLR0917 - private, called once
    gangs: Sequence[Gang],
    pending: Sequence[_Pending],
    allowed: dict[str, frozenset[str]],
    allowed_existing: dict[str, frozenset[str]],
    options: Mapping[str, Option],
    existing: Mapping[str, _ExistingNode],
) -> None:
    """Tie the pending members of gangs with running members to those members' pool and zone."""
    anchors = {g.id: (g.pool, g.zone) for g in gangs if g.pool is not None or g.zone is not None}
    if not anchors:
        return
    narrowed: dict[tuple[frozenset[str], str | None, str | None, bool], frozenset[str]] = {}

    def narrow(
        ids: frozenset[str], pool: str | None, zone: str | None, new: bool
    ) -> frozenset[str]:
        key = (ids, pool, zone, new)
        cached = narrowed.get(key)
        if cached is None:
            cached = frozenset(
                i
                for i in ids
                if (pool is None or (options[i].pool.name if new else existing[i].pool) == pool)
                and (
                    zone is None or (options[i].offering.zone if new else existing[i].zone) == zone
                )
            )
            narrowed[key] = cached
        return cached

    for item in pending:
        anchor = anchors.get(item.gang or "")
        if anchor is None:
            continue
        key = item.facts.key
        allowed[key] = narrow(allowed[key], *anchor, new=True)
        allowed_existing[key] = narrow(allowed_existing[key], *anchor, new=False)


def _drop_short_gangs(
    classes: Sequence[PodClass], gangs: Sequence[Gang], build: Build
) -> tuple[list[PodClass], list[Gang]]:
    """Gangs with fewer plannable members than their minimum get nothing: all unschedulable."""
    kept_gangs: list[Gang] = []
    short: dict[str, Gang] = {}
    for gang in gangs:
        total = sum(c.count for c in classes if c.gang == gang.id)
        if total < gang.min_count:
            short[gang.id] = gang
        else:
            kept_gangs.append(gang)
    if not short:
        return list(classes), kept_gangs
    kept: list[PodClass] = []
    for c in classes:
        short_gang = short.get(c.gang or "")
        if short_gang is None:
            kept.append(c)
            continue
        info = build.gangs.get(short_gang.id)
        name = info.key if info is not None else short_gang.id
        reason = (
            f"pod group {name} cannot be placed whole: fewer than {short_gang.min_count} of its "
            "members can be planned for, so none are placed"
        )
        build.unschedulable.extend((pod.key, reason) for pod in build.class_pods.pop(c.key, []))
        build.class_allowed.pop(c.key, None)
        build.class_carries.pop(c.key, None)
    return kept, kept_gangs


# --- topology --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TopologyContext:
    """What topology constraints are computed from."""

    pending: Sequence[_Pending]
    bound: Mapping[str, Sequence[Pod]]
    node_zone: Mapping[str, str]
    allowed: Mapping[str, frozenset[str]]
    options: Mapping[str, Option]
    existing: Mapping[str, _ExistingNode]
    by_labels: Mapping[str, _LabelSets]

    def counts(
        self, namespaces: Iterable[str], selector: SelectorKey, *, zone: bool
    ) -> dict[str, int]:
        return _bound_counts(self.bound, namespaces, selector, self.node_zone if zone else None)


def _topology(  # noqa: PLR0917 - private, called once
    view: ClusterView,
    bound: Mapping[str, Sequence[Pod]],
    pending: Sequence[_Pending],
    allowed: Mapping[str, frozenset[str]],
    options: Mapping[str, Option],
    existing: Mapping[str, _ExistingNode],
) -> tuple[list[TopologyConstraint], list[_CoLocationSpec]]:
    """Spread, anti-affinity and affinity constraints among the pending pods.

    Each constraint covers the pods its selector matches (in the carrier's namespaces);
    they are marked on each ``_Pending`` so that classes split along constraint membership.
    """
    context = _TopologyContext(
        pending=pending,
        bound=bound,
        node_zone={n.key: n.zone for n in view.nodes},
        allowed=allowed,
        options=options,
        existing=existing,
        by_labels=_by_labels(pending),
    )
    constraints = _spread_constraints(context)
    constraints.extend(_anti_affinities(context))
    return constraints, _affinity_specs(context)


def _spread_constraints(context: _TopologyContext) -> list[TopologyConstraint]:
    groups: dict[tuple[str, SpreadTerm], list[_Pending]] = defaultdict(list)
    for item in context.pending:
        for spread in item.facts.spreads:
            groups[(item.facts.namespace, spread)].append(item)
    constraints: list[TopologyConstraint] = []
    for index, ((namespace, term), carriers) in enumerate(
        sorted(groups.items(), key=lambda kv: repr(kv[0]))
    ):
        selected = _selected(context.by_labels, (namespace,), term.selector)
        if not selected:
            continue
        cid = f"spread-{index}"
        zone = term.topology_key == wk.LABEL_ZONE
        counts = context.counts((namespace,), term.selector, zone=zone)
        if zone:
            allowed_sets = {context.allowed[carrier.facts.key] for carrier in carriers}
            zones = sorted(
                {context.options[o].offering.zone for ids in allowed_sets for o in ids}
                | {node.zone for node in context.existing.values() if node.zone}
            )
            if not zones:
                continue
            constraint = SpreadConstraint(
                cid, TopologyKey.ZONE, term.max_skew, tuple(zones), counts
            )
        else:
            constraint = SpreadConstraint(cid, TopologyKey.HOSTNAME, term.max_skew, (), counts)
        constraints.append(constraint)
        for item in selected:
            item.topology.add(cid)
    return constraints


def _affinity_groups(
    pending: Sequence[_Pending], *, anti: bool
) -> list[tuple[AffinityTerm, list[_Pending]]]:
    groups: dict[AffinityTerm, list[_Pending]] = defaultdict(list)
    for item in pending:
        for term in item.facts.anti_affinities if anti else item.facts.affinities:
            groups[term].append(item)
    return sorted(groups.items(), key=lambda kv: repr(kv[0]))


def _anti_affinities(context: _TopologyContext) -> list[TopologyConstraint]:
    constraints: list[TopologyConstraint] = []
    for index, (term, carriers) in enumerate(_affinity_groups(context.pending, anti=True)):
        cid = f"anti-{index}"
        zone = term.topology_key == wk.LABEL_ZONE
        counts = context.counts(term.namespaces, term.selector, zone=zone)
        key = TopologyKey.ZONE if zone else TopologyKey.HOSTNAME
        constraints.append(AntiAffinity(cid, key, frozenset(d for d, n in counts.items() if n)))
        members = [*carriers, *_selected(context.by_labels, term.namespaces, term.selector)]
        for item in members:
            item.topology.add(cid)
    return constraints


def _affinity_specs(context: _TopologyContext) -> list[_CoLocationSpec]:
    specs: list[_CoLocationSpec] = []
    for index, (term, carriers) in enumerate(_affinity_groups(context.pending, anti=False)):
        cid = f"affinity-{index}"
        zone = term.topology_key == wk.LABEL_ZONE
        counts = context.counts(term.namespaces, term.selector, zone=zone)
        key = TopologyKey.ZONE if zone else TopologyKey.HOSTNAME
        specs.append(_CoLocationSpec(cid, key, frozenset(d for d, n in counts.items() if n)))
        for item in _selected(context.by_labels, term.namespaces, term.selector):
            item.topology.add(cid)
        for item in carriers:
            item.carries.add(cid)
    return specs


@dataclass(frozen=True, slots=True)
class _CoLocationSpec:
    id: str
    key: TopologyKey
    satisfied: frozenset[str]


def _affinities(
    specs: Sequence[_CoLocationSpec],
    classes: Sequence[PodClass],
    options: Mapping[str, Option],
    existing: Mapping[str, _ExistingNode],
    build: Build,
) -> tuple[list[PodClass], list[TopologyConstraint]]:
    """Required pod affinity as solver constraints, once classes are known.

    kube-scheduler lets a pod whose own labels match its affinity term go anywhere only while
    no matching pod exists in the cluster (the first pod); every later carrier must find a
    match in its domain. So the carriers that match themselves:

    * with a match already bound, go only to domains that hold one (their allowed offerings
      and nodes are cut to those domains);
    * with none bound, all go to one domain, chosen by the solver for cost: one zone
      (``Affinity``) or one node (``Affinity`` with the hostname key).

    Carriers that do not match themselves keep the ``CoLocation`` rule (a target pod in their
    domain, or a bound one).
    """
    carriers: dict[str, set[str]] = defaultdict(set)
    for key, carried in build.class_carries.items():
        for cid in carried:
            carriers[cid].add(key)
    by_key = {c.key: c for c in classes}
    extra_topology: dict[str, set[str]] = defaultdict(set)
    cut: dict[str, list[_CoLocationSpec]] = defaultdict(list)
    constraints: list[TopologyConstraint] = []
    for spec in specs:
        keys = frozenset(carriers[spec.id] & by_key.keys())
        if not keys:
            continue
        constraints.append(CoLocation(spec.id, spec.key, keys, spec.satisfied))
        own = sorted(k for k in keys if spec.id in by_key[k].topology)
        if not own:
            continue
        if spec.satisfied:
            for k in own:
                cut[k].append(spec)
            continue
        first = f"{spec.id}-first"
        constraints.append(Affinity(first, key=spec.key))
        for k in sorted(keys):
            extra_topology[k].add(first)
    out: list[PodClass] = []
    for original in classes:
        c = original
        for spec in cut.get(c.key, ()):
            c = _within(c, spec, options, existing)
            build.class_allowed[c.key] = c.allowed_bin_types
        if c.key in extra_topology:
            c = replace(c, topology=c.topology | extra_topology[c.key])
        out.append(c)
    return out, constraints


def _within(
    c: PodClass,
    spec: _CoLocationSpec,
    options: Mapping[str, Option],
    existing: Mapping[str, _ExistingNode],
) -> PodClass:
    """``c`` cut to the domains of ``spec`` that already hold a matching pod."""
    if spec.key is TopologyKey.HOSTNAME:
        return replace(
            c,
            allowed_bin_types=frozenset(),
            allowed_existing=c.allowed_existing & spec.satisfied,
        )
    return replace(
        c,
        allowed_bin_types=frozenset(
            o for o in c.allowed_bin_types if options[o].offering.zone in spec.satisfied
        ),
        allowed_existing=frozenset(
            e for e in c.allowed_existing if existing[e].zone in spec.satisfied
        ),
    )


class _LabelSets:
    """The pending pods of one namespace by label set, the label sets indexed by label.

    A selector is tested only on the label sets that carry the labels it requires (its
    ``matchLabels`` pairs, an ``In`` expression's values, an ``Exists`` key): with thousands
    of distinct label sets and hundreds of selectors (one per spread, affinity or group),
    testing every set against every selector dominated the topology step.
    """

    def __init__(self) -> None:
        self.items: dict[tuple[tuple[str, str], ...], list[_Pending]] = {}
        self._order: dict[tuple[tuple[str, str], ...], int] = {}
        self._by_pair: dict[tuple[str, str], list[tuple[tuple[str, str], ...]]] = {}
        self._by_key: dict[str, list[tuple[tuple[str, str], ...]]] = {}

    def add(self, item: _Pending) -> None:
        """File ``item`` under its label set."""
        key = item.facts.label_key
        members = self.items.get(key)
        if members is None:
            members = self.items[key] = []
            self._order[key] = len(self._order)
            for label, value in item.facts.labels.items():
                self._by_pair.setdefault((label, value), []).append(key)
                self._by_key.setdefault(label, []).append(key)
        members.append(item)

    def selected(self, selector: SelectorKey) -> list[_Pending]:
        """The pods whose labels ``selector`` matches, label sets in the order first seen."""
        match_labels, expressions = selector
        narrowest: list[tuple[tuple[str, str], ...]] | None = None
        for pair in match_labels:
            narrowest = _narrower(narrowest, self._by_pair.get(pair, []))
        for label, operator, values in expressions:
            if operator == "In":
                # a label set has one value per label: each set comes once, whatever repeats
                chosen = dict.fromkeys(values)
                within = [k for value in chosen for k in self._by_pair.get((label, value), [])]
                narrowest = _narrower(narrowest, within)
            elif operator == "Exists":
                narrowest = _narrower(narrowest, self._by_key.get(label, []))
        order = self._order
        keys = list(self.items) if narrowest is None else sorted(narrowest, key=order.__getitem__)
        selected: list[_Pending] = []
        for key in keys:
            members = self.items[key]
            if selector_matches(selector, members[0].facts.labels):
                selected.extend(members)
        return selected


def _narrower(
    known: list[tuple[tuple[str, str], ...]] | None, other: list[tuple[tuple[str, str], ...]]
) -> list[tuple[tuple[str, str], ...]]:
    return other if known is None or len(other) < len(known) else known


def _by_labels(pending: Sequence[_Pending]) -> dict[str, _LabelSets]:
    """The pending pods by namespace and label set, so selectors are matched once per set."""
    index: dict[str, _LabelSets] = {}
    for item in pending:
        labelled = index.get(item.facts.namespace)
        if labelled is None:
            labelled = index[item.facts.namespace] = _LabelSets()
        labelled.add(item)
    return index


def _selected(
    by_labels: Mapping[str, _LabelSets],
    namespaces: Iterable[str],
    selector: SelectorKey,
) -> list[_Pending]:
    """The pending pods in ``namespaces`` whose labels ``selector`` matches."""
    selected: list[_Pending] = []
    for namespace in dict.fromkeys(namespaces):
        labelled = by_labels.get(namespace)
        if labelled is not None:
            selected.extend(labelled.selected(selector))
    return selected


def _bound_counts(
    bound: Mapping[str, Sequence[Pod]],
    namespaces: Iterable[str],
    selector: SelectorKey,
    node_zone: Mapping[str, str] | None,
) -> dict[str, int]:
    spaces = set(namespaces)
    counts: dict[str, int] = defaultdict(int)
    for node, pods in bound.items():
        domain = node_zone.get(node, "") if node_zone is not None else node
        if not domain:
            continue
        for pod in pods:
            if (pod.metadata.namespace or "default") in spaces and selector_matches(
                selector, pod.metadata.labels
            ):
                counts[domain] += 1
    return dict(counts)


# --- classes and bin types -------------------------------------------------------------------


def _classes(
    pending: Sequence[_Pending],
    *,
    allowed: Mapping[str, frozenset[str]],
    allowed_existing: Mapping[str, frozenset[str]],
    options: Mapping[str, Option],
    existing: Mapping[str, _ExistingNode],
    build: Build,
    derived: _Derived | None = None,
) -> list[PodClass]:
    groups: dict[tuple[object, ...], list[_Pending]] = {}
    for item in pending:
        signature = (
            tuple(sorted(item.facts.requests.items())),
            item.compat_key,
            item.fraction,
            item.gang,
            frozenset(item.topology),
            frozenset(item.carries),
        )
        groups.setdefault(signature, []).append(item)
    classes: list[PodClass] = []
    fit = _ClassFit(options, existing, allowed, allowed_existing, derived)
    for index, (_, items) in enumerate(groups.items()):
        first = items[0]
        fitting, fitting_existing = fit.fitting(first)
        if not fitting and not fitting_existing:
            reason = _no_capacity_reason(first, allowed[first.facts.key], options, build.explainer)
            build.unschedulable.extend((item.facts.key, reason) for item in items)
            continue
        class_key = f"c{index}-{_short_hash(first.facts.key)}"
        build.class_pods[class_key] = [item.facts for item in items]
        build.class_allowed[class_key] = fitting
        build.class_carries[class_key] = frozenset(first.carries)
        classes.append(
            PodClass(
                key=class_key,
                count=len(items),
                demand=fit.demand(first.facts.requests),
                allowed_bin_types=fitting,
                allowed_existing=fitting_existing,
                gpu_fraction_milli=first.fraction,
                gang=first.gang if first.gang in build.gangs else None,
                topology=frozenset(first.topology),
            )
        )
    return classes


_EXISTING_SLACK: Final = 64
"""Existing nodes remembered beyond twice the view's before the memo starts again."""
_EXISTING_INDEX_MIN: Final = 64
"""From this many existing nodes a class's fit is found with arrays (consolidation at scale)."""
_INT64_SAFE: Final = 2**62


class _ResourceColumns:
    """Resource lists side by side: per resource, one int64 column, built on first use.

    Values are capped at ``_INT64_SAFE`` (a larger request gets no mask: the caller tests it
    plainly), so ``holding`` is the test of :func:`fits` on every list at once.
    """

    def __init__(self, lists: Sequence[Mapping[str, int]]) -> None:
        self._lists = lists
        self._columns: dict[str, npt.NDArray[np.int64]] = {}

    def _column(self, name: str) -> npt.NDArray[np.int64]:
        column = self._columns.get(name)
        if column is None:
            column = np.fromiter(
                (min(values.get(name, 0), _INT64_SAFE) for values in self._lists),
                dtype=np.int64,
                count=len(self._lists),
            )
            self._columns[name] = column
        return column

    def holding(self, requests: Mapping[str, int]) -> npt.NDArray[np.bool_] | None:
        """Per list, whether it holds ``requests``; None when a request is past int64."""
        if any(milli >= _INT64_SAFE for milli in requests.values()):
            return None
        mask = np.ones(len(self._lists), dtype=np.bool_)
        for name, milli in requests.items():
            if milli > 0:
                mask &= self._column(name) >= milli
        return mask


class _ExistingFitIndex:
    """The existing nodes a request fits on, by one vectorised comparison per resource.

    Built lazily (one column per resource asked about); results are cached per (requests,
    GPU fraction). The same test as :func:`fits` plus the GPU-fraction test.
    """

    def __init__(self, existing: Mapping[str, _ExistingNode]) -> None:
        self._existing = existing
        self._ids = list(existing)
        self._room = _ResourceColumns([n.remaining for n in existing.values()])
        self._gpu_free: npt.NDArray[np.int64] | None = None
        self._cache: dict[object, frozenset[str]] = {}

    def fitting(self, requests: Mapping[str, int], fraction: int) -> frozenset[str]:
        """Ids of the existing nodes with room for ``requests`` (and a ``fraction`` of a GPU)."""
        key = (tuple(sorted(requests.items())), fraction)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        mask = self._room.holding(requests)
        if mask is None:
            result = frozenset(
                e
                for e, n in self._existing.items()
                if fits(requests, n.remaining)
                and (not fraction or max(n.gpus_free, default=0) >= fraction)
            )
        else:
            if fraction:
                if self._gpu_free is None:
                    self._gpu_free = np.fromiter(
                        (max(n.gpus_free, default=0) for n in self._existing.values()),
                        dtype=np.int64,
                        count=len(self._ids),
                    )
                mask &= self._gpu_free >= fraction
            ids = self._ids
            result = frozenset(ids[i] for i in np.flatnonzero(mask).tolist())
        self._cache[key] = result
        return result


class _ClassFit:
    """The options and existing nodes one pod of a class fits on, cached.

    Computed once per distinct (compatibility, requests, GPU fraction): classes split by
    topology or gang share them. Equal results are the same ``frozenset`` object, so later
    per-set caches hit at once.
    """

    def __init__(
        self,
        options: Mapping[str, Option],
        existing: Mapping[str, _ExistingNode],
        allowed: Mapping[str, frozenset[str]],
        allowed_existing: Mapping[str, frozenset[str]],
        derived: _Derived | None = None,
    ) -> None:
        if derived is None:
            self._index = _FitIndex(options)
            self._fitting: dict[object, frozenset[str]] = {}
            self._interned: dict[frozenset[str], frozenset[str]] = {}
        else:
            if derived.fit_index is None:
                derived.fit_index = _FitIndex(options)
            self._index = derived.fit_index
            self._fitting = derived.fitting
            self._interned = derived.interned
        self._existing = existing
        self._existing_index = _ExistingFitIndex(existing)
        self._allowed = allowed
        self._allowed_existing = allowed_existing
        self._cache: dict[object, tuple[frozenset[str], frozenset[str]]] = {}
        self._demand: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}

    def fitting(self, item: _Pending) -> tuple[frozenset[str], frozenset[str]]:
        """The option ids and existing node ids ``item`` fits on."""
        requests = item.facts.requests
        # the allowed sets are part of the key: a gang tied to its running members' pool
        # and zone has narrower ones than other pods of its signature
        key = (
            item.compat_key,
            tuple(sorted(requests.items())),
            item.fraction,
            self._allowed[item.facts.key],
            self._allowed_existing[item.facts.key],
        )
        cached = self._cache.get(key)
        if cached is None:
            options_key = key[:4]
            options = self._fitting.get(options_key)
            if options is None:
                options = self._intern(
                    self._allowed[item.facts.key] & self._index.fitting(requests, item.fraction)
                )
                self._fitting[options_key] = options
            allowed_existing = self._allowed_existing[item.facts.key]
            if len(allowed_existing) < _EXISTING_INDEX_MIN:
                existing = frozenset(
                    e
                    for e in allowed_existing
                    if fits(requests, self._existing[e].remaining)
                    and (
                        not item.fraction
                        or max(self._existing[e].gpus_free, default=0) >= item.fraction
                    )
                )
            else:
                existing = allowed_existing & self._existing_index.fitting(requests, item.fraction)
            cached = (options, existing)
            self._cache[key] = cached
        return cached

    def demand(self, requests: Mapping[str, int]) -> dict[str, int]:
        """``requests`` in solver units (a fresh dict)."""
        key = tuple(sorted(requests.items()))
        demand = self._demand.get(key)
        if demand is None:
            demand = demand_units(requests)
            self._demand[key] = demand
        return dict(demand)

    def _intern(self, ids: frozenset[str]) -> frozenset[str]:
        return self._interned.setdefault(ids, ids)


class _FitIndex:
    """Which options one pod of a given shape fits on, computed once per shape.

    Options of one pool and instance type share their capacity (allocatable minus the
    DaemonSets of that pool), so a shape is checked once per (pool, instance type), not once
    per offering.
    """

    def __init__(self, options: Mapping[str, Option]) -> None:
        by_shape: dict[tuple[str, str], list[str]] = defaultdict(list)
        self._capacity: dict[tuple[str, str], Option] = {}
        for option in options.values():
            shape = (option.pool.name, option.instance_type.name)
            by_shape[shape].append(option.id)
            self._capacity.setdefault(shape, option)
        self._ids = [frozenset(by_shape[shape]) for shape in self._capacity]
        self._room = _ResourceColumns([o.capacity for o in self._capacity.values()])
        self._gpus: npt.NDArray[np.int64] | None = None
        self._cache: dict[tuple[tuple[tuple[str, int], ...], int], frozenset[str]] = {}

    def fitting(self, requests: Mapping[str, int], fraction: int) -> frozenset[str]:
        """Ids of the options one pod with ``requests`` (and GPU ``fraction``) fits on.

        The test of ``_fits_option``, one vectorised comparison per resource over the shapes.
        """
        key = (tuple(sorted(requests.items())), fraction)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        mask = self._room.holding(requests)
        if mask is None:
            shapes = [
                i
                for i, option in enumerate(self._capacity.values())
                if _fits_option(requests, fraction, option)
            ]
        else:
            if fraction:
                if self._gpus is None:
                    self._gpus = np.fromiter(
                        (o.instance_type.capacity.get(GPU, 0) for o in self._capacity.values()),
                        dtype=np.int64,
                        count=len(self._ids),
                    )
                mask &= self._gpus >= GPU_MILLI
            shapes = np.flatnonzero(mask).tolist()
        ids = self._ids
        cached = frozenset().union(*(ids[i] for i in shapes))
        self._cache[key] = cached
        return cached


def _fits_option(requests: Mapping[str, int], fraction: int, option: Option) -> bool:
    if fraction and option.instance_type.capacity.get(GPU, 0) < GPU_MILLI:
        return False
    return fits(requests, option.capacity)


def _no_capacity_reason(
    item: _Pending, candidates: frozenset[str], options: Mapping[str, Option], explainer: Explainer
) -> str:
    tolerations = item.facts.signature.tolerations
    if not candidates:
        return explainer.incompatible(tolerations, item.alternatives)
    pools = sorted({options[o].pool.name for o in candidates})
    wanted = ", ".join(
        f"{name}={value}"
        for name, value in sorted(format_resource_list(item.facts.requests).items())
        if name != "pods"
    )
    reason = (
        f"no instance type in NodePool {', '.join(pools)} has enough resources "
        f"for requests {wanted}"
    )
    return "; ".join([reason, *explainer.not_ready(tolerations, item.alternatives)])


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:6]


def _bin_types(
    classes: Sequence[PodClass],
    options: Mapping[str, Option],
    names: Sequence[str],
    topology: Sequence[TopologyConstraint],
    derived: _Derived | None = None,
) -> tuple[tuple[BinType, ...], list[PodClass]]:
    """Solver bin types for the options some class may use, minus dominated ones.

    Two options are interchangeable for the solver when the same classes may use them, they
    belong to one pool and (for classes with zone constraints or gangs) one zone; among such
    options one with no less capacity and no higher price dominates. The classes keep their
    full allowed sets in :class:`Build` for listing every fitting instance type afterwards.
    """
    zone_constraints = {
        t.id for t in topology if getattr(t, "key", TopologyKey.ZONE) is TopologyKey.ZONE
    }
    zone_carriers = {
        key
        for t in topology
        if isinstance(t, CoLocation) and t.key is TopologyKey.ZONE
        for key in t.carriers
    }
    # classes sharing an allowed set share their users: work per distinct set, not per class
    sets: dict[frozenset[str], int] = {}
    sensitive_sets: set[int] = set()
    for c in classes:
        index = sets.setdefault(c.allowed_bin_types, len(sets))
        if bool(c.topology & zone_constraints) or c.gang is not None or c.key in zone_carriers:
            sensitive_sets.add(index)
    # the bin types are a function of the sets (in order), which of them are zone-sensitive
    # and the resource names: a build over the same offerings with the same ones reuses them
    memo_key = (tuple(sets), frozenset(sensitive_sets), tuple(names))
    known = derived.bin_types.get(memo_key) if derived is not None else None
    if known is None:
        known = _bin_types_of(sets, sensitive_sets, options, names)
        if derived is not None:
            derived.bin_types[memo_key] = known
    bin_types, narrowed = known
    restricted = [replace(c, allowed_bin_types=narrowed[c.allowed_bin_types]) for c in classes]
    return bin_types, restricted


def _bin_types_of(
    sets: Mapping[frozenset[str], int],
    sensitive_sets: set[int],
    options: Mapping[str, Option],
    names: Sequence[str],
) -> tuple[tuple[BinType, ...], dict[frozenset[str], frozenset[str]]]:
    """The bin types of the options the ``sets`` allow, and each set cut to the kept ones."""
    users: dict[str, list[int]] = defaultdict(list)
    for allowed_set, index in sets.items():
        for o in allowed_set:
            users[o].append(index)
    groups: dict[tuple[object, ...], list[Option]] = defaultdict(list)
    for option_id, indices in users.items():
        option = options[option_id]
        sensitive = any(i in sensitive_sets for i in indices)
        zone = option.offering.zone if sensitive else "*"
        groups[(option.pool.name, zone, tuple(indices))].append(option)
    units = {
        o.id: capacity_units(o.capacity, names) for members in groups.values() for o in members
    }
    kept: list[Option] = []
    for members in groups.values():
        kept.extend(_undominated(members, units))
    kept_ids = {o.id for o in kept}
    limit_usage: dict[tuple[str, str], dict[str, int]] = {}
    for option in kept:
        shape = (option.pool.name, option.instance_type.name)
        if shape not in limit_usage:
            limit_usage[shape] = {**demand_units(option.instance_type.capacity), NODES: 1}
    bin_types = tuple(
        BinType(
            id=o.id,
            instance_type=o.instance_type.name,
            zone=o.offering.zone,
            capacity_type=o.offering.capacity_type,
            pool=o.pool.name,
            capacity=dict(units[o.id]),
            price_micros=to_micros(o.price),
            gpus=o.instance_type.capacity.get(GPU, 0) // GPU_MILLI,
            max_count=o.offering.reservation_capacity,
            limit_usage=dict(limit_usage[(o.pool.name, o.instance_type.name)]),
        )
        for o in sorted(kept, key=lambda o: (o.price, o.id))
    )
    narrowed = {ids: ids & kept_ids for ids in sets}
    return bin_types, narrowed


def _undominated(members: Sequence[Option], units: Mapping[str, Mapping[str, int]]) -> list[Option]:
    """The options no cheaper-or-equal option with at least as much capacity dominates.

    Offerings of one instance type differ only in price here (the group already fixed the
    pool and, where it matters, the zone), so only the cheapest of each type is considered
    (spot first on a tie, as Karpenter prefers spot). ``units`` holds each option's capacity
    in solver units.
    """
    # a reservation holds a limited count: it never hides the unlimited offerings behind it
    limited = [o for o in members if o.offering.reservation_capacity is not None]
    cheapest: dict[str, Option] = {}
    for option in sorted(
        members, key=lambda o: (o.price, 0 if o.offering.capacity_type == "spot" else 1, o.id)
    ):
        if option.offering.reservation_capacity is None:
            cheapest.setdefault(option.instance_type.name, option)
    ordered = list(cheapest.values())
    vectors = [
        (o.instance_type.capacity.get(GPU, 0) // GPU_MILLI, *units[o.id].values()) for o in ordered
    ]
    return limited + [ordered[i] for i in _first_undominated(vectors)]


def _first_undominated(vectors: Sequence[tuple[int, ...]]) -> list[int]:
    """Indices of the vectors that no earlier vector is at least as large as in every component.

    Since "at least as large" is transitive, these are exactly the vectors a first-to-last scan
    keeps when it drops each vector some kept one dominates. Per component, the vectors with at
    least a given value form a bit mask (bit ``i`` for vector ``i``); a vector's dominators are
    the AND of its components' masks, so the scan costs a few big-integer operations per
    vector instead of a comparison with every kept vector.
    """
    count = len(vectors)
    dominators = [(1 << count) - 1] * count
    for component in range(len(vectors[0]) if vectors else 0):
        by_value: dict[int, int] = defaultdict(int)
        for i, vector in enumerate(vectors):
            by_value[vector[component]] |= 1 << i
        at_least = 0
        for value in sorted(by_value, reverse=True):
            at_least |= by_value[value]
            by_value[value] = at_least
        for i, vector in enumerate(vectors):
            dominators[i] &= by_value[vector[component]]
    return [i for i in range(count) if not dominators[i] & ((1 << i) - 1)]


# --- limits ----------------------------------------------------------------------------------


def _limits(view: ClusterView, names: Sequence[str]) -> list[PoolLimit]:
    """What each limited NodePool has left: its limits minus the capacity of its nodes.

    Every NodeClaim that exists counts, the view's ``leaving`` ones too (as Karpenter's
    docs put it, provisioning resumes once nodes have been terminated). An in-flight
    NodeClaim not yet launched counts as its largest instance type, since CreateFleet may
    launch any of them.
    """
    usage_of: dict[str, dict[str, int]] = {}
    for state in (*view.nodes, *view.leaving):
        if not state.pool:
            continue
        capacity = state.capacity
        if capacity is None:
            capacity = _largest(t.capacity for t in _claim_types(view, state))
        usage = usage_of.setdefault(state.pool, {NODES: 0})
        for name, amount in capacity.items():
            usage[name] = usage.get(name, 0) + amount
        usage[NODES] += 1000
    limits: list[PoolLimit] = []
    for pool in view.pools:
        if pool.limits is None:
            continue
        usage = usage_of.get(pool.name, {})
        remaining = {
            name: max(limit - usage.get(name, 0), 0) for name, limit in pool.limits.items()
        }
        limit_names = [*names, NODES, *(n for n in remaining if n not in names and n != NODES)]
        limits.append(
            PoolLimit(
                pool.name, capacity_units(remaining, [n for n in limit_names if n in remaining])
            )
        )
    return limits
