"""Integer plans from the column-generation LP: diving.

``dive`` repeatedly solves the master LP over the given columns for the pods still to place
and buys bins of the columns it uses: ``floor(x_p)`` of every column used whole, else one of
every column used at least half (or of the most used one); when LP solves are slow, or with
``nearest``, every column rounded to nearest at once. It stops when every pod has a bin.

The LP knows nothing of zones: pods of zone-spread classes are first dealt to zones
(``zone_quotas``), zone-(anti-)affine classes keep per-zone counts the caller gives, and the
LP covers those per-zone rows with columns of that zone (copied across zones where needed).
Cutting the chosen columns to the pods left keeps every co-location carrier beside a target.
The caller validates the result like any other plan.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import NamedTuple

from solver.colgen import LPTimeout, Pattern, master_lp, needy_carriers
from solver.problem import (
    Affinity,
    AntiAffinity,
    BinType,
    CoLocation,
    NewBin,
    Placement,
    Problem,
    SpreadConstraint,
    TopologyKey,
)

_WHOLE = 1 - 1e-6
_UNUSED = 1e-9
_ROUND_UP = 0.5
_SLOW_LP = 0.1
"""Seconds per master LP from which the dive rounds all columns to nearest at once."""
_COPY_EVERY_UP_TO = 2000
"""Columns up to which the dive copies every zone-dealt column to the other zones."""


def dive(
    problem: Problem,
    columns: list[Pattern],
    demand: Mapping[str, int],
    *,
    deadline: float | None = None,
    zones: Mapping[str, Mapping[str, int]] | None = None,
    timed: bool = True,
    nearest: bool = False,
) -> list[NewBin] | None:
    """Return new bins placing ``demand`` (pods per class), or None when the LP cannot.

    Pods of classes under a zone spread are first dealt to zones (``zone_quotas``), and the
    LP covers those per-zone quotas with columns of that zone, so the plan keeps the spread.
    ``zones`` fixes the pods per zone of other classes (those under zone affinity or
    anti-affinity: the caller passes a valid plan's, ``zone_bound``). With ``timed``, slow
    LP solves make the dive round more at once; without, the result depends on the input
    only (reproducible runs). With ``nearest``, every solve rounds all columns to nearest.
    """
    types = {t.id: t for t in problem.bin_types}
    quotas = zone_quotas(problem, demand) | {k: dict(v) for k, v in (zones or {}).items()}

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
    covered = {(k, types[p.bin_type].zone) for p in columns for k, _ in p.counts if k in quotas}
    missing = {(k, z) for k, q in quotas.items() for z, n in q.items() if n > 0} - covered
    # copies of every zone-dealt column give the LP more room, but on many columns its
    # solves get slow: then only rows without any column get copies
    every = len(columns) <= _COPY_EVERY_UP_TO
    carriers = _Carriers(needy_carriers(problem), {c.key: c.topology for c in problem.classes})
    columns = columns + _zone_copies(problem, columns, set(quotas), missing, carriers, every=every)
    virtual = [
        Pattern(p.bin_type, tuple(sorted((row(k, types[p.bin_type].zone), n) for k, n in p.counts)))
        for p in columns
    ]
    bins = _dive_rows(problem, virtual, rows, deadline, timed=timed, nearest=nearest)
    if bins is None:
        return None
    return _cut(carriers, columns, virtual, bins, rows)


_SEP = "\x00"


class _Carriers(NamedTuple):
    """Hostname co-location carriers: the groups each needs a target of, each class's groups."""

    needs: Mapping[str, list[str]]
    topology: Mapping[str, frozenset[str]]


def _cut(
    carriers: _Carriers,
    columns: list[Pattern],
    virtual: list[Pattern],
    bins: list[int],
    rows: dict[str, int],
) -> list[NewBin]:
    """Return the chosen columns' bins with their pods cut to the rows still to place.

    Every bin with carriers of a hostname co-location first gets one target pod, so cutting
    never strands the carriers.
    """
    needs, topology = carriers
    taken: list[dict[str, int]] = [{} for _ in bins]
    for counts, i in zip(taken, bins, strict=True):
        wanted = {g for k, _ in columns[i].counts for g in needs.get(k, ())}
        for (k, _), (r, _) in zip(columns[i].counts, virtual[i].counts, strict=True):
            if wanted & topology[k] and k not in needs and rows.get(r, 0) > 0:
                wanted -= topology[k]
                rows[r] -= 1
                counts[k] = 1

    def fill(counts: dict[str, int], i: int) -> None:
        # carriers go last and only beside a target; a bin never exceeds its column
        present = {g for k in counts for g in topology[k]}
        pairs = sorted(
            zip(columns[i].counts, virtual[i].counts, strict=True), key=lambda kr: kr[0][0] in needs
        )
        for (k, n), (r, _) in pairs:
            if not all(g in present for g in needs.get(k, ())):
                continue
            take = min(n - counts.get(k, 0), rows.get(r, 0))
            if take > 0:
                rows[r] -= take
                counts[k] = counts.get(k, 0) + take
                present |= topology[k]

    for counts, i in zip(taken, bins, strict=True):
        fill(counts, i)
    if any(n > 0 for n in rows.values()):
        # pods cut from one bin may still fit another's column beside their targets
        for counts, i in zip(taken, bins, strict=True):
            fill(counts, i)
    return [
        NewBin(columns[i].bin_type, Placement(counts, columns[i].devices_for(counts)))
        for counts, i in zip(taken, bins, strict=True)
        if counts
    ]


def _zone_copies(
    problem: Problem,
    columns: list[Pattern],
    zoned: set[str],
    missing: set[tuple[str, str]],
    carriers: _Carriers,
    *,
    every: bool,
) -> list[Pattern]:
    """Return copies of the columns holding zone-dealt classes on the same offering elsewhere.

    Pricing works per offering group, and a group may sit in one zone only; without copies
    a class's quota in another zone (``missing``: class, zone) can have no column at all,
    and the dive cannot finish. A copy goes to each offering of the same instance type and
    pool in another zone (any capacity type), with the column's classes that allow it (a
    subset of a bin still fits); unless ``every``, only where it holds a missing row.
    """
    types = {t.id: t for t in problem.bin_types}
    allowed = {c.key: c.allowed_bin_types for c in problem.classes}
    siblings: dict[tuple[str, str], list[BinType]] = {}
    for t in problem.bin_types:
        siblings.setdefault((t.instance_type, t.pool), []).append(t)
    have = set(columns)
    out: list[Pattern] = []
    for p in columns:
        if not any(k in zoned for k, _ in p.counts):
            continue
        t = types[p.bin_type]
        for other in siblings[t.instance_type, t.pool]:
            if other.zone == t.zone or other.capacity != t.capacity or other.gpus != t.gpus:
                continue
            kept = _with_targets(
                tuple((k, n) for k, n in p.counts if other.id in allowed[k]), carriers
            )
            if not any((k, other.zone) in missing if not every else k in zoned for k, _ in kept):
                continue
            devices = p.devices_for(dict(kept))
            copy = Pattern(other.id, kept, tuple(sorted(devices.items())))
            if copy not in have:
                have.add(copy)
                out.append(copy)
    return out


def _dive_rows(
    problem: Problem,
    columns: list[Pattern],
    demand: dict[str, int],
    deadline: float | None,
    *,
    timed: bool,
    nearest: bool,
) -> list[int] | None:
    """Return column indices (repeated) whose bins cover ``demand`` (rows keyed by name)."""
    types = {t.id: t for t in problem.bin_types}
    remaining = {k: v for k, v in demand.items() if v > 0}
    chosen: list[int] = []
    while remaining:
        started = time.monotonic()
        try:
            _, _, xs = master_lp(problem, types, columns, remaining, deadline=deadline)
        except LPTimeout:
            return None
        if nearest or (timed and time.monotonic() - started > _SLOW_LP):
            # slow solves: round every column to nearest at once, then cover what is left
            take = [(i, math.floor(x + 0.5)) for i, x in enumerate(xs) if x >= _ROUND_UP]
        else:
            take = [(i, math.floor(x + 1e-6)) for i, x in enumerate(xs) if x >= _WHOLE]
        if not take:
            # round up every column the LP half-uses (at least its most used one)
            best = max(range(len(xs)), key=lambda i: (xs[i], -i), default=None)
            if best is None or xs[best] <= _UNUSED:
                return None
            take = [(i, 1) for i, x in enumerate(xs) if x >= _ROUND_UP] or [(best, 1)]
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


def _with_targets(
    counts: tuple[tuple[str, int], ...], carriers: _Carriers
) -> tuple[tuple[str, int], ...]:
    """Return ``counts`` without carriers whose hostname co-location lost its targets."""
    needs, targets = carriers
    while True:
        present = {g for k, _ in counts for g in targets[k]}
        kept = tuple((k, n) for k, n in counts if all(g in present for g in needs.get(k, ())))
        if kept == counts:
            return kept
        counts = kept


def zone_bound(problem: Problem) -> set[str]:
    """Return the classes whose pods per zone matter beyond spreads.

    They are the members of zone anti-affinities and single-zone affinities, and the carriers
    and targets of zone co-locations; the LP knows nothing of these rules.
    """
    ids = {
        t.id
        for t in problem.topology
        if isinstance(t, Affinity)
        or (isinstance(t, AntiAffinity | CoLocation) and t.key is TopologyKey.ZONE)
    }
    carriers = {
        k
        for t in problem.topology
        if isinstance(t, CoLocation) and t.key is TopologyKey.ZONE
        for k in t.carriers
    }
    return {c.key for c in problem.classes if c.topology & ids or c.key in carriers}


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
