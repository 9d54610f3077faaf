"""The executable specification of a plan and the test oracle for every solver.

``violations(problem, solution)`` lists every broken rule in plain words; an empty list means
the solution is valid:

* accounting: each class's placed pods plus its ``unplaced`` entries equal its count; ids exist;
* allowed bins only (``PodClass.allowed_bin_types`` / ``allowed_existing``);
* capacity per resource (new bins: ``BinType.capacity``; existing: ``ExistingBin.remaining``),
  where each fully free GPU device receiving fractions consumes one unit of ``gpu_resource``;
* fractions: fractional classes list their pods per device; per device the fractions sum to at
  most its free share (1000 on new bins);
* gangs: placed members are 0 or >= ``min_count``; one pool / one zone when asked, that of
  the members already running when the gang has some;
* topology: zone spread skew over the eligible zones, hostname spread per bin, anti-affinity,
  affinity to one domain (all matching pods in one zone or on one bin: kube-scheduler's
  first-pod rule for a group matching itself),
  co-location (every bin / zone with a carrier also hosts a target or is
  ``satisfied``);
* node pool limits and ``BinType.max_count``;
* pool weights: no pod on new capacity of a pool when a higher-weight pool can still take it
  once the plan is made (``solver.weights``): one more bin of an allowed type holding it fits
  that pool's limits and ``max_count`` left by the plan, or (pods without gang, topology or
  GPU fraction) one of the plan's new bins of that pool has room for it; a gang's members on a
  lower-weight pool are rejected when one more bin of a heavier pool holds them all;
* ``cost_micros`` equals ``cost(...)`` and ``lower_bound_micros <= cost_micros``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solver.problem import (
    GPU_MILLI,
    Affinity,
    AntiAffinity,
    BinType,
    CoLocation,
    Placement,
    PodClass,
    Problem,
    Solution,
    SpreadConstraint,
    TopologyKey,
)
from solver.weights import Leftover, fits_one


@dataclass(frozen=True, slots=True)
class _Bin:
    name: str
    zone: str
    pool: str
    capacity: dict[str, int]
    devices: tuple[int, ...]
    placement: Placement
    existing_id: str | None
    ref: str


def cost(problem: Problem, solution: Solution) -> int:
    """Return the hourly price in micro-dollars of the solution's new bins."""
    price = {b.id: b.price_micros for b in problem.bin_types}
    return sum(price[b.bin_type] for b in solution.new_bins if b.bin_type in price)


def violations(problem: Problem, solution: Solution) -> list[str]:
    """Return every rule the solution breaks (empty when valid)."""
    out: list[str] = []
    bins = _bins(problem, solution, out)
    classes = {c.key: c for c in problem.classes}
    _check_accounting(problem, solution, out)
    for b in bins:
        _check_bin(problem, classes, b, out)
    _check_gangs(problem, bins, out)
    _check_topology(problem, classes, bins, out)
    _check_limits(problem, solution, out)
    _check_weights(problem, classes, solution, out)
    total = cost(problem, solution)
    if solution.cost_micros != total:
        out.append(f"cost_micros {solution.cost_micros} != sum of bin prices {total}")
    if solution.lower_bound_micros > solution.cost_micros:
        out.append(f"lower bound {solution.lower_bound_micros} > cost {solution.cost_micros}")
    return out


def _bins(problem: Problem, solution: Solution, out: list[str]) -> list[_Bin]:
    types = {b.id: b for b in problem.bin_types}
    existing = {e.id: e for e in problem.existing}
    bins: list[_Bin] = []
    for i, nb in enumerate(solution.new_bins):
        bt = types.get(nb.bin_type)
        if bt is None:
            out.append(f"new bin {i}: unknown bin type {nb.bin_type}")
            continue
        devices = (GPU_MILLI,) * bt.gpus
        name = f"new bin {i} ({bt.id})"
        bins.append(
            _Bin(name, bt.zone, bt.pool, dict(bt.capacity), devices, nb.placement, None, bt.id)
        )
    seen: set[str] = set()
    for ep in solution.existing:
        e = existing.get(ep.bin_id)
        if e is None:
            out.append(f"existing placement on unknown bin {ep.bin_id}")
            continue
        if e.id in seen:
            out.append(f"existing bin {e.id} listed twice")
        seen.add(e.id)
        name = f"existing bin {e.id}"
        bins.append(
            _Bin(
                name, e.zone, e.pool, dict(e.remaining), e.gpu_free_milli, ep.placement, e.id, e.id
            )
        )
    return bins


def _check_accounting(problem: Problem, solution: Solution, out: list[str]) -> None:
    placed = Counter[str]()
    for p in [b.placement for b in solution.new_bins] + [e.placement for e in solution.existing]:
        for k, n in p.counts.items():
            if n < 0:
                out.append(f"class {k}: negative count {n} on a bin")
            placed[k] += n
    unplaced = Counter[str]()
    for u in solution.unplaced:
        if u.count < 0:
            out.append(f"class {u.class_key}: negative unplaced count")
        unplaced[u.class_key] += u.count
    keys = {c.key for c in problem.classes}
    out.extend(
        f"class {k}: unknown class key in solution" for k in (set(placed) | set(unplaced)) - keys
    )
    out.extend(
        f"class {c.key}: placed {placed[c.key]} + unplaced {unplaced[c.key]} != count {c.count}"
        for c in problem.classes
        if placed[c.key] + unplaced[c.key] != c.count
    )


def _check_bin(problem: Problem, classes: dict[str, PodClass], b: _Bin, out: list[str]) -> None:
    used: Counter[str] = Counter()
    device_use = [0] * len(b.devices)
    for k, n in b.placement.counts.items():
        c = classes.get(k)
        if c is None or n == 0:
            continue
        allowed = c.allowed_existing if b.existing_id is not None else c.allowed_bin_types
        if b.ref not in allowed:
            out.append(f"{b.name}: class {k} not allowed there")
        for r, v in c.demand.items():
            used[r] += v * n
        _check_fraction_devices(c, n, b, device_use, out)
    for k in b.placement.gpu_devices:
        c = classes.get(k)
        if c is None or c.gpu_fraction_milli == 0:
            out.append(f"{b.name}: gpu_devices for non-fractional class {k}")
    for d, use in enumerate(device_use):
        if use > b.devices[d]:
            out.append(f"{b.name}: GPU {d} fractions {use} > free {b.devices[d]}")
    fresh = sum(1 for d, use in enumerate(device_use) if use > 0 and b.devices[d] == GPU_MILLI)
    used[problem.gpu_resource] += fresh
    for r, v in used.items():
        if v > b.capacity.get(r, 0):
            out.append(f"{b.name}: {r} used {v} > capacity {b.capacity.get(r, 0)}")


def _check_fraction_devices(
    c: PodClass, n: int, b: _Bin, device_use: list[int], out: list[str]
) -> None:
    if c.gpu_fraction_milli == 0:
        return
    per_device = b.placement.gpu_devices.get(c.key, ())
    if sum(per_device) != n or any(x < 0 for x in per_device):
        out.append(f"{b.name}: class {c.key} device counts {per_device} do not sum to {n}")
    if len(per_device) > len(b.devices):
        out.append(f"{b.name}: class {c.key} uses {len(per_device)} GPUs, bin has fewer")
        return
    for d, x in enumerate(per_device):
        device_use[d] += x * c.gpu_fraction_milli


def _members_by_group(
    bins: list[_Bin], groups_of: Mapping[str, Iterable[str]]
) -> dict[str, list[tuple[_Bin, int]]]:
    """Return, per group id, the bins holding pods of its classes and how many (bin order).

    ``groups_of`` maps a class key to the ids of the groups (gangs, topology constraints) its
    pods belong to; one pass over the bins instead of one per group.
    """
    per: dict[str, dict[int, int]] = {}
    for i, b in enumerate(bins):
        for k, v in b.placement.counts.items():
            if v <= 0:
                continue
            for g in groups_of.get(k, ()):
                counts = per.setdefault(g, {})
                counts[i] = counts.get(i, 0) + v
    return {g: [(bins[i], n) for i, n in counts.items()] for g, counts in per.items()}


def _check_gangs(problem: Problem, bins: list[_Bin], out: list[str]) -> None:
    gang_of = {c.key: (c.gang,) for c in problem.classes if c.gang is not None}
    by_gang = _members_by_group(bins, gang_of)
    for g in problem.gangs:
        members = by_gang.get(g.id, [])
        placed = sum(n for _, n in members)
        if 0 < placed < g.min_count:
            out.append(f"gang {g.id}: partial placement {placed} < min {g.min_count}")
        if g.same_pool and len({b.pool for b, _ in members}) > 1:
            out.append(f"gang {g.id}: members in several node pools")
        if g.same_zone and len({b.zone for b, _ in members}) > 1:
            out.append(f"gang {g.id}: members in several zones")
        if g.same_pool and g.pool is not None and any(b.pool != g.pool for b, _ in members):
            out.append(f"gang {g.id}: members outside pool {g.pool} of its running members")
        if g.same_zone and g.zone is not None and any(b.zone != g.zone for b, _ in members):
            out.append(f"gang {g.id}: members outside zone {g.zone} of its running members")


def _check_topology(
    problem: Problem, classes: dict[str, PodClass], bins: list[_Bin], out: list[str]
) -> None:
    by_group = _members_by_group(bins, {k: c.topology for k, c in classes.items()})
    carrier_of: defaultdict[str, list[str]] = defaultdict(list)
    for t in problem.topology:
        if isinstance(t, CoLocation):
            for k in set(t.carriers):
                carrier_of[k].append(t.id)
    # per co-location, the bins holding its carriers and how many (bin order)
    carried = _members_by_group(bins, carrier_of) if carrier_of else {}
    for t in problem.topology:
        members = by_group.get(t.id, [])
        per_zone: Counter[str] = Counter()
        for b, n in members:
            per_zone[b.zone] += n
        if isinstance(t, SpreadConstraint):
            _check_spread(t, members, per_zone, out)
        elif isinstance(t, AntiAffinity):
            _check_anti(t, members, per_zone, out)
        elif isinstance(t, CoLocation):
            _check_colocation(t, carried.get(t.id, []), members, per_zone, out)
        else:
            _check_affinity(t, members, per_zone, out)


def _check_spread(
    t: SpreadConstraint, members: list[tuple[_Bin, int]], per_zone: Counter[str], out: list[str]
) -> None:
    if t.key is TopologyKey.HOSTNAME:
        for b, n in members:
            have = n + (t.existing.get(b.existing_id, 0) if b.existing_id else 0)
            if have > t.max_skew:
                out.append(f"spread {t.id}: {b.name} has {have} > max_skew {t.max_skew}")
        return
    if bad := set(per_zone) - set(t.zones):
        out.append(f"spread {t.id}: pods in ineligible zones {sorted(bad)}")
    counts = [per_zone[z] + t.existing.get(z, 0) for z in t.zones]
    if max(counts) - min(counts) > t.max_skew:
        out.append(f"spread {t.id}: zone counts {counts} exceed max_skew {t.max_skew}")


def _check_anti(
    t: AntiAffinity, members: list[tuple[_Bin, int]], per_zone: Counter[str], out: list[str]
) -> None:
    if t.key is TopologyKey.HOSTNAME:
        for b, n in members:
            if n > 1 or (b.existing_id is not None and b.existing_id in t.occupied):
                out.append(f"anti-affinity {t.id}: {b.name} hosts {n} matching pods")
        return
    for z, n in per_zone.items():
        if n > 1 or z in t.occupied:
            out.append(f"anti-affinity {t.id}: zone {z} hosts {n} matching pods")


def _check_colocation(
    t: CoLocation,
    carriers: list[tuple[_Bin, int]],
    members: list[tuple[_Bin, int]],
    per_zone: Counter[str],
    out: list[str],
) -> None:
    if t.key is TopologyKey.HOSTNAME:
        hosts = {id(b) for b, _ in members}
        for b, _ in carriers:
            if id(b) not in hosts and (b.existing_id is None or b.existing_id not in t.satisfied):
                out.append(f"co-location {t.id}: {b.name} hosts carriers but no target pod")
        return
    out.extend(
        f"co-location {t.id}: zone {z} hosts carriers but no target pod"
        for z in sorted({b.zone for b, _ in carriers})
        if per_zone[z] == 0 and z not in t.satisfied
    )


def _check_affinity(
    t: Affinity, members: list[tuple[_Bin, int]], per_zone: Counter[str], out: list[str]
) -> None:
    """All matching pods in one domain (kube-scheduler's first-pod rule), within ``zones``."""
    if t.key is TopologyKey.HOSTNAME:
        hosts = sorted({b.name for b, n in members if n > 0})
        if len(hosts) > 1:
            out.append(f"affinity {t.id}: pods on several nodes {hosts}")
        outside = sorted(
            b.name
            for b, n in members
            if n > 0 and t.zones is not None and (b.existing_id or "") not in t.zones
        )
        if outside:
            out.append(f"affinity {t.id}: pods outside allowed nodes {outside}")
        return
    zones = {z for z, n in per_zone.items() if n > 0}
    if len(zones) > 1:
        out.append(f"affinity {t.id}: pods in several zones {sorted(zones)}")
    if t.zones is not None and zones - t.zones:
        out.append(f"affinity {t.id}: pods outside allowed zones {sorted(zones - t.zones)}")


def _check_limits(problem: Problem, solution: Solution, out: list[str]) -> None:
    types = {b.id: b for b in problem.bin_types}
    per_type = Counter(b.bin_type for b in solution.new_bins if b.bin_type in types)
    for tid, n in per_type.items():
        mc = types[tid].max_count
        if mc is not None and n > mc:
            out.append(f"bin type {tid}: {n} bins > max_count {mc}")
    usage: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for tid, n in per_type.items():
        for r, v in types[tid].usage_for_limits().items():
            usage[types[tid].pool][r] += v * n
    for lim in problem.limits:
        for r, v in lim.remaining.items():
            if usage[lim.pool][r] > v:
                out.append(f"pool {lim.pool}: {r} usage {usage[lim.pool][r]} > limit {v}")


def _check_weights(
    problem: Problem, classes: dict[str, PodClass], solution: Solution, out: list[str]
) -> None:
    weights = problem.pool_weights
    top = max((weights.get(t.pool, 0) for t in problem.bin_types), default=0)
    if not any(weights.get(t.pool, 0) < top for t in problem.bin_types):
        return
    check = _WeightCheck(problem, classes, solution)
    gangs: set[str] = set()
    # the answer depends on the class and the bin's weight only: once per pair
    higher: dict[tuple[str, int], str | None] = {}
    for nb in solution.new_bins:
        bt = check.types.get(nb.bin_type)
        if bt is None or weights.get(bt.pool, 0) >= top:
            continue
        w = weights.get(bt.pool, 0)
        for k, n in nb.placement.counts.items():
            c = classes.get(k)
            if n <= 0 or c is None:
                continue
            if c.gang is not None:
                gangs.add(c.gang)
                continue
            if c.topology:
                # whether a heavier bin keeps the pod's spread or affinity depends on where the
                # rest of its group went; the tier that declined it judged that, not this check
                continue
            if (k, w) not in higher:
                higher[k, w] = check.fresh_higher(c, w) or check.room_higher(c, w)
            pool = higher[k, w]
            if pool is not None:
                out.append(
                    f"class {k}: on pool {bt.pool} while higher-weight pool {pool} can take it"
                )
    for g in gangs:
        pool = check.gang_higher(g)
        if pool is not None:
            out.append(f"gang {g}: on a lower-weight pool while pool {pool} can take it whole")


def _room_dominates(big: Mapping[str, int], small: Mapping[str, int]) -> bool:
    """Return whether room ``big`` has at least ``small``'s amount of every resource."""
    return all(big.get(r, 0) >= v for r, v in small.items()) and all(
        v >= 0 for r, v in big.items() if r not in small
    )


class _WeightCheck:
    """Whether a higher-weight pool can still take pods a plan put on a lower-weight pool.

    A pool can take a pod when one more bin of an allowed type holding it fits the limits and
    ``max_count`` the plan leaves (``weights.Leftover``), or, for a pod without gang, topology
    or GPU fraction, when one of the plan's new bins of the pool has room for it. A gang's
    members (without topology or fractions, all on new bins) can be taken when one more bin of
    a type allowed for all of them holds them all within what is left.
    """

    def __init__(self, problem: Problem, classes: dict[str, PodClass], solution: Solution) -> None:
        self.problem, self.classes, self.solution = problem, classes, solution
        self.types = {b.id: b for b in problem.bin_types}
        self.left = Leftover.of(problem, solution.new_bins)
        self.weights = problem.pool_weights
        self._fitting: dict[tuple[object, ...], list[BinType]] = {}
        self._fronts: dict[str, list[tuple[int, dict[str, int]]]] | None = None
        carriers = {k for t in problem.topology if isinstance(t, CoLocation) for k in t.carriers}
        self.plain = {
            c.key
            for c in problem.classes
            if c.gang is None
            and not c.topology
            and c.gpu_fraction_milli == 0
            and c.key not in carriers
        }

    def fitting(self, c: PodClass) -> list[BinType]:
        """Return the allowed bin types that hold one pod of ``c`` (cached per class shape)."""
        shape = (c.allowed_bin_types, tuple(sorted(c.demand.items())), c.gpu_fraction_milli)
        out = self._fitting.get(shape)
        if out is None:
            out = self._fitting[shape] = [
                bt
                for bt in self.problem.bin_types
                if bt.id in c.allowed_bin_types and fits_one(self.problem, c, bt)
            ]
        return out

    def fresh_higher(self, c: PodClass, w: int) -> str | None:
        """Return a pool heavier than ``w`` that can take a pod of ``c`` on a new bin."""
        for bt in self.fitting(c):
            if self.weights.get(bt.pool, 0) > w and self.left.fresh_fits(bt):
                return bt.pool
        return None

    def room_higher(self, c: PodClass, w: int) -> str | None:
        """Return a pool heavier than ``w`` whose planned bin has room for a pod of ``c``."""
        if c.key not in self.plain:
            return None
        if self._fronts is None:
            self._fronts = self._room_fronts()
        first: int | None = None
        pool = None
        need = [(r, v) for r, v in c.demand.items() if v > 0]
        for tid, front in self._fronts.items():
            bt = self.types[tid]
            if self.weights.get(bt.pool, 0) <= w or tid not in c.allowed_bin_types:
                continue
            for i, room in front:
                if first is not None and i >= first:
                    break
                if all(v <= room.get(r, 0) for r, v in need):
                    first, pool = i, bt.pool
                    break
        return pool

    def _room_fronts(self) -> dict[str, list[tuple[int, dict[str, int]]]]:
        """Return, per bin type, the plan's bins of it no earlier bin of it dominates.

        A bin is left out when an earlier bin of its type has at least its room of every
        resource: any pod the later one has room for, the earlier one has too. So the first
        bin with room for a pod is in its type's list (kept in plan order), and
        ``room_higher`` looks at a few bins per type instead of every bin of the plan.
        """
        fronts: dict[str, list[tuple[int, dict[str, int]]]] = {}
        for i, nb in enumerate(self.solution.new_bins):
            if nb.bin_type not in self.types:
                continue
            room = self._room(nb.bin_type, nb.placement)
            front = fronts.setdefault(nb.bin_type, [])
            if not any(_room_dominates(kept, room) for _, kept in front):
                front.append((i, room))
        return fronts

    def _room(self, type_id: str, placement: Placement) -> dict[str, int]:
        bt = self.types.get(type_id)
        if bt is None:
            return {}
        room = dict(bt.capacity)
        for k, n in placement.counts.items():
            c = self.classes.get(k)
            for r, v in (c.demand if c is not None else {}).items():
                room[r] = room.get(r, 0) - v * n
        devices = {d for per in placement.gpu_devices.values() for d, x in enumerate(per) if x}
        gpu = self.problem.gpu_resource
        room[gpu] = room.get(gpu, 0) - len(devices)
        return room

    def gang_higher(self, gang: str) -> str | None:
        """Return a heavier pool one more bin of which can take the gang's members whole."""
        members = list(self.problem.classes_of_gang(gang))
        if any(c.topology or c.gpu_fraction_milli for c in members):
            return None
        keys = {c.key for c in members}
        if any(k in keys for e in self.solution.existing for k in e.placement.counts):
            return None
        total: Counter[str] = Counter()
        w = None
        for nb in self.solution.new_bins:
            for k, n in nb.placement.counts.items():
                if k in keys and n > 0:
                    for r, v in self.classes[k].demand.items():
                        total[r] += v * n
                    bw = self.weights.get(self.types[nb.bin_type].pool, 0)
                    w = bw if w is None else max(w, bw)
        placed = [c for c in members if self.solution.placed_counts().get(c.key, 0) > 0]
        if w is None or not placed:
            return None
        for bt in self.fitting(placed[0]):
            if (
                self.weights.get(bt.pool, 0) > w
                and all(bt.id in c.allowed_bin_types for c in placed)
                and all(v <= bt.capacity.get(r, 0) for r, v in total.items() if v > 0)
                and self.left.fresh_fits(bt)
            ):
                return bt.pool
        return None
