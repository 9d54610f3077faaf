"""First-fit-decreasing planners: the Karpenter-like baseline and the cost-aware warm start.

Both honour every rule of ``solver.validate`` (their output always validates) and work per
class and bin, not per pod: a class is placed by visiting each candidate bin once and putting
as many of its pods there as every rule allows (``k`` pods at once), so the work grows with
classes x bins, not pods.

* classes are taken sorted by cpu then memory descending (Karpenter's order), except that
  classes carrying a ``CoLocation`` they are not a target of come after all other classes (so
  the targets are already placed); each class tries existing bins first (in problem order),
  then the open new bins, then new bins;
* a gang is placed at the position of its first class, all its members at once, inside one
  (pool, zone) domain when it asks for it; if fewer than ``min_count`` members fit, the whole
  state is rolled back and its pods are unplaced with reason ``gang``;
* zone-scoped rules (zone spread, zone anti-affinity, zone affinity, zone co-location) first
  split the class over zones pod by pod with Karpenter's incremental rule (a pod may go to zone
  z when ``count(z) + 1 - min(count) <= max_skew``, least loaded zone first), then place each
  zone's share in bulk; when a zone cannot take its share the class is undone and re-split with
  that zone capped, and as a last resort placed one pod at a time (which keeps the invariant);
* a group held to one bin (hostname ``Affinity``) is placed together at the position of its
  first class by the cost-aware planner (and by Karpenter's with ``whole_groups``), starting
  on a new bin that holds the whole group;
* hostname rules (spread, anti-affinity, co-location) cap ``k`` per bin; a co-location carrier
  that is not a target itself only joins bins (or zones) already hosting a target or listed in
  ``satisfied``; carriers that find none are unplaced (reason ``topology``);
* node pool limits and ``max_count`` are charged for the offering a bin would launch as (its
  cheapest remaining candidate) and re-checked whenever that changes;
* fractional pods go first-fit onto physical GPU devices.

``karpenter_ffd``: open bins are tried fewest pods first (sorted when a class starts); a new bin
keeps every offering of the highest-weight pool that still fits its pods and launches the
cheapest at the end. ``cost_aware_ffd``: a new bin is opened with the offering of lowest price
per copy of the opening class, open bins are tried first-fit in opening order, and every bin is
downsized to the cheapest offering of its pool and zone that fits its contents at the end.
Both plan tier by tier (``solver.tiers``): pods a heavier pool's limits cannot take fall
through to the next pool, as in Karpenter, which filters each new NodeClaim's instance types by
the remaining limits.

Speed (none of it changes a plan): offerings that hold the same pods (``weights.fit_key``) are
checked once; eligible lists, opening rankings (sorted lazily) and capacity bounds are cached
per run; Karpenter's fill order is kept sorted between fills (``_NpodsOrder``); cost-aware
fills skip the leading open bins earlier fills of the same demand found spent.
"""

from __future__ import annotations

import functools
import time
from bisect import bisect_left, insort
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from solver import tiers
from solver.problem import (
    GPU_MILLI,
    Affinity,
    AntiAffinity,
    BinType,
    CoLocation,
    ExistingBin,
    ExistingPlacement,
    Gang,
    NewBin,
    Placement,
    PodClass,
    Problem,
    Solution,
    SpreadConstraint,
    Status,
    TopologyConstraint,
    TopologyKey,
    Unplaced,
    UnplacedReason,
)
from solver.validate import cost
from solver.weights import apply_pool_weights, fit_key, fits_one

Domain = tuple[str | None, str | None]
"""(pool, zone) a gang is confined to; ``None`` = unconstrained."""

_INF = 1 << 60
_Floats = npt.NDArray[np.float64]
_Ints = npt.NDArray[np.intp]

_T = TypeVar("_T")


@dataclass(slots=True)
class _Bin:
    """A bin being filled.

    New bins keep their candidate offerings lazily: a candidate is valid while it is in zone
    ``pin`` (if set), allowed for every class on the bin, has more than ``top_dev`` GPUs and
    holds ``used``; ``by_cpu`` / ``by_price`` are shared sorted lists.
    """

    existing: ExistingBin | None
    by_cpu: list[BinType]
    by_price: list[BinType]
    free: list[int]
    pin: str | None = None
    used: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    group: Counter[str] = field(default_factory=Counter)
    dev_counts: dict[str, list[int]] = field(default_factory=dict)
    dev_use: list[int] = field(default_factory=list)
    charged: BinType | None = None
    npods: int = 0
    top_dev: int = -1
    dead: bool = False
    exh: int = 0
    wide: bool = False
    """Cost-aware bin whose candidates were widened to every offering of its pool and zone."""
    """Bit mask of needs (``_Packer.need_mask``) no pod of any class can have met on the bin."""
    cands: list[BinType] | None = None
    """Cache: a superset of the valid offerings in ``by_cpu`` order (None: all of ``by_cpu``).

    Validity only shrinks while pods are added, so offerings found invalid are dropped; any
    removal of pods resets the cache.
    """
    seq: int = 0
    """Opening order of new bins."""
    maxcap: _Cap | None = None
    """Cache: the largest capacity per resource over ``cands`` (an upper bound of the room)."""
    allow: list[frozenset[str]] | None = None
    """Cache: the distinct allowed bin type sets of the classes on the bin."""
    listed: bool = False
    """A new bin in ``_State.bins`` (not a trial bin ``open_bin`` may discard)."""
    home: str | None = None
    """The key of the ``_State.by_zone`` list holding a listed new bin."""
    blocks: list[tuple[_Usable, int]] = field(default_factory=list)
    """The ``_Usable`` lists holding the bin and its block in each (since ``blocks_gen``)."""
    blocks_gen: int = -1
    """The ``_Packer._skip_gen`` of ``blocks`` (older lists are cleared)."""

    def pool(self) -> str:
        return self.existing.pool if self.existing is not None else self.by_cpu[0].pool


@dataclass(frozen=True, slots=True)
class _Cap:
    """The largest capacity per resource over some offerings, and how many offerings reach it.

    ``top`` has a resource when some offering lists it (as ``_maxcap``); ``hits`` counts the
    offerings listing the resource at ``top``, so that dropping offerings rarely rescans.
    """

    top: dict[str, int]
    hits: dict[str, int]

    @classmethod
    def of(cls, types: list[BinType]) -> _Cap:
        """Return the capacity bound of ``types``."""
        top = _maxcap(types)
        hits = dict.fromkeys(top, 0)
        for t in types:
            for r, v in t.capacity.items():
                if v == top[r]:
                    hits[r] += 1
        return cls(top, hits)

    def without(self, dropped: list[BinType], kept: list[BinType]) -> _Cap:
        """Return the bound of ``kept``, given that this is the bound of ``kept + dropped``."""
        hits = dict(self.hits)
        top = self.top
        for t in dropped:
            for r, v in t.capacity.items():
                if v == top[r]:
                    hits[r] -= 1
        lost = [r for r, n in hits.items() if n == 0]
        if not lost:
            return _Cap(top, hits)
        top = dict(top)
        for r in lost:
            vals = [t.capacity[r] for t in kept if r in t.capacity]
            if vals:
                top[r] = max(vals)
                hits[r] = vals.count(top[r])
            else:
                del top[r], hits[r]
        return _Cap(top, hits)


@dataclass(slots=True)
class _State:
    bins: list[_Bin]
    zone_counts: dict[str, Counter[str]]
    pool_usage: defaultdict[str, Counter[str]]
    type_count: Counter[str]
    by_zone: defaultdict[str | None, list[_Bin]] = field(default_factory=lambda: defaultdict(list))
    """New bins per pinned zone (``None``: not pinned yet), in opening order."""
    placed: Counter[str] = field(default_factory=Counter)
    """Pods placed per topology group, all bins together."""
    holders: defaultdict[str, dict[int, _Bin]] = field(default_factory=lambda: defaultdict(dict))
    """The new bins holding pods of each topology group, by ``id``."""


@dataclass(slots=True)
class _Move:
    """``k`` pods of a class put on a bin (journal entry for undo)."""

    b: _Bin
    c: PodClass
    k: int
    devs: list[int] | None
    zone: str | None
    opened: bool
    charged: BinType | None
    """The bin's charged offering before the move (restored by ``undo``)."""


@dataclass(frozen=True, slots=True)
class _Offers:
    """Candidate offerings a new bin can be opened with (shared, built once per run)."""

    by_cpu: list[BinType]
    by_price: list[BinType]
    pin: str | None
    """The zone of every offering when they share one, else None."""
    width: int
    """The most GPU devices of any offering."""

    @classmethod
    def of(cls, types: list[BinType]) -> _Offers:
        """Return the offers of ``types`` (not empty) with both sort orders."""
        zones = {t.zone for t in types}
        pin = types[0].zone if len(zones) == 1 else None
        return cls(_by_cpu(types), _by_price(types), pin, max(t.gpus for t in types))


class _NpodsOrder:
    """Open new bins of one fill zone in Karpenter's order, kept sorted between fills.

    A fill in zone ``z`` tries ``by_zone[z] + by_zone[None]`` (zone None: every new bin)
    stably sorted by pod count. While every bin list is sorted by ``seq`` and ``seq`` is
    unique (``_Packer.seq_ordered``), that is the order of (pods, part, seq) with part 0 for
    the first list and 1 for the second; bins whose pod count or list changed are re-keyed.
    """

    def __init__(self, zone: str | None) -> None:
        self.zone = zone
        self.keys: list[tuple[int, int, int]] = []
        self.bins: list[_Bin] = []
        self.key_of: dict[int, tuple[int, int, int]] = {}
        self.seen = -1
        """How much of the log of changed bins is applied (-1: not built yet)."""

    def part(self, b: _Bin) -> int | None:
        """Return which list of the fill holds ``b`` (None: neither)."""
        if not b.listed:
            return None
        if self.zone is None or b.home == self.zone:
            return 0
        return 1 if b.home is None else None

    def update(self, parts: list[list[_Bin]], moved: list[_Bin]) -> list[_Bin]:
        """Bring the order up to date and return a copy of it.

        ``parts`` are the fill's bin lists; ``moved`` logs every bin whose pod count or list
        changed (appended, never cleared while this order lives).
        """
        if self.seen < 0:
            self.keys = sorted((b.npods, p, b.seq) for p, part in enumerate(parts) for b in part)
            by_key = {(p, b.seq): b for p, part in enumerate(parts) for b in part}
            self.bins = [by_key[k[1:]] for k in self.keys]
            self.key_of = {id(b): k for k, b in zip(self.keys, self.bins, strict=True)}
        else:
            dirty = {id(b): b for b in moved[self.seen :]}
            for ident, b in dirty.items():
                old = self.key_of.pop(ident, None)
                if old is not None:
                    j = bisect_left(self.keys, old)
                    del self.keys[j], self.bins[j]
                p = self.part(b)
                if p is not None:
                    new = (b.npods, p, b.seq)
                    j = bisect_left(self.keys, new)
                    self.keys.insert(j, new)
                    self.bins.insert(j, b)
                    self.key_of[ident] = new
        self.seen = len(moved)
        return list(self.bins)


@dataclass(slots=True)
class _Fit:
    """How many pods of a class a bin takes, and what the bin becomes."""

    k: int
    charged: BinType | None
    devs: list[int] | None
    zone: str | None


def _fractions(  # noqa: PLR0917 - one small pure helper
    free: list[int],
    use: list[int],
    ndev: int,
    frac: int,
    per_pod_gpu: int,
    gpu_left: int,
    limit: int,
) -> list[int]:
    """Return pods per device (first fit) for up to ``limit`` fractional pods."""
    plan = [0] * len(use)
    cur = list(use)
    for _ in range(limit):
        d = next((d for d in range(ndev) if free[d] - cur[d] >= frac), None)
        if d is None:
            break
        need = per_pod_gpu + (1 if cur[d] == 0 and free[d] == GPU_MILLI else 0)
        if need > gpu_left:
            break
        gpu_left -= need
        cur[d] += frac
        plan[d] += 1
    return plan


class _Catalog:
    """Per-run index of the offerings.

    Offerings with equal ``fit_key`` (same capacity and GPUs, e.g. one instance type in every
    zone) hold the same pods, so fit questions are answered once per such group.
    """

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        groups: dict[tuple[int, tuple[tuple[str, int], ...]], int] = {}
        self.reps: list[BinType] = []
        """One offering per group."""
        self.gids: list[int] = []
        """The group of each of ``problem.bin_types``."""
        for t in problem.bin_types:
            g = groups.setdefault(fit_key(t), len(self.reps))
            if g == len(self.reps):
                self.reps.append(t)
            self.gids.append(g)
        self.gid = {t.id: g for t, g in zip(problem.bin_types, self.gids, strict=True)}
        self._fits: dict[tuple[object, ...], bytes] = {}
        self._copies: dict[tuple[object, ...], list[int]] = {}

    @staticmethod
    def demand_key(c: PodClass) -> tuple[object, ...]:
        """Return what the fit and size of one pod of ``c`` depend on."""
        return tuple(sorted(c.demand.items())), c.gpu_fraction_milli

    def fits(self, c: PodClass) -> bytes:
        """Return per group whether one pod of ``c`` fits its offerings (``fits_one``)."""
        key = self.demand_key(c)
        out = self._fits.get(key)
        if out is None:
            out = self._fits[key] = bytes(fits_one(self.p, c, t) for t in self.reps)
        return out

    def eligible(self, c: PodClass) -> list[BinType]:
        """Return the offerings ``c`` allows that hold one of its pods, in problem order."""
        ok, allowed = self.fits(c), c.allowed_bin_types
        return [
            t for t, g in zip(self.p.bin_types, self.gids, strict=True) if ok[g] and t.id in allowed
        ]

    def copies(self, c: PodClass) -> list[int]:
        """Return per group how many pods of ``c`` an empty bin holds (``_INF``: unbounded)."""
        key = self.demand_key(c)
        out = self._copies.get(key)
        if out is None:
            out = self._copies[key] = [_copies(t, c, _INF) for t in self.reps]
        return out


class _Lazy(Generic[_T]):
    """A sequence materialised on demand from an iterator (of non-None items).

    It can be iterated any number of times, also concurrently.
    """

    def __init__(self, source: Iterator[_T]) -> None:
        self._source = source
        self._done: list[_T] = []

    def __iter__(self) -> Iterator[_T]:
        i = 0
        while True:
            if i == len(self._done):
                nxt = next(self._source, None)
                if nxt is None:
                    return
                self._done.append(nxt)
            yield self._done[i]
            i += 1


class _Packer:
    """Bulk first-fit state shared by both greedy policies."""

    _pools: dict[frozenset[str], frozenset[str]]
    """The NodePools of each set of allowed offerings (``_pools_of``)."""

    def __init__(self, problem: Problem, *, karpenter: bool, whole_groups: bool = False) -> None:
        self.p = problem
        # the cost-aware planner always places a one-bin group whole
        self.karpenter, self.whole_groups = karpenter, whole_groups or not karpenter
        self.gpu = problem.gpu_resource
        self.topo: dict[str, TopologyConstraint] = {t.id: t for t in problem.topology}
        self.limits = {lim.pool: lim.remaining for lim in problem.limits}
        zone_counts: dict[str, Counter[str]] = {}
        for t in problem.topology:
            zone_counts[t.id] = Counter(
                t.existing if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE else {}
            )
        self.classes = {c.key: c for c in problem.classes}
        self._zone_prices: dict[tuple[object, ...], dict[str, float]] = {}
        self._most_copies: dict[object, int] = {}
        self._rank_arrays: dict[object, tuple[list[BinType], _Floats, _Floats, _Ints]] = {}
        self.carries: defaultdict[str, list[CoLocation]] = defaultdict(list)
        for t in problem.topology:
            if isinstance(t, CoLocation):
                for k in sorted(t.carriers):
                    self.carries[k].append(t)
        bins = [_Bin(e, [], [], list(e.gpu_free_milli)) for e in problem.existing]
        for b in bins:
            b.dev_use = [0] * len(b.free)
        self.s = _State(bins, zone_counts, defaultdict(Counter), Counter())
        self.n_existing = len(bins)
        self.tracked = bool(self.limits) or any(t.max_count is not None for t in problem.bin_types)
        self._hrules: dict[str, list[tuple[int, str, TopologyConstraint]]] = {}
        small = [c.demand for c in problem.classes if c.count > 0]
        self.smallest = {
            r: min((d.get(r, 0) for d in small), default=0) for r in ("cpu", "memory", "pods")
        }
        self._eligible: dict[tuple[object, ...], list[BinType]] = {}
        self.catalog = _Catalog(problem)
        self._kinds: dict[tuple[object, ...], int] = {}
        self._kind_of: dict[str, tuple[int, int]] = {}
        self._rooms: dict[str, int] = {}
        self._gates: dict[str, tuple[list[str], list[tuple[str, int]]]] = {}
        live = [c for c in problem.classes if c.count > 0]
        res = sorted({r for c in live for r, v in c.demand.items() if v > 0})
        self._bit = {r: 1 << i for i, r in enumerate(res)}
        self._needs, self._pools = res, {}
        self._min_need = {r: min(c.demand.get(r, 0) or _INF for c in live) for r in res}
        self._frac_bit = 1 << len(res)
        self._min_frac = min((c.gpu_fraction_milli or _INF for c in live), default=_INF)
        self._masks: dict[str, int] = {}
        self._fullcap: dict[int, _Cap] = {}
        self._zoned_lists: dict[tuple[int, str], tuple[list[BinType], _Cap]] = {}
        self._wide: dict[tuple[str, str | None], tuple[list[BinType], list[BinType]]] = {}
        self._options: dict[tuple[object, ...], list[_Offers]] = {}
        self._ranked: dict[tuple[object, ...], _Lazy[_Offers]] = {}
        self._ranked_all: dict[tuple[object, ...], _Lazy[BinType]] = {}
        # per (zone, offerings, demand): leading open bins cost-aware fills skip (``_skip_key``)
        self._skip: dict[tuple[str | None, int, int], int] = {}
        # per (zone, offerings): the open bins a cost-aware fill may use (``_usable_open``)
        self._usable: dict[tuple[str | None, int], _Usable] = {}
        self._skip_gen = 0  # bumped by every clear of ``_skip``
        # Karpenter's fill order per zone, kept sorted; cleared by ``undo``
        self._orders: dict[str | None, _NpodsOrder] = {}
        # the bins whose pod count or list changed since the orders were built, in order
        self._moved: list[_Bin] = []
        # every bin list is sorted by ``seq`` and seqs are unique (until ``undo`` filters)
        self.seq_ordered = True
        self._zones: dict[tuple[object, ...], list[str]] = {}
        self._singles: dict[str, _Offers] = {}

    # ---- exhausted bins -----------------------------------------------------------------
    def need_mask(self, c: PodClass) -> int:
        """Return the bits of the needs of one pod of ``c`` (resources, a GPU fraction)."""
        m = self._masks.get(c.key)
        if m is None:
            m = sum(bit for r, bit in self._bit.items() if c.demand.get(r, 0) > 0)
            if c.gpu_fraction_milli:
                m |= self._frac_bit
            self._masks[c.key] = m
        return m

    def _exhausted(self, b: _Bin) -> int:
        """Return the needs that no pod of any class can meet on ``b`` any more.

        Conservative: capacity is the largest over the bin's offerings, and a need is only
        marked when even the smallest demand of any class for it does not fit.
        """
        big = b.existing.remaining if b.existing is not None else self._full_cap(b.by_cpu).top
        fresh = b_fresh(b)
        used, gpu = b.used, self.gpu
        m = 0
        for r, bit in self._bit.items():
            if big.get(r, 0) - used[r] - (fresh if r == gpu else 0) < self._min_need[r]:
                m |= bit
        if self._min_frac < _INF:
            whole = big.get(gpu, 0) - used[gpu] - fresh >= 1
            frac = self._min_frac
            if not any(
                f - u >= frac and (whole or u > 0 or f < GPU_MILLI)
                for f, u in zip(b.free, b.dev_use, strict=False)
            ):
                m |= self._frac_bit
        return m

    def _full_cap(self, types: list[BinType]) -> _Cap:
        """Return the capacity bound of a shared candidate list (cached for the run).

        The lists are kept alive by the option caches, so their ids are stable.
        """
        cap = self._fullcap.get(id(types))
        if cap is None:
            cap = self._fullcap[id(types)] = _Cap.of(types)
        return cap

    def _zoned(self, types: list[BinType], zone: str) -> tuple[list[BinType], _Cap]:
        """Return the offerings of a shared list in ``zone`` and their bound (cached).

        Offerings of other zones can never launch a bin pinned to ``zone``.
        """
        key = (id(types), zone)
        out = self._zoned_lists.get(key)
        if out is None:
            kept = [t for t in types if t.zone == zone]
            if len(kept) == len(types):
                out = (types, self._full_cap(types))
            else:
                out = (kept, _Cap.of(kept))
            self._zoned_lists[key] = out
        return out

    # ---- rules --------------------------------------------------------------------------
    def needy(self, c: PodClass) -> bool:
        """Return whether ``c`` carries a co-location it does not satisfy by itself."""
        return any(t.id not in c.topology for t in self.carries.get(c.key, ()))

    def zone_rules(self, c: PodClass) -> list[TopologyConstraint]:
        """Return the zone-scoped constraints ``c`` is subject to."""
        out: list[TopologyConstraint] = []
        for tid in sorted(c.topology):
            t = self.topo[tid]
            if t.key is TopologyKey.ZONE:
                out.append(t)
        out.extend(
            t
            for t in self.carries.get(c.key, ())
            if t.key is TopologyKey.ZONE and t.id not in c.topology
        )
        return out

    def _zone_ok(self, c: PodClass, t: TopologyConstraint, zone: str, counts: Counter[str]) -> bool:
        if isinstance(t, SpreadConstraint):
            if zone not in t.zones:
                return False
            return counts[zone] + 1 - min(counts[z] for z in t.zones) <= t.max_skew
        if isinstance(t, AntiAffinity):
            return counts[zone] == 0 and zone not in t.occupied
        if isinstance(t, CoLocation):
            return t.id in c.topology or counts[zone] > 0 or zone in t.satisfied
        chosen = {z for z, n in counts.items() if n > 0}
        return (t.zones is None or zone in t.zones) and chosen <= {zone}

    def _host_rules(self, c: PodClass) -> list[tuple[int, str, TopologyConstraint]]:
        rules = self._hrules.get(c.key)
        if rules is None:
            rules = []
            for tid in sorted(c.topology):
                t = self.topo[tid]
                if isinstance(t, SpreadConstraint) and t.key is TopologyKey.HOSTNAME:
                    rules.append((0, tid, t))
                elif isinstance(t, AntiAffinity) and t.key is TopologyKey.HOSTNAME:
                    rules.append((1, tid, t))
                elif isinstance(t, Affinity) and t.key is TopologyKey.HOSTNAME:
                    rules.append((3, tid, t))
            rules.extend(
                (2, t.id, t)
                for t in self.carries.get(c.key, ())
                if t.key is TopologyKey.HOSTNAME and t.id not in c.topology
            )
            self._hrules[c.key] = rules
        return rules

    def _gate(self, c: PodClass) -> tuple[list[str], list[tuple[str, int]]]:
        """Return the hostname rules of ``c`` on a new bin as a cheap test (see ``_gate_ok``).

        ``host_room`` of a new bin is positive exactly when every group of the first list is
        present and every (group, limit) of the second is below its limit.
        """
        gate = self._gates.get(c.key)
        if gate is None:
            present: list[str] = []
            below: list[tuple[str, int]] = []
            for kind, tid, t in self._host_rules(c):
                if kind == 0:
                    assert isinstance(t, SpreadConstraint)  # noqa: S101 - by construction
                    below.append((tid, t.max_skew))
                elif kind == 1:
                    below.append((tid, 1))
                elif kind == 2:  # noqa: PLR2004 - rule kinds of _host_rules
                    present.append(tid)
            gate = self._gates[c.key] = (present, below)
        return gate

    def host_room(self, b: _Bin, c: PodClass) -> int:
        """Return how many pods of ``c`` the hostname rules allow on ``b``."""
        rules = self._host_rules(c)
        if not rules:
            return _INF
        room = _INF
        eid = b.existing.id if b.existing is not None else None
        for kind, tid, t in rules:
            if kind == 0:
                assert isinstance(t, SpreadConstraint)  # noqa: S101 - by construction
                have = b.group[tid] + (t.existing.get(eid, 0) if eid is not None else 0)
                room = min(room, t.max_skew - have)
            elif kind == 1:
                assert isinstance(t, AntiAffinity)  # noqa: S101
                if b.group[tid] > 0 or (eid is not None and eid in t.occupied):
                    return 0
                room = min(room, 1)
            elif kind == 3:  # noqa: PLR2004 - rule kinds of _host_rules
                assert isinstance(t, Affinity)  # noqa: S101
                if b.group[tid] == 0 and (
                    self.s.placed[tid] > 0
                    or (t.zones is not None and (eid is None or eid not in t.zones))
                ):
                    return 0  # one bin only: the first pod's
            elif b.group[tid] == 0:
                assert isinstance(t, CoLocation)  # noqa: S101
                if eid is None or eid not in t.satisfied:
                    return 0
        return max(room, 0)

    def _limits_ok(self, old: BinType | None, new: BinType) -> bool:
        if old is not None and old.id == new.id:
            return True
        if new.max_count is not None and self.s.type_count[new.id] + 1 > new.max_count:
            return False
        lim = self.limits.get(new.pool)
        if lim is None:
            return True
        usage = self.s.pool_usage[new.pool]
        old_use = old.usage_for_limits() if old is not None else {}
        new_use = new.usage_for_limits()
        return all(usage[r] - old_use.get(r, 0) + new_use.get(r, 0) <= v for r, v in lim.items())

    # ---- how many pods fit ----------------------------------------------------------------
    def _res_room(
        self, cap: Mapping[str, int], ndev: int, b: _Bin, c: PodClass, limit: int
    ) -> tuple[int, list[int] | None]:
        """Return (pods of ``c`` that fit ``cap`` on ``b``, device plan) up to ``limit``."""
        fresh = b_fresh(b)
        k = limit
        for r, v in c.demand.items():
            if v > 0:
                left = cap.get(r, 0) - b.used[r] - (fresh if r == self.gpu else 0)
                k = min(k, left // v)
                if k <= 0:
                    return 0, None
        if not c.gpu_fraction_milli:
            return k, None
        gpu_left = cap.get(self.gpu, 0) - b.used[self.gpu] - fresh
        plan = _fractions(
            b.free, b.dev_use, ndev, c.gpu_fraction_milli, c.demand.get(self.gpu, 0), gpu_left, k
        )
        return sum(plan), plan

    def fit(  # noqa: PLR0911 - one early exit per rule
        self, b: _Bin, c: PodClass, domain: Domain, limit: int
    ) -> _Fit | None:
        """Return how many pods of ``c`` (at most ``limit``) ``b`` takes, or None."""
        pool, zone = domain
        if b.existing is not None:
            e = b.existing
            if e.id not in c.allowed_existing or (pool is not None and e.pool != pool):
                return None
            if zone is not None and e.zone != zone:
                return None
            k = min(limit, self.host_room(b, c))
            if k <= 0:
                return None
            k, devs = self._res_room(e.remaining, len(b.free), b, c, k)
            return _Fit(k, None, devs, e.zone) if k > 0 else None
        if pool is not None and b.pool() != pool:
            return None
        if zone is not None and b.pin is not None and b.pin != zone:
            return None
        limit = min(limit, self.host_room(b, c))
        if limit <= 0:
            return None
        return self._fit_new(b, c, zone or b.pin, limit)

    def _widen(self, b: _Bin) -> None:
        """Let a cost-aware bin grow to any offering of its pool and zone (for carriers).

        A carrier that is not its own target cannot open bins: it only joins bins hosting a
        target, so those bins may switch to a larger offering (the cheapest valid one is
        launched, as for Karpenter-style bins).
        """
        key = (b.pool(), b.pin)
        lists = self._wide.get(key)
        if lists is None:
            types = [
                t
                for t in self.p.bin_types
                if t.pool == key[0] and (key[1] is None or t.zone == key[1])
            ]
            lists = self._wide[key] = (_by_cpu(types), _by_price(types))
        b.by_cpu, b.by_price = lists
        b.cands = b.maxcap = None
        b.wide = True
        self._clear_skips()
        extra = max(t.gpus for t in lists[0]) - len(b.free)
        if extra > 0:
            b.free.extend([GPU_MILLI] * extra)
            b.dev_use.extend([0] * extra)
            for per in b.dev_counts.values():
                per.extend([0] * extra)

    def valid(
        self,
        b: _Bin,
        t: BinType,
        zone: str | None,
        fresh: int | None = None,
        allowed: list[frozenset[str]] | None = None,
    ) -> bool:
        """Return whether offering ``t`` can launch bin ``b`` with its current pods."""
        if (zone is not None and t.zone != zone) or t.gpus <= b.top_dev:
            return False
        if allowed is None:
            allowed = self.on_bin(b)
        if any(t.id not in a for a in allowed):
            return False
        if fresh is None:
            fresh = b_fresh(b)
        cap = t.capacity
        for r, v in b.used.items():
            if v + (fresh if r == self.gpu else 0) > cap.get(r, 0):
                return False
        return not (fresh and self.gpu not in b.used and fresh > cap.get(self.gpu, 0))

    def on_bin(self, b: _Bin) -> list[frozenset[str]]:
        """Return the distinct allowed bin type sets of the classes on ``b`` (cached)."""
        if b.allow is None:
            sets = (self.classes[k].allowed_bin_types for k in b.counts)
            b.allow = list({id(a): a for a in sets}.values())
        return b.allow

    def launch(self, b: _Bin) -> BinType | None:
        """Return the cheapest valid offering of a new bin (None for existing bins)."""
        if b.existing is not None:
            return None
        fresh = b_fresh(b)
        allowed = self.on_bin(b)
        return next((t for t in b.by_price if self.valid(b, t, b.pin, fresh, allowed)), None)

    def _fit_new(  # noqa: C901, PLR0912 - one scan with its shortcuts
        self, b: _Bin, c: PodClass, zone: str | None, limit: int
    ) -> _Fit | None:
        allowed = c.allowed_bin_types
        best, best_t = 0, None
        cpu = c.demand.get("cpu", 0)
        used_cpu = b.used["cpu"]
        rooms: list[int] = []
        if b.cands is None and b.pin is not None:
            cands, b.maxcap = self._zoned(b.by_cpu, b.pin)
            b.cands = cands
        elif b.cands is None:
            cands = b.by_cpu
            if b.maxcap is None:
                b.maxcap = self._full_cap(cands)
        else:
            cands = b.cands
            if b.maxcap is None:
                b.maxcap = _Cap.of(cands)
        maxcap, used = b.maxcap.top, b.used
        if any(v > 0 and v > maxcap.get(r, 0) - used[r] for r, v in c.demand.items()):
            return None
        fresh = b_fresh(b)
        on_bin = self.on_bin(b)
        dropped: list[BinType] = []
        for t in cands:  # largest cpu first
            if not self.tracked and _done(best, limit, cpu, t, used_cpu):
                break
            if t.id not in allowed:
                continue
            if not self.valid(b, t, b.pin, fresh, on_bin):
                dropped.append(t)
                continue
            if zone is not None and t.zone != zone:
                continue
            k, _ = self._res_room(t.capacity, t.gpus, b, c, limit)
            if k > best:
                best, best_t = k, t
            if k > 0:
                rooms.append(k)
        if dropped:
            gone = {id(t) for t in dropped}
            b.cands = [t for t in cands if id(t) not in gone]
            b.maxcap = b.maxcap.without(dropped, b.cands)
        if best_t is None:
            return None
        if not self.tracked:
            return self._plan(b, c, best, best_t, zone)
        for k in sorted(set(rooms), reverse=True):
            f = self._plan(b, c, k, best_t, zone)
            if f is not None and self._charge_ok(b, c, f):
                return f
        return None

    def _plan(self, b: _Bin, c: PodClass, k: int, t: BinType, zone: str | None) -> _Fit | None:
        devs = None
        if c.gpu_fraction_milli:
            devs = _fractions(
                b.free, b.dev_use, t.gpus, c.gpu_fraction_milli, c.demand.get(self.gpu, 0), _INF, k
            )
            if sum(devs) < k:
                return None
        return _Fit(k, None, devs, zone)

    def _charge_ok(self, b: _Bin, c: PodClass, f: _Fit) -> bool:
        """Tentatively add the pods and check limits for the new cheapest offering."""
        saved = (b.cands, b.maxcap)
        self._record(b, c, f.k, f.devs, None)
        pin = b.pin
        b.pin = f.zone or b.pin
        new = self.launch(b)
        self._record(b, c, -f.k, [-x for x in f.devs] if f.devs is not None else None, None)
        b.pin = pin
        b.cands, b.maxcap = saved
        if new is None or not self._limits_ok(b.charged, new):
            return False
        f.charged = new
        return True

    # ---- commit / undo -------------------------------------------------------------------
    def commit(self, b: _Bin, c: PodClass, f: _Fit, journal: list[_Move], opened: bool) -> None:
        if b.existing is None and f.zone is not None and b.pin != f.zone:
            if not opened:
                self.s.by_zone[b.pin].remove(b)
                insort(self.s.by_zone[f.zone], b, key=lambda x: x.seq)
                b.home = f.zone
                self._clear_skips()
            b.pin = f.zone
        before = b.charged
        self._record(b, c, f.k, f.devs, f.zone)
        if b.existing is None and self.tracked:
            old, new = b.charged, f.charged
            assert new is not None  # noqa: S101 - _charge_ok sets it
            if old is None or old.id != new.id:
                if old is not None:
                    self._charge(old, -1)
                self._charge(new, 1)
            b.charged = new
        journal.append(_Move(b, c, f.k, f.devs, f.zone, opened, before))
        if b.blocks_gen == self._skip_gen:
            for usable, block in b.blocks:
                usable.tops[block] = None
        big = b.existing.remaining if b.existing is not None else b.by_cpu[0].capacity
        b.dead = any(big.get(r, 0) - b.used[r] < v for r, v in self.smallest.items() if v > 0)
        b.exh = self._exhausted(b)

    def _charge(self, t: BinType, sign: int) -> None:
        self.s.type_count[t.id] += sign
        for r, v in t.usage_for_limits().items():
            self.s.pool_usage[t.pool][r] += sign * v

    def _record(
        self, b: _Bin, c: PodClass, k: int, devs: list[int] | None, zone: str | None
    ) -> None:
        if k < 0:
            b.cands = None
            b.maxcap = None
        for r, v in c.demand.items():
            b.used[r] += v * k
        if c.key not in b.counts and b.allow is not None:
            a = c.allowed_bin_types
            if not any(x is a for x in b.allow):
                b.allow = [*b.allow, a]
        b.counts[c.key] += k
        b.npods += k
        if self.karpenter:
            self._moved.append(b)
        if b.counts[c.key] == 0:
            del b.counts[c.key]
            b.allow = None
        if c.topology:
            self._count_groups(b, c.topology, k, zone)
        if devs is not None:
            per = b.dev_counts.setdefault(c.key, [0] * len(b.free))
            for d, x in enumerate(devs):
                b.dev_use[d] += x * c.gpu_fraction_milli
                per[d] += x
            if not any(per):
                del b.dev_counts[c.key]
            b.top_dev = max((d for d, u in enumerate(b.dev_use) if u > 0), default=-1)

    def _count_groups(self, b: _Bin, tids: Iterable[str], k: int, zone: str | None) -> None:
        """Count ``k`` more pods of groups ``tids`` on ``b`` (in ``zone``, when pinned)."""
        s = self.s
        for tid in tids:
            b.group[tid] += k
            s.placed[tid] += k
            if zone is not None:
                s.zone_counts[tid][zone] += k
            if b.existing is None:
                if b.group[tid] > 0:
                    s.holders[tid][id(b)] = b
                else:
                    s.holders[tid].pop(id(b), None)

    def undo(self, journal: list[_Move]) -> None:
        """Remove every pod the journal placed (bins opened for it are dropped)."""
        self._forget_orders()
        for m in reversed(journal):
            neg = [-x for x in m.devs] if m.devs is not None else None
            self._record(m.b, m.c, -m.k, neg, m.zone)
            m.b.dead = False
            m.b.exh = 0
            b = m.b
            if b.charged is not m.charged:
                if b.charged is not None:
                    self._charge(b.charged, -1)
                if m.charged is not None:
                    self._charge(m.charged, 1)
                b.charged = m.charged
        dropped = {id(m.b) for m in journal if m.opened and m.b.npods == 0}
        for m in journal:
            if id(m.b) in dropped:
                m.b.listed = False
        if dropped:
            removed = _drop(self.s.bins, dropped)
            removed += sum(_drop(lst, dropped) for lst in self.s.by_zone.values())
            if removed != 2 * len(dropped):  # not at the tails: filter everything
                self.seq_ordered = False
                self.s.bins = [b for b in self.s.bins if id(b) not in dropped]
                for lst in self.s.by_zone.values():
                    lst[:] = [b for b in lst if id(b) not in dropped]
        journal.clear()

    # ---- new bins ------------------------------------------------------------------------
    def _kind(self, c: PodClass) -> tuple[int, int]:
        """Return small ids of (the offerings ``c`` can use, its demand) (cached per class).

        Classes of equal first id have equal ``eligible`` lists; of equal ids, equal rankings.
        """
        kind = self._kind_of.get(c.key)
        if kind is None:
            cat = self.catalog
            keys = ((c.allowed_bin_types, cat.fits(c)), cat.demand_key(c))
            ids = [self._kinds.setdefault(k, len(self._kinds)) for k in keys]
            kind = self._kind_of[c.key] = (ids[0], ids[1])
        return kind

    def eligible(self, c: PodClass, domain: Domain) -> list[BinType]:
        """Return the allowed offerings of ``domain`` that hold one pod of ``c``."""
        key = (self._kind(c)[0], domain)
        out = self._eligible.get(key)
        if out is None:
            pool, zone = domain
            if domain == (None, None):
                out = self.catalog.eligible(c)
            else:
                out = [
                    t
                    for t in self.eligible(c, (None, None))
                    if (pool is None or t.pool == pool) and (zone is None or t.zone == zone)
                ]
            self._eligible[key] = out
        return out

    def empty_room(self, c: PodClass) -> int:
        """Return ``host_room`` of an empty new bin for ``c`` (cached per class)."""
        room = self._rooms.get(c.key)
        if room is None:
            room = self._rooms[c.key] = self.host_room(_Bin(None, [], [], []), c)
        return room

    def open_options(self, c: PodClass, domain: Domain, remaining: int) -> Iterable[_Offers]:
        """Return candidate offers for a new bin for ``c``, best first."""
        if self.karpenter:
            key = (self._kind(c)[0], domain)
            opts = self._options.get(key)
            if opts is None:
                by_pool: defaultdict[str, list[BinType]] = defaultdict(list)
                for t in self.eligible(c, domain):
                    by_pool[t.pool].append(t)
                order = sorted(by_pool, key=lambda p: (-self.p.pool_weights.get(p, 0), p))
                opts = self._options[key] = [_Offers.of(by_pool[p]) for p in order]
            return opts
        cap = min(remaining, self.empty_room(c) or remaining)
        if self._one_bin(c):
            return self._whole_first(c, domain, remaining)
        rkey = (self._kind(c), domain, cap)
        ranked = self._ranked.get(rkey)
        if ranked is None:
            pool, zone = domain
            ranked = self._ranked[rkey] = _Lazy(
                self._single(t)
                for t in self._by_price_per_copy(c, cap)
                if (pool is None or t.pool == pool) and (zone is None or t.zone == zone)
            )
        return ranked

    def _one_bin(self, c: PodClass) -> bool:
        """Return whether ``c`` must stay on one bin (a hostname ``Affinity``)."""
        return any(kind == 3 for kind, _, _ in self._host_rules(c))  # noqa: PLR2004

    def one_bin_group(self, c: PodClass) -> str | None:
        """Return the first hostname ``Affinity`` holding ``c`` to one bin (None: none)."""
        return next((tid for kind, tid, _ in self._host_rules(c) if kind == 3), None)  # noqa: PLR2004

    def _affine_zones(self, c: PodClass, zones: list[str]) -> list[str]:
        """Return ``zones`` cut to the zone of the bin already holding ``c``'s one-bin group."""
        for kind, tid, _ in self._host_rules(c):
            if kind != 3 or not self.s.placed[tid]:  # noqa: PLR2004
                continue
            for b in self.s.bins:
                if b.group[tid] > 0:
                    zone = b.existing.zone if b.existing is not None else b.pin
                    return zones if zone is None else [z for z in zones if z == zone]
        return zones

    def _whole_first(self, c: PodClass, domain: Domain, remaining: int) -> list[_Offers]:
        """Return the offers for a class held to one bin, best first.

        The cheapest that hold the whole group (every class under the same rule) come first,
        then those holding all ``remaining`` pods of ``c``, then the others by most pods held.
        """
        copies, gid = self.catalog.copies(c), self.catalog.gid
        pool, zone = domain
        types = [
            t
            for t in self.eligible(c, (None, None))
            if (pool is None or t.pool == pool) and (zone is None or t.zone == zone)
        ]
        group: Counter[str] = Counter()
        tids = {tid for kind, tid, _ in self._host_rules(c) if kind == 3}  # noqa: PLR2004
        for k in self.classes.values():
            if k.topology & tids:
                left = remaining if k.key == c.key else k.count
                group.update({r: v * left for r, v in k.demand.items()})

        def whole(t: BinType) -> bool:
            return all(t.capacity.get(r, 0) >= v for r, v in group.items())

        types.sort(
            key=lambda t: (
                not whole(t),
                copies[gid[t.id]] < remaining,
                t.price_micros if copies[gid[t.id]] >= remaining else -copies[gid[t.id]],
                t.id,
            )
        )
        return [self._single(t) for t in types]

    def _by_price_per_copy(self, c: PodClass, cap: int) -> _Lazy[BinType]:
        """Return ``eligible(c, (None, None))`` by price per copy of ``c`` (up to ``cap``), id.

        Shared by every domain (their rankings are this one filtered), cached per class kind.
        """
        kind = self._kind(c)
        copies, gid = self.catalog.copies(c), self.catalog.gid
        most = self._most_copies.get(kind)
        if most is None:
            eligible = self.eligible(c, (None, None))
            most = self._most_copies[kind] = max((copies[gid[t.id]] for t in eligible), default=0)
        # a cap above every offering's copies ranks as that many: one ranking for all of them
        key = (kind, min(cap, max(most, 1)))
        ranked = self._ranked_all.get(key)
        if ranked is None:
            arrays = self._rank_arrays.get(kind)
            if arrays is None:
                eligible = self.eligible(c, (None, None))
                ids = np.array([t.id for t in eligible], dtype=object)
                arrays = self._rank_arrays[kind] = (
                    eligible,
                    np.array([t.price_micros for t in eligible], dtype=np.float64),
                    np.array([copies[gid[t.id]] for t in eligible], dtype=np.float64),
                    np.argsort(np.argsort(ids, kind="stable"), kind="stable"),
                )
            eligible, price, most_of, by_id = arrays
            # increasing (price per copy, id), as a vector: the same floats as one by one
            per = price / np.maximum(np.minimum(float(cap), most_of), 1.0)
            order = np.lexsort((by_id, per)).tolist()
            ranked = self._ranked_all[key] = _Lazy(map(eligible.__getitem__, order))
        return ranked

    def _single(self, t: BinType) -> _Offers:
        """Return the offers of ``t`` alone (one shared object per offering)."""
        o = self._singles.get(t.id)
        if o is None:
            o = self._singles[t.id] = _Offers([t], [t], t.zone, t.gpus)
        return o

    def open_bin(self, c: PodClass, domain: Domain, limit: int, journal: list[_Move]) -> int:
        """Open one new bin with as many pods of ``c`` as fit; return how many (0: none)."""
        if not self.eligible(c, domain) or self.empty_room(c) <= 0:
            return 0
        for o in self.open_options(c, domain, limit):
            b = _Bin(None, o.by_cpu, o.by_price, [GPU_MILLI] * o.width, pin=o.pin)
            b.dev_use = [0] * o.width
            f = self.fit(b, c, domain, limit)
            if f is not None:
                b.seq = len(self.s.bins)
                self.s.bins.append(b)
                self.s.by_zone[b.pin].append(b)
                b.listed, b.home = True, b.pin
                self.commit(b, c, f, journal, opened=True)
                return f.k
        return 0

    # ---- classes -------------------------------------------------------------------------
    def _forget_orders(self) -> None:
        """Drop the cached fill orders (bins left a list or lost pods)."""
        self._clear_skips()
        self._orders.clear()
        self._moved.clear()

    def _open_order(self, zone: str | None) -> list[_Bin]:
        """Return the open new bins a fill in ``zone`` tries, in order (a new list)."""
        bins = self.s.bins
        if self.karpenter:
            parts = [bins[self.n_existing :]] if zone is None else self._zone_parts(zone)
            if not self.seq_ordered:
                return sorted([b for part in parts for b in part], key=attrgetter("npods"))
            order = self._orders.get(zone)
            if order is None:
                order = self._orders[zone] = _NpodsOrder(zone)
            return order.update(parts, self._moved)
        if zone is None:
            return bins[self.n_existing :]
        by_zone = self.s.by_zone
        if not by_zone[None]:
            return list(by_zone[zone])
        return sorted(by_zone[zone] + by_zone[None], key=lambda b: b.seq)

    def _zone_parts(self, zone: str) -> list[list[_Bin]]:
        """Return the lists of open new bins a fill in ``zone`` tries, in order."""
        by_zone = self.s.by_zone
        return [by_zone[zone], by_zone[None]]

    def fill(self, c: PodClass, domain: Domain, n: int, journal: list[_Move]) -> int:
        """Place up to ``n`` pods of ``c`` in ``domain``: existing, open, then new bins."""
        zone = domain[1]
        widen = not self.karpenter and self.needy(c)
        skip_key = self._skip_key(c, zone) if not widen else None
        start = 0
        kept: _Kept | None = None
        opened: Iterable[_Bin]
        if skip_key is None:
            opened = self._gated(c, zone, self._open_order(zone))
        else:
            start = self._skip.get(skip_key, 0)
            kept = self._roomy(c, zone, self._usable_open(c, zone), start)
            opened = kept.bins
        gen = self._skip_gen
        group = self.one_bin_group(c) if self.whole_groups else None
        if group is not None and not self.s.placed[group]:
            # a one-bin group starts on a new bin chosen to hold it whole (``_whole_first``),
            # not on a bin other classes opened and may have filled
            opened, kept = [], None
        placed, spent = self._visit(c, domain, n, journal, opened, widen)
        if skip_key is not None and gen == self._skip_gen:
            self._skip[skip_key] = kept.spent(spent) if kept is not None else start + spent
        while placed < n:
            k = self.open_bin(c, domain, n - placed, journal)
            if k == 0:
                break
            placed += k
        return placed

    def _pools_of(self, c: PodClass) -> frozenset[str]:
        """Return the NodePools of the offerings ``c`` may use (cached per offerings).

        A new bin's offerings are all of one pool: in another, ``fit`` finds none ``c`` may
        use, whatever the number of candidates (``_none_allowed`` looks at short lists).
        """
        allowed = c.allowed_bin_types
        pools = self._pools.get(allowed)
        if pools is None:
            pools = self._pools[allowed] = frozenset(
                t.pool for t in self.p.bin_types if t.id in allowed
            )
        return pools

    def _gated(self, c: PodClass, zone: str | None, opened: list[_Bin]) -> list[_Bin]:
        """Return ``opened`` without the bins lacking a group ``c`` must join.

        That is a group ``c`` carries a co-location to (``_gate``), or a one-bin group of
        ``c`` (hostname ``Affinity``) already placed elsewhere: ``host_room`` is 0 there, and
        only pods are added during a fill, so such a bin stays closed to ``c``. ``_visit``
        would pass over these bins (and not widen them): one only ends the leading run it
        counts for skips, and fills without a skip count (``_skip_key`` None) do not use it.
        The scan over every open bin per fill was most of the Karpenter-style pass at 20,000
        pods (1.5M of 1.7M bins visited, none taken).
        """
        tids = [
            tid
            for kind, tid, _ in self._host_rules(c)
            if kind == 2 or (kind == 3 and self.s.placed[tid] > 0)  # noqa: PLR2004 - rule kinds
        ]
        if not tids:
            return opened
        held = self.s.holders[tids[0]]
        for tid in tids[1:]:
            held = {i: b for i, b in held.items() if b.group.get(tid, 0)}
        order = self._orders.get(zone) if self.karpenter and self.seq_ordered else None
        if order is not None:
            # ``opened`` is a copy of the order ``_open_order`` just brought up to date
            key_of = order.key_of
            return sorted((b for i, b in held.items() if i in key_of), key=lambda b: key_of[id(b)])
        return [b for b in opened if id(b) in held]

    def _roomy(self, c: PodClass, zone: str | None, bins: list[_Bin], start: int) -> _Kept:
        """Return the bins of ``bins[start:]`` a cost-aware fill of ``c`` visits.

        Whole blocks of the ``_Usable`` list ``bins`` (``_Usable.tops``) where no bin has
        room for one pod of ``c`` are left out: ``_visit`` would pass over each of their
        bins (dead, or ``_room_ok`` false). In the constraint mix at 10,000 pods such bins
        were 2.4M of 2.5M visited. Blocks are looked at as the fill reaches them.
        """
        usable = self._usable.get((zone, self._kind(c)[0]))
        n = len(bins)
        if usable is None or usable.bins is not bins or n - start < 2 * _BLOCK:
            return _Kept(bins[start:], start, [(start, n)])
        dem = [(r, v) for r, v in c.demand.items() if v > 0]
        ranges: list[tuple[int, int]] = []
        return _Kept(self._blocks(usable, start, dem, ranges), start, ranges)

    def _blocks(
        self, usable: _Usable, start: int, dem: list[tuple[str, int]], ranges: list[tuple[int, int]]
    ) -> Iterator[_Bin]:
        """Yield the bins of ``usable.bins[start:]`` in blocks with room for ``dem``.

        Appends each run of bins yielded to ``ranges`` (start, end) before yielding it, and
        an empty run at the end of the list once every block is looked at.
        """
        bins = usable.bins
        n = len(bins)
        i = start
        while i < n:
            j = min(n, (i // _BLOCK + 1) * _BLOCK)
            if i % _BLOCK or j - i < _BLOCK or self._room_in(usable, i // _BLOCK, dem):
                ranges.append((i, j))
                yield from bins[i:j]
            i = j
        ranges.append((n, n))

    def _room_in(self, usable: _Usable, block: int, dem: list[tuple[str, int]]) -> bool:
        """Return whether a bin of a full ``block`` of ``usable`` may have room for ``dem``."""
        top = usable.tops[block]
        if top is None:
            top = _block_top(usable.bins[block * _BLOCK : (block + 1) * _BLOCK], self._needs)
            if top is None:
                return True
            usable.tops[block] = top
        return _within(top, dem)

    def _visit(  # noqa: PLR0917 - the loop of fill
        self,
        c: PodClass,
        domain: Domain,
        n: int,
        journal: list[_Move],
        opened: Iterable[_Bin],
        widen: bool,
    ) -> tuple[int, int]:
        """Put up to ``n`` pods of ``c`` on the existing bins, then ``opened``, first fit.

        Returns (pods placed, length of the leading run of ``opened`` that is spent for the
        demand of ``c``: dead, exhausted for its needs or without room for one pod).
        """
        placed = spent = 0
        run = True
        zone = domain[1]
        present, below = self._gate(c)
        dem = [(r, v) for r, v in c.demand.items() if v > 0]
        need = self.need_mask(c)
        # a class allowed on every offering fits no bin less for its offerings
        narrow = len(c.allowed_bin_types) < len(self.p.bin_types)
        pools = self._pools_of(c) if narrow else ()
        for b in chain(self.s.bins[: self.n_existing], opened):
            if placed >= n:
                break
            if widen and b.existing is None and not b.wide and self.host_room(b, c) > 0:
                self._widen(b)
                b.exh, b.dead = self._exhausted(b), False
            new = b.existing is None
            if narrow and not run and new and _none_allowed(b.cands, c.allowed_bin_types):
                continue  # as below, checked first once the leading run is over
            blocked = (zone is not None and b.pin is not None and b.pin != zone) or (
                (present or below) and new and not _gate_ok(b.group, present, below)
            )  # other zone, or host_room(b, c) == 0
            if b.dead or b.exh & need or (not blocked and not _room_ok(b.maxcap, b.used, dem)):
                if run and new:
                    spent += 1
                continue
            run = run and not new
            if blocked or (
                narrow
                and new
                and (b.by_cpu[0].pool not in pools or _none_allowed(b.cands, c.allowed_bin_types))
            ):
                continue
            f = self.fit(b, c, domain, n - placed)
            if f is not None:
                self.commit(b, c, f, journal, opened=False)
                placed += f.k
        return placed, spent

    def _clear_skips(self) -> None:
        """Forget skip counts and usable lists (a list changed but at its end, or a bin grew)."""
        self._skip.clear()
        self._usable.clear()
        self._skip_gen += 1

    def _skip_key(self, c: PodClass, zone: str | None) -> tuple[str | None, int, int] | None:
        """Return the key of the skip count of cost-aware fills of ``c`` in ``zone``, if any.

        Cost-aware fills try open bins in a list that only grows at its end (between undos,
        widenings and re-pinnings, which clear the counts), and a bin spent for a demand (see
        ``_visit``) stays spent meanwhile: pods are only added, offerings only dropped. So a
        fill may start after the leading bins that earlier fills of that demand found spent
        in the same list (``_usable_open``, one per offerings).
        """
        if self.karpenter or (zone is not None and self.s.by_zone[None]):
            return None
        kind = self._kind(c)
        return zone, kind[0], kind[1]

    def _usable_open(self, c: PodClass, zone: str | None) -> list[_Bin]:
        """Return the open new bins a cost-aware fill of ``c`` in ``zone`` tries, in order.

        That is ``_open_order(zone)`` without the bins none of whose offerings ``c`` may use
        (``_none_allowed`` of ``by_cpu``, which only a widening changes): ``fit`` would find
        nothing there. Kept per (zone, offerings) and extended as the list grows at its end;
        cleared with the skip counts. Only for fills with a ``_skip_key``.
        """
        key = (zone, self._kind(c)[0])
        usable = self._usable.get(key)
        if usable is None:
            usable = self._usable[key] = _Usable([], self.n_existing if zone is None else 0)
        base = self.s.bins if zone is None else self.s.by_zone[zone]
        if usable.seen < len(base):
            last = len(usable.bins) // _BLOCK
            if len(usable.bins) % _BLOCK and last < len(usable.tops):
                usable.tops[last] = None  # that block grows
            first = len(usable.bins)
            allowed = c.allowed_bin_types
            if len(allowed) < len(self.p.bin_types):
                usable.bins.extend(
                    b for b in base[usable.seen :] if not _none_allowed(b.by_cpu, allowed)
                )
            else:
                usable.bins.extend(base[usable.seen :])
            usable.seen = len(base)
            self._enter_blocks(usable, first)
        return usable.bins

    def _enter_blocks(self, usable: _Usable, first: int) -> None:
        """Give ``usable`` a room per block and note the blocks of its bins from ``first`` on.

        The notes (``_Bin.blocks``) let a commit reset the room of the bin's blocks.
        """
        bins, tops, gen = usable.bins, usable.tops, self._skip_gen
        tops.extend([None] * (-(-len(bins) // _BLOCK) - len(tops)))
        for i in range(first, len(bins)):
            b = bins[i]
            if b.blocks_gen != gen:
                b.blocks, b.blocks_gen = [], gen
            b.blocks.append((usable, i // _BLOCK))

    def place_class(
        self, c: PodClass, domain: Domain, n: int, log: list[_Move] | None = None
    ) -> int:
        """Place up to ``n`` pods of ``c`` and return how many were placed.

        The moves are appended to ``log`` (when given) so that the caller can undo them.
        """
        journal: list[_Move] = []
        placed = self._place_class(c, domain, n, journal)
        if log is not None:
            log.extend(journal)
        return placed

    def _place_class(self, c: PodClass, domain: Domain, n: int, journal: list[_Move]) -> int:
        if n <= 0:
            return 0
        rules = self.zone_rules(c)
        if not rules:
            return self.fill(c, domain, n, journal)
        zones = self._reachable_zones(c, domain)
        if self._one_bin(c):
            zones = self._affine_zones(c, zones)
        caps: dict[str, int] = {}
        for _ in range(4):
            quota = self._split(c, rules, zones, n, caps)
            placed, short = 0, False
            for z in sorted(quota):
                got = self.fill(c, (domain[0], z), quota[z], journal)
                placed += got
                if got < quota[z]:
                    caps[z] = got
                    short = True
            if not short or self._zones_valid(rules):
                return placed
            self.undo(journal)
        return self._place_one_by_one(c, rules, zones, domain, n, journal=journal)

    def _reachable_zones(self, c: PodClass, domain: Domain) -> list[str]:
        """Return the sorted zones of the offerings and existing bins ``c`` may use in ``domain``.

        Cached per eligible offerings, allowed existing bins and domain.
        """
        key = (self._kind(c)[0], c.allowed_existing, domain)
        out = self._zones.get(key)
        if out is None:
            zs = {t.zone for t in self.eligible(c, domain)}
            zs |= {
                e.zone
                for e in self.p.existing
                if e.id in c.allowed_existing and (domain[0] is None or e.pool == domain[0])
            }
            if domain[1] is not None:
                zs &= {domain[1]}
            out = self._zones[key] = sorted(zs)
        return out

    def _load(self, c: PodClass, zone: str, counts: dict[str, Counter[str]]) -> int:
        return sum(counts[t][zone] for t in sorted(c.topology) if t in counts)

    def _split(
        self,
        c: PodClass,
        rules: list[TopologyConstraint],
        zones: list[str],
        n: int,
        caps: Mapping[str, int],
    ) -> Counter[str]:
        counts = {t.id: self.s.zone_counts[t.id].copy() for t in rules}
        for tid in c.topology:
            counts.setdefault(tid, self.s.zone_counts[tid].copy())
        quota: Counter[str] = Counter()
        # once a single-zone group has its zone, only that zone passes: no price needed
        open_affinity = [
            t for t in rules if isinstance(t, Affinity) and not any(counts[t.id].values())
        ]
        price = self._zone_price(c, open_affinity, zones)
        # each zone's load (``_load``), kept as pods are given zones: every group of the
        # class counts each pod once
        load = {z: self._load(c, z, counts) for z in zones}
        for _ in range(n):
            order = sorted(zones, key=lambda z: (load[z], price.get(z, 0), z))
            pick = next(
                (
                    z
                    for z in order
                    if quota[z] < caps.get(z, _INF)
                    and all(self._zone_ok(c, t, z, counts[t.id]) for t in rules)
                ),
                None,
            )
            if pick is None:
                break
            quota[pick] += 1
            load[pick] += len(c.topology)
            for tid in c.topology:
                counts[tid][pick] += 1
        return quota

    def _zone_price(
        self, c: PodClass, rules: Sequence[TopologyConstraint], zones: list[str]
    ) -> dict[str, float]:
        """Return per zone the lowest price per pod of ``c`` when ``c`` is held to one zone.

        The single zone of an ``Affinity`` is then chosen for cost; other rules keep the zone
        order by load and name (empty result).
        """
        if not any(isinstance(t, Affinity) for t in rules):
            return {}
        # a price ordering only (a heuristic): computed once per shape and zones in a run
        key = (
            c.allowed_bin_types,
            tuple(sorted(c.demand.items())),
            c.gpu_fraction_milli,
            tuple(zones),
        )
        cached = self._zone_prices.get(key)
        if cached is not None:
            return cached
        copies, gid = self.catalog.copies(c), self.catalog.gid
        out: dict[str, float] = {}
        for t in self.eligible(c, (None, None)):
            per = t.price_micros / max(copies[gid[t.id]], 1)
            if t.zone in zones and per < out.get(t.zone, float("inf")):
                out[t.zone] = per
        self._zone_prices[key] = out
        return out

    def _zones_valid(self, rules: list[TopologyConstraint]) -> bool:
        for t in rules:
            counts = self.s.zone_counts[t.id]
            if isinstance(t, SpreadConstraint):
                vals = [counts[z] for z in t.zones]
                if max(vals) - min(vals) > t.max_skew:
                    return False
        return True

    def _place_one_by_one(
        self,
        c: PodClass,
        rules: list[TopologyConstraint],
        zones: list[str],
        domain: Domain,
        n: int,
        *,
        journal: list[_Move],
    ) -> int:
        placed = 0
        while placed < n:
            counts = self.s.zone_counts
            order = sorted(zones, key=lambda z: (self._load(c, z, counts), z))
            for z in order:
                if all(self._zone_ok(c, t, z, counts[t.id]) for t in rules) and self.fill(
                    c, (domain[0], z), 1, journal
                ):
                    placed += 1
                    break
            else:
                break
        return placed


_BLOCK = 32
"""Bins per block of a ``_Usable`` list whose room a fill may rule out at once."""


def _block_top(block: list[_Bin], needs: list[str]) -> dict[str, int] | None:
    """Return the most room per resource of ``needs`` on the bins of ``block`` not dead.

    None: a bin's room is not known yet (``maxcap`` None).
    """
    top = dict.fromkeys(needs, -_INF)
    for b in block:
        if b.dead:
            continue
        cap = b.maxcap
        if cap is None:
            return None
        have, used = cap.top, b.used
        for r in needs:
            free = have.get(r, 0) - used[r]
            if free > top[r]:  # noqa: PLR1730 - a hot loop: max() is slower
                top[r] = free
    return top


def _within(top: Mapping[str, int], dem: list[tuple[str, int]]) -> bool:
    """Return whether every demand of ``dem`` is within ``top``."""
    for r, v in dem:  # noqa: SIM110 - a hot loop: plain loops beat all() here
        if v > top.get(r, 0):
            return False
    return True


@dataclass(slots=True)
class _Kept:
    """The bins a fill visits (``bins``): those of a list from some start, less some blocks.

    ``ranges`` lists the (start, end) positions in the whole list of the runs of bins
    ``bins`` has given so far, from ``start``, so that a count of leading spent bins among
    them becomes one of the whole list (``spent``).
    """

    bins: Iterable[_Bin]
    start: int
    ranges: list[tuple[int, int]]

    def spent(self, leading: int) -> int:
        """Return where the next fill of the same demand may start in the whole list.

        The bins left out have no room for the demand, so they are spent; the first
        ``leading`` bins given are too. The first bin given but not counted (not spent, or
        not looked at) is where the next fill starts; when every bin given was counted,
        it starts after the last run given (a last empty run marks the list's end).
        """
        at = self.start
        for a, b in self.ranges:
            if leading < b - a:
                return a + leading
            leading -= b - a
            at = b
        return at


@dataclass(slots=True)
class _Usable:
    """The open bins a kind of class may use (``bins``), from the first ``seen`` of a list.

    ``tops`` holds, per block of ``_BLOCK`` bins, the most room (``maxcap.top - used``) per
    resource some pod needs of any bin of the block that is not dead (None: to be found).
    A commit to a bin resets its blocks (``_Bin.blocks``); between clears of the list pods
    are only added and offerings only dropped, so a value is an upper bound of the room.
    """

    bins: list[_Bin]
    seen: int
    tops: list[dict[str, int] | None] = field(default_factory=list)


def _gate_ok(group: Mapping[str, int], present: list[str], below: list[tuple[str, int]]) -> bool:
    """Return whether a new bin with these group counts passes ``_Packer._gate``."""
    for tid in present:
        if not group.get(tid, 0):
            return False
    for tid, limit in below:  # noqa: SIM110 - a hot loop: plain loops beat all() here
        if group.get(tid, 0) >= limit:
            return False
    return True


def _room_ok(cap: _Cap | None, used: Mapping[str, int], dem: list[tuple[str, int]]) -> bool:
    """Return whether every demand of ``dem`` is within ``cap.top - used`` (None: unknown)."""
    if cap is None:
        return True
    top = cap.top
    for r, v in dem:  # noqa: SIM110 - a hot loop: plain loops beat all() here
        if v > top.get(r, 0) - used.get(r, 0):
            return False
    return True


_FEW_CANDIDATES = 8
"""``_none_allowed`` looks at candidate lists up to this long (most bins keep one or two)."""


def _none_allowed(cands: list[BinType] | None, allowed: frozenset[str]) -> bool:
    """Return whether a short candidate list has no offering in ``allowed``.

    ``fit`` then returns None without side effects; the shortcut skips its calls, which were
    most of the cost-aware pass on the constraint mix (96 % of 100k calls at 5k pods: bins of
    another pool's or shape's offerings).
    """
    if cands is None or len(cands) > _FEW_CANDIDATES:
        return False
    for t in cands:  # noqa: SIM110 - a hot loop: plain loops beat all() here
        if t.id in allowed:
            return False
    return True


def b_fresh(b: _Bin) -> int:
    """Return how many fully free devices of ``b`` already host fractions."""
    return sum(1 for d, use in enumerate(b.dev_use) if use > 0 and b.free[d] == GPU_MILLI)


def _by_cpu(types: list[BinType]) -> list[BinType]:
    return sorted(types, key=lambda t: (-t.capacity.get("cpu", 0), t.price_micros, t.id))


def _done(best: int, limit: int, cpu: int, t: BinType, used_cpu: int) -> bool:
    """Return whether no candidate from ``t`` on (sorted by cpu) can beat ``best``."""
    return (best > 0 and best >= limit) or (
        cpu > 0 and (t.capacity.get("cpu", 0) - used_cpu) // cpu <= best
    )


def _drop(bins: list[_Bin], dropped: set[int]) -> int:
    """Remove the ``dropped`` bins from the tail of ``bins``; return how many were removed.

    Bins opened under a journal are the most recently opened ones, so they are at the tail.
    """
    n = len(bins)
    while n and id(bins[n - 1]) in dropped:
        n -= 1
    removed = len(bins) - n
    del bins[n:]
    return removed


def _maxcap(types: list[BinType]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in types:
        for r, v in t.capacity.items():
            if v > out.get(r, -1):
                out[r] = v
    return out


def _by_price(types: list[BinType]) -> list[BinType]:
    return sorted(types, key=lambda t: (t.price_micros, t.id))


def _copies(t: BinType, c: PodClass, remaining: int) -> int:
    """Return how many pods of ``c`` (at most ``remaining``) an empty ``t`` holds.

    A new cost-aware bin opens with the offering of lowest price per copy of its class,
    ``price / max(copies, 1)``, ties broken by id.
    """
    copies = remaining
    for r, v in c.demand.items():
        if v > 0:
            copies = min(copies, t.capacity.get(r, 0) // v)
    if c.gpu_fraction_milli:
        copies = min(copies, t.gpus * (GPU_MILLI // c.gpu_fraction_milli))
    return copies


def _sort_key(c: PodClass) -> tuple[int, int, str]:
    return (-c.demand.get("cpu", 0), -c.demand.get("memory", 0), c.key)


class GreedyTimeout(Exception):  # noqa: N818 - a signal, not an error
    """The greedy planner passed its deadline (only with ``deadline=``)."""


class GreedyStopped(GreedyTimeout):
    """The greedy planner was told to stop (only with ``stop=``): its plan is not wanted."""


_STOP_EVERY = 8
"""``stop`` is asked before every this many classes (it may cost a system call)."""


def _run(
    problem: Problem,
    *,
    karpenter: bool,
    deadline: float | None = None,
    whole_groups: bool = False,
    stop: Callable[[], bool] | None = None,
) -> _Packer:
    packer = _Packer(problem, karpenter=karpenter, whole_groups=whole_groups)
    gangs = {g.id: g for g in problem.gangs}
    members: defaultdict[str, list[PodClass]] = defaultdict(list)
    for c in problem.classes:
        if c.gang is not None:
            members[c.gang].append(c)
    done: set[str] = set()
    order = sorted(problem.classes, key=lambda c: (packer.needy(c), *_sort_key(c)))
    if packer.whole_groups:
        order = _groups_together(packer, order)
    for i, c in enumerate(order):
        if deadline is not None and time.monotonic() > deadline:
            raise GreedyTimeout
        if stop is not None and i % _STOP_EVERY == 0 and stop():
            raise GreedyStopped
        if c.gang is None:
            packer.place_class(c, (None, None), c.count)
        elif c.gang not in done:
            done.add(c.gang)
            _place_gang(packer, gangs[c.gang], members[c.gang])
    return packer


def _groups_together(packer: _Packer, order: list[PodClass]) -> list[PodClass]:
    """Return ``order`` with the classes of each one-bin group moved up to its first one.

    A group held to one bin (hostname ``Affinity``) opens its bin for the whole group; placed
    together, its classes take that room before other classes fill the bin.
    """
    group_of = {c.key: g for c in order if (g := packer.one_bin_group(c)) is not None}
    if not group_of:
        return order
    members: defaultdict[str, list[PodClass]] = defaultdict(list)
    for c in order:
        if c.key in group_of:
            members[group_of[c.key]].append(c)
    out: list[PodClass] = []
    for c in order:
        g = group_of.get(c.key)
        if g is None:
            out.append(c)
        elif members[g] and members[g][0] is c:
            out.extend(members.pop(g))
    return out


def _gang_domains(packer: _Packer, g: Gang, classes: list[PodClass]) -> list[Domain]:
    if not (g.same_pool or g.same_zone):
        return [(None, None)]
    allowed = set().union(*(c.allowed_bin_types for c in classes))
    allowed_e = set().union(*(c.allowed_existing for c in classes))
    doms: set[Domain] = set()
    for t in packer.p.bin_types:
        if t.id in allowed:
            doms.add((t.pool if g.same_pool else None, t.zone if g.same_zone else None))
    for e in packer.p.existing:
        if e.id in allowed_e:
            doms.add((e.pool if g.same_pool else None, e.zone if g.same_zone else None))
    weights = packer.p.pool_weights
    return sorted(doms, key=lambda d: (-weights.get(d[0] or "", 0), d[0] or "", d[1] or ""))


def _place_gang(packer: _Packer, g: Gang, classes: list[PodClass]) -> None:
    """Place the gang in its cheapest domain (Karpenter: the first that fits), or not at all.

    Each domain is tried by placing the members with a journal and undoing them; the cost of a
    domain is the change of the launch price of the bins it touched.
    """
    classes = sorted(classes, key=lambda c: (packer.needy(c), *_sort_key(c)))
    best: tuple[int, int] | None = None
    domains = _gang_domains(packer, g, classes)
    for i, domain in enumerate(domains):
        journal: list[_Move] = []
        placed = sum(packer.place_class(c, domain, c.count, journal) for c in classes)
        if placed >= g.min_count and packer.karpenter:
            return
        touched = list({id(m.b): m.b for m in journal}.values())
        after = _bins_cost(packer, touched) if placed >= g.min_count else 0
        packer.undo(journal)
        if placed < g.min_count:
            continue
        spent = after - _bins_cost(packer, [b for b in touched if b.npods])
        if best is None or spent < best[0]:
            best = (spent, i)
    if best is not None:
        domain = domains[best[1]]
        for c in classes:
            packer.place_class(c, domain, c.count)


def _bins_cost(packer: _Packer, bins: list[_Bin]) -> int:
    total = 0
    for b in bins:
        t = packer.launch(b)
        if t is not None and b.npods:
            total += t.price_micros
    return total


def _to_solution(packer: _Packer, status: Status) -> Solution:
    new_bins: list[NewBin] = []
    existing: list[ExistingPlacement] = []
    placed: Counter[str] = Counter()
    for b in packer.s.bins:
        if not b.counts:
            continue
        placed.update(b.counts)
        placement = Placement(
            dict(b.counts), {k: _trim(v) for k, v in b.dev_counts.items() if sum(v) > 0}
        )
        if b.existing is not None:
            existing.append(ExistingPlacement(b.existing.id, placement))
        else:
            launch = packer.launch(b)
            assert launch is not None  # noqa: S101 - a new bin always has a candidate
            new_bins.append(NewBin(launch.id, placement))
    sol = Solution(
        new_bins=tuple(new_bins),
        existing=tuple(existing),
        unplaced=unplaced_entries(packer.p, placed),
        cost_micros=0,
        lower_bound_micros=0,
        status=status,
    )
    return _with_cost(packer.p, sol)


def _trim(v: list[int]) -> tuple[int, ...]:
    last = max((i for i, x in enumerate(v) if x), default=-1)
    return tuple(v[: last + 1])


def _with_cost(problem: Problem, sol: Solution) -> Solution:
    from dataclasses import replace  # noqa: PLC0415 - local to keep the namespace small

    return replace(sol, cost_micros=cost(problem, sol))


def unplaced_entries(problem: Problem, placed: Mapping[str, int]) -> tuple[Unplaced, ...]:
    """Return the ``Unplaced`` entries for pods not in ``placed``, with a reason each."""
    out: list[Unplaced] = []
    gang_placed: Counter[str] = Counter()
    for c in problem.classes:
        if c.gang is not None:
            gang_placed[c.gang] += placed.get(c.key, 0)
    for c in problem.classes:
        n = c.count - placed.get(c.key, 0)
        if n > 0:
            out.append(Unplaced(c.key, n, _reason(problem, c, gang_placed)))
    return tuple(out)


def _reason(problem: Problem, c: PodClass, gang_placed: Counter[str]) -> UnplacedReason:
    if c.gang is not None and gang_placed[c.gang] == 0:
        return UnplacedReason.GANG
    fitting = [
        t for t in problem.bin_types if t.id in c.allowed_bin_types and fits_one(problem, c, t)
    ]
    existing_fit = any(
        e.id in c.allowed_existing and all(v <= e.remaining.get(r, 0) for r, v in c.demand.items())
        for e in problem.existing
    )
    if not fitting and not existing_fit:
        return UnplacedReason.NO_CAPACITY
    limited = {lim.pool for lim in problem.limits}
    if any(t.pool in limited or t.max_count is not None for t in fitting):
        return UnplacedReason.LIMIT
    return UnplacedReason.TOPOLOGY


def downsize(problem: Problem, solution: Solution) -> Solution:
    """Move every new bin to the cheapest offering of its pool and zone that fits its pods.

    The replacement must be allowed for every class on the bin, hold its resources and GPU
    fractions, and keep ``max_count`` and pool limits; zone and pool are unchanged, so gangs,
    topology and weights stay valid.
    """
    from dataclasses import replace  # noqa: PLC0415

    types = {t.id: t for t in problem.bin_types}
    classes = {c.key: c for c in problem.classes}
    type_count = Counter(b.bin_type for b in solution.new_bins)
    usage: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for b in solution.new_bins:
        t = types[b.bin_type]
        usage[t.pool].update(t.usage_for_limits())
    limits = {lim.pool: lim.remaining for lim in problem.limits}
    out: list[NewBin] = []
    by_domain: defaultdict[tuple[str, str], list[BinType]] = defaultdict(list)
    for t in sorted(problem.bin_types, key=lambda t: (t.price_micros, t.id)):
        by_domain[t.pool, t.zone].append(t)
    for b in solution.new_bins:
        cur = types[b.bin_type]
        need: _Contents | None = None
        for t in by_domain[cur.pool, cur.zone]:
            if t.price_micros >= cur.price_micros:
                break
            if need is None:
                need = _Contents.of(problem, classes, b.placement)
            if need.held_by(t) and _swap_ok(cur, t, type_count, usage, limits):
                type_count[cur.id] -= 1
                type_count[t.id] += 1
                usage[t.pool].subtract(cur.usage_for_limits())
                usage[t.pool].update(t.usage_for_limits())
                cur = t
                break
        out.append(NewBin(cur.id, b.placement))
    return _with_cost(problem, replace(solution, new_bins=tuple(out)))


def _swap_ok(
    cur: BinType,
    t: BinType,
    type_count: Counter[str],
    usage: defaultdict[str, Counter[str]],
    limits: Mapping[str, Mapping[str, int]],
) -> bool:
    if t.max_count is not None and type_count[t.id] + 1 > t.max_count:
        return False
    lim = limits.get(t.pool, {})
    old, new = cur.usage_for_limits(), t.usage_for_limits()
    return all(usage[t.pool][r] - old.get(r, 0) + new.get(r, 0) <= v for r, v in lim.items())


@dataclass(frozen=True, slots=True)
class _Contents:
    """What the pods of one placement need from an offering (for ``downsize``)."""

    allowed: list[frozenset[str]]
    """The distinct allowed bin type sets of the classes on the bin."""
    used: dict[str, int]
    """Resources used, whole GPUs including the devices hosting fractions."""
    devices: int
    """GPU devices the fractions are spread over."""

    @classmethod
    def of(
        cls, problem: Problem, classes: Mapping[str, PodClass], placement: Placement
    ) -> _Contents:
        """Return the needs of ``placement``."""
        used: dict[str, int] = {}
        allowed: dict[int, frozenset[str]] = {}
        for k, n in placement.counts.items():
            c = classes[k]
            if n:
                allowed[id(c.allowed_bin_types)] = c.allowed_bin_types
            for r, v in c.demand.items():
                used[r] = used.get(r, 0) + v * n
        devices = max((len(per) for per in placement.gpu_devices.values()), default=0)
        dev_use = [0] * devices
        for k, per in placement.gpu_devices.items():
            for d, x in enumerate(per):
                dev_use[d] += x * classes[k].gpu_fraction_milli
        gpu = problem.gpu_resource
        used[gpu] = used.get(gpu, 0) + sum(1 for u in dev_use if u > 0)
        return cls(list(allowed.values()), used, devices)

    def held_by(self, t: BinType) -> bool:
        """Return whether offering ``t`` is allowed for the pods and holds them."""
        if self.devices > t.gpus or any(t.id not in a for a in self.allowed):
            return False
        cap = t.capacity
        return all(v <= cap.get(r, 0) for r, v in self.used.items())


def plan_tiers(problem: Problem, *, karpenter: bool, deadline: float | None = None) -> tiers.Tiers:
    """Return ``karpenter_ffd``'s (or ``cost_aware_ffd``'s) plan with its tiers' plans.

    Raises:
        GreedyTimeout: when ``deadline`` (a ``time.monotonic()`` value) passes first.
    """
    return tiers.fall_through(
        problem,
        functools.partial(_tier, karpenter=karpenter, deadline=deadline),
        post=None if karpenter else functools.partial(downsize, problem),
    )


def _tier(
    problem: Problem,
    *,
    karpenter: bool,
    deadline: float | None,
    whole_groups: bool = False,
    stop: Callable[[], bool] | None = None,
) -> Solution:
    """Return the plan of one tier (classes pre-filtered to their top tier)."""
    problem.validate_structure()
    packer = _run(
        apply_pool_weights(problem),
        karpenter=karpenter,
        deadline=deadline,
        whole_groups=whole_groups,
        stop=stop,
    )
    sol = _to_solution(packer, Status.GREEDY)
    return sol if karpenter else downsize(problem, sol)


def karpenter_ffd(
    problem: Problem,
    *,
    deadline: float | None = None,
    fall_through: bool = True,
    whole_groups: bool = False,
    stop: Callable[[], bool] | None = None,
) -> Solution:
    """Plan like Karpenter: first-fit-decreasing with flexible offerings per new bin.

    NodePools are tried by weight; pods a heavier pool's limits cannot take fall through to
    the next (``solver.tiers``; ``fall_through=False`` plans the top tier only).
    ``whole_groups``: a group held to one bin (hostname ``Affinity``) is placed together,
    on a new bin of its own, as the cost-aware planner does; Karpenter places its first pod
    wherever it fits and leaves out the members the bin has no room for (not Karpenter's
    plan, but one that fills bins the way it does).

    ``stop``: asked now and then while planning; once it answers True the plan is given up.

    Returns a valid ``Solution`` with status ``GREEDY`` and ``lower_bound_micros`` 0.

    Raises:
        GreedyTimeout: when ``deadline`` (a ``time.monotonic()`` value) passes first.
        GreedyStopped: when ``stop`` answered True first.
    """
    plan = functools.partial(
        _tier, karpenter=True, deadline=deadline, whole_groups=whole_groups, stop=stop
    )
    if not fall_through:
        return plan(problem)
    return tiers.fall_through(problem, plan).solution


def cost_aware_ffd(
    problem: Problem, *, deadline: float | None = None, fall_through: bool = True
) -> Solution:
    """Plan first-fit-decreasing, opening by price per copy and downsizing at the end.

    Weights fall through as in ``karpenter_ffd``.

    Returns a valid ``Solution`` with status ``GREEDY`` and ``lower_bound_micros`` 0.

    Raises:
        GreedyTimeout: when ``deadline`` (a ``time.monotonic()`` value) passes first.
    """
    if not fall_through:
        return _tier(problem, karpenter=False, deadline=deadline)
    return plan_tiers(problem, karpenter=False, deadline=deadline).solution
