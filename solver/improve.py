"""Local search on a plan's new bins: empty bins into others, consolidate sets.

Rounding an LP or packing greedily leaves room on many bins. Six moves turn that room into
savings, the way Karpenter's consolidation would after the fact, but before anything is bought:

* **empty**: move every pod of a bin onto other new bins of its zone and pool, then drop it;
* **consolidate**: replace a set of bins of one zone and pool by one bin of an offering
  cheaper than all of them (e.g. seven one-GPU nodes and a small one by one eight-GPU node);
  only where bins times offerings of the domain stay small (``_CONSOLIDATE_WORK``);
* **empty into larger offerings**: move every pod of a bin onto others of its pool (of its
  zone too for pods under zonal topology or in gangs), moving those to larger offerings of
  their zones where they lack room, when the extra price is less than the dropped bin's.
  This is what packs pods that must keep apart (hostname anti-affinity and spread), where
  no two bins may merge: the others' pods join them instead;
* **swap**: trade a pod of a bin for a smaller one of another bin of its zone and pool that
  has room for it, when the first bin then fits a cheaper offering (``_Swaps``);
* **shed**: move pods of a bin one by one into the room other bins of its zone and pool have
  left, until it fits a cheaper offering (``_Shed``);
* **rebalance** (with ``improve``'s ``rebalance``): move or trade pods between bins of a zone
  and pool that keep their offerings, where that lowers the bins' fluid cost
  (``solver.rebalance``), so that bins filling one resource and idling another fill evenly
  and the moves above can shrink them (``_Rebalance``).

All keep every bin in its zone and pool, and pods in their pool, so pool weights stay as they
were, and pods under zonal rules (spreads, affinities, co-location on zone; gang members) in
their zone, so zonal topology and gangs stay valid; per bin they check allowed offerings
(which also carry each pod's zones), resources, GPU devices (a fraction goes to
a device with room; a fresh device takes one GPU; consolidated devices keep their pods;
fractions never move with the third move), hostname caps (spread, anti-affinity) and
hostname co-location (a carrier moves only to a bin holding a target; consolidation keeps
bins' pods together; a one-bin group, hostname affinity to its own pods, never leaves its
bin but by consolidation), and the moves that change offerings check ``max_count`` and pool
limits. Existing bins are left as they are. ``improve`` returns the plan itself when nothing
saves money; callers validate the result like any other plan.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from solver.bounds import hostname_caps
from solver.colgen import needy_carriers
from solver.problem import (
    GPU_MILLI,
    Affinity,
    BinType,
    CoLocation,
    NewBin,
    Placement,
    PodClass,
    Problem,
    Solution,
    SpreadConstraint,
    TopologyKey,
)
from solver.rebalance import FluidCost
from solver.rounding import zone_bound


def _covers(have: npt.NDArray[np.int64], want: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Return ``(have >= want).all(axis=-1)`` for (1, offerings, R) against (n, 1, R).

    numpy's reduction over the short resource axis of the (n, offerings, R) comparison costs
    several times the comparisons themselves (16 x 256 x 3: 96 us against 11 us), and the
    growing and swap moves make thousands of such checks; so one resource at a time.
    """
    if not have.shape[-1]:
        return np.ones(np.broadcast_shapes(have.shape[:-1], want.shape[:-1]), dtype=np.bool_)
    ok = have[..., 0] >= want[..., 0]
    for r in range(1, have.shape[-1]):
        ok &= have[..., r] >= want[..., r]
    return ok


@dataclass(slots=True)
class _Bin:
    """One new bin while it changes: its offering, pods and what they use."""

    t: BinType
    counts: Counter[str]
    used: Counter[str]
    group: Counter[str]
    """Pods per hostname group (caps and co-location targets)."""
    devices: list[dict[str, int]] = field(default_factory=list)
    """Per GPU device holding fractions: pods per fractional class."""
    load: list[int] = field(default_factory=list)
    """Milli-GPU used per device (parallel to ``devices``)."""
    alive: bool = True

    def npods(self) -> int:
        """Return how many pods the bin holds."""
        return sum(self.counts.values())

    def fill(self) -> float:
        """Return the largest share of a resource the pods use (0 = empty)."""
        return max(
            (v / self.t.capacity[r] for r, v in self.used.items() if self.t.capacity.get(r)),
            default=0.0,
        )


class _Rules:
    """What a bin may hold: the per-bin rules of ``validate`` for new bins."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.gpu = problem.gpu_resource
        self.classes = {c.key: c for c in problem.classes}
        self.caps = hostname_caps(problem)
        self.needs = needy_carriers(problem)
        hostname_colocation = {
            t.id for t in problem.topology if isinstance(t, CoLocation) and t.key.name == "HOSTNAME"
        }
        # hostname affinity to its own pods: the whole group stays on its one bin
        self.one_bin = frozenset(
            t.id
            for t in problem.topology
            if isinstance(t, Affinity) and t.key is TopologyKey.HOSTNAME
        )
        self.tracked = set(self.caps) | hostname_colocation | self.one_bin
        self.targets = self.tracked - set(self.caps) - self.one_bin
        """Hostname co-location groups: a bin's carriers need one of their pods."""
        self._groups: dict[str, list[str]] = {}
        self.types = {t.id: t for t in problem.bin_types}
        self.zone_bound = _zone_bound(problem)

    def movable(self, key: str) -> bool:
        """Return whether pods of ``key`` may move one by one (no fraction, no one-bin group)."""
        c = self.classes[key]
        return not c.gpu_fraction_milli and not (c.topology & self.one_bin)

    def may_leave(self, b: _Bin, key: str) -> bool:
        """Return whether one pod of ``key`` may leave ``b`` (no carrier loses its target)."""
        for g in self.classes[key].topology & self.targets:
            if b.group[g] <= 1 and any(g in self.needs.get(k, ()) for k in b.counts):
                return False
        return True

    def pinned(self, b: _Bin) -> bool:
        """Return whether ``b`` holds a one-bin group (its pods cannot leave one by one)."""
        return any(b.group[g] for g in self.one_bin)

    def groups(self, c: PodClass) -> list[str]:
        """The groups of ``c`` a bin tracks (worked out once per class)."""
        found = self._groups.get(c.key)
        if found is None:
            found = self._groups[c.key] = [g for g in c.topology if g in self.tracked]
        return found

    def add(self, b: _Bin, c: PodClass, n: int) -> int:
        """Add up to ``n`` pods of ``c`` to ``b``; return how many went."""
        if n <= 0 or b.t.id not in c.allowed_bin_types:
            return 0
        if any(b.group[g] == 0 for g in self.needs.get(c.key, ())):
            return 0
        if any(b.group[g] == 0 for g in c.topology if g in self.one_bin):
            return 0  # a one-bin group's pods only join their group (all of it is on one bin)
        room = n
        for g in self.groups(c):
            if g in self.caps:
                room = min(room, self.caps[g] - b.group[g])
        if c.gpu_fraction_milli:
            return self._add_fractions(b, c, room)
        for r, v in c.demand.items():
            if v > 0:
                room = min(room, (b.t.capacity.get(r, 0) - b.used[r]) // v)
        if room <= 0:
            return 0
        self._count(b, c, room)
        return room

    def _add_fractions(self, b: _Bin, c: PodClass, room: int) -> int:
        added = 0
        size = c.gpu_fraction_milli
        while added < room:
            if any(b.used[r] + v > b.t.capacity.get(r, 0) for r, v in c.demand.items() if v):
                break
            d = next((i for i, u in enumerate(b.load) if u + size <= GPU_MILLI), None)
            if d is None:
                if len(b.load) >= b.t.gpus or b.used[self.gpu] + 1 > b.t.capacity.get(self.gpu, 0):
                    break
                b.load.append(0)
                b.devices.append({})
                b.used[self.gpu] += 1
                d = len(b.load) - 1
            b.load[d] += size
            b.devices[d][c.key] = b.devices[d].get(c.key, 0) + 1
            self._count(b, c, 1)
            added += 1
        return added

    def put_back(self, b: _Bin, c: PodClass, n: int) -> None:
        """Return ``n`` pods of ``c`` to ``b``, where they were (no rule to check)."""
        self._count(b, c, n)

    def _count(self, b: _Bin, c: PodClass, n: int) -> None:
        b.counts[c.key] += n
        for r, v in c.demand.items():
            b.used[r] += v * n
        for g in self.groups(c):
            b.group[g] += n

    def load(self, nb: NewBin) -> _Bin:
        """Return the working copy of a plan's new bin."""
        t = self.types[nb.bin_type]
        b = _Bin(t, Counter(), Counter(), Counter())
        for k, n in nb.placement.counts.items():
            if n <= 0:
                continue
            c = self.classes[k]
            b.counts[k] += n
            for r, v in c.demand.items():
                b.used[r] += v * n
            for g in self.groups(c):
                b.group[g] += n
        width = max((len(v) for v in nb.placement.gpu_devices.values()), default=0)
        per: list[dict[str, int]] = [{} for _ in range(width)]
        for k, xs in nb.placement.gpu_devices.items():
            for i, x in enumerate(xs):
                if x:
                    per[i][k] = x
        for contents in per:
            if contents:
                b.devices.append(contents)
                b.load.append(
                    sum(self.classes[k].gpu_fraction_milli * x for k, x in contents.items())
                )
                b.used[self.gpu] += 1
        return b

    def remove(self, b: _Bin, key: str, n: int, device_counts: list[int] | None) -> None:
        """Take ``n`` pods of ``key`` off ``b`` (from the devices in ``device_counts``)."""
        c = self.classes[key]
        b.counts[key] -= n
        if not b.counts[key]:
            del b.counts[key]
        for r, v in c.demand.items():
            b.used[r] -= v * n
        for g in self.groups(c):
            b.group[g] -= n
        for d, x in enumerate(device_counts or ()):
            if not x:
                continue
            b.devices[d][key] -= x
            if not b.devices[d][key]:
                del b.devices[d][key]
            b.load[d] -= x * c.gpu_fraction_milli
        for d in reversed(range(len(b.load))):
            if b.load[d] == 0:
                del b.load[d]
                del b.devices[d]
                b.used[self.gpu] -= 1


def _placement(b: _Bin) -> NewBin:
    per: dict[str, list[int]] = {}
    for d, contents in enumerate(b.devices):
        for k, x in contents.items():
            per.setdefault(k, [0] * len(b.devices))[d] = x
    return NewBin(
        b.t.id,
        Placement(
            {k: n for k, n in b.counts.items() if n > 0},
            {k: tuple(v[: max(i for i, x in enumerate(v) if x) + 1]) for k, v in per.items()},
        ),
    )


_PAIR = 2


class _Domain:
    """The bins of one pool and zone, with their free room per resource as an array."""

    def __init__(
        self,
        rules: _Rules,
        bins: list[_Bin],
        names: list[str],
        offerings: list[BinType] | None = None,
        *,
        growing: bool = False,
    ) -> None:
        # fullest first: they take moved pods first, so the room left stays in few bins
        self.bins = sorted(bins, key=lambda b: -b.fill())
        self.offerings = _Offerings(offerings or [], names)
        self.growth = _Growth(rules, self.offerings, names, self.bins) if growing else None
        self.failed: dict[tuple[frozenset[tuple[str, int]], int], int] = {}
        self.emptied = 0
        """Bins emptied by ``empty_growing``; ``failed`` maps bins alike to that count then."""
        self.rules = rules
        self.names = names
        self.capped = sorted(rules.caps)
        self.targets = sorted({g for gs in rules.needs.values() for g in gs})
        # a row's columns: resources, hostname caps, co-location targets, a fraction; bins
        # and pods count in a few groups of many, so rows start from these and change there
        width = len(names) + len(self.capped) + len(self.targets) + 1
        first_cap, first_target = len(names), len(names) + len(self.capped)
        self._cap_at = {g: first_cap + j for j, g in enumerate(self.capped)}
        self._target_at = {g: first_target + j for j, g in enumerate(self.targets)}
        self._empty_row = np.zeros(width, dtype=np.int64)
        self._empty_row[first_cap:first_target] = [rules.caps[g] for g in self.capped]
        self._no_need = np.zeros(width, dtype=np.int64)
        # column-major: the moves read a column of every bin (the room for one pod's ask)
        self.free = np.asfortranarray(
            np.array([self._row(b) for b in self.bins], dtype=np.int64).reshape(
                len(self.bins), width
            )
        )
        # columns where some bin's room may be below 0 (a superset: a column never leaves it);
        # elsewhere a pod asking nothing of a column fits every bin there
        self.maybe_short: npt.NDArray[np.bool_] = np.asarray((self.free < 0).any(axis=0))
        self.alive = np.ones(len(self.bins), dtype=np.bool_)
        zone_ids = sorted({b.t.zone for b in self.bins})
        self.zones = np.array([zone_ids.index(b.t.zone) for b in self.bins], dtype=np.int64)
        ids = sorted({b.t.id for b in self.bins})
        self.type_index = np.array([ids.index(b.t.id) for b in self.bins], dtype=np.int64)
        self.type_ids = ids
        self.allowed: dict[frozenset[str], npt.NDArray[np.bool_]] = {}

    def _allowed(self, c: PodClass) -> npt.NDArray[np.bool_]:
        mask = self.allowed.get(c.allowed_bin_types)
        if mask is None:
            per_type = np.array([t in c.allowed_bin_types for t in self.type_ids], dtype=np.bool_)
            mask = self.allowed[c.allowed_bin_types] = per_type[self.type_index]
        return mask

    def retype(self, j: int, t: BinType) -> None:
        """Move bin ``j`` to offering ``t`` (its pods stay)."""
        self.bins[j].t = t
        if t.id not in self.type_ids:
            self.type_ids.append(t.id)
        self.type_index[j] = self.type_ids.index(t.id)
        self.allowed.clear()

    def _row(self, b: _Bin) -> npt.NDArray[np.int64]:
        """Return what ``b`` can still take (resources, hostname caps, targets, a fraction)."""
        fresh = len(b.load) < b.t.gpus and b.used[self.rules.gpu] < b.t.capacity.get(
            self.rules.gpu, 0
        )
        row = self._empty_row.copy()
        capacity = b.t.capacity
        for j, r in enumerate(self.names):
            row[j] = capacity.get(r, 0) - b.used[r]
        for g, n in b.group.items():
            if (col := self._cap_at.get(g)) is not None:
                row[col] -= n
            if (col := self._target_at.get(g)) is not None:
                row[col] += n
        row[-1] = GPU_MILLI if fresh else GPU_MILLI - min(b.load, default=GPU_MILLI)
        return row

    def _need(self, c: PodClass) -> npt.NDArray[np.int64]:
        """Return what one pod of ``c`` takes (a carrier: one target already there)."""
        need = self._no_need.copy()
        for j, r in enumerate(self.names):
            need[j] = c.demand.get(r, 0)
        for g in c.topology:
            if (col := self._cap_at.get(g)) is not None:
                need[col] = 1
        for g in self.rules.needs.get(c.key, ()):
            if (col := self._target_at.get(g)) is not None:
                need[col] = 1
        need[-1] = c.gpu_fraction_milli
        return need

    def refresh(self, i: int) -> None:
        """Recompute bin ``i``'s rows (room, growth) after its pods or offering changed."""
        row = self._row(self.bins[i])
        self.free[i] = row
        self.maybe_short |= row < 0
        if self.growth is not None:
            self.growth.refresh(i, self.bins[i])

    def takers(self, c: PodClass, i: int) -> list[int]:
        """Return the live bins but ``i`` whose room, caps and offering take a pod of ``c``."""
        need = self._need(c)
        fits = self.alive & self._allowed(c)
        # only the columns the pod asks something of, or where room may be short of 0: a row
        # has a column per hostname group and target, and a pod counts against few of them
        for col in ((need != 0) | self.maybe_short).nonzero()[0].tolist():
            fits &= self.free[:, col] >= need[col]
        fits[i] = False
        found: list[int] = fits.nonzero()[0].tolist()
        return found

    def empty(self, i: int) -> bool:
        """Move every pod of bin ``i`` onto the others (fullest first); undo all if one stays."""
        rules, donor = self.rules, self.bins[i]
        if rules.pinned(donor):
            return False
        moves: list[_Move] = []
        # carriers last, so their targets may already have arrived
        for key, n in sorted(donor.counts.items(), key=lambda kn: (kn[0] in rules.needs, kn[0])):
            c = rules.classes[key]
            left = n
            for j in self.takers(c, i):
                b = self.bins[j]
                before = [d.get(key, 0) for d in b.devices]
                got = rules.add(b, c, left)
                if not got:
                    continue
                diff = None
                if c.gpu_fraction_milli:
                    after = [d.get(key, 0) for d in b.devices]
                    diff = [x - (before[d] if d < len(before) else 0) for d, x in enumerate(after)]
                moves.append(_Move(j, key, got, diff))
                self.refresh(j)
                left -= got
                if not left:
                    break
            if left:
                for m in reversed(moves):
                    rules.remove(self.bins[m.target], m.key, m.count, m.devices)
                    self.refresh(m.target)
                return False
        donor.alive = False
        self.alive[i] = False
        return True

    def empty_growing(self, i: int, ledger: _Ledger) -> bool:
        """Move every pod of bin ``i`` onto others, moving those to larger offerings as needed.

        Each pod goes to the bin whose cheapest offering holding it with everything already
        there costs least more (``_Growth``); the moves stand when those extras together
        cost less than bin ``i``, and pool limits and ``max_count`` allow the new offerings.
        """
        rules, donor = self.rules, self.bins[i]
        if self.growth is None or not self.alive[i] or donor.npods() > _GROW_DONOR_PODS:
            return False
        if rules.pinned(donor) or any(rules.classes[k].gpu_fraction_milli for k in donor.counts):
            return False  # fractions keep to the plain moves (device by device)
        # a bin like one that did not empty since the last change will not either (almost:
        # the other one is now a place to go), and GPU plans hold many such bins
        alike = (frozenset(donor.counts.items()), donor.t.price_micros)
        if self.failed.get(alike) == self.emptied:
            return False
        self.failed[alike] = self.emptied
        moves: list[_Move] = []
        retyped: dict[int, BinType] = {}
        extra = 0
        # carriers last, so their targets may already have arrived
        for key, n in sorted(donor.counts.items(), key=lambda kn: (kn[0] in rules.needs, kn[0])):
            spent = self._place_growing(i, rules.classes[key], n, (moves, retyped))
            extra += spent if spent is not None else donor.t.price_micros
            if extra >= donor.t.price_micros:
                return self._undo(moves, retyped)
        changes = [(t, self.bins[j].t) for j, t in retyped.items() if t.id != self.bins[j].t.id]
        if not ledger.retype(changes):
            return self._undo(moves, retyped)
        ledger.drop(donor.t)
        self.emptied += 1
        donor.alive = False
        self.alive[i] = False
        return True

    def _place_growing(
        self, i: int, c: PodClass, n: int, done: tuple[list[_Move], dict[int, BinType]]
    ) -> int | None:
        """Place ``n`` pods of ``c`` off bin ``i``; return the extra price (None: no room)."""
        assert self.growth is not None  # noqa: S101 - empty_growing checked
        moves, retyped = done
        k = len(self.names)
        need = self._need(c)
        extra = 0
        here = self.zones == self.zones[i] if c.key in self.rules.zone_bound else True
        # hostname caps and co-location targets the pod counts against
        rules = (k + need[k:-1].nonzero()[0]).tolist()
        while n:
            fits = self.alive & here
            for col in rules:
                fits &= self.free[:, col] >= need[col]
            fits[i] = False
            found = self.growth.cheapest(c, fits.nonzero()[0], self.free[:, :k])
            if found is None:
                return None
            j, t = found
            b = self.bins[j]
            if t is not None and t.id != b.t.id:
                retyped.setdefault(j, b.t)
                extra += t.price_micros - b.t.price_micros
                self.retype(j, t)
            # as many as fit where one fits as it is; one where the bin grew for it
            got = self.rules.add(b, c, n if t is None else 1)
            if got:
                moves.append(_Move(j, c.key, got, None))
                n -= got
            self.refresh(j)
            if not got:
                return None
        return extra

    def _undo(self, moves: list[_Move], retyped: dict[int, BinType]) -> bool:
        """Take back ``moves`` and return the bins in ``retyped`` to their offerings."""
        for m in reversed(moves):
            self.rules.remove(self.bins[m.target], m.key, m.count, m.devices)
        for j, t in retyped.items():
            self.retype(j, t)
        for j in {m.target for m in moves} | set(retyped):
            self.refresh(j)
        return False


class _Offerings:
    """A domain's offerings, cheapest first, as arrays over the resources ``names``."""

    def __init__(self, offerings: list[BinType], names: list[str]) -> None:
        self.list = offerings
        self.cap = np.array(
            [[t.capacity.get(r, 0) for r in names] for t in offerings], dtype=np.int64
        ).reshape(len(offerings), len(names))
        self.gpus = np.array([t.gpus for t in offerings], dtype=np.int64)
        self.price = np.array([t.price_micros for t in offerings], dtype=np.int64)
        self.in_zone = {
            z: np.fromiter((t.zone == z for t in offerings), dtype=np.bool_, count=len(offerings))
            for z in {t.zone for t in offerings}
        }
        self.masks: dict[frozenset[str], npt.NDArray[np.bool_]] = {}

    def mask(self, allowed: frozenset[str]) -> npt.NDArray[np.bool_]:
        """Return which offerings are in ``allowed`` (cached per set)."""
        m = self.masks.get(allowed)
        if m is None:
            ids = (t.id in allowed for t in self.list)
            m = self.masks[allowed] = np.fromiter(ids, dtype=np.bool_, count=len(self.list))
        return m


class _Growth:
    """A domain's offerings against its bins: the cheapest offering holding a bin plus a pod.

    Per bin: its offering's capacity and which offerings every class on it allows (and have
    the GPU devices its fractions use), as arrays kept in step with the moves.
    """

    def __init__(
        self, rules: _Rules, offerings: _Offerings, names: list[str], bins: list[_Bin]
    ) -> None:
        self.rules, self.o, self.names, self.bins = rules, offerings, names, bins
        self.own = np.zeros((len(bins), len(names)), dtype=np.int64)
        self.current = np.zeros(len(bins), dtype=np.int64)
        self.allowed = np.zeros((len(bins), len(offerings.list)), dtype=np.bool_)
        # when each bin's row last changed (a count of refreshes), and per demand the spare
        # room of every bin (``_spare``) with the count it is up to date with
        self.changed = np.zeros(len(bins), dtype=np.int64)
        self.refreshes = 0
        self.spares: dict[bytes, tuple[npt.NDArray[np.float64], int]] = {}
        self.demands: dict[str, npt.NDArray[np.int64]] = {}
        for j, b in enumerate(bins):
            self.refresh(j, b)

    def refresh(self, j: int, b: _Bin) -> None:
        """Recompute bin ``j``'s row after its pods or offering changed."""
        self.refreshes += 1
        self.changed[j] = self.refreshes
        self.own[j] = [b.t.capacity.get(r, 0) for r in self.names]
        self.current[j] = b.t.price_micros
        zone = self.o.in_zone.get(b.t.zone)
        mask = self.o.gpus >= len(b.load)
        mask = mask & zone if zone is not None else np.zeros_like(mask)
        # classes mostly share their allowed offerings: each set once
        for allowed in {self.rules.classes[key].allowed_bin_types for key in b.counts}:
            mask &= self.o.mask(allowed)
        self.allowed[j] = mask

    def cheapest(
        self, c: PodClass, candidates: npt.NDArray[np.intp], free: npt.NDArray[np.int64]
    ) -> tuple[int, BinType | None] | None:
        """Return (bin, offering) costing least more to hold one more pod of ``c``.

        The offering is None when the bin's own holds the pod.

        ``candidates``: bins whose hostname rules take the pod; ``free``: room per bin in
        ``names``. Only the ``_GROW_CANDIDATES`` bins with the most room are weighed.
        """
        if not candidates.size or not self.o.list:
            return None
        demand = self.demands.get(c.key)
        if demand is None:
            demand = np.array([c.demand.get(r, 0) for r in self.names], dtype=np.int64)
            self.demands[c.key] = demand
        if candidates.size > _GROW_CANDIDATES:
            spare = self._spare(demand, free)[candidates]
            top = np.argpartition(-spare, _GROW_CANDIDATES)[:_GROW_CANDIDATES]
            candidates = candidates[np.sort(top)]
        room = free[candidates] - demand
        for j in candidates[(room >= 0).all(axis=1)].tolist():
            if self.bins[j].t.id in c.allowed_bin_types:
                return j, None
        need = self.own[candidates] - room
        # bins grow: only offerings from the cheapest candidate's own price up are weighed
        lo = int(np.searchsorted(self.o.price, self.current[candidates].min()))
        span = slice(lo, lo + _GROW_OFFERINGS)
        ok = _covers(self.o.cap[None, span, :], need[:, None, :])
        ok &= self.allowed[candidates, span] & self.o.mask(c.allowed_bin_types)[None, span]
        first = np.argmax(ok, axis=1)
        has = ok[np.arange(len(candidates)), first]
        if not has.any():
            return None
        first += lo
        extra = np.where(
            has, self.o.price[first] - self.current[candidates], np.iinfo(np.int64).max
        )
        n = int(np.argmin(extra))
        return int(candidates[n]), self.o.list[int(first[n])]

    def _spare(
        self, demand: npt.NDArray[np.int64], free: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Per bin, the least share of its offering's capacity left after a pod of ``demand``.

        Kept for the last ``_SPARE_DEMANDS`` demands asked (classes mostly share a few) and
        recomputed only for the bins refreshed since: the same numbers, element by element, as
        computing every bin's afresh.
        """
        key = demand.tobytes()
        kept = self.spares.pop(key, None)
        spare: npt.NDArray[np.float64]
        if kept is None:
            spare = ((free - demand) / np.maximum(self.own, 1)).min(axis=1)
            if len(self.spares) >= _SPARE_DEMANDS:
                del self.spares[next(iter(self.spares))]  # the least recently asked
        else:
            spare, upto = kept
            stale = (self.changed > upto).nonzero()[0]
            if stale.size:
                room = free[stale] - demand
                spare[stale] = (room / np.maximum(self.own[stale], 1)).min(axis=1)
        self.spares[key] = (spare, self.refreshes)
        return spare


_SPARE_DEMANDS = 64
"""Demands whose spare room per bin ``_Growth`` keeps (a generated mix may have thousands)."""
_SHRINK_ROUNDS = 4
"""Rounds of shedding then swapping ``improve`` makes at most (each frees room for the other)."""
_SWAP_DONOR_PODS = 16
"""Bins with more pods do not swap: one pod less rarely lets a large bin shrink."""
_SWAP_TRIES = 32
"""Classes a bin's pod is tried against per swap, by saving (each needs a bin to give one)."""
_SWAPS_PER_BIN = 2
"""Swaps ``_Swaps.run`` may make for one bin in a row."""
_GROW_DONOR_PODS = 16
"""Bins with more pods are not emptied into larger offerings: their pods move one by one, and
the saving (another bin's price less the extras) is in bins holding few pods."""
_GROW_CANDIDATES = 16
"""Bins weighed per pod by ``_Growth.cheapest``: those with the most room left."""
_GROW_OFFERINGS = 256
"""Offerings weighed per pod by ``_Growth.cheapest``, by price from the candidates' own."""


class _ClassRows:
    """The classes on a domain's bins: each one's demand row and allowed offerings.

    Attributes:
        keys: the class keys, sorted; ``index`` maps each to its row.
        demand: one row per class over the domain's resources.
        allowed: one row per class over the domain's offerings.
    """

    def __init__(self, domain: _Domain) -> None:
        rules, o = domain.rules, domain.offerings
        self.keys = sorted({k for b in domain.bins for k in b.counts})
        self.index = {k: n for n, k in enumerate(self.keys)}
        self.demand = np.array(
            [[rules.classes[k].demand.get(r, 0) for r in domain.names] for k in self.keys],
            dtype=np.int64,
        ).reshape(len(self.keys), len(domain.names))
        self.allowed = np.array(
            [o.mask(rules.classes[k].allowed_bin_types) for k in self.keys], dtype=np.bool_
        ).reshape(len(self.keys), len(o.list))


class _Swaps:
    """Swap one pod of a bin for a smaller one of another bin, so the first gets cheaper.

    Bin ``A`` gives a pod of class ``a`` and takes one of class ``b`` from bin ``B``; ``B``
    keeps its offering (the ``a`` pod fits in its room once ``b`` is gone), ``A`` moves to
    the cheapest offering of its domain holding its new pods, which must cost less than its
    own. Fractions, carriers and targets of co-locations never swap; hostname caps hold on
    both bins.
    """

    def __init__(self, domain: _Domain, ledger: _Ledger) -> None:
        self.d, self.ledger = domain, ledger
        self.cap, self.price = domain.offerings.cap, domain.offerings.price
        table = _ClassRows(domain)
        present, self.index = table.keys, table.index
        self.demand, self.allowed = table.demand, table.allowed
        self.swappable = np.array([self._swappable(k) for k in present], dtype=np.bool_)
        # the least of every resource a swappable pod asks (a bin can shrink no further)
        smallest = self.demand[self.swappable] if self.swappable.any() else self.demand[:0]
        self.least = smallest.min(axis=0) if len(smallest) else np.zeros(len(domain.names))
        self.keys = present
        self.holders: defaultdict[str, set[int]] = defaultdict(set)
        for j, b in enumerate(domain.bins):
            for k in b.counts:
                self.holders[k].add(j)

    def _swappable(self, key: str) -> bool:
        rules = self.d.rules
        c = rules.classes[key]
        if c.gpu_fraction_milli or key in rules.needs:
            return False
        return not any(g in rules.tracked and g not in rules.caps for g in c.topology)

    def run(self, i: int) -> bool:
        """Make the best swap that makes bin ``i`` cheaper; return whether one was made."""
        d, donor = self.d, self.d.bins[i]
        # only offerings cheaper than the bin's own can make it cheaper
        w = int(np.searchsorted(self.price, donor.t.price_micros))
        if not d.alive[i] or donor.load or w == 0 or donor.npods() > _SWAP_DONOR_PODS:
            return False
        used = np.array([donor.used[r] for r in d.names], dtype=np.int64)
        best: tuple[int, str, str, int, int] | None = None
        for a in donor.counts:
            ia = self.index[a]
            lightest = used - self.demand[ia] + self.least
            if not self.swappable[ia] or not (self.cap[:w] >= lightest).all(axis=1).any():
                continue
            rest = np.ones(w, dtype=np.bool_)
            for key in donor.counts:
                if key != a or donor.counts[a] > 1:
                    rest &= self.allowed[self.index[key], :w]
            need = used - self.demand[ia] + self.demand  # per class b
            ok = _covers(self.cap[None, :w, :], need[:, None, :])
            ok &= rest[None, :] & self.allowed[:, :w] & self.swappable[:, None]
            ok[ia] = False
            first = np.argmax(ok, axis=1)
            saving = np.where(
                ok[np.arange(len(self.keys)), first], donor.t.price_micros - self.price[first], 0
            )
            # the dearest saving first; the first class another bin can give is the best one
            for ib in np.argsort(-saving, kind="stable")[:_SWAP_TRIES].tolist():
                if saving[ib] <= 0 or (best is not None and saving[ib] <= best[0]):
                    break
                j = self._taker(i, a, self.keys[ib])
                if j is not None:
                    best = (int(saving[ib]), a, self.keys[ib], j, int(first[ib]))
                    break
        return best is not None and self._apply(i, best[1:])

    def _apply(self, i: int, swap: tuple[str, str, int, int]) -> bool:
        """Make the swap if the rules and the limits take it; else leave both bins as they were."""
        a, b, j, o = swap
        d, donor, taker = self.d, self.d.bins[i], self.d.bins[j]
        rules, old, cheaper = d.rules, donor.t, d.offerings.list[o]
        rules.remove(donor, a, 1, None)
        rules.remove(taker, b, 1, None)
        d.retype(i, cheaper)
        took_b = rules.add(donor, rules.classes[b], 1)
        took_a = rules.add(taker, rules.classes[a], 1) if took_b else 0
        done = took_a == 1 and self.ledger.retype([(old, cheaper)])
        if not done:
            # the array checks and the rules disagree (or the limits refuse): put back
            if took_a:
                rules.remove(taker, a, 1, None)
            if took_b:
                rules.remove(donor, b, 1, None)
            d.retype(i, old)
            rules.add(donor, rules.classes[a], 1)
            rules.add(taker, rules.classes[b], 1)
        for x in (i, j):
            d.refresh(x)
            for k in (a, b):
                if d.bins[x].counts.get(k):
                    self.holders[k].add(x)
                else:
                    self.holders[k].discard(x)
        return done

    def _taker(self, i: int, a: str, b: str) -> int | None:
        """Return a live bin other than ``i`` holding ``b`` that holds ``a`` in its place."""
        d = self.d
        ca, cb = d.rules.classes[a], d.rules.classes[b]
        if not self._caps_allow(d.bins[i], ca, cb):
            return None
        held = self.holders[b] - {i}
        if not held:
            return None
        rows = np.fromiter(sorted(held), dtype=np.intp, count=len(held))
        change = self.demand[self.index[b]] - self.demand[self.index[a]]
        k = len(d.names)
        room: npt.NDArray[np.bool_] = d.alive[rows]
        # a resource the swap frees (or keeps) stays at 0 or above where it was
        for r in ((change < 0) | d.maybe_short[:k]).nonzero()[0].tolist():
            room &= d.free[rows, r] + change[r] >= 0
        for j in rows[room].tolist():
            x = d.bins[j]
            if x.t.id in ca.allowed_bin_types and self._caps_allow(x, cb, ca):
                return int(j)
        return None

    def _caps_allow(self, x: _Bin, out: PodClass, into: PodClass) -> bool:
        """Return whether ``x``'s hostname caps allow one ``into`` in place of one ``out``."""
        caps = self.d.rules.caps
        return all(
            x.group[g] - (g in out.topology) + 1 <= caps[g] for g in into.topology if g in caps
        )


_SHED_TRIES = 4
"""Cheaper offerings ``_Shed.run`` tries for one bin, dearest (the smallest step) first."""
_SHEDS_PER_BIN = 8
"""Times in a row one bin may shed pods to shrink again."""


class _Shed:
    """Move pods off a bin into the room others of its domain have left, so it gets cheaper.

    The bin moves to a cheaper offering; the bins that take its pods keep theirs. Greedy
    plans and roundings leave a little room on many bins and a few large bins holding pods
    free to go anywhere in their zone; those pods fill the room and the large bins shrink.
    Fractions and one-bin groups stay; a co-location target stays while a carrier on its bin
    has no other; ``_Rules.add`` keeps hostname caps and carriers' targets on the bins pods
    join.
    """

    def __init__(self, domain: _Domain, ledger: _Ledger) -> None:
        self.d, self.ledger = domain, ledger
        self.cap, self.price = domain.offerings.cap, domain.offerings.price
        table = _ClassRows(domain)
        self.demand = {k: table.demand[n] for k, n in table.index.items()}
        self.allowed = {k: table.allowed[n] for k, n in table.index.items()}
        self.sizes = {k: tuple(int(x) for x in row) for k, row in self.demand.items()}

    def run(self, i: int) -> bool:
        """Move bin ``i`` to a cheaper offering, moving out what it no longer holds."""
        d, donor = self.d, self.d.bins[i]
        w = int(np.searchsorted(self.price, donor.t.price_micros))
        if not d.alive[i] or donor.load or w == 0:
            return False
        movable = [k for k in donor.counts if self.d.rules.movable(k)]
        if not movable:
            return False
        used = np.array([donor.used[r] for r in d.names], dtype=np.int64)
        out = sum(self.demand[k] * donor.counts[k] for k in movable)
        allowed = np.ones(w, dtype=np.bool_)
        for k in donor.counts:
            allowed &= self.allowed[k][:w]
        holds = allowed & (self.cap[:w] >= used - out).all(axis=1)
        # the cheapest offering holding the bin as it is (no moves), else the smallest step
        # down first: it needs the fewest moves; ``run`` again goes further
        outright = (holds & (self.cap[:w] >= used).all(axis=1)).nonzero()[0][:1]
        tries = holds.nonzero()[0][::-1][:_SHED_TRIES]
        for o in outright.tolist() or tries.tolist():
            moves = self._shed(i, np.maximum(used - self.cap[o], 0), movable)
            if moves is None:
                continue
            cheaper = d.offerings.list[o]
            if self.ledger.retype([(donor.t, cheaper)]):
                d.retype(i, cheaper)
                d.refresh(i)
                return True
            self._undo(i, moves)
        return False

    def _shed(
        self, i: int, excess: npt.NDArray[np.int64], movable: list[str]
    ) -> list[_Move] | None:
        """Move pods of ``movable`` classes off bin ``i`` until ``excess`` is gone.

        Returns the moves, or None (and nothing moved) when the rest cannot go anywhere.
        """
        d, rules = self.d, self.d.rules
        donor = d.bins[i]
        # a few resources: plain ints beat numpy's per-call cost here
        left = [int(x) for x in excess]
        scale = [max(x, 1) for x in left]
        sizes = self.sizes
        # the pods covering most of the excess first, then the smallest (the others' room is
        # short); the order holds as the excess shrinks
        order = sorted(
            movable,
            key=lambda k: (
                -sum(min(v, x) / s for v, x, s in zip(sizes[k], left, scale, strict=True) if x > 0),
                sum(sizes[k]),
            ),
        )
        moves: list[_Move] = []
        stuck: set[str] = set()
        while any(x > 0 for x in left):
            key = next(
                (
                    k
                    for k in order
                    if k not in stuck
                    and donor.counts.get(k)
                    and any(v > 0 < x for v, x in zip(sizes[k], left, strict=True))
                ),
                None,
            )
            if key is None:
                self._undo(i, moves)
                return None
            c = rules.classes[key]
            target = None
            if rules.may_leave(donor, key):
                target = next((j for j in d.takers(c, i) if rules.add(d.bins[j], c, 1)), None)
            if target is None:
                stuck.add(key)
                continue
            rules.remove(donor, key, 1, None)
            moves.append(_Move(target, key, 1, None))
            d.refresh(target)
            left = [x - v for x, v in zip(left, sizes[key], strict=True)]
        return moves

    def _undo(self, i: int, moves: list[_Move]) -> None:
        rules, donor = self.d.rules, self.d.bins[i]
        for m in reversed(moves):
            rules.remove(self.d.bins[m.target], m.key, m.count, m.devices)
            rules.put_back(donor, rules.classes[m.key], m.count)
            self.d.refresh(m.target)
        self.d.refresh(i)


_REBALANCE_TRIES = 4
"""Best-ranked moves (or swaps) per pod checked against every rule before the next pod."""
_REBALANCE_GAIN = 1e-3
"""A move must lower the two bins' fluid cost by this share of the first bin's price."""
_REBALANCE_WASTE = 0.03
"""Only bins whose fluid cost is at least this share below their price start moves and swaps.

Bins that fill evenly have little to trade; skipping them keeps a pass short on plans of
many bins (the weighted-limits mix, 2,000 pods, 526 bins)."""
_REBALANCE_ROUNDS = 8
"""Rounds of rebalancing in ``improve``: a pass of moves and swaps, then one of shrinking."""
_REBALANCE_IDLE = 2
"""Rebalancing stops after this many rounds in a row that saved nothing."""


@dataclass(slots=True)
class _Pods:
    """Movable pods of a domain: one entry per (bin, class), with the class's demand row."""

    where: npt.NDArray[np.int64]
    keys: list[str]
    rows: npt.NDArray[np.float64]


class _Rebalance:
    """Move and swap pods between a domain's bins so that their fluid cost falls.

    Every bin keeps its offering (a pod goes only where the room is), so the plan costs no
    more; a bin left empty is dropped and one whose pods fit a cheaper offering steps down.
    The fluid cost (``solver.rebalance``) falls when bins that fill one resource and idle
    another trade pods until both fill evenly; ``_Shed``, ``_Swaps`` and emptying then find
    the savings they could not before. Fractions and one-bin groups stay; ``_Rules`` keeps
    hostname caps, co-location and allowed offerings on every bin a pod joins.
    """

    def __init__(
        self,
        rules: _Rules,
        members: list[_Bin],
        *,
        names: list[str],
        offerings: _Offerings,
        ledger: _Ledger,
        fluid: FluidCost,
    ) -> None:
        self.rules, self.names, self.offerings, self.ledger = rules, names, offerings, ledger
        self.bins = [b for b in members if b.alive and not b.load and not rules.pinned(b)]
        self.fluid = fluid
        width = len(names)
        self.used = np.array(
            [[b.used[r] for r in names] for b in self.bins], dtype=np.float64
        ).reshape(len(self.bins), width)
        self.cap = np.array(
            [[b.t.capacity.get(r, 0) for r in names] for b in self.bins], dtype=np.float64
        ).reshape(len(self.bins), width)
        self.cost = self.fluid.of(self.used)
        self.live = np.ones(len(self.bins), dtype=np.bool_)
        self._demand: dict[str, npt.NDArray[np.float64]] = {}

    def demand(self, key: str) -> npt.NDArray[np.float64]:
        """Return what one pod of ``key`` uses, per resource of ``names``."""
        found = self._demand.get(key)
        if found is None:
            c = self.rules.classes[key]
            found = np.array([c.demand.get(r, 0) for r in self.names], dtype=np.float64)
            self._demand[key] = found
        return found

    def run(self, late: Callable[[], bool]) -> bool:
        """Move, then swap, pods where that lowers the fluid cost; return whether any did."""
        if len(self.bins) < _PAIR or late():
            return False
        moved = self._moves()
        return self._swaps(late) or moved

    def _prices(self) -> npt.NDArray[np.float64]:
        return np.array([b.t.price_micros for b in self.bins], dtype=np.float64)

    def _wasteful(self, prices: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """Return which bins' fluid cost is ``_REBALANCE_WASTE`` or more below their price."""
        result: npt.NDArray[np.bool_] = self.cost <= (1 - _REBALANCE_WASTE) * prices
        return result

    def _pods(self, *, wasteful: bool = False) -> _Pods:
        """Return the (bin, class) pairs of movable pods, with their demand rows.

        ``wasteful``: only of bins whose fluid cost is ``_REBALANCE_WASTE`` below their price
        (a pod leaving a bin that fills evenly rarely lowers the fluid cost).
        """
        where: list[int] = []
        keys: list[str] = []
        chosen = self.live & self._wasteful(self._prices()) if wasteful else self.live
        for j in chosen.nonzero()[0].tolist():
            for key in sorted(self.bins[j].counts):
                if self.rules.movable(key):
                    where.append(j)
                    keys.append(key)
        rows = np.array([self.demand(k) for k in keys], dtype=np.float64).reshape(
            len(keys), len(self.names)
        )
        return _Pods(np.array(where, dtype=np.int64), keys, rows)

    def _moves(self) -> bool:
        """Move pods to the bins where the fluid cost falls most, each bin once a round."""
        pods = self._pods(wasteful=True)
        if not pods.keys:
            return False
        room = self.cap - self.used
        fits = (room[None, :, :] >= pods.rows[:, None, :]).all(axis=2) & self.live[None, :]
        fits[np.arange(len(pods.keys)), pods.where] = False
        ps, js = fits.nonzero()
        if not len(ps):
            return False
        left = self.fluid.of(self.used[pods.where] - pods.rows) - self.cost[pods.where]
        delta = self.fluid.of(self.used[js] + pods.rows[ps]) - self.cost[js] + left[ps]
        good = delta < -_REBALANCE_GAIN * self._prices()[pods.where[ps]]
        ps, js, delta = ps[good], js[good], delta[good]
        touched: set[int] = set()
        moved = False
        for o in np.argsort(delta, kind="stable").tolist():
            p, j = int(ps[o]), int(js[o])
            i, key = int(pods.where[p]), pods.keys[p]
            if i in touched or j in touched:
                continue
            b = self.bins[i]
            if not b.counts.get(key) or not self.rules.may_leave(b, key):
                continue
            if self.rules.add(self.bins[j], self.rules.classes[key], 1):
                self.rules.remove(b, key, 1, None)
                touched.update((i, j))
                self._changed(j)
                self._changed(i)
                moved = True
        return moved

    def _swaps(self, late: Callable[[], bool]) -> bool:
        """Let each bin, most wasteful first, trade a pod where the fluid cost falls most."""
        pods = self._pods()
        if not pods.keys:
            return False
        prices = self._prices()
        wasteful = self._wasteful(prices)
        touched: set[int] = set()
        swapped = False
        for i in np.argsort(self.cost - prices, kind="stable").tolist():
            if late() or not wasteful[i]:
                break
            if i in touched or not self.live[i]:
                continue
            mine = (pods.where == i).nonzero()[0]
            if not len(mine):
                continue
            rows = pods.rows[mine]
            ours = self.used[i] - rows[:, None, :] + pods.rows[None, :, :]
            theirs = self.used[pods.where][None, :, :] - pods.rows[None, :, :] + rows[:, None, :]
            ok = (
                (ours <= self.cap[i]).all(axis=2)
                & (theirs <= self.cap[pods.where][None, :, :]).all(axis=2)
                & (pods.where != i)[None, :]
                & self.live[pods.where][None, :]
            )
            ms, qs = ok.nonzero()
            if not len(ms):
                continue
            delta = (
                self.fluid.of(ours[ms, qs])
                - self.cost[i]
                + self.fluid.of(theirs[ms, qs])
                - self.cost[pods.where[qs]]
            )
            gain = -_REBALANCE_GAIN * prices[i]
            tries = 0
            for o in np.argsort(delta, kind="stable").tolist():
                if delta[o] >= gain or tries >= _REBALANCE_TRIES:
                    break
                key, j = pods.keys[int(mine[ms[o]])], int(pods.where[qs[o]])
                other = pods.keys[int(qs[o])]
                if j in touched or key == other:
                    continue
                tries += 1
                if self.rules.may_leave(self.bins[i], key) and self._trade(i, key, j, other):
                    touched.update((i, j))
                    swapped = True
                    break
        return swapped

    def _trade(self, i: int, key: str, j: int, other: str) -> bool:
        """Swap one pod of ``key`` on bin ``i`` with one of ``other`` on bin ``j`` if allowed."""
        rules, a, b = self.rules, self.bins[i], self.bins[j]
        if not b.counts.get(other) or not rules.may_leave(b, other):
            return False
        mine, theirs = rules.classes[key], rules.classes[other]
        rules.remove(a, key, 1, None)
        rules.remove(b, other, 1, None)
        if rules.add(a, theirs, 1):
            if rules.add(b, mine, 1):
                self._changed(i)
                self._changed(j)
                return True
            rules.remove(a, other, 1, None)
        rules.put_back(a, mine, 1)
        rules.put_back(b, theirs, 1)
        return False

    def _changed(self, i: int) -> None:
        """Refresh bin ``i``'s rows; drop it when empty, else step it down if it can."""
        b = self.bins[i]
        if not b.counts:
            b.alive = False
            self.live[i] = False
            self.ledger.drop(b.t)
            return
        self.used[i] = [b.used[r] for r in self.names]
        offerings = self.offerings
        fits = (offerings.cap >= self.used[i]).all(axis=1) & (offerings.price < b.t.price_micros)
        for key in b.counts:
            fits &= offerings.mask(self.rules.classes[key].allowed_bin_types)
        cheaper = fits.nonzero()[0]
        if len(cheaper):
            # offerings come cheapest first
            t = offerings.list[int(cheaper[0])]
            if self.ledger.retype([(b.t, t)]):
                b.t = t
                self.cap[i] = [t.capacity.get(r, 0) for r in self.names]
        self.cost[i] = float(self.fluid.of(self.used[i][None, :])[0])


class _Shrinker(Protocol):
    """A move that makes one bin of a domain cheaper (``_Swaps``, ``_Shed``)."""

    def run(self, i: int) -> bool:
        """Make bin ``i`` cheaper if it can; return whether it did."""
        ...


_PAIR = 2


@dataclass(slots=True)
class _Move:
    """Pods moved onto bin ``target`` of a domain (per device for fractions), to undo."""

    target: int
    key: str
    count: int
    devices: list[int] | None


class _Ledger:
    """Bins per offering and pool usage of the plan, against ``max_count`` and pool limits."""

    def __init__(self, problem: Problem, bins: list[_Bin]) -> None:
        self.count: Counter[str] = Counter(b.t.id for b in bins)
        self.usage: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for b in bins:
            self.usage[b.t.pool].update(b.t.usage_for_limits())
        self.limits = {lim.pool: lim.remaining for lim in problem.limits}

    def swap(self, old: list[_Bin], t: BinType) -> bool:
        """Record ``old`` replaced by one bin of ``t`` if limits allow; return whether."""
        count = self.count[t.id] + 1 - sum(b.t.id == t.id for b in old)
        if t.max_count is not None and count > t.max_count:
            return False
        usage = Counter(self.usage[t.pool])
        for b in old:
            usage.subtract(b.t.usage_for_limits())
        usage.update(t.usage_for_limits())
        if any(usage[r] > v for r, v in self.limits.get(t.pool, {}).items()):
            return False
        for b in old:
            self.count[b.t.id] -= 1
        self.count[t.id] += 1
        self.usage[t.pool] = usage
        return True

    def drop(self, t: BinType) -> None:
        """Record one bin of ``t`` emptied."""
        self.count[t.id] -= 1
        self.usage[t.pool].subtract(t.usage_for_limits())

    def retype(self, changes: list[tuple[BinType, BinType]]) -> bool:
        """Record bins moved from one offering to another if limits allow; return whether."""
        count: Counter[str] = Counter()
        usage: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for old, new in changes:
            count[old.id] -= 1
            count[new.id] += 1
            usage[old.pool].subtract(old.usage_for_limits())
            usage[new.pool].update(new.usage_for_limits())
        for _, new in changes:
            if new.max_count is not None and self.count[new.id] + count[new.id] > new.max_count:
                return False
            now, limits = self.usage[new.pool], self.limits.get(new.pool, {})
            if any(now[r] + usage[new.pool][r] > v for r, v in limits.items()):
                return False
        self.count.update(count)
        for pool, change in usage.items():
            self.usage[pool].update(change)
        return True


_CONSOLIDATE_WORK = 100_000
"""Consolidate a domain only when its bins times offerings are at most this (a round then
takes about 20 ms; rounds stop at the deadline)."""
_SETS_PER_OFFERING = 16
"""Disjoint sets one offering may propose per round of ``_Consolidation``."""
_FILL_ON = 50
"""Offerings (best prefixes first) whose set is filled past its first misfit."""


class _Consolidation:
    """Replace sets of bins of one domain by one bin of a cheaper offering.

    For every offering ``t`` the bins it may hold are taken in order of price per share of
    ``t`` they fill, as long as their pods together fit (resources, GPU devices, hostname
    caps); the set saving most is replaced (pool limits and ``max_count`` allowing), and
    the search repeats.
    """

    def __init__(self, rules: _Rules, offerings: list[BinType], ledger: _Ledger) -> None:
        self.rules, self.offerings, self.ledger = rules, offerings, ledger
        self.names = sorted({r for t in offerings for r in t.capacity})
        self.capped = sorted(rules.caps)
        self.cap = np.array(
            [[*self._columns(t.capacity, rules.caps), t.gpus] for t in offerings],
            dtype=np.float64,
        ).reshape(len(offerings), len(self.names) + len(self.capped) + 1)
        self.negative = (self.cap < 0).any(axis=0)
        self.price = np.array([t.price_micros for t in offerings], dtype=np.float64)
        self.allowed = _Offerings(offerings, [])
        self.by_bin: dict[int, npt.NDArray[np.bool_]] = {}
        self.by_used: dict[int, list[int]] = {}
        self.refused = np.zeros(len(offerings), dtype=np.bool_)

    def _columns(self, amounts: Mapping[str, int], groups: Mapping[str, int]) -> list[int]:
        return [*(amounts.get(r, 0) for r in self.names), *(groups.get(g, 0) for g in self.capped)]

    def _used(self, b: _Bin) -> list[int]:
        """Return what ``b``'s pods use in the columns of ``cap`` (bins never change here)."""
        out = self.by_used.get(id(b))
        if out is None:
            out = self.by_used[id(b)] = [*self._columns(b.used, b.group), len(b.load)]
        return out

    def _allows(self, b: _Bin) -> npt.NDArray[np.bool_]:
        """Return which offerings every class on ``b`` allows."""
        out = self.by_bin.get(id(b))
        if out is None:
            out = np.ones(len(self.offerings), dtype=np.bool_)
            for k in b.counts:
                out &= self.allowed.mask(self.rules.classes[k].allowed_bin_types)
            self.by_bin[id(b)] = out
        return out

    def _sets(self, live: list[_Bin]) -> list[tuple[float, int, list[int]]]:
        """Return (saving, offering, bins as indices into ``live``) that save, best first."""
        used = np.array([self._used(b) for b in live], dtype=np.float64).reshape(
            len(live), self.cap.shape[1]
        )
        # columns no live bin uses (most hostname caps) hold every set: left out; they only
        # give shares of 0 (or 0 / 0, which fmax passes over)
        columns = np.flatnonzero(used.any(axis=0) | self.negative)
        used, cap = used[:, columns], self.cap[:, columns]
        cost = np.array([b.t.price_micros for b in live], dtype=np.float64)
        allowed = np.array([self._allows(b) for b in live], dtype=np.bool_).T
        # the largest share of an offering's capacity a bin uses (a use where the offering has
        # none: inf); 0 / 0 (nothing used of nothing) is nan, which fmax passes over
        with np.errstate(divide="ignore", invalid="ignore"):
            share = used[None, :, :] / cap[:, None, :]
        size = np.fmax.reduce(share, axis=2)
        size[np.isnan(size)] = 0.0
        usable = allowed & (size <= 1) & ~self.refused[:, None]
        density = np.where(usable, cost[None, :] / np.maximum(size, 1e-12), -np.inf)
        # the longest prefix in density order that fits, for every offering at once (usable
        # bins sort first: the others' density is -inf)...
        prefixes: list[tuple[float, int, npt.NDArray[np.intp], int]] = []
        rows = np.flatnonzero(usable.sum(axis=1) >= _PAIR)
        if rows.size:
            count = usable[rows].sum(axis=1)
            order = np.argsort(-density[rows], axis=1, kind="stable")
            fits = (np.cumsum(used[order], axis=1) <= cap[rows][:, None, :]).all(axis=2)
            fits &= np.arange(len(live))[None, :] < count[:, None]
            ns = np.where(fits.all(axis=1), len(live), fits.argmin(axis=1))
            # prices are whole micro-dollars: the running sums are exact
            taken = np.cumsum(cost[order], axis=1)
            for r, ti in enumerate(rows.tolist()):
                n = int(ns[r])
                saving = float(taken[r, n - 1] if n else 0.0) - float(self.price[ti])
                prefixes.append((saving, ti, order[r, : count[r]], n))
        # ...then the most promising go on past the first bin that did not fit, and take
        # further sets of the bins left, so that one round merges many
        out: list[tuple[float, int, list[int]]] = []
        for _, ti, order, _ in sorted(prefixes, key=lambda p: -p[0])[:_FILL_ON]:
            left = order
            for _ in range(_SETS_PER_OFFERING):
                chosen = _fill(used, cap[ti], left)
                saving = float(cost[chosen].sum() - self.price[ti])
                if len(chosen) < _PAIR or saving <= 0:
                    break
                out.append((saving, ti, chosen))
                left = left[~np.isin(left, chosen)]
        out.sort(key=lambda x: -x[0])
        return out

    def run(self, members: list[_Bin], deadline: float | None) -> list[_Bin]:
        """Consolidate ``members`` (merged bins are appended to it); return the new bins."""
        made: list[_Bin] = []
        while deadline is None or time.monotonic() < deadline:
            live = [b for b in members if b.alive]
            sets = self._sets(live) if len(live) >= _PAIR else []
            if not sets:
                return made
            taken: set[int] = set()
            # the best set, then every other one that shares no bin with those taken
            for _, ti, chosen in sets:
                if taken.intersection(chosen):
                    continue
                old = [live[i] for i in chosen]
                if not self.ledger.swap(old, self.offerings[ti]):
                    # limits refuse it: never offer this offering again in this domain
                    self.refused[ti] = True
                    continue
                taken.update(chosen)
                made.append(self._merge(old, self.offerings[ti]))
                members.append(made[-1])
        return made

    @staticmethod
    def _merge(old: list[_Bin], t: BinType) -> _Bin:
        merged = _Bin(t, Counter(), Counter(), Counter())
        for b in old:
            b.alive = False
            merged.counts.update(b.counts)
            merged.used.update(b.used)
            merged.group.update(b.group)
            merged.devices.extend(b.devices)
            merged.load.extend(b.load)
        return merged


def _fill(
    used: npt.NDArray[np.float64], cap: npt.NDArray[np.float64], order: npt.NDArray[np.intp]
) -> list[int]:
    """Return the bins of ``order`` (rows of ``used``) one bin of capacity ``cap`` holds.

    The leading run that fits, then every later bin that still fits, in order.
    """
    fits = (np.cumsum(used[order], axis=0) <= cap).all(axis=1)
    n = len(order) if fits.all() else int(np.argmin(fits))
    chosen: list[int] = order[:n].tolist()
    room = cap - used[order[:n]].sum(axis=0)
    rest = order[n:]
    while rest.size:
        fits = (used[rest] <= room).all(axis=1)
        if not fits.any():
            break
        k = int(np.argmax(fits))
        chosen.append(int(rest[k]))
        room -= used[rest[k]]
        rest = rest[k + 1 :]
    return chosen


def _zone_bound(problem: Problem) -> frozenset[str]:
    """Return the classes whose pods must keep their zone.

    Those under zonal rules (``rounding.zone_bound``), zone spreads and gangs.
    """
    spreads = {
        t.id
        for t in problem.topology
        if isinstance(t, SpreadConstraint) and t.key is TopologyKey.ZONE
    }
    other = {c.key for c in problem.classes if c.gang is not None or c.topology & spreads}
    return frozenset(zone_bound(problem) | other)


def _offerings(problem: Problem) -> dict[tuple[str, str], list[BinType]]:
    """Return the offerings per (pool, zone), cheapest first, one of each alike set.

    Of offerings alike but for their price (spot, on-demand) only the cheapest can win.
    """
    out: defaultdict[tuple[str, str], list[BinType]] = defaultdict(list)
    seen: set[tuple[object, ...]] = set()
    for t in sorted(problem.bin_types, key=lambda t: (t.price_micros, t.id)):
        alike = (t.pool, t.zone, t.instance_type, t.gpus, tuple(sorted(t.capacity.items())))
        if alike not in seen:
            seen.add(alike)
            out[t.pool, t.zone].append(t)
    return out


def improve(
    problem: Problem,
    plan: Solution,
    *,
    deadline: float | None = None,
    shed_first: bool = False,
    first_pass_until: float | None = None,
    rebalance: bool = False,
) -> Solution:
    """Return ``plan`` with bins emptied, merged or shrunk (``plan`` itself when none saves).

    Per zone and pool: bins are emptied into the room of others, then (per pool) into others
    moved to larger offerings where that costs less than the emptied bin
    (``_Domain.empty_growing``), then sets of bins are consolidated, then bins shed pods into
    the others' room to shrink (``_Shed``) and pods are swapped so bins shrink (``_Swaps``),
    these two in turn while either finds a move (at most ``_SHRINK_ROUNDS`` times); each move
    in every domain before the next, so the cheaper moves are done when the deadline comes.
    Shedding goes first: on large plans it saves more per second than swapping.

    ``shed_first``: one round of shedding and swapping comes before everything else. For
    plans of full bins (Karpenter's first-fit-decreasing fills each bin up to its largest
    offering), where few bins empty or grow and shrinking is where the savings are.

    Stops at ``deadline`` (a ``time.monotonic()`` value) keeping the moves made so far.
    ``rebalance``: then, while time is left, rounds of rebalancing every domain
    (``_Rebalance``) and shrinking (``_rebalanced``); the caller decides when that is worth
    the time (``solver.cpsat._rebalances``).
    ``first_pass_until``: the first pass over every domain (shedding with ``shed_first``,
    else emptying) runs until then instead, whatever ``deadline``: it finds most of the
    saving (Karpenter's diverse mix, 5,000 pods: $404 of $404.45 an hour in its first 0.55
    s of 1.6 s), and a plan cut off in it keeps most bins as they were.
    """
    if len(plan.new_bins) < _PAIR:
        return plan
    search = _Search(problem, plan, deadline if first_pass_until is None else first_pass_until)
    # cheap moves first, in every domain, then dearer ones, as time allows
    first, then = (search.shed, (search.swap, search.empty)) if shed_first else (search.empty, ())
    changed = search.everywhere(first)
    search.deadline = deadline
    for move in then:
        changed |= search.everywhere(move)
    for pool in search.pools:
        changed |= search.grow(pool)
    changed |= search.everywhere(search.consolidate)
    changed |= search.shrink(rounds=_SHRINK_ROUNDS)
    polished = _solution(plan, search) if changed else plan
    if rebalance:
        polished = _rebalanced(search, polished)
    return polished


def _solution(plan: Solution, search: _Search) -> Solution:
    """Return ``plan`` with the live bins of ``search``."""
    return replace(
        plan,
        new_bins=tuple(_placement(b) for b in search.bins if b.alive),
        cost_micros=search.cost(),
    )


def _rebalanced(search: _Search, polished: Solution) -> Solution:
    """Rebalance and shrink ``search``'s bins in rounds; the cheapest plan of any round.

    A round that saves nothing leaves ``polished`` as it was (its pods dealt the same), so
    a rebalancing that finds no saving changes nothing but the time spent.
    """
    idle = 0
    for _ in range(_REBALANCE_ROUNDS):
        if idle >= _REBALANCE_IDLE or not search.everywhere(search.rebalance):
            break
        search.shrink(rounds=1)
        if search.cost() < polished.cost_micros:
            polished = _solution(polished, search)
            idle = 0
        else:
            idle += 1
    return polished


class _Search:
    """One ``improve`` run: the plan's bins per domain, the offerings and the limits."""

    def __init__(self, problem: Problem, plan: Solution, deadline: float | None) -> None:
        self.rules = _Rules(problem)
        self.bins = [self.rules.load(nb) for nb in plan.new_bins]
        self.names = sorted({r for c in problem.classes for r, v in c.demand.items() if v > 0})
        self.domains: defaultdict[tuple[str, str], list[_Bin]] = defaultdict(list)
        for b in self.bins:
            self.domains[b.t.pool, b.t.zone].append(b)
        self.pools = sorted({pool for pool, _ in self.domains})
        self.offerings = _offerings(problem)
        self.ledger = _Ledger(problem, self.bins)
        self.deadline = deadline
        self.rebalancing: dict[tuple[str, str], tuple[_Offerings, FluidCost]] = {}
        """Per domain, its offerings as arrays and their fluid cost (made when first used)."""

    def _late(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def cost(self) -> int:
        """Return what the live bins cost."""
        return sum(b.t.price_micros for b in self.bins if b.alive)

    def everywhere(self, move: Callable[[tuple[str, str], list[_Bin]], bool]) -> bool:
        """Apply ``move`` to every domain; return whether it changed any."""
        changed = False
        for key, members in self.domains.items():
            changed |= move(key, members)
        return changed

    def empty(self, _key: tuple[str, str], members: list[_Bin]) -> bool:
        """Empty the domain's bins into each other's room."""
        if len(members) < _PAIR or self._late():
            return False
        changed = False
        domain = _Domain(self.rules, members, self.names)
        # the emptiest bins are the easiest to empty
        for i in sorted(range(len(domain.bins)), key=lambda i: (domain.bins[i].fill(), -i)):
            if self._late():
                break
            if domain.empty(i):
                changed = True
                self.ledger.drop(domain.bins[i].t)
        return changed

    def shrink(self, *, rounds: int) -> bool:
        """Shed, then swap, in every domain; again while either moves, ``rounds`` at most."""
        changed = False
        for _ in range(rounds):
            moved = self.everywhere(self.shed)
            moved |= self.everywhere(self.swap)
            changed |= moved
            if not moved:
                break
        return changed

    def consolidate(self, key: tuple[str, str], members: list[_Bin]) -> bool:
        """Replace sets of the domain's live bins by one bin of a cheaper offering."""
        offerings = self.offerings.get(key, [])
        alive = sum(b.alive for b in members)
        if alive < _PAIR or alive * len(offerings) > _CONSOLIDATE_WORK or self._late():
            return False
        made = _Consolidation(self.rules, offerings, self.ledger).run(members, self.deadline)
        self.bins.extend(made)
        return bool(made)

    def rebalance(self, key: tuple[str, str], members: list[_Bin]) -> bool:
        """Deal the domain's pods so that its bins fill evenly (``_Rebalance``)."""
        if self._late():
            return False
        arrays = self.rebalancing.get(key)
        if arrays is None:
            listed = _Offerings(self.offerings.get(key, []), self.names)
            arrays = self.rebalancing[key] = listed, FluidCost(listed.cap, listed.price)
        offerings, fluid = arrays
        move = _Rebalance(
            self.rules,
            members,
            names=self.names,
            offerings=offerings,
            ledger=self.ledger,
            fluid=fluid,
        )
        return move.run(self._late)

    def swap(self, key: tuple[str, str], members: list[_Bin]) -> bool:
        """Swap pods between the domain's live bins so that bins move to cheaper offerings."""
        return self._shrink(key, members, lambda d: _Swaps(d, self.ledger), _SWAPS_PER_BIN)

    def shed(self, key: tuple[str, str], members: list[_Bin]) -> bool:
        """Move pods into the room of the domain's live bins so that others shrink."""
        return self._shrink(key, members, lambda d: _Shed(d, self.ledger), _SHEDS_PER_BIN)

    def _shrink(
        self,
        key: tuple[str, str],
        members: list[_Bin],
        mover: Callable[[_Domain], _Shrinker],
        times: int,
    ) -> bool:
        """Let ``mover`` make each live bin of the domain cheaper, up to ``times`` in a row."""
        alive = [b for b in members if b.alive]
        if len(alive) < _PAIR or self._late():
            return False
        domain = _Domain(self.rules, alive, self.names, self.offerings.get(key, []))
        move = mover(domain)
        changed = False
        # dearest first: they have the most to save
        for i in sorted(range(len(domain.bins)), key=lambda i: -domain.bins[i].t.price_micros):
            for _ in range(times):
                if self._late() or not move.run(i):
                    break
                changed = True
        return changed

    def grow(self, pool: str) -> bool:
        """Empty the pool's live bins into others moved to larger offerings of their zones.

        Pods free of zonal rules (zone topology, gangs) may go to a bin of another zone.
        """
        alive = [b for (p, _), members in self.domains.items() if p == pool for b in members]
        alive = [b for b in alive if b.alive]
        if len(alive) < _PAIR or self._late():
            return False
        offerings = sorted(
            (t for (p, _), ts in self.offerings.items() if p == pool for t in ts),
            key=lambda t: (t.price_micros, t.id),
        )
        changed = False
        domain = _Domain(self.rules, alive, self.names, offerings, growing=True)
        for i in sorted(range(len(domain.bins)), key=lambda i: (domain.bins[i].fill(), -i)):
            if self._late():
                break
            changed |= domain.empty_growing(i, self.ledger)
        return changed
