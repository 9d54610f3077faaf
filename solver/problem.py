"""Problem and solution types of the bin-packing optimiser, in integer units.

The provisioner collapses pending pods into classes and precomputes compatibility (requirements,
taints, volume zones, pool/zone of gangs); the solver only sees integers and allowed sets.

Units (the caller chooses, the solver only adds and compares integers):
    * resources are ``Mapping[str, int]`` keyed by resource name (``cpu`` in millicores,
      ``memory`` in MiB, ``pods``, ``nvidia.com/gpu`` whole devices, any extended resource). A
      resource missing from a capacity map has capacity 0; missing from a demand map, demand 0.
    * prices are micro-dollars per hour (``price_micros``).
    * GPU fractions are milli-devices: a pod with ``gpu_fraction_milli=500`` needs half of ONE
      physical GPU; the fractions on one physical GPU sum to at most 1000.

GPU model (uniform for new and existing bins): a bin has physical devices, each with a free
fraction (new bins: ``BinType.gpus`` devices with 1000 free each; existing bins:
``ExistingBin.gpu_free_milli``). Whole-GPU requests use the resource ``Problem.gpu_resource``
and are checked against ``capacity[gpu_resource]`` like any resource; in addition every
*fully free* device (1000 free) that receives a fraction consumes one unit of
``capacity[gpu_resource]``. So on an existing node pass ``remaining[gpu_resource]`` = devices
that are completely unused and list in ``gpu_free_milli`` every device with its free share
(1000 for the unused ones, less for devices already hosting fractions).

Ids: every ``BinType.id``, ``ExistingBin.id``, ``PodClass.key``, ``Gang.id`` and topology
constraint id is an opaque string unique within its kind; the solution refers back to them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

GPU_MILLI = 1000
"""Capacity of one physical GPU in fraction milli-units."""


class ProblemError(ValueError):
    """The problem is structurally invalid (unknown ids, negative numbers, bad topology)."""


class TopologyKey(StrEnum):
    """Topology domain of a constraint."""

    ZONE = "zone"
    HOSTNAME = "hostname"


class Status(StrEnum):
    """How good a solution is known to be."""

    OPTIMAL = "OPTIMAL"
    """Proven: cost equals the lower bound (or nothing new had to be bought)."""
    FEASIBLE = "FEASIBLE"
    """The optimiser improved on the greedy start but did not prove optimality."""
    GREEDY = "GREEDY"
    """Nothing better than the greedy start was found (or a greedy policy was asked for)."""


class UnplacedReason(StrEnum):
    """Why pods of a class were left unplaced."""

    GANG = "gang"
    """The pod's gang could not be placed whole (at least ``min_count``), so nothing was placed."""
    NO_CAPACITY = "no_capacity"
    """No allowed bin type or existing bin can hold even one pod of the class."""
    LIMIT = "limit"
    """A bin type fits, but node pool limits or offering counts (``max_count``) are exhausted."""
    TOPOLOGY = "topology"
    """Capacity exists but spread, affinity or anti-affinity rules forbid more pods."""


@dataclass(frozen=True, slots=True)
class BinType:
    """An offering new capacity can be bought as: instance type x zone x capacity type x pool.

    Attributes:
        id: unique id of the offering (e.g. ``"default/m7i.large/us-east-1a/spot"``).
        instance_type: instance type name (``"m7i.large"``).
        zone: availability zone.
        capacity_type: ``"spot"`` or ``"on-demand"`` (informational for the solver).
        pool: NodePool name; limits and weights are per pool.
        capacity: allocatable after kubelet reservations and DaemonSet overhead, per resource.
        price_micros: hourly price in micro-dollars.
        max_count: at most this many new bins of this offering (``None``: unbounded).
        gpus: physical GPU devices, for fractional packing (see module docstring).
        limit_usage: what one node of this type counts against its pool's ``PoolLimit``
            (Karpenter counts the full instance capacity, not allocatable); empty = ``capacity``.
    """

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    pool: str
    capacity: Mapping[str, int]
    price_micros: int
    max_count: int | None = None
    gpus: int = 0
    limit_usage: Mapping[str, int] = field(default_factory=dict)

    def usage_for_limits(self) -> Mapping[str, int]:
        """Return what one bin of this type consumes from its pool's limits."""
        return self.limit_usage or self.capacity


@dataclass(frozen=True, slots=True)
class ExistingBin:
    """An existing node or in-flight NodeClaim: capacity used at zero cost before anything new.

    Attributes:
        id: unique id (node or NodeClaim name).
        zone: its zone.
        pool: its NodePool (``""`` for nodes outside any pool).
        remaining: allocatable minus the requests of pods already bound, per resource.
        gpu_free_milli: free fraction per physical GPU (1000 = unused; see module docstring).
    """

    id: str
    zone: str
    pool: str
    remaining: Mapping[str, int]
    gpu_free_milli: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PodClass:
    """Identical pending pods collapsed into one class.

    Attributes:
        key: unique id of the class.
        count: number of pods.
        demand: requests of one pod per resource (``pods`` should be 1 if the caller counts pods).
        allowed_bin_types: ids of ``BinType`` s a pod may go to (requirements, taints, volume zone).
        allowed_existing: ids of ``ExistingBin`` s a pod may go to.
        gpu_fraction_milli: 0, or the share (1..999) of ONE physical GPU each pod needs.
        gang: id of the ``Gang`` the pods belong to, if any.
        topology: ids of topology constraints (``SpreadConstraint``, ``AntiAffinity``,
            ``Affinity``, ``CoLocation``) whose selector matches these pods (for
            ``CoLocation``: the pods are its targets; carriers are listed on the constraint).
    """

    key: str
    count: int
    demand: Mapping[str, int]
    allowed_bin_types: frozenset[str]
    allowed_existing: frozenset[str] = frozenset()
    gpu_fraction_milli: int = 0
    gang: str | None = None
    topology: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Gang:
    """All-or-nothing group: at least ``min_count`` of its pods placed, or none.

    The members are the pods of every class whose ``gang`` is this id, on new and existing
    bins together.

    Attributes:
        id: unique id.
        min_count: minimum number of placed members (1..total members).
        same_pool: placed members all on bins of one node pool.
        same_zone: placed members all on bins of one zone.
        pool: the node pool of members already running (bound or nominated), if any: placed
            members must be on bins of it (with ``same_pool``). The caller also narrows the
            members' allowed sets to it; the solver does not search other pools.
        zone: likewise the zone of members already running (with ``same_zone``).
    """

    id: str
    min_count: int
    same_pool: bool = True
    same_zone: bool = True
    pool: str | None = None
    zone: str | None = None


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``DoNotSchedule`` topology spread over the pods of the classes that list its id.

    Zone key: with n_z = ``existing[z]`` + placed matching pods in zone z, for z in ``zones``,
    ``max(n) - min(n) <= max_skew``; matching pods may only be placed in ``zones``.
    Hostname key: on every bin, ``existing[bin id]`` + placed matching pods ``<= max_skew``
    (the global minimum is 0 because a new node can always be made, as in Karpenter).

    Attributes:
        id: unique constraint id.
        key: topology key.
        max_skew: the maxSkew (>= 1).
        zones: eligible zones (zone key only).
        existing: already bound matching pods per zone (zone key) or per existing bin id
            (hostname key).
    """

    id: str
    key: TopologyKey
    max_skew: int
    zones: tuple[str, ...] = ()
    existing: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AntiAffinity:
    """Required pod anti-affinity among the matching pods: at most one per domain.

    Attributes:
        id: unique constraint id.
        key: zone (one matching pod per zone) or hostname (one per bin).
        occupied: domains (zone names or existing bin ids) already hosting a matching pod;
            no matching pod may be placed there.
    """

    id: str
    key: TopologyKey
    occupied: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Affinity:
    """Required pod affinity to one domain: all placed matching pods in a single zone or bin.

    This is kube-scheduler's first-pod rule for a group whose term matches its own pods while
    no matching pod runs: the first pod may go anywhere, every later one only where a match
    is, so they all end in the first one's domain (the solver picks it for cost).

    Attributes:
        id: unique constraint id.
        zones: the domains allowed for that single domain: zone names (zone key) or existing
            bin ids (hostname key; a new bin is then not allowed); ``None`` = any domain.
        key: zone (one zone) or hostname (one bin, new or existing).
    """

    id: str
    zones: frozenset[str] | None = None
    key: TopologyKey = TopologyKey.ZONE


@dataclass(frozen=True, slots=True)
class CoLocation:
    """Required pod affinity (Kubernetes semantics): carriers only where a target is.

    The *targets* are the pods of the classes whose ``PodClass.topology`` lists this id (the
    pods the affinity term's selector matches); the *carriers* are the pods of the classes in
    ``carriers`` (the pods whose spec carries the term). Rule: every bin (hostname key) or zone
    (zone key) that hosts at least one carrier pod also hosts at least one target pod, or is in
    ``satisfied``. A carrier class that is itself a target satisfies the rule by its own
    presence (Kubernetes lets a pod that matches its own term schedule anywhere). New bins are
    never in ``satisfied``.

    Attributes:
        id: unique constraint id.
        key: zone or hostname.
        carriers: class keys of the pods that carry the affinity term.
        satisfied: zone names (zone key) or existing bin ids (hostname key) where a matching
            pod is already bound.
    """

    id: str
    key: TopologyKey
    carriers: frozenset[str]
    satisfied: frozenset[str] = frozenset()


TopologyConstraint = SpreadConstraint | AntiAffinity | Affinity | CoLocation


@dataclass(frozen=True, slots=True)
class PoolLimit:
    """Remaining ``spec.limits`` of a NodePool (limit minus what its nodes already use).

    Every new bin of the pool consumes its type's ``usage_for_limits()``; a resource not
    listed is unlimited.
    """

    pool: str
    remaining: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Problem:
    """A whole planning problem.

    Attributes:
        bin_types: offerings for new capacity.
        existing: existing nodes and in-flight claims, used at zero cost.
        classes: pending pod classes.
        gangs: gangs referenced by ``PodClass.gang``.
        topology: topology constraints referenced by ``PodClass.topology``.
        limits: remaining node pool limits.
        pool_weights: NodePool ``spec.weight`` per pool (missing = 0). Planned in tiers
            (``solver.tiers``): a class uses only the bin types of the highest-weight pool
            that can take one of its pods (``solver.weights.apply_pool_weights``); pods left
            when that pool's limits run out fall through to the next pool.
        gpu_resource: the resource name of whole GPUs.
    """

    bin_types: tuple[BinType, ...]
    classes: tuple[PodClass, ...]
    existing: tuple[ExistingBin, ...] = ()
    gangs: tuple[Gang, ...] = ()
    topology: tuple[TopologyConstraint, ...] = ()
    limits: tuple[PoolLimit, ...] = ()
    pool_weights: Mapping[str, int] = field(default_factory=dict)
    gpu_resource: str = "nvidia.com/gpu"

    def bin_type(self, type_id: str) -> BinType:
        """Return the bin type with this id."""
        return _index(self.bin_types)[type_id]

    def requests_gpus(self) -> bool:
        """Return whether pods of this problem request GPUs (whole devices or fractions)."""
        gpu = self.gpu_resource
        return any(c.count and (c.gpu_fraction_milli or c.demand.get(gpu, 0)) for c in self.classes)

    def classes_of_gang(self, gang_id: str) -> Iterator[PodClass]:
        """Yield the classes whose pods belong to the gang."""
        return (c for c in self.classes if c.gang == gang_id)

    def validate_structure(self) -> None:  # noqa: C901, PLR0912 - one check list
        """Check ids, references and numbers.

        Raises:
            ProblemError: naming the first offending object and field.
        """
        _check_unique("bin type", [b.id for b in self.bin_types])
        _check_unique("existing bin", [b.id for b in self.existing])
        _check_unique("class", [c.key for c in self.classes])
        _check_unique("gang", [g.id for g in self.gangs])
        _check_unique("topology constraint", [t.id for t in self.topology])
        for b in self.bin_types:
            if b.price_micros < 0 or b.gpus < 0 or any(v < 0 for v in b.capacity.values()):
                raise ProblemError(f"bin type {b.id}: negative price, gpus or capacity")
            if b.max_count is not None and b.max_count < 0:
                raise ProblemError(f"bin type {b.id}: negative max_count")
        for e in self.existing:
            if any(v < 0 for v in e.remaining.values()):
                raise ProblemError(f"existing bin {e.id}: negative remaining")
            if any(not 0 <= f <= GPU_MILLI for f in e.gpu_free_milli):
                raise ProblemError(f"existing bin {e.id}: gpu_free_milli outside 0..1000")
        types = {b.id for b in self.bin_types}
        existing = {e.id for e in self.existing}
        gangs = {g.id for g in self.gangs}
        topo = {t.id for t in self.topology}
        keys = {c.key for c in self.classes}
        known: set[frozenset[str]] = set()  # allowed sets already found known (shared by many)
        for c in self.classes:
            _check_class(c, types, existing, gangs, topo, known=known)
        for g in self.gangs:
            total = sum(c.count for c in self.classes_of_gang(g.id))
            if not g.min_count >= 1:
                raise ProblemError(f"gang {g.id}: min_count must be >= 1")
            if total < g.min_count:
                raise ProblemError(f"gang {g.id}: {total} members < min_count {g.min_count}")
        for t in self.topology:
            if isinstance(t, SpreadConstraint) and t.max_skew < 1:
                raise ProblemError(f"topology constraint {t.id}: max_skew must be >= 1")
            if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE and not t.zones:
                raise ProblemError(f"topology constraint {t.id}: zone spread without zones")
            if isinstance(t, CoLocation) and (unknown := t.carriers - keys):
                raise ProblemError(
                    f"topology constraint {t.id}: carriers unknown {sorted(unknown)}"
                )


def _check_class(
    c: PodClass,
    types: set[str],
    existing: set[str],
    gangs: set[str],
    topo: set[str],
    *,
    known: set[frozenset[str]],
) -> None:
    if c.count < 0 or any(v < 0 for v in c.demand.values()):
        raise ProblemError(f"class {c.key}: negative count or demand")
    if not 0 <= c.gpu_fraction_milli < GPU_MILLI:
        raise ProblemError(f"class {c.key}: gpu_fraction_milli must be in 0..999")
    if c.allowed_bin_types not in known:
        if unknown := c.allowed_bin_types - types:
            raise ProblemError(f"class {c.key}: allowed_bin_types unknown {sorted(unknown)}")
        known.add(c.allowed_bin_types)
    if unknown := c.allowed_existing - existing:
        raise ProblemError(f"class {c.key}: allowed_existing unknown {sorted(unknown)}")
    if c.gang is not None and c.gang not in gangs:
        raise ProblemError(f"class {c.key}: gang {c.gang} unknown")
    if unknown := c.topology - topo:
        raise ProblemError(f"class {c.key}: topology unknown {sorted(unknown)}")


def _check_unique(kind: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ProblemError(f"{kind} {i}: duplicate id")
        seen.add(i)


def _index(types: tuple[BinType, ...]) -> dict[str, BinType]:
    return {b.id: b for b in types}


@dataclass(frozen=True, slots=True)
class Placement:
    """Pods on one bin (new or existing).

    Attributes:
        counts: pods per class key (zero counts omitted).
        gpu_devices: for fractional classes, pods of the class per physical GPU device index
            (tuple indexed by device; its sum equals ``counts[key]``).
    """

    counts: Mapping[str, int]
    gpu_devices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NewBin:
    """A new node to launch: an offering and its pods."""

    bin_type: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class ExistingPlacement:
    """Pods placed on an existing bin."""

    bin_id: str
    placement: Placement


@dataclass(frozen=True, slots=True)
class Unplaced:
    """Pods of a class that were not placed, and why."""

    class_key: str
    count: int
    reason: UnplacedReason


@dataclass(frozen=True, slots=True)
class Solution:
    """The plan.

    Attributes:
        new_bins: new nodes (each with one offering id).
        existing: placements on existing bins.
        unplaced: unplaced pods per class with a reason.
        cost_micros: sum of the new bins' prices.
        lower_bound_micros: lower bound on the cost of new bins placing the pods that this
            solution places on new bins (<= ``cost_micros``).
        status: see ``Status``.
        seconds: wall time spent.
    """

    new_bins: tuple[NewBin, ...]
    existing: tuple[ExistingPlacement, ...]
    unplaced: tuple[Unplaced, ...]
    cost_micros: int
    lower_bound_micros: int
    status: Status
    seconds: float = 0.0

    def placed_counts(self) -> dict[str, int]:
        """Return pods placed per class key (new and existing bins together)."""
        out: dict[str, int] = {}
        for p in [b.placement for b in self.new_bins] + [e.placement for e in self.existing]:
            for k, n in p.counts.items():
                out[k] = out.get(k, 0) + n
        return out

    def new_counts(self) -> dict[str, int]:
        """Return pods placed on new bins per class key."""
        out: dict[str, int] = {}
        for b in self.new_bins:
            for k, n in b.placement.counts.items():
                out[k] = out.get(k, 0) + n
        return out
