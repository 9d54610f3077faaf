"""First-fit-decreasing planners: the Karpenter-like baseline and the cost-aware warm start.

Both honour every rule of ``solver.validate`` (their output always validates):

* pods are taken class by class, sorted by cpu then memory descending (Karpenter's order);
  each pod tries existing bins first (in problem order), then the open new bins, then a new bin;
* a gang is placed at the position of its first class, all its members at once, inside one
  (pool, zone) domain when it asks for it; if fewer than ``min_count`` members fit, the whole
  state is rolled back and its pods are unplaced with reason ``gang``;
* topology is checked incrementally (zone spread as Karpenter does: a pod may go to zone z when
  ``count(z) + 1 - min(count) <= max_skew``, which keeps the skew invariant as pods are only
  added); a new bin whose candidate offerings span zones is pinned to one zone as soon as a
  zone-constrained pod joins it;
* node pool limits and ``max_count`` are charged for the offering a bin would launch as (its
  cheapest remaining candidate) and re-checked whenever that changes;
* fractional pods go first-fit onto physical GPU devices.

``karpenter_ffd``: open bins are tried fewest pods first; a new bin keeps every offering of the
highest-weight pool that still fits its pods and launches the cheapest at the end.
``cost_aware_ffd``: a new bin is opened with the offering of lowest price per copy of the
opening pod's class, open bins are tried first-fit in opening order, and every bin is downsized
to the cheapest offering of its pool and zone that fits its contents at the end.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from solver.problem import (
    GPU_MILLI,
    AntiAffinity,
    BinType,
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
from solver.weights import apply_pool_weights, fits_one

Domain = tuple[str | None, str | None]
"""(pool, zone) a gang is confined to; ``None`` = unconstrained."""


@dataclass(slots=True)
class _Bin:
    existing: ExistingBin | None
    candidates: list[BinType]
    free: list[int]
    used: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    dev_counts: dict[str, list[int]] = field(default_factory=dict)
    dev_use: list[int] = field(default_factory=list)
    charged: BinType | None = None

    @property
    def launch(self) -> BinType | None:
        if not self.candidates:
            return None
        return min(self.candidates, key=lambda t: (t.price_micros, t.id))

    def zones(self) -> set[str]:
        if self.existing is not None:
            return {self.existing.zone}
        return {t.zone for t in self.candidates}

    def pool(self) -> str:
        return self.existing.pool if self.existing is not None else self.candidates[0].pool


@dataclass(slots=True)
class _State:
    bins: list[_Bin]
    zone_counts: dict[str, Counter[str]]
    pool_usage: defaultdict[str, Counter[str]]
    type_count: Counter[str]


class _Packer:
    """Incremental first-fit state shared by both greedy policies."""

    def __init__(self, problem: Problem, *, karpenter: bool) -> None:
        self.p = problem
        self.karpenter = karpenter
        self.gpu = problem.gpu_resource
        self.topo: dict[str, TopologyConstraint] = {t.id: t for t in problem.topology}
        self.limits = {lim.pool: lim.remaining for lim in problem.limits}
        self.types_by_id = {t.id: t for t in problem.bin_types}
        zone_counts: dict[str, Counter[str]] = {}
        for t in problem.topology:
            zone_counts[t.id] = Counter(
                t.existing if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE else {}
            )
        self.classes = {c.key: c for c in problem.classes}
        bins = [_Bin(e, [], list(e.gpu_free_milli)) for e in problem.existing]
        for b in bins:
            b.dev_use = [0] * len(b.free)
        self.s = _State(bins, zone_counts, defaultdict(Counter), Counter())
        self.n_existing = len(bins)

    # ---- checks -------------------------------------------------------------------------
    def _device_for(self, b: _Bin, c: PodClass) -> int | None:
        for d, free in enumerate(b.free):
            if free - b.dev_use[d] >= c.gpu_fraction_milli:
                return d
        return None

    def _fits(self, t: BinType | ExistingBin, b: _Bin, c: PodClass, device: int | None) -> bool:
        cap = t.remaining if isinstance(t, ExistingBin) else t.capacity
        extra = 0
        if device is not None:
            if isinstance(t, BinType) and device >= t.gpus:
                return False
            extra = 1 if b.dev_use[device] == 0 and b.free[device] == GPU_MILLI else 0
        for r, v in c.demand.items():
            add = v + (extra if r == self.gpu else 0)
            if b.used[r] + add + (b_fresh(b) if r == self.gpu else 0) > cap.get(r, 0):
                return False
        if extra and self.gpu not in c.demand:
            return b.used[self.gpu] + b_fresh(b) + 1 <= cap.get(self.gpu, 0)
        return True

    def _group_on_bin(self, b: _Bin, tid: str) -> int:
        return sum(n for k, n in b.counts.items() if tid in self.classes[k].topology)

    def _topology_ok(self, b: _Bin, c: PodClass, zone: str | None) -> bool:
        for tid in c.topology:
            t = self.topo[tid]
            if isinstance(t, SpreadConstraint) and t.key is TopologyKey.HOSTNAME:
                have = self._group_on_bin(b, tid)
                if b.existing is not None:
                    have += t.existing.get(b.existing.id, 0)
                if have + 1 > t.max_skew:
                    return False
            elif isinstance(t, AntiAffinity) and t.key is TopologyKey.HOSTNAME:
                if self._group_on_bin(b, tid) > 0 or (
                    b.existing is not None and b.existing.id in t.occupied
                ):
                    return False
            elif zone is None or not self._zone_ok(t, zone):
                return False
        return True

    def _zone_ok(self, t: TopologyConstraint, zone: str) -> bool:
        counts = self.s.zone_counts[t.id]
        if isinstance(t, SpreadConstraint):
            if zone not in t.zones:
                return False
            return counts[zone] + 1 - min(counts[z] for z in t.zones) <= t.max_skew
        if isinstance(t, AntiAffinity):
            return counts[zone] == 0 and zone not in t.occupied
        chosen = {z for z, n in counts.items() if n > 0}
        return (t.zones is None or zone in t.zones) and chosen <= {zone}

    def _needs_zone(self, c: PodClass, domain: Domain) -> bool:
        if domain[1] is not None:
            return True
        return any(
            not (isinstance(self.topo[t], SpreadConstraint | AntiAffinity))
            or self.topo[t].key is TopologyKey.ZONE  # type: ignore[union-attr]
            for t in c.topology
        )

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

    # ---- placement ----------------------------------------------------------------------
    def try_add(self, b: _Bin, c: PodClass, domain: Domain) -> bool:  # noqa: PLR0911
        """Place one pod of ``c`` on ``b`` if every rule allows it."""
        if b.existing is not None:
            return self._try_existing(b, c, domain)
        pool, zone = domain
        if pool is not None and b.pool() != pool:
            return False
        device = self._device_for(b, c) if c.gpu_fraction_milli else None
        if c.gpu_fraction_milli and device is None:
            return False
        cands = [
            t
            for t in b.candidates
            if t.id in c.allowed_bin_types
            and (zone is None or t.zone == zone)
            and self._fits(t, b, c, device)
        ]
        if not cands:
            return False
        zones = sorted({t.zone for t in cands})
        if self._needs_zone(c, domain) and len(zones) > 1:
            zones.sort(key=lambda z: (self._zone_load(c, z), z))
            for z in zones:
                sub = [t for t in cands if t.zone == z]
                if self._commit_new(b, c, sub, device, z):
                    return True
            return False
        return self._commit_new(b, c, cands, device, zones[0] if len(zones) == 1 else None)

    def _zone_load(self, c: PodClass, zone: str) -> int:
        return sum(self.s.zone_counts[t][zone] for t in c.topology)

    def _commit_new(
        self, b: _Bin, c: PodClass, cands: list[BinType], device: int | None, zone: str | None
    ) -> bool:
        old = b.charged
        new = min(cands, key=lambda t: (t.price_micros, t.id))
        if not self._topology_ok(b, c, zone) or not self._limits_ok(old, new):
            return False
        if old is None or old.id != new.id:
            if old is not None:
                self._charge(old, -1)
            self._charge(new, 1)
        b.candidates = cands
        b.charged = new
        self._record(b, c, device, zone)
        return True

    def _charge(self, t: BinType, sign: int) -> None:
        self.s.type_count[t.id] += sign
        for r, v in t.usage_for_limits().items():
            self.s.pool_usage[t.pool][r] += sign * v

    def _try_existing(self, b: _Bin, c: PodClass, domain: Domain) -> bool:
        e = b.existing
        assert e is not None  # noqa: S101 - caller checked
        pool, zone = domain
        if e.id not in c.allowed_existing or (pool is not None and e.pool != pool):
            return False
        if zone is not None and e.zone != zone:
            return False
        device = self._device_for(b, c) if c.gpu_fraction_milli else None
        if c.gpu_fraction_milli and device is None:
            return False
        if not self._fits(e, b, c, device) or not self._topology_ok(b, c, e.zone):
            return False
        self._record(b, c, device, e.zone)
        return True

    def _record(self, b: _Bin, c: PodClass, device: int | None, zone: str | None) -> None:
        for r, v in c.demand.items():
            b.used[r] += v
        b.counts[c.key] += 1
        if device is not None:
            b.dev_use[device] += c.gpu_fraction_milli
            per = b.dev_counts.setdefault(c.key, [0] * len(b.free))
            per[device] += 1
        if zone is not None:
            for t in c.topology:
                self.s.zone_counts[t][zone] += 1

    def open_options(self, c: PodClass, domain: Domain, remaining: int) -> list[list[BinType]]:
        """Return candidate lists for a new bin for one pod of ``c``, best first."""
        pool, zone = domain
        types = [
            t
            for t in self.p.bin_types
            if t.id in c.allowed_bin_types
            and (pool is None or t.pool == pool)
            and (zone is None or t.zone == zone)
            and fits_one(self.p, c, t)
        ]
        if self.karpenter:
            by_pool: defaultdict[str, list[BinType]] = defaultdict(list)
            for t in types:
                by_pool[t.pool].append(t)
            order = sorted(by_pool, key=lambda p: (-self.p.pool_weights.get(p, 0), p))
            return [by_pool[p] for p in order]
        return [[t] for t in sorted(types, key=lambda t: _price_per_copy(t, c, remaining))]

    def place_pod(self, c: PodClass, domain: Domain, remaining: int, skip: set[int]) -> bool:
        """Place one pod: existing bins, open bins, then a new bin."""
        for i in range(self.n_existing):
            if i not in skip and self.try_add(self.s.bins[i], c, domain):
                return True
        opened = list(range(self.n_existing, len(self.s.bins)))
        if self.karpenter:
            opened.sort(key=lambda i: sum(self.s.bins[i].counts.values()))
        for i in opened:
            if i not in skip and self.try_add(self.s.bins[i], c, domain):
                return True
        for cands in self.open_options(c, domain, remaining):
            width = max(t.gpus for t in cands)
            b = _Bin(None, cands, [GPU_MILLI] * width)
            b.dev_use = [0] * width
            if self.try_add(b, c, domain):
                self.s.bins.append(b)
                return True
        return False


def b_fresh(b: _Bin) -> int:
    """Return how many fully free devices of ``b`` already host fractions."""
    return sum(1 for d, use in enumerate(b.dev_use) if use > 0 and b.free[d] == GPU_MILLI)


def _price_per_copy(t: BinType, c: PodClass, remaining: int) -> tuple[float, str]:
    copies = remaining
    for r, v in c.demand.items():
        if v > 0:
            copies = min(copies, t.capacity.get(r, 0) // v)
    if c.gpu_fraction_milli:
        copies = min(copies, t.gpus * (GPU_MILLI // c.gpu_fraction_milli))
    return (t.price_micros / max(copies, 1), t.id)


def _sort_key(c: PodClass) -> tuple[int, int, str]:
    return (-c.demand.get("cpu", 0), -c.demand.get("memory", 0), c.key)


def _run(problem: Problem, *, karpenter: bool) -> _Packer:
    packer = _Packer(problem, karpenter=karpenter)
    gangs = {g.id: g for g in problem.gangs}
    done: set[str] = set()
    for c in sorted(problem.classes, key=_sort_key):
        if c.gang is None:
            _place_class(packer, c, (None, None), c.count)
        elif c.gang not in done:
            done.add(c.gang)
            _place_gang(packer, gangs[c.gang])
    return packer


def _place_class(packer: _Packer, c: PodClass, domain: Domain, n: int) -> int:
    skip: set[int] = set()
    placed = 0
    for i in range(n):
        if not packer.place_pod(c, domain, n - i, skip):
            break
        placed += 1
    return placed


def _gang_domains(packer: _Packer, g: Gang) -> list[Domain]:
    classes = list(packer.p.classes_of_gang(g.id))
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


def _place_gang(packer: _Packer, g: Gang) -> None:
    classes = sorted(packer.p.classes_of_gang(g.id), key=_sort_key)
    best: tuple[int, _State] | None = None
    start = copy.deepcopy(packer.s)
    for domain in _gang_domains(packer, g):
        packer.s = copy.deepcopy(start)
        placed = sum(_place_class(packer, c, domain, c.count) for c in classes)
        if placed < g.min_count:
            continue
        spent = _state_cost(packer.s)
        if best is None or spent < best[0]:
            best = (spent, packer.s)
        if packer.karpenter:
            break
    packer.s = best[1] if best is not None else start


def _state_cost(s: _State) -> int:
    return sum(b.launch.price_micros for b in s.bins if b.launch is not None)


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
            launch = b.launch
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
    for b in solution.new_bins:
        cur = types[b.bin_type]
        for t in sorted(problem.bin_types, key=lambda t: (t.price_micros, t.id)):
            if t.price_micros >= cur.price_micros:
                break
            ok = t.pool == cur.pool and t.zone == cur.zone
            if (
                ok
                and _holds(problem, classes, t, b.placement)
                and _swap_ok(cur, t, type_count, usage, limits)
            ):
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


def _holds(
    problem: Problem, classes: Mapping[str, PodClass], t: BinType, placement: Placement
) -> bool:
    used: Counter[str] = Counter()
    devices = 0
    for k, n in placement.counts.items():
        c = classes[k]
        if n and t.id not in c.allowed_bin_types:
            return False
        for r, v in c.demand.items():
            used[r] += v * n
    for per in placement.gpu_devices.values():
        devices = max(devices, len(per))
    dev_use = [0] * devices
    for k, per in placement.gpu_devices.items():
        for d, x in enumerate(per):
            dev_use[d] += x * classes[k].gpu_fraction_milli
    if devices > t.gpus:
        return False
    used[problem.gpu_resource] += sum(1 for u in dev_use if u > 0)
    return all(v <= t.capacity.get(r, 0) for r, v in used.items())


def _greedy(problem: Problem, *, karpenter: bool, post: Callable[[Solution], Solution]) -> Solution:
    problem.validate_structure()
    packer = _run(apply_pool_weights(problem), karpenter=karpenter)
    return post(_to_solution(packer, Status.GREEDY))


def karpenter_ffd(problem: Problem) -> Solution:
    """Plan like Karpenter: first-fit-decreasing with flexible offerings per new bin.

    Returns a valid ``Solution`` with status ``GREEDY`` and ``lower_bound_micros`` 0.
    """
    return _greedy(problem, karpenter=True, post=lambda s: s)


def cost_aware_ffd(problem: Problem) -> Solution:
    """Plan first-fit-decreasing, opening by price per copy and downsizing at the end.

    Returns a valid ``Solution`` with status ``GREEDY`` and ``lower_bound_micros`` 0.
    """
    return _greedy(problem, karpenter=False, post=lambda s: downsize(problem, s))
