"""Integer plans from the column-generation LP: diving, then zone balancing.

``dive`` repeatedly solves the master LP over the generated columns for the pods still to
place, buys ``floor(x_p)`` bins of every column the LP uses whole (or one bin of its most used
column when none is), and stops when every pod has a bin. Each LP is small (columns x
classes), so a dive takes milliseconds; on cutting-stock-like problems it lands within a bin
or two of the LP value, which CP-SAT over the same columns often fails to reach in seconds.

The LP knows nothing of zones, so ``balance_zones`` then moves each bin to the zone (among
offerings that price and hold identically, ``colgen.type_groups``) where the zone spread
constraints it touches are least loaded. The caller validates the result like any other plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from solver.colgen import LPTimeout, Pattern, master_lp
from solver.problem import (
    NewBin,
    Placement,
    Problem,
    SpreadConstraint,
    TopologyKey,
)

_WHOLE = 1 - 1e-6
_UNUSED = 1e-9


def dive(
    problem: Problem,
    columns: list[Pattern],
    demand: Mapping[str, int],
    *,
    deadline: float | None = None,
) -> list[NewBin] | None:
    """Return new bins placing ``demand`` (pods per class), or None when the LP cannot.

    Pods of classes under a zone spread are first dealt to zones (``zone_quotas``), and the
    LP covers those per-zone quotas with columns of that zone, so the plan keeps the spread.
    """
    types = {t.id: t for t in problem.bin_types}
    quotas = zone_quotas(problem, demand)

    def row(key: str, zone: str) -> str:
        return f"{key}{_SEP}{zone}" if key in quotas else key

    rows: dict[str, int] = {}
    for k, n in demand.items():
        if n <= 0:
            continue
        if k in quotas:
            rows.update({row(k, z): q for z, q in quotas[k].items() if q > 0})
        else:
            rows[k] = n
    virtual = [
        Pattern(p.bin_type, tuple(sorted((row(k, types[p.bin_type].zone), n) for k, n in p.counts)))
        for p in columns
    ]
    bins = _dive_rows(problem, virtual, rows, deadline)
    if bins is None:
        return None
    new_bins = []
    for i in bins:
        p, v = columns[i], virtual[i]
        counts: dict[str, int] = {}
        for (k, n), (r, _) in zip(p.counts, v.counts, strict=True):
            take = min(n, rows.get(r, 0))
            if take > 0:
                rows[r] -= take
                counts[k] = take
        if counts:
            new_bins.append(NewBin(p.bin_type, Placement(counts, p.devices_for(counts))))
    return new_bins


_SEP = "\x00"


def _dive_rows(
    problem: Problem, columns: list[Pattern], demand: dict[str, int], deadline: float | None
) -> list[int] | None:
    """Return column indices (repeated) whose bins cover ``demand`` (rows keyed by name)."""
    types = {t.id: t for t in problem.bin_types}
    remaining = {k: v for k, v in demand.items() if v > 0}
    chosen: list[int] = []
    while remaining:
        try:
            _, _, xs = master_lp(problem, types, columns, remaining, deadline=deadline)
        except LPTimeout:
            return None
        take = [(i, math.floor(x + 1e-6)) for i, x in enumerate(xs) if x >= _WHOLE]
        if not take:
            best = max(range(len(xs)), key=lambda i: (xs[i], -i), default=None)
            if best is None or xs[best] <= _UNUSED:
                return None
            take = [(best, 1)]
        progressed = False
        for i, n in take:
            for _ in range(n):
                useful = {k: min(c, remaining[k]) for k, c in columns[i].counts if k in remaining}
                if not useful:
                    break
                chosen.append(i)
                progressed = True
                for k, v in useful.items():
                    remaining[k] -= v
                    if remaining[k] <= 0:
                        remaining.pop(k)
        if not progressed:
            return None
    return chosen


def zone_quotas(problem: Problem, demand: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """Deal the pods of zone-spread classes to zones, always to the least loaded one.

    Loads start from the spread's existing counts; a class under several spreads goes where
    the highest of their loads is lowest. Classes are dealt in key order (deterministic).
    """
    spreads = {
        t.id: t
        for t in problem.topology
        if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE
    }
    if not spreads:
        return {}
    zones_of = {t.id: t.zone for t in problem.bin_types}
    load: dict[tuple[str, str], int] = {}
    for t in spreads.values():
        for z in t.zones:
            load[t.id, z] = t.existing.get(z, 0)
    out: dict[str, dict[str, int]] = {}
    for c in sorted(problem.classes, key=lambda c: c.key):
        n = demand.get(c.key, 0)
        gs = sorted(g for g in c.topology if g in spreads)
        if n <= 0 or not gs:
            continue
        zones = {zones_of[t] for t in c.allowed_bin_types if t in zones_of}
        for g in gs:
            zones &= set(spreads[g].zones)
        if not zones:
            continue
        quota = dict.fromkeys(sorted(zones), 0)
        for _ in range(n):
            z = min(quota, key=lambda z: (max(load[g, z] for g in gs), z))
            quota[z] += 1
            for g in gs:
                load[g, z] += 1
        out[c.key] = quota
    return out
