"""Lower bounds on the cost of new capacity.

Both bounds take ``demand``: pods per class key that must go to new bins (for a plan, what it
places on new capacity) and bound the cost of *any* set of new bins that holds those pods under
the problem's rules. They relax the integer problem, so they can only be lower:

* ``fluid_bound``: an LP (GLOP) where each class may be split fractionally over offerings and
  bins are bought fractionally: ``min sum_t price_t y_t`` s.t. ``sum_t z_ct = d_c``,
  ``sum_c dem_cr z_ct <= cap_tr y_t`` per resource, GPU
  ``sum_c (1000 gpu_c + frac_c) z_ct <= 1000 cap_t,gpu y_t`` (a bin's whole GPUs plus its
  devices hosting fractions are at most its GPUs, and those devices hold at most 1000 each),
  and per hostname group ``sum_{c in g} z_ct <= cap_g y_t``. Every feasible packing gives a
  feasible point (y_t = number of bins of type t), so the LP value is a lower bound.
* ``farley_bound``: the column-generation bound, valid for any dual vector (see its docstring).

Floating point: values are scaled down by ``1e-6`` relative (and 1e-3 absolute) before taking
the ceiling (costs are integers), so GLOP's tolerances never lift a bound above a feasible cost.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping

from ortools.linear_solver import pywraplp

from solver.problem import GPU_MILLI, AntiAffinity, BinType, PodClass, Problem, SpreadConstraint
from solver.problem import TopologyKey as Key
from solver.weights import fits_one

_SAFETY = 1e-6
_UNIT = 1e-6
"""LP objectives in dollars (prices are micro-dollars) keep GLOP well scaled."""


def hostname_caps(problem: Problem) -> dict[str, int]:
    """Return the per-new-bin cap of matching pods for every hostname topology constraint."""
    caps: dict[str, int] = {}
    for t in problem.topology:
        if isinstance(t, SpreadConstraint) and t.key is Key.HOSTNAME:
            caps[t.id] = t.max_skew
        elif isinstance(t, AntiAffinity) and t.key is Key.HOSTNAME:
            caps[t.id] = 1
    return caps


def _rows(problem: Problem, classes: list[PodClass]) -> list[tuple[str, dict[str, int]]]:
    """Return resource rows: (name, coefficient per class); GPU row in milli-devices."""
    names = sorted({r for c in classes for r in c.demand} - {problem.gpu_resource})
    rows = [(r, {c.key: c.demand.get(r, 0) for c in classes}) for r in names]
    gpu = {
        c.key: GPU_MILLI * c.demand.get(problem.gpu_resource, 0) + c.gpu_fraction_milli
        for c in classes
    }
    rows.append((problem.gpu_resource, gpu))
    return rows


def _cap(problem: Problem, t: BinType, r: str) -> int:
    if r == problem.gpu_resource:
        return GPU_MILLI * t.capacity.get(r, 0)
    return t.capacity.get(r, 0)


def _floor(value: float) -> int:
    """Round an LP bound to a safe integer bound.

    Plans cost whole micro-dollars, so the ceiling of the tolerance-reduced LP value is still
    below every feasible cost.
    """
    return max(0, math.ceil(value * (1 - _SAFETY) - 1e-3))


def _aggregate(
    problem: Problem, demand: Mapping[str, int]
) -> tuple[list[tuple[PodClass, int]], list[tuple[BinType, list[int]]]]:
    """Return merged classes (representative, pods) and types (cheapest, member indices).

    Classes with equal demand, GPU fraction, hostname groups and allowed types are
    interchangeable in the fluid LP, so they merge; types with equal capacity, GPUs and
    members merge into their cheapest one. Both keep the LP value unchanged.
    """
    caps = hostname_caps(problem)
    merged: dict[tuple[object, ...], int] = {}
    reps: list[tuple[PodClass, int]] = []
    for c in problem.classes:
        n = demand.get(c.key, 0)
        if n <= 0:
            continue
        sig = (
            tuple(sorted((r, v) for r, v in c.demand.items() if v)),
            c.gpu_fraction_milli,
            tuple(sorted(g for g in c.topology if g in caps)),
            c.allowed_bin_types,
        )
        i = merged.get(sig)
        if i is None:
            merged[sig] = len(reps)
            reps.append((c, n))
        else:
            reps[i] = (reps[i][0], reps[i][1] + n)
    members: dict[str, list[int]] = {}
    by_type = {t.id: t for t in problem.bin_types}
    for i, (c, _) in enumerate(reps):
        for tid in c.allowed_bin_types:
            t = by_type.get(tid)
            if t is not None and fits_one(problem, c, t):
                members.setdefault(tid, []).append(i)
    groups: dict[tuple[object, ...], tuple[BinType, list[int]]] = {}
    for t in problem.bin_types:
        ms = members.get(t.id)
        if not ms:
            continue
        ms.sort()
        tsig = (tuple(sorted(t.capacity.items())), t.gpus, tuple(ms))
        old = groups.get(tsig)
        if old is None or (t.price_micros, t.id) < (old[0].price_micros, old[0].id):
            groups[tsig] = (t, ms)
    return reps, list(groups.values())


_FULL_LP_NONZEROS = 6_000
"""Fluid LPs up to this size are solved whole; larger ones by adding offerings as needed."""


def resource_bound(problem: Problem, demand: Mapping[str, int]) -> int:
    """A cheap lower bound in micro-dollars for placing ``demand`` (pods per class) on new bins.

    Any plan buys at least the total demand ``D_r`` of every resource ``r``, and a bin of type
    ``t`` supplies at most ``capacity_t[r]`` of it for ``price_t``; so every plan costs at least
    ``max_r D_r * min_t price_t / capacity_t[r]`` over the bin types some class may use. Weak,
    but computed in one pass, and never 0 when something must be bought: it stands in when the
    fluid LP runs out of time.
    """
    totals: dict[str, int] = {}
    usable: set[str] = set()
    for c in problem.classes:
        count = demand.get(c.key, 0)
        if count <= 0:
            continue
        usable |= c.allowed_bin_types
        for name, amount in c.demand.items():
            totals[name] = totals.get(name, 0) + amount * count
    best = 0
    for name, total in totals.items():
        if total <= 0:
            continue
        ratios = [
            b.price_micros / b.capacity[name]
            for b in problem.bin_types
            if b.id in usable and b.capacity.get(name, 0) > 0
        ]
        if ratios:
            best = max(best, math.floor(total * min(ratios)))
    return best


def fluid_bound(
    problem: Problem, demand: Mapping[str, int], *, deadline: float | None = None
) -> int:
    """Return the fluid LP lower bound in micro-dollars for placing ``demand`` on new bins.

    Classes with demand but no offering that can hold one pod are ignored (nothing can place
    them, so no plan does). The LP is built over merged classes and types (``_aggregate``).
    Small LPs are solved whole. Large ones are solved over a growing subset of offerings; the
    duals ``pi`` of the class rows of such a restricted LP are turned into a valid bound by the
    Farley argument (``farley_bound``): with ``v_t >= max sum_i pi_i a_i`` over the fractional
    contents ``a`` of one bin of type ``t`` (resources, hostname caps, ``a_i <= d_i``),
    ``theta = min(1, min_t price_t / v_t)`` makes ``theta pi`` dual feasible for the full LP,
    so ``theta sum_i pi_i d_i`` is a lower bound. Stops adding offerings at ``deadline``.
    """
    reps, types = _aggregate(problem, demand)
    if not reps or not types:
        return 0
    if sum(len(ms) for _, ms in types) > _FULL_LP_NONZEROS:
        types = _relax_types(types)
    value = _fluid_lp(problem, reps, types, deadline)
    return _floor(value / _UNIT) if value is not None else 0


def _relax_types(
    types: list[tuple[BinType, list[int]]], ratio: float = 1.1
) -> list[tuple[BinType, list[int]]]:
    """Merge offerings of similar size into relaxed ones (a smaller LP, still a lower bound).

    Offerings sorted by price are grouped while every capacity of the group is within
    ``ratio`` of its first member's; a group becomes one offering with the lowest price, the
    largest capacity per resource, the most GPUs and every member class. Any bin of a member
    fits the relaxed offering at no higher price, so the relaxed LP's value is not higher.
    """
    ordered = sorted(types, key=lambda x: (x[0].price_micros, x[0].id))
    out: list[tuple[BinType, list[int]]] = []
    group: list[tuple[BinType, list[int]]] = []

    def close() -> None:
        first = group[0][0]
        cap: dict[str, int] = {}
        for t, _ in group:
            for r, v in t.capacity.items():
                cap[r] = max(cap.get(r, 0), v)
        ms = sorted({i for _, m in group for i in m})
        gpus = max(t.gpus for t, _ in group)
        out.append((dataclasses.replace(first, capacity=cap, gpus=gpus), ms))

    for t, ms in ordered:
        if group:
            first = group[0][0]
            near = t.gpus == first.gpus and all(
                v <= ratio * first.capacity.get(r, 0) for r, v in t.capacity.items()
            )
            if not near or t.pool != first.pool:
                close()
                group = []
        group.append((t, ms))
    if group:
        close()
    return out


def _fluid_lp(  # noqa: C901, PLR0912 - one LP
    problem: Problem,
    reps: list[tuple[PodClass, int]],
    types: list[tuple[BinType, list[int]]],
    deadline: float | None,
) -> float | None:
    """Solve the fluid LP over ``types``; return its value in dollars (None: not solved)."""
    classes = [c for c, _ in reps]
    solver = pywraplp.Solver.CreateSolver("GLOP")
    caps = hostname_caps(problem)
    rows = [(r, [coef[c.key] for c in classes]) for r, coef in _rows(problem, classes)]
    obj = solver.Objective()
    per_class: list[list[pywraplp.Variable]] = [[] for _ in reps]
    inf = solver.infinity()
    for t, ms in types:
        y = solver.NumVar(0, inf, "")
        obj.SetCoefficient(y, t.price_micros * _UNIT)
        zs = [solver.NumVar(0, inf, "") for _ in ms]
        for i, z in zip(ms, zs, strict=True):
            per_class[i].append(z)
        for r, coef in rows:
            if not any(coef[i] for i in ms):
                continue
            cap = _cap(problem, t, r)
            ct = solver.Constraint(-inf, 0)
            ct.SetCoefficient(y, -1 if cap else 0)
            for i, z in zip(ms, zs, strict=True):
                if coef[i]:
                    ct.SetCoefficient(z, coef[i] / cap if cap else 1)
        for gid, cap in caps.items():
            group = [z for i, z in zip(ms, zs, strict=True) if gid in classes[i].topology]
            if group:
                ct = solver.Constraint(-inf, 0)
                ct.SetCoefficient(y, -cap)
                for z in group:
                    ct.SetCoefficient(z, 1)
    for (_, n), vs in zip(reps, per_class, strict=True):
        ct = solver.Constraint(n if vs else 0, inf)
        for v in vs:
            ct.SetCoefficient(v, 1)
    obj.SetMinimization()
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        solver.SetTimeLimit(max(1, int(left * 1000)))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return float(obj.Value())


def knapsack_upper(
    problem: Problem, t: BinType, duals: Mapping[str, float], demand: Mapping[str, int]
) -> float:
    """Return an upper bound on ``max sum_c duals_c a_c`` over patterns ``a`` of one bin of ``t``.

    It is the LP relaxation of the pattern knapsack (resources, GPU row, hostname caps,
    ``0 <= a_c <= demand_c``), so it is >= the value of every integer pattern.
    """
    classes = [
        c
        for c in problem.classes
        if duals.get(c.key, 0.0) > 0
        and demand.get(c.key, 0) > 0
        and t.id in c.allowed_bin_types
        and fits_one(problem, c, t)
    ]
    if not classes:
        return 0.0
    solver = pywraplp.Solver.CreateSolver("GLOP")
    a = {c.key: solver.NumVar(0, demand[c.key], "") for c in classes}
    for r, coef in _rows(problem, classes):
        ct = solver.Constraint(-solver.infinity(), _cap(problem, t, r))
        for c in classes:
            ct.SetCoefficient(a[c.key], coef[c.key])
    for gid, cap in hostname_caps(problem).items():
        ct = solver.Constraint(-solver.infinity(), cap)
        for c in classes:
            if gid in c.topology:
                ct.SetCoefficient(a[c.key], 1)
    obj = solver.Objective()
    for c in classes:
        obj.SetCoefficient(a[c.key], duals[c.key])
    obj.SetMaximization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return math.inf
    return float(obj.Value()) * (1 + _SAFETY) + 1e-6


def fast_knapsack_upper(
    problem: Problem, t: BinType, duals: Mapping[str, float], demand: Mapping[str, int]
) -> float:
    """Return a cheap upper bound on the best pattern value of one bin of ``t``.

    Each single resource row (and each hostname cap) alone is a relaxation of the pattern
    knapsack; its LP optimum is a fractional knapsack solved greedily by value density. The
    minimum over the rows is therefore >= ``knapsack_upper`` >= every integer pattern's value.
    """
    classes = [
        c
        for c in problem.classes
        if duals.get(c.key, 0.0) > 0
        and demand.get(c.key, 0) > 0
        and t.id in c.allowed_bin_types
        and fits_one(problem, c, t)
    ]
    if not classes:
        return 0.0
    best = sum(duals[c.key] * demand[c.key] for c in classes)
    rows = [(coef, _cap(problem, t, r)) for r, coef in _rows(problem, classes)]
    for gid, cap in hostname_caps(problem).items():
        rows.append(({c.key: (1 if gid in c.topology else 0) for c in classes}, cap))
    for coef, cap in rows:
        free = sum(duals[c.key] * demand[c.key] for c in classes if coef[c.key] == 0)
        if free >= best:
            continue
        dense = sorted(
            (c for c in classes if coef[c.key] > 0), key=lambda c: -duals[c.key] / coef[c.key]
        )
        left, value = float(cap), free
        for c in dense:
            take = min(float(demand[c.key]), left / coef[c.key])
            value += take * duals[c.key]
            left -= take * coef[c.key]
            if left <= 0:
                break
        best = min(best, value)
    return best * (1 + _SAFETY) + 1e-6


def farley_bound(
    problem: Problem,
    duals: Mapping[str, float],
    demand: Mapping[str, int],
    *,
    exact: int = 6,
) -> int:
    """Return the Farley (Lagrangian) bound of the pattern LP for any non-negative duals.

    Proof. The pattern LP is ``min sum_p c_p x_p`` s.t. ``sum_p a_pc x_p >= d_c``, ``x >= 0``,
    over every feasible pattern ``p`` (one bin of type ``t(p)`` holding ``a_pc <= d_c`` pods;
    capping at ``d_c`` loses no integer solution, so its optimum is still a lower bound of the
    integer plan). Its dual is ``max sum_c pi_c d_c`` s.t. ``sum_c pi_c a_pc <= c_p`` for all p,
    ``pi >= 0``. Given any ``pi >= 0`` (e.g. the duals of a restricted master stopped early),
    let ``v_t >= max_{p of type t} sum_c pi_c a_pc`` (``knapsack_upper``) and
    ``theta = min(1, min_t c_t / v_t)``. ``v_t`` is the cheap row-wise bound
    (``fast_knapsack_upper``) for every type, refined by the exact LP relaxation
    (``knapsack_upper``) for the ``exact`` types with the smallest ratios. Then for every pattern
    ``sum_c theta pi_c a_pc <= theta v_t <= c_t``, so ``theta pi`` is dual feasible and by weak
    duality ``theta sum_c pi_c d_c`` is at most the LP optimum, hence at most the cost of any
    set of new bins placing ``d``. When the master has converged, ``theta = 1`` and the bound
    equals the LP value.
    """
    pi = {k: max(0.0, v) for k, v in duals.items()}
    total = sum(pi.get(k, 0.0) * d for k, d in demand.items())
    if total <= 0:
        return 0
    ratios: list[tuple[float, int]] = []
    seen: dict[tuple[object, ...], float] = {}
    members = _members(problem)
    for i, t in enumerate(problem.bin_types):
        sig = (tuple(sorted(t.capacity.items())), t.gpus, members.get(t.id, frozenset()))
        v = seen.get(sig)
        if v is None:
            v = seen[sig] = fast_knapsack_upper(problem, t, pi, demand)
        if v > 0:
            ratios.append((t.price_micros / v, i))
    ratios.sort()
    theta = 1.0
    for n, (ratio, i) in enumerate(ratios):
        if ratio >= theta:
            break
        if n >= exact:  # every remaining fast ratio is a valid (weaker) bound
            theta = min(theta, ratio)
            break
        t = problem.bin_types[i]
        v = knapsack_upper(problem, t, pi, demand)
        if v > 0:
            theta = min(theta, t.price_micros / v)
    return _floor(theta * total)


def _members(problem: Problem) -> dict[str, frozenset[str]]:
    """Return the keys of the classes allowed on each bin type id."""
    out: dict[str, set[str]] = {}
    for c in problem.classes:
        for tid in c.allowed_bin_types:
            out.setdefault(tid, set()).add(c.key)
    return {tid: frozenset(ks) for tid, ks in out.items()}
