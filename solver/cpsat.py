"""The optimiser: LP dives over greedy and generated columns, and an integer master in CP-SAT.

``solve(problem, config)`` plans tier by tier (``solver.tiers``): the steps below plan the
pods of the heaviest NodePools they may use; pods whose pools' limits run out fall through to
the next tier, planned again by the same steps with the first tier's bins pre-opened (each
tier with the adaptive budget of its own pods). When a heavier pool's limits bind, its pods
are also chosen by what they save elsewhere (``solver.valued_tier``) and the lighter tiers
planned by the same steps; that plan replaces the tiered search's when every valid plan uses
the heavier pool's limits up, else the cheaper is kept. A plan of several tiers is compared
with both greedy plans (which fall through too) and the better one is kept; its bound is the
weight-aware one (``bounds.tiered_bound``).

1. applies pool weight tiers (``solver.weights``), runs ``cost_aware_ffd`` and
   ``karpenter_ffd`` (and, when Karpenter's leaves out members of groups held to one bin,
   time allowing, ``karpenter_ffd`` with those groups placed whole, given up as soon as the
   cost-aware plan is in and leaves no more pods out) and keeps the best (more
   pods placed, then cheaper, then fewer bins), empties one's bins into each other
   (``solver.improve``; ``_first_polished``), computes the fluid bound, then empties the
   other plans' within the budget. With two cores (``solver.ahead``) a forked child makes
   the cost-aware plan and then the fluid bound while this process makes Karpenter's plans
   and polishes the first;
2. the LP phases work on the problem with interchangeable classes merged when it has many
   (``solver.shapes``: classes differing only in key and gang, e.g. one per pod group); their
   bins are split back to classes gang by gang;
3. a first LP dive (``solver.rounding``) over both greedy plans' bins and balanced slices of
   the demand (``colgen.balanced_slices``): on large problems there is no time for more;
4. column generation (``solver.colgen``) seeded with those columns, priced partially and
   exactly (``solver.pricing`` orders the offering groups), when the budget leaves time for
   its set-up; then a second dive over all columns. A dive deals zone-spread pods to zones,
   keeps zone-(anti-)affine classes in the greedy plan's zones and copies columns across
   zones; every plan gets its bins emptied into each other (``solver.improve``) and is kept
   only when valid and better;
5. an integer master in CP-SAT over the LP's columns (unless merged) plus the greedy and
   dive plans' bins, hinted with the best plan so far, plus variables for existing bins:

   * ``x_p`` (int): how many bins of pattern ``p``; ``y[e,c]`` (int): pods of class c on
     existing bin e (with per-device variables for fractional classes and a boolean per fully
     free device that receives fractions);
   * ``w[c,d]`` (int): pods of class c actually placed on new bins of domain d = (pool, zone),
     ``w[c,d] <= sum_{p in d} a_pc x_p`` (patterns may be filled partially, which keeps every
     rule valid because removing pods never breaks capacity or hostname caps);
   * per class ``placed_c = sum_d w[c,d] + sum_e y[e,c] <= count_c`` and ``placed_c >=`` what
     the greedy plan placed (so the result never places fewer pods of any class);
   * gangs: a boolean per gang, ``min * g <= placed(gang) <= total * g``; same zone / same pool
     via one-hot choice booleans bounding the per-zone / per-pool placements;
   * zone spread (``max - min <= skew`` over eligible zones, with existing counts), zone
     anti-affinity (<= 1 per zone, 0 in occupied zones), zone affinity (one chosen zone);
     hostname caps hold inside every pattern and on existing bins;
   * pool limits and ``max_count`` as linear constraints on ``x``;
   * objective (lexicographic by weights): unplaced pods, then price, then number of bins.

   CP-SAT runs with the configured workers, seed, deterministic time and the remaining
   wall time;
6. the plan is extracted (bins of each domain filled to ``w``), downsized, validated with
   ``solver.validate`` and compared with the greedy plan: the better one is returned, so the
   result is never worse than either greedy plan.

Time: every phase stops at ``config.time_limit_seconds``; the adaptive budget
(``budget_seconds``: 0.4 s up to 1k pods, then 0.3 ms per pod, for the whole planning step,
the problem building and the greedy plans counted, but at least 0.25 s of search; the whole
time limit when pods request GPUs)
ends the search earlier, as does a gap within ``relative_gap`` after the fluid bound, and
CP-SAT stops when it has not improved for ``max(0.2 s, 30 %)`` of its running time
(wall-clock runs only; with ``deterministic_time`` the run is reproducible and only the
limits apply). The first greedy plan's polish always ends its first pass (never past the
time limit, nor for longer than the planning step's budget once that is spent), its later
passes and later plans' polish stop up to 5 % past the budget, and the first later plan
gets at least 10 % of the planning step's budget even when it comes later (never past the
time limit).

Lower bound: the maximum of the fluid LP bound and the Farley pattern bound (the LP value
itself once exact pricing proves convergence), for exactly the pods the returned plan puts
on new bins. Status: ``OPTIMAL`` when cost equals the bound,
``FEASIBLE`` when the optimiser beat the greedy plan, ``GREEDY`` otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from ortools.sat.python import cp_model

from solver import tiers, valued_tier
from solver.ahead import NOTHING_AHEAD, Ahead, Made, cost_aware_then_bound, forks
from solver.bounds import fluid_bound, hostname_caps, tiered_bound
from solver.colgen import (
    SMOOTHING,
    ColumnGenerationResult,
    Pattern,
    balanced_slices,
    generate,
    lp_bound,
    needy_carriers,
    pattern_bound,
    patterns_from_solution,
)
from solver.config import DETERMINISTIC_ROUNDS, SolverConfig
from solver.cpmodel import CpModel
from solver.forked import Forked
from solver.greedy import (
    GreedyStopped,
    GreedyTimeout,
    cost_aware_ffd,
    downsize,
    karpenter_ffd,
    plan_tiers,
    unplaced_entries,
)
from solver.guided import guided_plan
from solver.improve import improve
from solver.problem import (
    GPU_MILLI,
    Affinity,
    AntiAffinity,
    CoLocation,
    ExistingPlacement,
    NewBin,
    Placement,
    Problem,
    Solution,
    SpreadConstraint,
    Status,
    TopologyKey,
)
from solver.rounding import dive, zone_bound
from solver.shapes import LPView, lp_view
from solver.validate import violations
from solver.weights import apply_pool_weights, may_fall_through

LinExpr = Any


def _quality(s: Solution) -> tuple[int, int, int]:
    return (sum(u.count for u in s.unplaced), s.cost_micros, len(s.new_bins))


class _Master:
    """Variables and constraints of the integer master."""

    def __init__(self, problem: Problem, patterns: list[Pattern], floors: dict[str, int]) -> None:
        self.p = problem
        self.m = CpModel()
        self.types = {t.id: t for t in problem.bin_types}
        self.classes = {c.key: c for c in problem.classes}
        self.patterns = patterns
        self.x = [self.m.new_int_var(0, self._ub(p), f"x{i}") for i, p in enumerate(patterns)]
        self.y: dict[tuple[str, str], cp_model.IntVar] = {}
        self.f: dict[tuple[str, int, str], cp_model.IntVar] = {}
        self.w: dict[tuple[str, tuple[str, str]], cp_model.IntVar] = {}
        self.placed: dict[str, LinExpr] = {}
        self.zone: defaultdict[str, defaultdict[str, list[LinExpr]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.pool: defaultdict[str, defaultdict[str, list[LinExpr]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._add_existing()
        self._add_domains()
        self._add_placed(floors)
        self._add_gangs()
        self._add_topology()
        self._add_limits()

    def _ub(self, p: Pattern) -> int:
        t = self.types[p.bin_type]
        ub = max(math.ceil(self.classes[k].count / n) for k, n in p.counts)
        return min(ub, t.max_count) if t.max_count is not None else ub

    def _add_existing(self) -> None:  # noqa: C901, PLR0912 - one bin's rows in one place
        caps = hostname_caps(self.p)
        spreads = {t.id: t for t in self.p.topology if isinstance(t, SpreadConstraint)}
        antis = {t.id: t for t in self.p.topology if isinstance(t, AntiAffinity)}
        for e in self.p.existing:
            members = [c for c in self.p.classes if e.id in c.allowed_existing and c.count]
            if not members:
                continue
            fresh = [
                self.m.new_bool_var("") if free == GPU_MILLI else None for free in e.gpu_free_milli
            ]
            for c in members:
                self.y[e.id, c.key] = y = self.m.new_int_var(0, c.count, "")
                self.zone[c.key][e.zone].append(y)
                self.pool[c.key][e.pool].append(y)
                if c.gpu_fraction_milli:
                    fs = []
                    for d, u in enumerate(fresh):
                        self.f[e.id, d, c.key] = f = self.m.new_int_var(0, c.count, "")
                        fs.append(f)
                        if u is not None:
                            self.m.add(f <= c.count * u)
                    self.m.add(y == sum(fs))
            for d, free in enumerate(e.gpu_free_milli):
                use = [
                    c.gpu_fraction_milli * self.f[e.id, d, c.key]
                    for c in members
                    if c.gpu_fraction_milli
                ]
                if use:
                    self.m.add(sum(use) <= free)
            resources = {r for c in members for r in c.demand} | {self.p.gpu_resource}
            for r in resources:
                load = [c.demand.get(r, 0) * self.y[e.id, c.key] for c in members]
                if r == self.p.gpu_resource:
                    load += [u for u in fresh if u is not None]
                self.m.add(sum(load) <= e.remaining.get(r, 0))
            for gid, cap in caps.items():
                group = [self.y[e.id, c.key] for c in members if gid in c.topology]
                if not group:
                    continue
                left = cap - spreads[gid].existing.get(e.id, 0) if gid in spreads else cap
                if gid in antis and e.id in antis[gid].occupied:
                    left = 0
                self.m.add(sum(group) <= max(0, left))

    def _add_domains(self) -> None:
        cap: defaultdict[tuple[str, tuple[str, str]], list[LinExpr]] = defaultdict(list)
        for p, x in zip(self.patterns, self.x, strict=True):
            t = self.types[p.bin_type]
            for k, n in p.counts:
                cap[k, (t.pool, t.zone)].append(n * x)
        exact = self._pinned_targets()
        for (k, dom), terms in sorted(cap.items()):
            self.w[k, dom] = w = self.m.new_int_var(0, self.classes[k].count, "")
            if k in exact:
                self.m.add(w == sum(terms))
            else:
                self.m.add(w <= sum(terms))
            self.zone[k][dom[1]].append(w)
            self.pool[k][dom[0]].append(w)

    def _pinned_targets(self) -> set[str]:
        """Return target classes of hostname co-locations whose carriers need them.

        Patterns with such carriers hold a target by construction; filling them exactly keeps
        that target when the plan is extracted (carriers may still be dropped).
        """
        needy = needy_carriers(self.p)
        ids = {g for gs in needy.values() for g in gs}
        return {c.key for c in self.p.classes if c.topology & ids}

    def _add_placed(self, floors: dict[str, int]) -> None:
        for c in self.p.classes:
            terms = [v for (_, k), v in self.y.items() if k == c.key]
            terms += [v for (k, _), v in self.w.items() if k == c.key]
            self.placed[c.key] = sum(terms)
            self.m.add(sum(terms) <= c.count)
            self.m.add(sum(terms) >= floors.get(c.key, 0))

    def _add_gangs(self) -> None:
        for g in self.p.gangs:
            keys = [c.key for c in self.p.classes_of_gang(g.id)]
            total = sum(self.classes[k].count for k in keys)
            on = self.m.new_bool_var(f"gang_{g.id}")
            placed = sum(self.placed[k] for k in keys)
            self.m.add(placed >= g.min_count * on)
            self.m.add(placed <= total * on)
            for flag, table in ((g.same_zone, self.zone), (g.same_pool, self.pool)):
                if flag:
                    self._one_domain(keys, table)

    def _one_domain(
        self, keys: list[str], table: dict[str, defaultdict[str, list[LinExpr]]]
    ) -> None:
        domains = sorted({d for k in keys for d in table[k]})
        choice = {d: self.m.new_bool_var("") for d in domains}
        self.m.add(sum(choice.values()) <= 1)
        for k in keys:
            for d, terms in table[k].items():
                self.m.add(sum(terms) <= self.classes[k].count * choice[d])

    def _zone_count(self, tid: str, zone: str) -> LinExpr:
        return sum(sum(self.zone[c.key][zone]) for c in self.p.classes if tid in c.topology)

    def _add_topology(self) -> None:
        for t in self.p.topology:
            keys = [c.key for c in self.p.classes if t.id in c.topology]
            zones = sorted({z for k in keys for z in self.zone[k]})
            if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE:
                self._spread(t, keys, zones)
            elif isinstance(t, AntiAffinity) and t.key is TopologyKey.ZONE:
                for z in zones:
                    self.m.add(self._zone_count(t.id, z) <= (0 if z in t.occupied else 1))
            elif isinstance(t, CoLocation):
                self._colocation(t, keys)
            elif isinstance(t, Affinity) and t.key is TopologyKey.HOSTNAME:
                self._one_bin(t, set(keys))
            elif isinstance(t, Affinity):
                choice = {z: self.m.new_bool_var("") for z in zones}
                self.m.add(sum(choice.values()) <= 1)
                big = sum(self.classes[k].count for k in keys)
                for z in zones:
                    allowed = t.zones is None or z in t.zones
                    self.m.add(self._zone_count(t.id, z) <= (big * choice[z] if allowed else 0))

    def _one_bin(self, t: Affinity, keys: set[str]) -> None:
        """All pods of ``keys`` on one bin (hostname ``Affinity``), an allowed one."""
        big = sum(self.classes[k].count for k in keys)
        hosts: list[LinExpr] = [
            x
            for p, x in zip(self.patterns, self.x, strict=True)
            if any(k in keys for k, _ in p.counts)
        ]
        if t.zones is not None:
            for x in hosts:
                self.m.add(x == 0)
            hosts = []
        for e in self.p.existing:
            ys = [self.y[e.id, k] for k in sorted(keys) if (e.id, k) in self.y]
            if not ys:
                continue
            if t.zones is not None and e.id not in t.zones:
                self.m.add(sum(ys) == 0)
                continue
            has = self.m.new_bool_var("")
            self.m.add(sum(ys) <= big * has)
            hosts.append(has)
        if hosts:
            self.m.add(sum(hosts) <= 1)

    def _colocation(self, t: CoLocation, targets: list[str]) -> None:
        needy = [k for k in sorted(t.carriers) if k in self.classes and k not in targets]
        if not needy:
            return
        big = sum(self.classes[k].count for k in needy)
        if t.key is TopologyKey.ZONE:
            zones = sorted({z for k in needy for z in self.zone[k]})
            for z in zones:
                carried = sum(sum(self.zone[k][z]) for k in needy)
                if z in t.satisfied:
                    continue
                hosted = sum(sum(self.zone[k][z]) for k in targets)
                has = self.m.new_bool_var("")
                self.m.add(carried <= big * has)
                self.m.add(hosted >= has)
            return
        for e in self.p.existing:
            carried_vars = [self.y[e.id, k] for k in needy if (e.id, k) in self.y]
            if not carried_vars or e.id in t.satisfied:
                continue
            hosted_vars = [self.y[e.id, k] for k in targets if (e.id, k) in self.y]
            has = self.m.new_bool_var("")
            self.m.add(sum(carried_vars) <= big * has)
            self.m.add(sum(hosted_vars) >= has)

    def _spread(self, t: SpreadConstraint, keys: list[str], zones: list[str]) -> None:
        big = sum(self.classes[k].count for k in keys) + sum(t.existing.values())
        for z in zones:
            if z not in t.zones:
                self.m.add(self._zone_count(t.id, z) == 0)
        lo = self.m.new_int_var(0, big, "")
        hi = self.m.new_int_var(0, big, "")
        for z in t.zones:
            n = self._zone_count(t.id, z) + t.existing.get(z, 0)
            self.m.add(n >= lo)
            self.m.add(n <= hi)
        self.m.add(hi - lo <= t.max_skew)

    def _add_limits(self) -> None:
        for lim in self.p.limits:
            for r, v in lim.remaining.items():
                terms = [
                    self.types[p.bin_type].usage_for_limits().get(r, 0) * x
                    for p, x in zip(self.patterns, self.x, strict=True)
                    if self.types[p.bin_type].pool == lim.pool
                ]
                if terms:
                    self.m.add(sum(terms) <= v)
        per_type: defaultdict[str, list[cp_model.IntVar]] = defaultdict(list)
        for p, x in zip(self.patterns, self.x, strict=True):
            per_type[p.bin_type].append(x)
        for tid, xs in per_type.items():
            mc = self.types[tid].max_count
            if mc is not None:
                self.m.add(sum(xs) <= mc)

    def set_objective(self, max_bins: int) -> None:
        bins = sum(self.x)
        self.m.add(bins <= max_bins)
        k = max_bins + 1
        top = max((t.price_micros for t in self.p.bin_types), default=0)
        penalty = k * (top + 1)
        price = sum(
            self.types[p.bin_type].price_micros * x
            for p, x in zip(self.patterns, self.x, strict=True)
        )
        unplaced = sum(c.count - self.placed[c.key] for c in self.p.classes)
        self.m.minimize(penalty * unplaced + k * price + bins)

    def hint(self, sol: Solution, seeds: list[Pattern]) -> None:
        index = {p: i for i, p in enumerate(self.patterns)}
        counts = Counter(index[p] for p in seeds if p in index)
        for i, x in enumerate(self.x):
            self.m.add_hint(x, counts.get(i, 0))
        dom: Counter[tuple[str, tuple[str, str]]] = Counter()
        for b in sol.new_bins:
            t = self.types[b.bin_type]
            for k, n in b.placement.counts.items():
                dom[k, (t.pool, t.zone)] += n
        for key, w in self.w.items():
            self.m.add_hint(w, dom.get(key, 0))
        on_existing = {
            (ep.bin_id, k): n for ep in sol.existing for k, n in ep.placement.counts.items()
        }
        for ekey, y in self.y.items():
            self.m.add_hint(y, on_existing.get(ekey, 0))

    def extract(self, solver: cp_model.CpSolver) -> Solution:
        by_dom: defaultdict[tuple[str, str], list[Pattern]] = defaultdict(list)
        for p, x in zip(self.patterns, self.x, strict=True):
            t = self.types[p.bin_type]
            by_dom[t.pool, t.zone].extend([p] * solver.value(x))
        new_bins: list[NewBin] = []
        for dom, pats in sorted(by_dom.items()):
            want = {k: solver.value(w) for (k, d), w in self.w.items() if d == dom}
            for p in pats:
                placement = _fill(p, want)
                if placement.counts:
                    new_bins.append(NewBin(p.bin_type, placement))
        return _finish(self.p, new_bins, self._extract_existing(solver))

    def _extract_existing(self, solver: cp_model.CpSolver) -> list[ExistingPlacement]:
        out = []
        for e in self.p.existing:
            counts = {k: solver.value(v) for (eid, k), v in self.y.items() if eid == e.id}
            counts = {k: n for k, n in counts.items() if n > 0}
            if not counts:
                continue
            devices = {}
            for k in counts:
                if self.classes[k].gpu_fraction_milli:
                    per = [solver.value(self.f[e.id, d, k]) for d in range(len(e.gpu_free_milli))]
                    devices[k] = tuple(per)
            out.append(ExistingPlacement(e.id, Placement(counts, devices)))
        return out


def _fill(p: Pattern, want: dict[str, int]) -> Placement:
    counts: dict[str, int] = {}
    for k, n in p.counts:
        take = min(n, want.get(k, 0))
        if take > 0:
            want[k] -= take
            counts[k] = take
    return Placement(counts, p.devices_for(counts))


def _log(config: SolverConfig) -> Callable[[str], None]:
    cb = config.log_callback
    return cb if cb is not None else (lambda _msg: None)


class _StopWhenClose(cp_model.CpSolverSolutionCallback):
    """Stop the search once a plan places as many pods and costs at most ``stop_at``."""

    def __init__(self, master: _Master, stop_at: int, unplaced: int) -> None:
        super().__init__()
        self.master, self.stop_at, self.unplaced = master, stop_at, unplaced
        self.last = time.monotonic()

    def on_solution_callback(self) -> None:
        self.last = time.monotonic()
        m = self.master
        price = sum(
            m.types[p.bin_type].price_micros * self.value(x)
            for p, x in zip(m.patterns, m.x, strict=True)
        )
        placed = sum(
            e if isinstance(e, int) else self.value(e)
            for e in (m.placed[c.key] for c in m.p.classes)
        )
        total = sum(c.count for c in m.p.classes)
        if total - placed <= self.unplaced and price <= self.stop_at:
            self.stop_search()


class _Patience(threading.Thread):
    """Stop CP-SAT when no better plan came for ``max(0.2 s, 30 %)`` of its running time."""

    def __init__(self, solver: cp_model.CpSolver, callback: _StopWhenClose) -> None:
        super().__init__(daemon=True)
        self.solver, self.callback = solver, callback
        self.begin = time.monotonic()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.05):
            now = time.monotonic()
            if now - self.callback.last > max(0.2, 0.3 * (now - self.begin)):
                self.solver.stop_search()
                return

    def finish(self) -> None:
        self.stopped.set()
        self.join()


_GRACE = 0.05
"""Share of the adaptive budget that emptying the last plans' bins may run past it (never
past the time limit)."""
_FIRST_POLISH = 0.1
"""Share of the budget the first plan's polish gets even when it comes late.

Polishing (``solver.improve``) is where most of the saving is made on hostname-constrained
plans (Karpenter's diverse 1k pods: 279 to 230 $/h in 0.08 s); a first dive that ends just
after the budget must not leave the plan unpolished (measured: 277 instead of 230 $/h in some
benchmark repetitions)."""


class _ColumnGeneration(NamedTuple):
    """How column generation runs for one kind of LP view."""

    share: float
    """Share of the time left it gets; the dives and CP-SAT get the rest."""
    smoothing: float
    """Dual smoothing weight (``solver.colgen.SMOOTHING``)."""


_PLAIN = _ColumnGeneration(share=0.6, smoothing=0.5)
"""When the LP keeps its classes.

Where bins hold many small pods, smoothing 0.5 gives plans as cheap or cheaper than 0.7 at
every planning-step budget measured (realistic mix, 500 pods: 18.84 to 18.91 $/h instead of
18.84 to 19.10; 2,000 pods: 74.15 instead of 74.16 to 74.40; 5,000: 185.44 instead of 185.50).
"""
_MERGED = _ColumnGeneration(share=0.92, smoothing=SMOOTHING)
"""When the LP phases merge classes (``solver.shapes``; GPU gangs).

The integer master then only gets the plans' own columns and rarely improves on them, so the
plan is about as good as the LP the dives round. Measured on the GPU-gang benchmark (500 /
2,000 pods, 5 s, before the pricing knapsacks got faster): 478.6 instead of 479.2 to 480.3
$/h, and 1950.8 instead of 1954.7 with the share at 0.6. A few large pods to a bin need the
full smoothing: with 0.5 the 500-pod plan costs 479.3 instead of 476.7 $/h.
"""
_DIVE_RESERVE = 1.5
"""Column generation leaves at least this many times the first dive's time for the last."""
_SETUP_SECONDS = 2e-7
"""Column generation's set-up time per offering and class (measured: 0.12 s for 1,200
offerings and 530 classes on 2 cores)."""


def _rounds(config: SolverConfig) -> int:
    if config.colgen_rounds is not None:
        return config.colgen_rounds
    return DETERMINISTIC_ROUNDS if config.deterministic_time is not None else 1 << 30


def _gap(cost: int, bound: int) -> float:
    return (cost - bound) / cost if cost > 0 else 0.0


def budget_seconds(problem: Problem, config: SolverConfig) -> float:
    """Return the wall time ``solve`` allows itself (at most ``config.time_limit_seconds``).

    With ``config.adaptive_budget`` and no ``deterministic_time``, the whole planning step
    (``config.spent_seconds`` already gone on building the problem, plus this solve) gets
    0.4 s up to 1,000 pods and 0.3 ms per further pod (1.6 s at 5k, 3.1 s at 10k, 6.1 s
    at 20k pods): the search stops there, keeping the best plan so far, so planning stays
    within the latency targets of docs/benchmarks.md; a little is left for building the
    NodeClaims. The search gets at least ``config.min_search_seconds`` however long the
    building took.

    Problems with pods that request GPUs (whole devices or fractions) keep the whole time
    limit: a GPU node costs tens of times a CPU node per hour and takes minutes to become
    ready, so seconds of search that buy a few percent are worth it (the search still stops
    early within ``relative_gap`` of the bound, or when CP-SAT stops improving).
    """
    if not config.adaptive_budget or config.deterministic_time is not None:
        return config.time_limit_seconds
    if problem.requests_gpus():
        return config.time_limit_seconds
    pods = sum(c.count for c in problem.classes)
    total = 0.4 + 3e-4 * max(0, pods - 1000)
    # building the problem is counted, and on a large catalog it is most of the budget in a
    # fresh process (``jointer plan``, 44 pods on the built-in us-east-1 catalog: 0.3 s
    # enumerating 7,000 offerings); without a minimum the optimiser got no time and the dry
    # run printed the greedy plan where the controller, whose offerings are kept between
    # batches, finds a cheaper one (examples/plan/mixed-web-batch.yaml: $1.3796 against
    # $1.3436 an hour)
    floor = config.min_search_seconds
    return min(config.time_limit_seconds, max(floor, total - config.spent_seconds))


_REBALANCE_BINS = 50
"""The first polish of a full-bins plan rebalances bins (``improve``'s ``rebalance``) from
this many bins up.

Only where the polish is the search: a first-fit-decreasing plan polished first (its bins
full, ``_FULL_BINS_FIRST``) on many bins of few pods (Karpenter's diverse mix, 500 pods on 83
bins: $117.40 instead of $118.35 an hour; the same mix on us-east-1: $5.29-5.41 instead of
$5.42). Elsewhere the LP phases and CP-SAT make the plan and need the budget's time: with
every first polish rebalancing, the weighted-limits mix at 2,000 pods cost $22.79 instead of
$21.70 in two repetitions of three (its column generation no longer finished), and the
realistic mix at 2,000 pods $75.10 instead of $74.13. The time rebalancing takes is not spent
polishing the other greedy plans: on the diverse mix with zonal self-affinity at 500 pods the
cost-aware plan's polish had found $120.46 an hour, where the rebalanced first plan costs
$123.55-124.51 (rebalancing after those polishes instead finds no time left on any benchmark row).
Not for GPU pods either: their nodes are priced by the GPUs, which the LP search packs.
"""


def _rebalances(problem: Problem, plan: Solution, full: list[Solution]) -> bool:
    """Return whether the first polish of ``plan`` rebalances its bins.

    ``full``: the plans whose bins are full (``_whole_groups``).
    """
    return (
        any(plan is f for f in full)
        and len(plan.new_bins) >= _REBALANCE_BINS
        and not problem.requests_gpus()
    )


def _greedy_plans(problem: Problem, hard: float, log: Callable[[str], None]) -> list[Solution]:
    """Return the greedy plans of one tier: cost-aware (unless out of time), then Karpenter's.

    Karpenter's plan carries the seconds it took (``_whole_groups`` weighs them).
    """
    started = time.monotonic()
    karpenter = karpenter_ffd(problem, fall_through=False)
    plans = [dataclasses.replace(karpenter, seconds=time.monotonic() - started)]
    try:
        plans.insert(0, cost_aware_ffd(problem, deadline=hard, fall_through=False))
    except GreedyTimeout:
        log("cost-aware greedy skipped: time limit")
    return plans


def solve(problem: Problem, config: SolverConfig | None = None) -> Solution:
    """Return the cheapest plan found within the configured limits (never worse than greedy).

    Plans tier by tier (``solver.tiers``), each tier with ``_solve_tier`` and the time left;
    the first tier starts from the greedy plans' first tiers.

    Raises:
        ProblemError: when ``problem.validate_structure()`` fails.
    """
    return solve_with_greedy(problem, config).best


@dataclasses.dataclass(frozen=True, slots=True)
class Solved:
    """What ``solve_with_greedy`` found.

    Attributes:
        best: the optimiser's plan (``solve``'s answer), or the first decisive greedy plan.
        greedy: the greedy plans it started from (cost-aware first-fit first, then
            Karpenter's first-fit-decreasing), whole (all tiers).
    """

    best: Solution
    greedy: tuple[Solution, ...]


def solve_with_greedy(
    problem: Problem,
    config: SolverConfig | None = None,
    *,
    decisive: Callable[[Solution], bool] | None = None,
) -> Solved:
    """``solve``, also returning the greedy plans it started from.

    ``decisive``: a test of a plan that no further search could improve for the caller's
    purpose (a consolidation simulation whose moving pods all fit on existing nodes); when
    a greedy plan passes it, the best such plan is returned at once (status ``GREEDY``).

    Raises:
        ProblemError: when ``problem.validate_structure()`` fails.
    """
    config = config or SolverConfig()
    start = time.monotonic()
    problem.validate_structure()
    soft = start + budget_seconds(problem, config) if forks(problem, config) else None
    greedy, ahead = _greedy_tiers(problem, start + config.time_limit_seconds, _log(config), soft)
    try:
        return _search(problem, config, start, (greedy, ahead), decisive)
    finally:
        ahead.close()


def _search(
    problem: Problem,
    config: SolverConfig,
    start: float,
    made: tuple[list[tiers.Tiers], Ahead],
    decisive: Callable[[Solution], bool] | None,
) -> Solved:
    """``solve_with_greedy`` after its greedy phase (``made``: its plans, what came ahead)."""
    greedy, ahead = made
    whole = tuple(g.solution for g in greedy)
    if decisive is not None:
        enough = [s for s in whole if decisive(s)]
        if enough:
            return Solved(min(enough, key=_quality), whole)
    starts = [([g.rounds[0] for g in greedy], ahead)]

    def tier(p: Problem, *, first: bool = False) -> Solution:
        # each tier gets the adaptive budget of its own pods, within the time left; the
        # problem's first tier counts the step so far as spent (its budget is the planning
        # step's) and starts from the greedy plans' first tiers
        elapsed = time.monotonic() - start
        left = max(0.0, config.time_limit_seconds - elapsed)
        spent = config.spent_seconds + elapsed if first else 0.0
        # the search's minimum counts from the start of this solve (the greedy plans included)
        least = max(0.0, config.min_search_seconds - elapsed) if first else 0.0
        plans, ahead = starts.pop() if first and starts else (None, NOTHING_AHEAD)
        return _solve_tier(
            p,
            dataclasses.replace(
                config, time_limit_seconds=left, spent_seconds=spent, min_search_seconds=least
            ),
            plans,
            ahead,
        )

    post = functools.partial(downsize, problem)
    firsts = iter([True])

    def plain(p: Problem) -> Solution:
        return tier(p, first=next(firsts, False))

    if not may_fall_through(problem):
        return Solved(tiers.fall_through(problem, plain, post=post).solution, whole)
    # the heavier pools' pods chosen by what they save when that applies; the tiered search
    # (which chooses them by count) too unless every valid plan uses those pools' limits up
    valued = _valued_tiers(problem, tier, post, config, start)
    candidates = [] if valued is None else [valued[0]]
    if valued is None or not valued[1]:
        candidates.append(tiers.fall_through(problem, plain, post=post))
    planned = min(candidates, key=lambda t: _quality(t.solution))
    return Solved(_best_of_tiers(problem, planned, list(whole), config, start), whole)


def _valued_tiers(
    problem: Problem,
    tier: Callable[[Problem], Solution],
    post: Callable[[Solution], Solution],
    config: SolverConfig,
    start: float,
) -> tuple[tiers.Tiers, bool] | None:
    """Return the plan whose first tier is chosen by cost (``solver.valued_tier``), if any.

    The pods that first tier leaves are planned by ``tier``, each lighter tier with the
    adaptive budget of its own pods. Returns the plan and ``FirstTier.only``; None when the
    choice does not apply (``valued_tier.first_tier``) or its plan breaks a rule.
    """
    hard = start + config.time_limit_seconds
    first = valued_tier.first_tier(
        problem,
        deadline=hard,
        seed=config.random_seed,
        deterministic_time=config.deterministic_time,
    )
    if first is None:
        return None
    calls = iter([first.plan])

    def from_first(p: Problem) -> Solution:
        return next(calls, None) or tier(p)

    planned = tiers.fall_through(problem, from_first, post=post)
    if violations(problem, planned.solution):
        return None
    return planned, first.only


def _greedy_tiers(
    problem: Problem, hard: float, log: Callable[[str], None], soft: float | None = None
) -> tuple[list[tiers.Tiers], Ahead]:
    """Return the greedy plans made in tiers (cost-aware first unless out of time).

    The first tier's plan of Karpenter's carries the seconds it took (``_whole_groups``).

    ``soft``: the end of the first tier's budget, when a forked child makes the cost-aware
    plan and its fluid bound (``solver.ahead``); this process meanwhile makes Karpenter's
    plan and, when that leaves pods unplaced, the whole-group plan ``_whole_groups`` may
    want (given up once the child's plan shows it is not wanted: ``_whole_plan_due``). Both
    come back in the ``Ahead``; a failed child's plan is made here.
    """
    started = time.monotonic()
    child = None
    if soft is not None:
        child = Forked.start(functools.partial(cost_aware_then_bound, problem, hard, soft))
    plans: list[tiers.Tiers] = []
    ahead = NOTHING_AHEAD
    try:
        karpenter = plan_tiers(problem, karpenter=True)
        first = dataclasses.replace(karpenter.rounds[0], seconds=time.monotonic() - started)
        plans.append(dataclasses.replace(karpenter, rounds=(first, *karpenter.rounds[1:])))
        if child is not None:
            cost_aware = _ChildPlan(child, hard)
            whole = None
            if first.unplaced:
                # made while the child works, given up once its plan shows it is not wanted
                whole = _whole_group_plan(
                    problem, first, hard, log, stop=functools.partial(_unwanted, first, cost_aware)
                )
            ahead = Ahead(whole, child, hard)
            made = cost_aware.take()
            if isinstance(made, tiers.Tiers):
                plans.insert(0, made)
                return plans, ahead
            log("cost-aware greedy made here: the forked child failed or is late")
        plans.insert(0, plan_tiers(problem, karpenter=False, deadline=hard))
    except GreedyTimeout:
        log("cost-aware greedy skipped: time limit")
    except BaseException:
        if child is not None:
            child.close()  # nobody else will end it
        raise
    return plans, ahead


class _ChildPlan:
    """The forked child's first value (the cost-aware plan in tiers), taken once it comes."""

    def __init__(self, child: Forked[Made], hard: float) -> None:
        self._child, self._hard = child, hard
        self._made: Made | None = None
        self._raised: Exception | None = None
        self._taken = False

    def came(self) -> bool:
        """Return whether the child has sent it (or ended), without waiting."""
        return self._taken or self._child.ready()

    def take(self) -> Made | None:
        """Return it, waiting until ``hard`` at most (None: the child failed or is late).

        Raises:
            Exception: what the child raised (``GreedyTimeout`` when ``hard`` passed), on
                every call.
        """
        if not self._taken:
            self._taken = True
            try:
                _, self._made = self._child.next(self._hard)
            except Exception as error:  # noqa: BLE001 - kept and raised again on each call
                self._raised = error
        if self._raised is not None:
            raise self._raised
        return self._made


def _unwanted(karpenter: Solution, cost_aware: _ChildPlan) -> bool:
    """Return whether the cost-aware plan has come and shows the whole-group plan unwanted."""
    return cost_aware.came() and not _whole_plan_due(karpenter, cost_aware.take())


def _whole_plan_due(karpenter: Solution, cost_aware: Made | None) -> bool:
    """Return whether ``_whole_groups`` may use the whole-group plan of the first tier.

    ``cost_aware``: the child's cost-aware plan in tiers (None or another value: not known).
    The plan is used only when Karpenter's plan leaves more pods unplaced than the cost-aware
    one; otherwise making it (about as long as Karpenter's plan) only delays the polish
    (Karpenter's diverse mix, 1,000 pods: 0.1 s of a 0.4 s budget).
    """
    if not isinstance(cost_aware, tiers.Tiers):
        return True
    return _unplaced_more(karpenter, cost_aware.rounds[0])


def _best_of_tiers(
    problem: Problem,
    planned: tiers.Tiers,
    greedy: list[Solution],
    config: SolverConfig,
    start: float,
) -> Solution:
    """Return the best of the optimiser's plan made in tiers and the greedy ones, bounded.

    A greedy plan made in tiers can beat the optimiser's when its first tier leaves more pods
    to a cheaper, lighter pool. The bound of a plan of several tiers is ``tiered_bound``: the
    cheapest of the cases rule 9 leaves (pods kept on their heaviest pool, or that pool used
    up to within one node of a limit), never below the bound without weights.
    """
    best = min([planned.solution, *greedy], key=_quality)
    if best is planned.solution and len(planned.rounds) == 1:
        return best
    status = Status.GREEDY
    if best is planned.solution and any(r.status is not Status.GREEDY for r in planned.rounds):
        status = Status.FEASIBLE
    hard = start + config.time_limit_seconds
    bound = 0
    if time.monotonic() < hard:
        bound = tiered_bound(problem, best.new_counts(), deadline=hard)
    bound = min(bound, best.cost_micros)
    if bound >= best.cost_micros:
        status = Status.OPTIMAL
    return dataclasses.replace(
        best, lower_bound_micros=bound, status=status, seconds=time.monotonic() - start
    )


def _solve_tier(
    problem: Problem,
    config: SolverConfig,
    greedy_plans: list[Solution] | None = None,
    ahead: Ahead = NOTHING_AHEAD,
) -> Solution:
    """Return the cheapest plan of one tier (the problem pre-filtered to each class's top tier).

    ``greedy_plans``: the greedy plans of this tier, when already made; ``ahead``: the fluid
    bound and whole-group plan made with them (``_greedy_tiers``).

    Stops early, before the time limit, as soon as the plan is within
    ``config.relative_gap`` of the lower bound (after the greedy plans and the fluid bound,
    after the first dive, after column generation, or inside CP-SAT), when the integer
    master is proven optimal over the generated columns, when the adaptive budget
    (``budget_seconds``) is spent, or when CP-SAT has not improved for a while (wall-clock
    runs only). Every phase checks the
    time limit; the Karpenter-style greedy plan is always computed.
    """
    log = _log(config)
    start = time.monotonic()
    hard = start + config.time_limit_seconds
    soft = start + budget_seconds(problem, config)
    spent = config.spent_seconds
    filtered = apply_pool_weights(problem)
    candidates = greedy_plans or _greedy_plans(problem, hard, log)
    greedy = min(candidates, key=_quality)
    demand = greedy.new_counts()
    # plans get their bins emptied into each other (solver.improve), a little past the budget
    incumbent = _Incumbent(
        problem,
        greedy,
        polish=(
            min(hard, soft + _GRACE * (soft - start)),
            _FIRST_POLISH * (soft - start + spent),
            hard,
        ),
        log=log,
    )
    consider = incumbent.consider

    def done(best: Solution, bound: int, status: Status) -> Solution:
        bound = min(bound, best.cost_micros)
        if bound >= best.cost_micros:
            status = Status.OPTIMAL
        return dataclasses.replace(
            best, lower_bound_micros=bound, status=status, seconds=time.monotonic() - start
        )

    if not any(demand.values()):
        return done(greedy, 0, Status.OPTIMAL)
    # one greedy plan (``_first_polished``) is polished first: it is the plan every later
    # phase must beat, and the one kept when the budget runs out. Its first pass always ends
    # (on a busy machine at most as long again as the planning step's budget); later passes
    # stop with the budget, as they find little (Karpenter's diverse mix, 10,000 pods: $0
    # in 2.0 s after the first pass's $744 an hour)
    step = soft - start + spent
    # ``full``: the plans whose bins are full (Karpenter's first-fit-decreasing)
    candidates, full = _whole_groups(problem, candidates, hard, log, ahead.whole)
    first, candidates, full = _guided(problem, (candidates, full), soft, log)
    consider(
        first,
        "emptied greedy",
        valid=True,
        first_pass_until=max(soft, time.monotonic() + step),
        full_bins=any(first is f for f in full),
        rebalance=_rebalances(problem, first, full),
    )
    # the bound, made ahead while the first plan was polished, or now
    fluid = _fluid(filtered, demand, ahead, (soft, hard))
    log(f"greedy {greedy.cost_micros}, fluid bound {fluid}")
    _polish_others(incumbent, candidates, (first, full), (fluid, config.relative_gap), soft)

    def finish(bound: int) -> Solution:
        best = incumbent.best
        return done(best, bound, Status.FEASIBLE if best is not greedy else Status.GREEDY)

    if _gap(incumbent.best.cost_micros, fluid) <= config.relative_gap or time.monotonic() >= soft:
        return finish(fluid)
    # classes differing only in key and gang are merged for the LP phases (solver.shapes)
    lp = lp_view(filtered, min_classes=config.merge_from)
    lp_demand = lp.demand(demand)
    seeds = [p for c in candidates for p in patterns_from_solution(c)]
    columns = list(dict.fromkeys(lp.pattern(p) for p in seeds))
    # a first dive over the greedy plans' bins and the balanced slices: on large problems
    # there may be no time left for column generation
    columns += balanced_slices(lp.problem, lp_demand, len(greedy.new_bins))
    # soft <= hard: the budget never exceeds the time limit
    dives = functools.partial(
        _dive_plans,
        filtered,
        lp,
        greedy=greedy,
        zones=_greedy_zones(filtered, lp, greedy),
        deadline=soft,
        timed=config.deterministic_time is None,
    )
    dive_seconds = _first_dives(dives(columns), consider)
    # column generation first groups offerings and indexes their knapsacks: only start it
    # with time for that and as much again for pricing
    setup = _SETUP_SECONDS * len(lp.problem.bin_types) * len(lp.problem.classes)
    left = soft - time.monotonic()
    if _gap(incumbent.best.cost_micros, fluid) <= config.relative_gap or left < 2 * setup:
        return finish(_final_bound(lp, incumbent.best, (demand, fluid), [], hard))
    how = _PLAIN if lp.shapes is None else _MERGED
    cg = generate(
        lp.problem,
        lp_demand,
        columns,
        rounds=_rounds(config),
        deadline=_columns_deadline(how.share, time.monotonic(), soft, dive_seconds),
        bound_deadline=soft,
        smoothing=how.smoothing,
    )
    log(
        f"column generation: {len(cg.patterns)} patterns, lp {cg.lp_value:.0f}, "
        f"{cg.rounds} rounds, converged {cg.converged}"
    )
    for plan in dives(cg.patterns):
        consider(plan, "lp dive")
    pattern = functools.partial(_pattern_bound, lp, cg, lp_demand, config.relative_gap, log)
    known = fluid
    if cg.converged:
        # converged: the pattern bound is the LP value scaled, known before CP-SAT starts
        known = pattern(incumbent.best, known, None)
    if time.monotonic() < soft and _gap(incumbent.best.cost_micros, known) > config.relative_gap:
        # merged columns have no class-level pods: the master then works on the plans' own
        # (an integer master over merged classes knows no gangs, and its plans rarely split)
        support = cg.support if lp.shapes is None else []
        consider(
            _run_master(
                filtered,
                patterns=list(
                    dict.fromkeys([*support, *seeds, *patterns_from_solution(incumbent.best)])
                ),
                start=(greedy, incumbent.best),
                config=config,
                deadline=soft,
                log=log,
                stop_at=math.floor(known / max(1e-9, 1 - config.relative_gap)),
            ),
            "cp-sat master",
        )
    if not cg.converged:
        # before convergence the pattern bound prices offerings exactly (up to a second on
        # the GPU gangs) and rarely beats the fluid one: it only gets the time CP-SAT left
        known = pattern(incumbent.best, known, soft)
    return finish(_final_bound(lp, incumbent.best, (demand, known), cg.patterns, hard))


def _fluid(
    problem: Problem, demand: Mapping[str, int], ahead: Ahead, times: tuple[float, float]
) -> int:
    """Return the fluid bound of ``demand``: made ahead, else now (``times``: soft, hard)."""
    made = ahead.bound_of(demand)
    if made is not None:
        return made
    soft, hard = times
    # the bound may run past the adaptive budget, but not by more than a second
    return fluid_bound(problem, demand, deadline=min(hard, max(soft, time.monotonic()) + 1.0))


_FULL_BINS_FIRST = 1.25
"""Karpenter's greedy plan is polished first when it costs at most this many times the other.

Its bins are full and shrink well: where it cost 1.03-1.16 times the cost-aware plan
(Karpenter's diverse mix and the constraint mix), its polish was the cheaper one in the same
time (diverse 1k $226.30 against $233.86, constraint mix 10k $320 against $332); where it cost
1.38-1.84 times (GPU gangs, weighted pools, the realistic mix on us-east-1), the cost-aware
plan's polish stayed cheaper.
"""


def _first_polished(candidates: list[Solution]) -> Solution:
    """Return the greedy plan polished first.

    ``candidates``: a plan of full bins last (Karpenter's, or the whole-group plan when
    ``_whole_groups`` added it). The best, unless that last one places as many pods and
    costs at most ``_FULL_BINS_FIRST`` times as much.
    """
    best = min(candidates, key=_quality)
    full = candidates[-1]
    if full is best or _unplaced_more(full, best):
        return best
    return full if full.cost_micros <= _FULL_BINS_FIRST * best.cost_micros else best


def _unplaced_more(plan: Solution, than: Solution) -> bool:
    """Return whether ``plan`` leaves more pods unplaced than ``than``."""
    return _quality(plan)[0] > _quality(than)[0]


def _polish_others(
    incumbent: _Incumbent,
    candidates: list[Solution],
    polished: tuple[Solution, list[Solution]],
    bound: tuple[int, float],
    soft: float,
) -> None:
    """Polish the greedy plans other than the first polished while the budget lasts.

    Any may win. ``polished``: the plan polished first and the plans whose bins are full.
    ``bound``: the fluid bound and the relative gap within which the search stops.
    """
    first, full = polished
    fluid, gap = bound
    for other in candidates:
        if _gap(incumbent.best.cost_micros, fluid) <= gap or time.monotonic() >= soft:
            return
        if other is not first:
            incumbent.consider(
                other, "emptied greedy", valid=True, full_bins=any(other is f for f in full)
            )


_GUIDED_ROOM = 2.0
"""The fluid-guided plan is made only while this many times Karpenter's planning time is
left of the budget: its first fit takes about as long as Karpenter's, its LP a tenth of that
(the constraint mix at 10,000 pods: 0.55 s and 0.05 s against 0.45 s), and its polish needs
the rest."""


def _guided(
    problem: Problem,
    plans: tuple[list[Solution], list[Solution]],
    soft: float,
    log: Callable[[str], None],
) -> tuple[Solution, list[Solution], list[Solution]]:
    """Return the plan to polish first, and the candidates and full-bins plans with it.

    ``plans``: the candidates (a full-bins plan last) and the full-bins plans, Karpenter's
    first. Where a full-bins plan is polished first (``_first_polished``), the fluid-guided
    plan (``solver.guided``), which fills bins as Karpenter's does, is polished first
    instead when it places as many pods for less (the constraint mix at 10,000 pods:
    $342.40 against Karpenter's $378.37 an hour, and $318.69 against $320.10 polished). Not
    made where Karpenter's bins hold few pods (``_GUIDED_PODS_PER_BIN``), where too little
    of the budget is left, or beside existing nodes. In the controller's 24-hour soak (seed
    1) the guided plans of batches beside nodes cost more over the day than they saved in
    each plan: made wherever nodes exist, it changed 34 of 516 plans (consolidation
    simulations) and the day cost $395.40 instead of $374.35 with 37 more consolidations;
    made wherever no pod fits on an existing node, $430.90. The LP sees new nodes only, and
    a batch dealt to two families leaves room in both that later pods and consolidation
    pay for.
    """
    candidates, full = plans
    first = _first_polished(candidates)
    if (
        problem.existing
        or not any(first is f for f in full)
        or _pods_per_bin(full[0]) < _GUIDED_PODS_PER_BIN
    ):
        return first, candidates, full
    if time.monotonic() + _GUIDED_ROOM * full[0].seconds > soft:
        log("guided greedy skipped: too little time left")
        return first, candidates, full
    try:
        guided = guided_plan(problem, deadline=soft)
    except GreedyTimeout:
        log("guided greedy skipped: out of budget")
        return first, candidates, full
    if guided is None:
        return first, candidates, full
    log(f"guided greedy {guided.cost_micros}, {sum(u.count for u in guided.unplaced)} unplaced")
    if _unplaced_more(guided, first) or guided.cost_micros >= first.cost_micros:
        return first, candidates, full
    return guided, [*candidates, guided], [*full, guided]


_GUIDED_PODS_PER_BIN = 16
"""The fluid-guided plan is made only where Karpenter's bins hold this many pods on average.

Where nodes hold a few pods each (Karpenter's diverse mix on us-east-1: 6 a node, most
pods kept apart by hostname spreads and anti-affinity) a node's cost is its size rounded up
to its few pods, whatever the family: the guided plan there cost more than Karpenter's
($8.74 against $7.14 an hour at 500 pods) and making it only took the polish's time."""


def _pods_per_bin(plan: Solution) -> float:
    """Return the mean number of pods on ``plan``'s new bins (0 without bins)."""
    pods = sum(sum(b.placement.counts.values()) for b in plan.new_bins)
    return pods / len(plan.new_bins) if plan.new_bins else 0.0


_WHOLE_GROUPS_ROOM = 3.0
"""The whole-group plan is made only while this many times Karpenter's planning time is left.

It takes about as long as Karpenter's plan, and its polish needs about twice that again to
beat the cost-aware plan's: on Karpenter's diverse mix at 20,000 pods (1.0 s to plan) it
reached $5,101 an hour after 1.5 CPU s and $4,663 after 2 s, against $4,867 from the
cost-aware plan's polish in the default 5 s limit. With less time the polish goes to the
plans already made.
"""


def _whole_groups(
    problem: Problem,
    candidates: list[Solution],
    hard: float,
    log: Callable[[str], None],
    made: Solution | None = None,
) -> tuple[list[Solution], list[Solution]]:
    """Return the candidates and those whose bins are full, the whole-group plan added.

    That is Karpenter's plan (the last candidate) made with one-bin groups whole, if useful.

    Only when Karpenter's plan leaves more pods unplaced than the best: its first fit starts
    a group held to one bin (hostname ``Affinity``) on a bin other pods already fill, and
    the group's later members find no room. The plan made with each such group on a bin of
    its own (``karpenter_ffd``'s ``whole_groups``) fills bins as Karpenter's does, so it may
    be polished first (``_first_polished``). Karpenter's plan stays a candidate: the other
    may leave out a pod Karpenter's places (a carrier of a co-location, say). Not made when
    not useful or when the time left is short (``_whole_group_plan``); ``made``: the plan
    when the greedy phase made it already (``_greedy_tiers``).
    """
    best = min(candidates, key=_quality)
    full = candidates[-1]
    if full is best or not _unplaced_more(full, best):
        return candidates, [full]
    whole = made or _whole_group_plan(problem, full, hard, log)
    if whole is None:
        return candidates, [full]
    return [*candidates, whole], [full, whole]


def _whole_group_plan(
    problem: Problem,
    karpenter: Solution,
    hard: float,
    log: Callable[[str], None],
    *,
    stop: Callable[[], bool] | None = None,
) -> Solution | None:
    """Return Karpenter's first fit with one-bin groups whole (``_whole_groups``), if due.

    None when the problem has no one-bin group, when too little time is left for the plan
    and its polish (``_WHOLE_GROUPS_ROOM`` times ``karpenter``'s seconds), or when ``stop``
    (asked now and then) says the plan is not wanted.
    """
    if not any(isinstance(t, Affinity) and t.key is TopologyKey.HOSTNAME for t in problem.topology):
        return None
    if time.monotonic() + _WHOLE_GROUPS_ROOM * karpenter.seconds > hard:
        log("whole-group greedy skipped: too little time left")
        return None
    try:
        whole = karpenter_ffd(
            problem, deadline=hard, fall_through=False, whole_groups=True, stop=stop
        )
    except GreedyStopped:
        log("whole-group greedy given up: the cost-aware plan places as many pods")
        return None
    except GreedyTimeout:
        log("whole-group greedy skipped: time limit")
        return None
    log(f"whole-group greedy {whole.cost_micros}, {sum(u.count for u in whole.unplaced)} unplaced")
    return whole


def _first_dives(
    plans: Iterator[Solution], consider: Callable[[Solution | None, str], None]
) -> float:
    """Consider the first dives' plans; return how long the first dive took."""
    started, took = time.monotonic(), 0.0
    # each dive's plan is polished before the next dive: polishing is worth more
    for plan in plans:
        took = took or time.monotonic() - started
        consider(plan, "first dive")
    return took


def _columns_deadline(share: float, now: float, soft: float, dive_seconds: float) -> float:
    """Return when column generation stops: its share of the time left, and time to dive."""
    # the dive after column generation takes about as long as the first one
    return soft - max((1 - share) * (soft - now), _DIVE_RESERVE * dive_seconds)


def _pattern_bound(  # noqa: PLR0917 - a partial's fixed arguments, then the state
    lp: LPView,
    cg: ColumnGenerationResult,
    lp_demand: Mapping[str, int],
    relative_gap: float,
    log: Callable[[str], None],
    best: Solution,
    known: int,
    deadline: float | None,
) -> int:
    """Return ``known`` raised to column generation's bound, unless ``best`` is close enough."""
    if _gap(best.cost_micros, known) <= relative_gap:
        return known
    known = max(known, lp_bound(lp.problem, cg, lp_demand, deadline=deadline))
    log(f"pattern bound {known}")
    return known


class _Incumbent:
    """The best valid plan so far (more pods placed, then cheaper, then fewer bins)."""

    def __init__(
        self,
        problem: Problem,
        greedy: Solution,
        *,
        polish: tuple[float, float, float],
        log: Callable[[str], None],
    ) -> None:
        """Start from ``greedy``.

        ``polish``: (time until which plans are polished, seconds the first polish gets even
        when it comes later, time limit no polish passes).
        """
        self.problem, self.best, self.greedy = problem, greedy, greedy
        self.polish_until, self.first, self.hard = polish
        self.log = log

    def consider(
        self,
        plan: Solution | None,
        what: str,
        *,
        valid: bool = False,
        first_pass_until: float | None = None,
        full_bins: bool = False,
        rebalance: bool = False,
    ) -> None:
        """Keep ``plan``, with its bins emptied into each other, if valid and better.

        ``valid``: the plan is known to be valid (validated already). ``first_pass_until``:
        the polish's first pass runs until then (never past the time limit; ``improve``)
        instead of the budget's first slice. ``full_bins``: the plan's bins are filled up to
        their largest offering (Karpenter's first-fit-decreasing): the polish shrinks them
        first (``improve``'s ``shed_first``). ``rebalance``: the polish rebalances bins too
        (``improve``'s ``rebalance``).
        """
        if plan is None:
            return
        polished = plan
        until = self.polish_until
        if first_pass_until is not None:
            first_pass_until = min(self.hard, first_pass_until)
            self.first = 0.0
        elif self.first > 0:
            until = min(self.hard, max(until, time.monotonic() + self.first))
            if time.monotonic() < until:
                self.first = 0.0
        if time.monotonic() < max(until, first_pass_until or until):
            polished = improve(
                self.problem,
                plan,
                deadline=until,
                shed_first=full_bins,
                first_pass_until=first_pass_until,
                rebalance=rebalance,
            )
        # the moves keep every rule: the raw plan is validated only when they broke one
        if polished is not plan and not violations(self.problem, polished):
            plan = polished
        elif not valid and violations(self.problem, plan):
            return
        if _quality(plan) < _quality(self.best):
            self.best = plan
            self.log(f"{what}: {plan.cost_micros}, {len(plan.new_bins)} bins")


def _greedy_zones(problem: Problem, lp: LPView, greedy: Solution) -> dict[str, Counter[str]]:
    """Return the greedy plan's new pods per zone of each zone-(anti-)affine LP row.

    The dive keeps them (``rounding.zone_bound``): the greedy plan is valid.
    """
    bound = zone_bound(lp.problem)
    zones: defaultdict[str, Counter[str]] = defaultdict(Counter)
    zone_of = {t.id: t.zone for t in problem.bin_types}
    for b in greedy.new_bins if bound else ():
        for k, n in b.placement.counts.items():
            if lp.key(k) in bound:
                zones[lp.key(k)][zone_of[b.bin_type]] += n
    return zones


def _dive_plans(
    problem: Problem,
    lp: LPView,
    columns: list[Pattern],
    greedy: Solution,
    *,
    zones: Mapping[str, Mapping[str, int]],
    deadline: float,
    timed: bool,
) -> Iterator[Solution]:
    """Yield the LP dives' plans for the pods ``greedy`` puts on new bins (its others kept).

    The dive rounds the LP step by step; when that was quick (against the time left once the
    caller has used its plan), a second dive rounds every column to nearest at once (on a
    few dozen bins either can win by a few percent).
    """
    demand = greedy.new_counts()
    lp_demand = lp.demand(demand)
    for nearest in (False, True):
        started = time.monotonic()
        new = dive(
            lp.problem,
            columns,
            lp_demand,
            deadline=deadline,
            zones=zones,
            timed=timed,
            nearest=nearest,
        )
        took = time.monotonic() - started
        bins = None if new is None else lp.split(problem, new, demand, greedy.existing)
        if bins is not None:
            yield _finish(problem, bins, list(greedy.existing))
        if timed and took > _QUICK_DIVE * (deadline - time.monotonic()):
            return


_QUICK_DIVE = 0.1
"""A dive that took less than this share of the time left leaves room for a second one."""


def _finish(
    problem: Problem, new_bins: list[NewBin], existing: list[ExistingPlacement]
) -> Solution:
    """Return the plan of these bins with its unplaced pods, moved to the cheapest offerings."""
    placed: Counter[str] = Counter()
    for pl in [b.placement for b in new_bins] + [e.placement for e in existing]:
        placed.update(pl.counts)
    sol = Solution(
        tuple(new_bins), tuple(existing), unplaced_entries(problem, placed), 0, 0, Status.FEASIBLE
    )
    return downsize(problem, sol)


def _final_bound(
    lp: LPView,
    best: Solution,
    known: tuple[dict[str, int], int],
    patterns: list[Pattern],
    deadline: float,
) -> int:
    """Return the best valid bound for exactly the pods ``best`` places on new bins."""
    demand = best.new_counts()
    if demand == known[0]:
        return known[1]
    bound = 0
    if time.monotonic() < deadline:
        bound = fluid_bound(lp.problem, lp.demand(demand), deadline=deadline)
    if bound < best.cost_micros and time.monotonic() < deadline:
        bound = max(bound, pattern_bound(lp.problem, patterns, lp.demand(demand)))
    return bound


def _run_master(
    problem: Problem,
    *,
    patterns: list[Pattern],
    start: tuple[Solution, Solution],
    config: SolverConfig,
    deadline: float,
    log: Callable[[str], None],
    stop_at: int = 0,
) -> Solution | None:
    greedy, best = start
    floors = greedy.placed_counts()
    master = _Master(problem, patterns, floors)
    master.set_objective(max(2 * len(greedy.new_bins) + 10, sum(greedy.new_counts().values())))
    master.hint(best, patterns_from_solution(best))
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = config.num_workers
    params.random_seed = config.random_seed
    if time.monotonic() >= deadline:
        return None
    params.max_time_in_seconds = max(0.01, deadline - time.monotonic())
    if config.deterministic_time is not None:
        params.max_deterministic_time = config.deterministic_time
    params.relative_gap_limit = config.relative_gap
    params.log_to_stdout = False
    if config.log_callback is not None:
        params.log_search_progress = True
        solver.log_callback = config.log_callback
    unplaced = sum(u.count for u in best.unplaced)
    callback = _StopWhenClose(master, stop_at, unplaced)
    watch = None
    if config.deterministic_time is None:
        watch = _Patience(solver, callback)
        watch.start()
    try:
        code = solver.solve(master.m, callback)
    finally:
        if watch is not None:
            watch.finish()
    log(f"cp-sat: {solver.status_name(code)}, objective {solver.objective_value:.0f}")
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return master.extract(solver)
