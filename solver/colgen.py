"""Column generation over bin patterns: the LP master (GLOP), pricing, and the pattern bound.

A *pattern* is one new bin: an offering plus the pods of each class on it (and, for fractional
classes, their pods per GPU device). The model's size grows with classes and offerings, not
pods. The master LP over a set of patterns ``P`` is::

    min  sum_p price_p x_p + sum_c M s_c
    s.t. sum_p a_pc x_p + s_c >= d_c      (dual pi_c >= 0)       x, s >= 0

with ``d`` the pods to place on new bins (the warm start's) and ``M`` a penalty above any
offering's price. Pricing: for each offering, a greedy knapsack fills classes by
``pi_c / size_ct`` (then by ``pi_c``) respecting resources, hostname caps and GPU devices;
patterns with negative reduced cost join ``P``. The loop stops when no pattern prices out, after
``rounds`` rounds, or at the deadline; the bound is ``bounds.farley_bound`` on the last duals
(valid even when stopped early). Seed patterns come from the greedy plans, so the integer master
(``solver.cpsat``) can always reproduce them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from solver.bounds import farley_bound, fast_knapsack_upper, hostname_caps
from solver.problem import (
    GPU_MILLI,
    BinType,
    CoLocation,
    PodClass,
    Problem,
    Solution,
    TopologyKey,
)
from solver.weights import fits_one


@dataclass(frozen=True, slots=True)
class Pattern:
    """One new bin's contents.

    Attributes:
        bin_type: offering id.
        counts: (class key, pods) pairs, sorted, zero counts omitted.
        devices: (class key, pods per device) pairs for fractional classes, sorted.
    """

    bin_type: str
    counts: tuple[tuple[str, int], ...]
    devices: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def count(self, key: str) -> int:
        """Return the pods of class ``key`` in the pattern."""
        return dict(self.counts).get(key, 0)


def patterns_from_solution(solution: Solution) -> list[Pattern]:
    """Return one pattern per new bin of ``solution`` (duplicates kept in order)."""
    return [
        Pattern(
            b.bin_type,
            tuple(sorted((k, n) for k, n in b.placement.counts.items() if n > 0)),
            tuple(sorted(b.placement.gpu_devices.items())),
        )
        for b in solution.new_bins
    ]


class _Filler:
    """Greedy knapsack for one offering: adds pods of classes while everything fits."""

    def __init__(self, problem: Problem, t: BinType, caps: Mapping[str, int]) -> None:
        self.p, self.t, self.caps = problem, t, caps
        self.co = {x.id for x in problem.topology if isinstance(x, CoLocation)}
        self.used: Counter[str] = Counter()
        self.group: Counter[str] = Counter()
        self.dev = [0] * t.gpus
        self.counts: Counter[str] = Counter()
        self.devices: dict[str, list[int]] = {}
        self.needs: dict[str, list[str]] = needy_carriers(problem)

    def add(self, c: PodClass, limit: int) -> None:
        if not c.gpu_fraction_milli and not any(g in self.caps for g in c.topology):
            bulk = limit
            for r, v in c.demand.items():
                if v > 0:
                    bulk = min(bulk, (self.t.capacity.get(r, 0) - self.used[r]) // v)
            if bulk > 1 and not any(self.group[g] == 0 for g in self.needs.get(c.key, ())):
                bulk -= 1
                for r, v in c.demand.items():
                    self.used[r] += v * bulk
                for g in c.topology:
                    self.group[g] += bulk
                self.counts[c.key] += bulk
                limit -= bulk
        for _ in range(limit):
            if not self._add_one(c):
                return

    def _add_one(self, c: PodClass) -> bool:
        gpu = self.p.gpu_resource
        need = Counter(c.demand)
        device = None
        if c.gpu_fraction_milli:
            device = next(
                (d for d, u in enumerate(self.dev) if u + c.gpu_fraction_milli <= GPU_MILLI), None
            )
            if device is None:
                return False
            if self.dev[device] == 0:
                need[gpu] += 1
        if any(self.used[r] + v > self.t.capacity.get(r, 0) for r, v in need.items() if v):
            return False
        if any(self.group[g] == 0 for g in self.needs.get(c.key, ())):
            return False
        groups = [g for g in c.topology if g in self.caps or g in self.co]
        if any(g in self.caps and self.group[g] + 1 > self.caps[g] for g in groups):
            return False
        self.used.update(need)
        self.group.update(groups)
        self.counts[c.key] += 1
        if device is not None:
            self.dev[device] += c.gpu_fraction_milli
            self.devices.setdefault(c.key, [0] * len(self.dev))[device] += 1
        return True

    def pattern(self) -> Pattern:
        devices = tuple(
            sorted(
                (k, tuple(v[: max(i for i, x in enumerate(v) if x) + 1]))
                for k, v in self.devices.items()
            )
        )
        return Pattern(self.t.id, tuple(sorted(self.counts.items())), devices)


_EPS = 1e-9


def needy_carriers(problem: Problem) -> dict[str, list[str]]:
    """Return, per class key, the hostname ``CoLocation`` ids it carries but is no target of.

    A bin holding pods of such a class must also hold a pod of a target class (new bins are
    never in ``satisfied``).
    """
    keys = {c.key: c for c in problem.classes}
    out: dict[str, list[str]] = {}
    for t in problem.topology:
        if isinstance(t, CoLocation) and t.key is TopologyKey.HOSTNAME:
            for k in sorted(t.carriers):
                if k in keys and t.id not in keys[k].topology:
                    out.setdefault(k, []).append(t.id)
    return out


def _size(t: BinType, c: PodClass) -> float:
    share = [v / t.capacity[r] for r, v in c.demand.items() if v and t.capacity.get(r, 0)]
    if c.gpu_fraction_milli and t.gpus:
        share.append(c.gpu_fraction_milli / (GPU_MILLI * t.gpus))
    return max(share, default=1e-9) or 1e-9


def price_patterns(
    problem: Problem, t: BinType, duals: Mapping[str, float], demand: Mapping[str, int]
) -> list[Pattern]:
    """Return heuristic patterns of offering ``t`` that are valuable under ``duals``."""
    classes = [
        c
        for c in problem.classes
        if duals.get(c.key, 0.0) > _EPS
        and demand.get(c.key, 0) > 0
        and t.id in c.allowed_bin_types
        and fits_one(problem, c, t)
    ]
    out = []
    caps = hostname_caps(problem)
    needs = needy_carriers(problem)
    for key in (
        lambda c: (c.key in needs, -duals[c.key] / _size(t, c), c.key),
        lambda c: (c.key in needs, -duals[c.key], c.key),
        lambda c: (c.key in needs, -duals[c.key] / _size2(t, c), c.key),
    ):
        f = _Filler(problem, t, caps)
        for c in sorted(classes, key=key):
            f.add(c, demand[c.key])
        if f.counts:
            out.append(f.pattern())
    exact = [c for c in classes if c.key not in needs]
    if exact and len(exact) <= _EXACT_MAX and not any(c.gpu_fraction_milli for c in exact):
        p = exact_pattern(problem, t, exact, duals, demand)
        if p is not None:
            out.append(p)
    return out


_EXACT_MAX = 60
"""Price offerings exactly (a small CP-SAT knapsack) when at most this many classes fit."""


def exact_pattern(
    problem: Problem,
    t: BinType,
    classes: list[PodClass],
    duals: Mapping[str, float],
    demand: Mapping[str, int],
) -> Pattern | None:
    """Return the most valuable pattern of ``t`` over ``classes`` (CP-SAT, deterministic).

    The classes must be non-fractional and need no co-location target; the model holds every
    resource of ``t``, the hostname caps and ``demand``. A short deterministic budget keeps it
    reproducible; the best pattern found is returned even when not proven optimal.
    """
    m = cp_model.CpModel()
    top = max(duals[c.key] for c in classes)
    a = {c.key: m.new_int_var(0, demand[c.key], "") for c in classes}
    for r in sorted({r for c in classes for r in c.demand}):
        terms = [c.demand[r] * a[c.key] for c in classes if c.demand.get(r, 0) > 0]
        if terms:
            m.add(sum(terms) <= t.capacity.get(r, 0))
    for gid, cap in hostname_caps(problem).items():
        group = [a[c.key] for c in classes if gid in c.topology]
        if group:
            m.add(sum(group) <= cap)
    m.maximize(sum(round(duals[c.key] / top * 1e6) * a[c.key] for c in classes))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = 0.05
    if solver.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    counts = tuple(sorted((k, solver.value(v)) for k, v in a.items() if solver.value(v) > 0))
    return Pattern(t.id, counts) if counts else None


def _size2(t: BinType, c: PodClass) -> float:
    share = [v / t.capacity[r] for r, v in c.demand.items() if v and t.capacity.get(r, 0)]
    return sum(share) or 1e-9


def _value(p: Pattern, duals: Mapping[str, float]) -> float:
    return sum(duals.get(k, 0.0) * n for k, n in p.counts)


@dataclass(frozen=True, slots=True)
class ColumnGenerationResult:
    """Patterns found and the valid lower bound for ``demand``."""

    patterns: list[Pattern]
    lower_bound_micros: int
    lp_value: float
    rounds: int
    converged: bool = False
    """No pattern priced out (heuristic pricing) before the deadline."""


def generate(  # noqa: C901 - one loop with its stopping rules
    problem: Problem,
    demand: Mapping[str, int],
    seeds: list[Pattern],
    *,
    rounds: int,
    deadline: float | None,
    bound_deadline: float | None = None,
) -> ColumnGenerationResult:
    """Run column generation from ``seeds`` and return the patterns and the Farley bound.

    Args:
        problem: the problem (pool weights already applied).
        demand: pods per class key to place on new bins.
        seeds: initial patterns (e.g. from the greedy plans).
        rounds: maximum pricing rounds (deterministic budget).
        deadline: ``time.monotonic()`` value after which to stop pricing, or ``None``.
        bound_deadline: no Farley bound is computed after this (the bound is then 0).
    """
    types = {t.id: t for t in problem.bin_types}
    pats: dict[Pattern, None] = dict.fromkeys(seeds)
    demand = {k: v for k, v in demand.items() if v > 0}
    groups = type_groups(problem)
    duals: dict[str, float] = {}
    value = 0.0
    done = 0
    converged = False
    for done in range(1, rounds + 1):  # noqa: B007 - reported below
        duals, value = _solve_master(problem, types, list(pats), demand)
        new = 0
        for rep, members in groups:
            if deadline is not None and time.monotonic() > deadline:
                break
            if fast_knapsack_upper(problem, rep, duals, demand) <= rep.price_micros * (1 + 1e-6):
                continue
            for p in price_patterns(problem, rep, duals, demand):
                if rep.price_micros - _value(p, duals) >= -1e-6 * rep.price_micros:
                    continue
                for t in members:
                    q = Pattern(t.id, p.counts, p.devices)
                    if q not in pats:
                        pats[q] = None
                        new += 1
        if new == 0:
            converged = deadline is None or time.monotonic() <= deadline
            break
        if deadline is not None and time.monotonic() > deadline:
            break
    if not demand:
        return ColumnGenerationResult(list(pats), 0, 0.0, 0, converged=True)
    duals, value = _solve_master(problem, types, list(pats), demand)
    bound = 0
    if bound_deadline is None or time.monotonic() < bound_deadline:
        bound = farley_bound(problem, duals, demand)
    return ColumnGenerationResult(list(pats), bound, value, done, converged=converged)


def type_groups(problem: Problem) -> list[tuple[BinType, list[BinType]]]:
    """Group offerings that price identically (capacity, GPUs, price, allowed classes)."""
    allowed: dict[str, list[str]] = {t.id: [] for t in problem.bin_types}
    for c in problem.classes:
        for tid in c.allowed_bin_types:
            if tid in allowed:
                allowed[tid].append(c.key)
    out: dict[tuple[object, ...], list[BinType]] = {}
    for t in problem.bin_types:
        sig = (tuple(sorted(t.capacity.items())), t.gpus, t.price_micros, tuple(allowed[t.id]))
        out.setdefault(sig, []).append(t)
    return [(ts[0], ts) for ts in out.values()]


def _solve_master(
    problem: Problem, types: Mapping[str, BinType], pats: list[Pattern], demand: Mapping[str, int]
) -> tuple[dict[str, float], float]:
    solver = pywraplp.Solver.CreateSolver("GLOP")
    penalty = 10 * max((t.price_micros for t in problem.bin_types), default=1) + 1
    rows = {k: solver.Constraint(d, solver.infinity()) for k, d in demand.items()}
    obj = solver.Objective()
    for p in pats:
        x = solver.NumVar(0, solver.infinity(), "")
        obj.SetCoefficient(x, types[p.bin_type].price_micros)
        for k, n in p.counts:
            if k in rows:
                rows[k].SetCoefficient(x, min(n, demand[k]))
    for row in rows.values():
        s = solver.NumVar(0, solver.infinity(), "")
        obj.SetCoefficient(s, penalty)
        row.SetCoefficient(s, 1)
    obj.SetMinimization()
    solver.Solve()
    return {k: max(0.0, row.dual_value()) for k, row in rows.items()}, obj.Value()


def pattern_bound(problem: Problem, patterns: list[Pattern], demand: Mapping[str, int]) -> int:
    """Return the Farley bound for ``demand`` from the master LP over ``patterns``."""
    demand = {k: v for k, v in demand.items() if v > 0}
    if not demand:
        return 0
    types = {t.id: t for t in problem.bin_types}
    duals, _ = _solve_master(problem, types, patterns, demand)
    return farley_bound(problem, duals, demand)
