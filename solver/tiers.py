"""NodePool weights that fall through: pods a heavier pool's limits cannot take go to the next.

``fall_through(problem, solve_tier)`` plans in tiers (``plan.md`` rule 9, ``solver.weights``):

1. ``solve_tier`` plans the whole problem; it applies the weight pre-filter itself
   (``weights.apply_pool_weights``), so each class may use only its top tier;
2. the plan leaves the heavier pools' limits and ``max_count`` reduced (``weights.Leftover``).
   Classes with pods left unplaced whose top tier is now lighter *fall*: a class without gang
   when no pool of its tier can take one more pod, or when its tier still has room yet planned
   the rest nowhere (a zonal spread a limited pool cannot keep: the class then may use only
   lighter pools); a gang that was left whole when a pool of its tier is limited (its members
   then may use only lighter pools' new bins);
3. the falling pods are planned again in a residual problem: the limits and offering counts
   left, the plan's new bins as pre-opened bins with their leftover room (so lighter pools are
   used only for what does not fit), existing bins with what is left of them, and topology
   constraints counting the pods already placed; the residual plan is merged into the plan;
4. repeat while classes fall; then pods without gang, topology or GPU fraction that sit on a
   lighter pool's new bin move into room left on a heavier pool's new bins, and emptied bins
   go.

A problem whose pools all have one weight, or without limits and ``max_count``, is solved
once: its plan is exactly ``solve_tier``'s. So is one whose limits do not bind (no class
falls). A merged plan that ``solver.validate`` rejects is dropped for the plan before it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from solver.problem import (
    GPU_MILLI,
    AntiAffinity,
    BinType,
    CoLocation,
    ExistingBin,
    ExistingPlacement,
    NewBin,
    Placement,
    PodClass,
    Problem,
    Solution,
    SpreadConstraint,
    TopologyConstraint,
    TopologyKey,
)
from solver.validate import cost, violations
from solver.weights import Leftover, may_fall_through, tier_weight

SolveTier = Callable[[Problem], Solution]
"""Plans one tier: a problem (its classes pre-filtered to their top tier by the callee)."""

_MAX_ROUNDS = 16
"""At most this many tiers are planned (one per distinct weight is enough)."""


@dataclass(frozen=True, slots=True)
class Tiers:
    """A plan made in tiers.

    Attributes:
        solution: the merged plan (``cost_micros`` recomputed, bound and status of the first
            tier's plan; the caller sets its own).
        rounds: the plans merged, in order (one: nothing fell through).
    """

    solution: Solution
    rounds: tuple[Solution, ...]


def fall_through(
    problem: Problem,
    solve_tier: SolveTier,
    *,
    post: Callable[[Solution], Solution] | None = None,
) -> Tiers:
    """Plan ``problem`` tier by tier (see the module docstring).

    ``post`` (e.g. ``greedy.downsize``) is applied to a merged plan of several tiers.
    """
    first = solve_tier(problem)
    if not may_fall_through(problem):
        return Tiers(first, (first,))
    tried = _Tried(problem)
    plan, rounds = first, [first]
    for _ in range(_MAX_ROUNDS):
        step = _Residual.build(problem, plan, tried)
        if step is None:
            break
        sub = solve_tier(step.problem)
        merged = _fill_heavier(problem, step.merge(sub))
        if post is not None:
            merged = post(merged)
        if violations(problem, merged):
            break
        plan = merged
        rounds.append(sub)
        tried.known.update(step.tried)
    return Tiers(plan, tuple(rounds))


class _Tried:
    """The tier weight each class was last planned at (computed when first asked)."""

    def __init__(self, problem: Problem) -> None:
        """Start with the problem's own tiers."""
        self.problem = problem
        self.known: dict[str, int | None] = {}

    def weight(self, c: PodClass) -> int | None:
        """Return the weight of the tier the class was last planned at."""
        if c.key not in self.known:
            self.known[c.key] = tier_weight(self.problem, c)
        return self.known[c.key]


@dataclass(frozen=True, slots=True)
class _Residual:
    """The problem of the pods that fall to a lighter tier, and how to merge its plan back."""

    original: Problem
    plan: Solution
    problem: Problem
    opened: Mapping[str, int]
    """Pre-opened bin id -> index of the plan's new bin."""
    tried: Mapping[str, int | None]
    """Tier weight of each falling class in this residual problem."""

    @classmethod
    def build(cls, problem: Problem, plan: Solution, tried: _Tried) -> _Residual | None:
        """Return the residual problem of the classes that fall, or ``None`` if none does."""
        left = Leftover.of(problem, plan.new_bins)
        after = left.residual(problem)
        unplaced: Counter[str] = Counter()
        for u in plan.unplaced:
            unplaced[u.class_key] += u.count
        placed = plan.placed_counts()
        gang_placed: Counter[str] = Counter()
        for c in problem.classes:
            if c.gang is not None:
                gang_placed[c.gang] += placed.get(c.key, 0)
        falling: dict[str, PodClass] = {}
        for c in problem.classes:
            if c.gang is None and unplaced[c.key] > 0:
                w, was = tier_weight(after, c), tried.weight(c)
                if w is None or was is None:
                    continue
                if w < was:
                    falling[c.key] = dataclasses.replace(c, count=unplaced[c.key])
                    continue
                # its tier still has room, yet planned the rest nowhere (a zonal spread that
                # one limited pool cannot keep): the heavier pools cannot take them, so they
                # go to the lighter ones, as Karpenter tries the next NodePool per pod
                lighter = frozenset(
                    t.id
                    for t in problem.bin_types
                    if t.id in c.allowed_bin_types and problem.pool_weights.get(t.pool, 0) < was
                )
                if lighter:
                    falling[c.key] = dataclasses.replace(
                        c, count=unplaced[c.key], allowed_bin_types=lighter
                    )
        for g in problem.gangs:
            if gang_placed[g.id] == 0:
                falling.update(_falling_gang(problem, after, g.id, tried))
        if not falling:
            return None
        existing, opened = _bins_left(problem, plan)
        classes = tuple(
            dataclasses.replace(
                c,
                allowed_existing=c.allowed_existing
                | {
                    b for b, i in opened.items() if plan.new_bins[i].bin_type in c.allowed_bin_types
                },
            )
            for c in falling.values()
        )
        keys = set(falling)
        residual = dataclasses.replace(
            after,
            classes=classes,
            existing=existing,
            gangs=tuple(g for g in problem.gangs if any(c.gang == g.id for c in classes)),
            topology=_topology_left(problem, plan, opened, keys),
        )
        weights = {c.key: tier_weight(residual, c) for c in classes}
        return cls(problem, plan, residual, opened, weights)

    def merge(self, sub: Solution) -> Solution:
        """Return the plan with the residual plan's pods added."""
        new_bins = list(self.plan.new_bins)
        existing = {e.bin_id: e.placement for e in self.plan.existing}
        for e in sub.existing:
            i = self.opened.get(e.bin_id)
            if i is not None:
                nb = new_bins[i]
                new_bins[i] = NewBin(nb.bin_type, _add(nb.placement, e.placement))
            else:
                have = existing.get(e.bin_id)
                existing[e.bin_id] = e.placement if have is None else _add(have, e.placement)
        new_bins.extend(sub.new_bins)
        keys = {c.key for c in self.problem.classes}
        unplaced = [u for u in self.plan.unplaced if u.class_key not in keys]
        order = [e.id for e in self.original.existing if e.id in existing]
        merged = dataclasses.replace(
            self.plan,
            new_bins=tuple(new_bins),
            existing=tuple(ExistingPlacement(b, existing[b]) for b in order),
            unplaced=(*unplaced, *sub.unplaced),
        )
        return dataclasses.replace(merged, cost_micros=cost(self.original, merged))


def _falling_gang(
    problem: Problem, after: Problem, gang: str, tried: _Tried
) -> dict[str, PodClass]:
    """Return the classes of a gang left whole, restricted to lighter pools, if it falls.

    It falls when its tier (the heaviest of its classes' tiers) has a pool with limits or
    ``max_count``: the gang did not fit what that pool had left.
    """
    members = list(problem.classes_of_gang(gang))
    weights = [w for c in members if (w := tried.weight(c)) is not None]
    if not weights:
        return {}
    w = max(weights)
    limited = {lim.pool for lim in problem.limits}
    pool_w = problem.pool_weights
    allowed = set().union(*(c.allowed_bin_types for c in members))
    if not any(
        t.id in allowed
        and pool_w.get(t.pool, 0) == w
        and (t.pool in limited or t.max_count is not None)
        for t in problem.bin_types
    ):
        return {}
    lighter = frozenset(t.id for t in after.bin_types if pool_w.get(t.pool, 0) < w)
    out = {
        c.key: dataclasses.replace(c, allowed_bin_types=c.allowed_bin_types & lighter)
        for c in members
    }
    if all(tier_weight(after, c) is None for c in out.values()):
        return {}
    return out


def _used(problem: Problem, placement: Placement) -> tuple[Counter[str], list[int]]:
    """Return the resources and the GPU fractions per device a placement uses."""
    classes = {c.key: c for c in problem.classes}
    used: Counter[str] = Counter()
    for k, n in placement.counts.items():
        for r, v in classes[k].demand.items():
            used[r] += v * n
    devices: list[int] = []
    for k, per in placement.gpu_devices.items():
        devices.extend([0] * (len(per) - len(devices)))
        for d, x in enumerate(per):
            devices[d] += x * classes[k].gpu_fraction_milli
    return used, devices


def _bins_left(problem: Problem, plan: Solution) -> tuple[tuple[ExistingBin, ...], dict[str, int]]:
    """Return the existing bins with what the plan leaves, then its new bins as pre-opened ones."""
    gpu = problem.gpu_resource
    on: dict[str, Placement] = {e.bin_id: e.placement for e in plan.existing}
    out: list[ExistingBin] = []
    for e in problem.existing:
        placement = on.get(e.id)
        if placement is None:
            out.append(e)
            continue
        used, devices = _used(problem, placement)
        free = list(e.gpu_free_milli)
        for d, x in enumerate(devices):
            if x and free[d] == GPU_MILLI:
                used[gpu] += 1
            free[d] -= x
        remaining = {r: v - used.get(r, 0) for r, v in e.remaining.items()}
        out.append(dataclasses.replace(e, remaining=remaining, gpu_free_milli=tuple(free)))
    ids = {e.id for e in problem.existing}
    types = {t.id: t for t in problem.bin_types}
    opened: dict[str, int] = {}
    for i, nb in enumerate(plan.new_bins):
        bt = types[nb.bin_type]
        _, devices = _used(problem, nb.placement)
        free = [GPU_MILLI] * bt.gpus
        for d, x in enumerate(devices):
            free[d] -= x
        name = f"{bt.id}#{i}"
        while name in ids:
            name += "'"
        ids.add(name)
        opened[name] = i
        remaining = dict(_room(problem, bt, nb.placement))
        out.append(ExistingBin(name, bt.zone, bt.pool, remaining, tuple(free)))
    return tuple(out), opened


def _topology_left(
    problem: Problem, plan: Solution, opened: Mapping[str, int], keys: set[str]
) -> tuple[TopologyConstraint, ...]:
    """Return the topology constraints with the plan's placed pods counted as existing."""
    zone_of_type = {t.id: t.zone for t in problem.bin_types}
    zone_of_bin = {e.id: e.zone for e in problem.existing}
    bins: list[tuple[str, str, Placement]] = [
        (e.bin_id, zone_of_bin[e.bin_id], e.placement) for e in plan.existing
    ]
    bins += [
        (b, zone_of_type[plan.new_bins[i].bin_type], plan.new_bins[i].placement)
        for b, i in opened.items()
    ]
    per_bin: defaultdict[str, Counter[str]] = defaultdict(Counter)
    per_zone: defaultdict[str, Counter[str]] = defaultdict(Counter)
    classes = {c.key: c for c in problem.classes}
    for name, zone, placement in bins:
        for k, n in placement.counts.items():
            for tid in classes[k].topology if n > 0 else ():
                per_bin[tid][name] += n
                per_zone[tid][zone] += n
    out: list[TopologyConstraint] = []
    for t in problem.topology:
        # Affinity is always zonal; the others name their key
        hosts = (
            per_zone[t.id]
            if getattr(t, "key", TopologyKey.ZONE) is TopologyKey.ZONE
            else per_bin[t.id]
        )
        if isinstance(t, SpreadConstraint):
            existing = Counter(t.existing)
            existing.update(hosts)
            out.append(dataclasses.replace(t, existing=dict(existing)))
        elif isinstance(t, AntiAffinity):
            out.append(dataclasses.replace(t, occupied=t.occupied | set(hosts)))
        elif isinstance(t, CoLocation):
            out.append(
                dataclasses.replace(
                    t, carriers=t.carriers & keys, satisfied=t.satisfied | set(hosts)
                )
            )
        elif hosts:
            zones = frozenset(hosts)
            out.append(dataclasses.replace(t, zones=zones if t.zones is None else t.zones & zones))
        else:
            out.append(t)
    return tuple(out)


def _add(a: Placement, b: Placement) -> Placement:
    """Return the placement of both ``a``'s and ``b``'s pods (GPU devices by index)."""
    counts = Counter(a.counts)
    counts.update(b.counts)
    devices: dict[str, tuple[int, ...]] = dict(a.gpu_devices)
    for k, per in b.gpu_devices.items():
        have = list(devices.get(k, ()))
        have.extend([0] * (len(per) - len(have)))
        for d, x in enumerate(per):
            have[d] += x
        devices[k] = tuple(have)
    return Placement({k: n for k, n in counts.items() if n}, devices)


def _room(problem: Problem, bt: BinType, placement: Placement) -> Counter[str]:
    """Return what is left of a new bin of type ``bt`` holding ``placement``."""
    used, devices = _used(problem, placement)
    used[problem.gpu_resource] += sum(1 for x in devices if x)
    return Counter({r: v - used.get(r, 0) for r, v in bt.capacity.items()})


def movable_classes(problem: Problem) -> set[str]:
    """Return the classes whose pods may go to any bin that holds them.

    No gang, topology or GPU fraction, and not carrying co-location targets.
    """
    carriers = {k for t in problem.topology if isinstance(t, CoLocation) for k in t.carriers}
    return {
        c.key
        for c in problem.classes
        if c.gang is None and not c.topology and not c.gpu_fraction_milli and c.key not in carriers
    }


def _fill_heavier(problem: Problem, plan: Solution) -> Solution:
    """Move pods from lighter pools' new bins into room on heavier pools' new bins.

    Only pods without gang, topology or GPU fraction move (nothing else can change); bins left
    empty are dropped. The plan gets no dearer.
    """
    weights = problem.pool_weights
    types = {t.id: t for t in problem.bin_types}
    classes = {c.key: c for c in problem.classes}
    movable = movable_classes(problem)
    weight = [weights.get(types[b.bin_type].pool, 0) for b in plan.new_bins]
    counts = [Counter(b.placement.counts) for b in plan.new_bins]
    rooms = [_room(problem, types[b.bin_type], b.placement) for b in plan.new_bins]
    heavy = sorted(range(len(plan.new_bins)), key=lambda i: -weight[i])
    moved = False
    for i in sorted(range(len(plan.new_bins)), key=lambda i: weight[i]):
        for k in sorted(counts[i]):
            if k not in movable:
                continue
            c = classes[k]
            for j in heavy:
                if weight[j] <= weight[i] or not counts[i][k]:
                    break
                if plan.new_bins[j].bin_type not in c.allowed_bin_types:
                    continue
                fit = min(
                    [counts[i][k]] + [rooms[j].get(r, 0) // v for r, v in c.demand.items() if v > 0]
                )
                if fit <= 0:
                    continue
                moved = True
                counts[i][k] -= fit
                counts[j][k] += fit
                for r, v in c.demand.items():
                    rooms[j][r] -= v * fit
    if not moved:
        return plan
    new_bins = []
    for b, cnt in zip(plan.new_bins, counts, strict=True):
        live = {k: n for k, n in cnt.items() if n}
        if live:
            new_bins.append(NewBin(b.bin_type, Placement(live, b.placement.gpu_devices)))
    out = dataclasses.replace(plan, new_bins=tuple(new_bins))
    return dataclasses.replace(out, cost_micros=cost(problem, out))
