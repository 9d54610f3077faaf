"""Classes merged by shape for the LP phases, and the LP's bins split back into classes.

Pods of two classes that differ only in their key and gang (same requests, offerings, existing
bins, GPU fraction, topology memberships and carried co-locations) are interchangeable in
every constraint but the gangs'. Gang-heavy workloads have many such classes (one per pod
group), so column generation and its dive run on the merged problem (``merge``): fewer LP rows,
knapsacks small enough to price exactly, and faster convergence. The merged problem drops the
gangs, a relaxation, so its bounds hold for the original.

``split`` maps the dive's bins back to classes, keeping each gang's new pods in one zone and
one NodePool where the gang asks for it (and where its pods on existing nodes already are);
the caller validates the result like any other plan.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.colgen import Pattern
from solver.problem import (
    CoLocation,
    ExistingPlacement,
    Gang,
    NewBin,
    Placement,
    PodClass,
    Problem,
)


@dataclass(frozen=True, slots=True)
class Shapes:
    """A problem with its interchangeable classes merged.

    Attributes:
        problem: the merged problem (no gangs); a shape's key is its first class's key.
        shape_of: shape key per class key of the original problem.
    """

    problem: Problem
    shape_of: Mapping[str, str]

    def demand(self, demand: Mapping[str, int]) -> dict[str, int]:
        """Return pods per shape for pods per class."""
        out: Counter[str] = Counter()
        for k, n in demand.items():
            if n > 0:
                out[self.shape_of[k]] += n
        return dict(out)

    def pattern(self, p: Pattern) -> Pattern:
        """Return the shape-level pattern of a class-level one."""
        counts: Counter[str] = Counter()
        for k, n in p.counts:
            counts[self.shape_of[k]] += n
        devices: dict[str, list[int]] = {}
        for k, per in p.devices:
            acc = devices.setdefault(self.shape_of[k], [])
            acc.extend([0] * (len(per) - len(acc)))
            for i, n in enumerate(per):
                acc[i] += n
        return Pattern(
            p.bin_type,
            tuple(sorted(counts.items())),
            tuple(sorted((k, tuple(v)) for k, v in devices.items())),
        )


def merge(problem: Problem) -> Shapes | None:
    """Return ``problem`` with interchangeable classes merged, or None when none are."""
    carried: defaultdict[str, set[str]] = defaultdict(set)
    for t in problem.topology:
        if isinstance(t, CoLocation):
            for k in t.carriers:
                carried[k].add(t.id)
    groups: dict[tuple[object, ...], list[PodClass]] = {}
    for c in problem.classes:
        sig = (
            tuple(sorted(c.demand.items())),
            c.allowed_bin_types,
            c.allowed_existing,
            c.gpu_fraction_milli,
            c.topology,
            frozenset(carried[c.key]),
        )
        groups.setdefault(sig, []).append(c)
    if len(groups) == len(problem.classes):
        return None
    shape_of = {c.key: cs[0].key for cs in groups.values() for c in cs}
    classes = tuple(
        dataclasses.replace(cs[0], count=sum(c.count for c in cs), gang=None)
        for cs in groups.values()
    )
    topology = tuple(
        dataclasses.replace(t, carriers=frozenset(shape_of.get(k, k) for k in t.carriers))
        if isinstance(t, CoLocation)
        else t
        for t in problem.topology
    )
    merged = dataclasses.replace(problem, classes=classes, gangs=(), topology=topology)
    return Shapes(merged, shape_of)


@dataclass(slots=True)
class _Slot:
    """Pods of one shape on one bin still to hand out (and per GPU device, if fractional)."""

    bin: int
    left: int
    devices: list[int]


class _Handout:
    """The shape-level bins' pods, handed out to classes bin by bin."""

    def __init__(self, shapes: Shapes, problem: Problem, bins: Sequence[NewBin]) -> None:
        self.shapes, self.bins = shapes, bins
        self.types = {t.id: t for t in problem.bin_types}
        self.slots: defaultdict[str, list[_Slot]] = defaultdict(list)
        for i, b in enumerate(bins):
            for s, n in b.placement.counts.items():
                self.slots[s].append(_Slot(i, n, list(b.placement.gpu_devices.get(s, ()))))
        self.counts: list[dict[str, int]] = [{} for _ in bins]
        self.devices: list[dict[str, list[int]]] = [{} for _ in bins]
        self._domains: dict[tuple[bool, bool], list[tuple[str, str]]] = {}
        self._members: dict[tuple[bool, bool], dict[tuple[str, str], set[int]]] = {}

    def domain(self, i: int, gang: Gang) -> tuple[str, str]:
        """Return the (zone, pool) of bin ``i`` as far as ``gang`` cares."""
        return self.domains(gang)[i]

    def domains(self, gang: Gang) -> list[tuple[str, str]]:
        """Return every bin's (zone, pool) as far as ``gang`` cares."""
        flags = (gang.same_zone, gang.same_pool)
        if flags not in self._domains:
            kinds = [self.types[b.bin_type] for b in self.bins]
            self._domains[flags] = [
                (t.zone if gang.same_zone else "", t.pool if gang.same_pool else "") for t in kinds
            ]
        return self._domains[flags]

    def bins_in(self, gang: Gang, domain: tuple[str, str]) -> set[int]:
        """Return the indices of the bins in ``domain`` (as ``gang`` sees domains)."""
        flags = (gang.same_zone, gang.same_pool)
        if flags not in self._members:
            members: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
            for i, d in enumerate(self.domains(gang)):
                members[d].add(i)
            self._members[flags] = members
        return self._members[flags].get(domain, set())

    def room(self, need: Iterable[str], gang: Gang) -> dict[tuple[str, str], Counter[str]]:
        """Return the pods of each shape in ``need`` left per domain of ``gang``."""
        out: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
        for s in need:
            for slot in self.slots[s]:
                out[self.domain(slot.bin, gang)][s] += slot.left
        return out

    def take(self, key: str, n: int, only: set[int] | None = None) -> bool:
        """Give class ``key`` ``n`` pods (from bins in ``only``); return whether it got all."""
        for slot in self.slots[self.shapes.shape_of[key]]:
            if n == 0:
                break
            if slot.left == 0 or (only is not None and slot.bin not in only):
                continue
            m = min(n, slot.left)
            slot.left -= m
            n -= m
            counts = self.counts[slot.bin]
            counts[key] = counts.get(key, 0) + m
            if slot.devices:
                mine = self.devices[slot.bin].setdefault(key, [0] * len(slot.devices))
                for d, free in enumerate(slot.devices):
                    moved = min(free, m)
                    slot.devices[d] -= moved
                    mine[d] += moved
                    m -= moved
        return n == 0

    def result(self) -> list[NewBin]:
        """Return the bins with the class-level pods handed out so far."""
        out = []
        for b, counts, devices in zip(self.bins, self.counts, self.devices, strict=True):
            if counts:
                per = {k: _trim(v) for k, v in devices.items() if any(v)}
                out.append(NewBin(b.bin_type, Placement(counts, per)))
        return out


def split(
    shapes: Shapes,
    problem: Problem,
    bins: Sequence[NewBin],
    demand: Mapping[str, int],
    existing: Sequence[ExistingPlacement] = (),
) -> list[NewBin] | None:
    """Return ``bins`` (shape-level) with their pods handed to the classes of ``demand``.

    Gangs that need one zone or one pool take their pods from the bins of one such domain,
    largest gangs first, into the domain with the least room that fits them (best fit) or,
    failing that, the most room (worst fit); the other classes take what is left. None when
    some class cannot get its pods either way.
    """
    for best_fit in (True, False):
        hand = _Handout(shapes, problem, bins)
        handed = _hand_gangs(hand, problem, demand, existing, best_fit=best_fit)
        if handed is None:
            continue
        rest = [(k, n) for k, n in demand.items() if n > 0 and k not in handed]
        if all(hand.take(k, n) for k, n in rest):
            return hand.result()
    return None


def _hand_gangs(
    hand: _Handout,
    problem: Problem,
    demand: Mapping[str, int],
    existing: Sequence[ExistingPlacement],
    *,
    best_fit: bool,
) -> set[str] | None:
    """Give each gang that needs one zone or pool its pods there; return the classes handed."""
    placed_on = _gang_domains(problem, existing)
    handed: set[str] = set()
    for gang, keys in _gangs_largest_first(problem, demand):
        if not (gang.same_zone or gang.same_pool):
            continue  # the other classes' turn hands out its pods
        need: Counter[str] = Counter()
        for k in keys:
            need[hand.shapes.shape_of[k]] += demand[k]
        room = hand.room(need, gang)
        fits = [
            d
            for d, r in room.items()
            if all(r[s] >= n for s, n in need.items()) and _matches(d, placed_on.get(gang.id), gang)
        ]
        if not fits:
            return None
        sign = -1 if best_fit else 1
        chosen = max(fits, key=lambda d: (sign * sum(room[d].values()), d))
        where = hand.bins_in(gang, chosen)
        if not all(hand.take(k, demand[k], where) for k in keys):
            return None
        handed.update(keys)
    return handed


def _trim(per_device: list[int]) -> tuple[int, ...]:
    last = max(i for i, n in enumerate(per_device) if n)
    return tuple(per_device[: last + 1])


def _gangs_largest_first(
    problem: Problem, demand: Mapping[str, int]
) -> list[tuple[Gang, list[str]]]:
    """Return each gang with new pods in ``demand`` and its class keys, most pods first."""
    keys: defaultdict[str, list[str]] = defaultdict(list)
    for c in problem.classes:
        if c.gang is not None and demand.get(c.key, 0) > 0:
            keys[c.gang].append(c.key)
    gangs = [(g, keys[g.id]) for g in problem.gangs if g.id in keys]
    gangs.sort(key=lambda gk: (-sum(demand[k] for k in gk[1]), gk[0].id))
    return gangs


def _gang_domains(
    problem: Problem, existing: Sequence[ExistingPlacement]
) -> dict[str, tuple[str, str]]:
    """Return the (zone, pool) of the existing nodes each gang already has pods on."""
    gang_of = {c.key: c.gang for c in problem.classes if c.gang is not None}
    bins = {b.id: b for b in problem.existing}
    out: dict[str, tuple[str, str]] = {}
    for e in existing:
        b = bins.get(e.bin_id)
        if b is None:
            continue
        for k, n in e.placement.counts.items():
            g = gang_of.get(k)
            if g is not None and n > 0:
                out.setdefault(g, (b.zone, b.pool))
    return out


def _matches(domain: tuple[str, str], fixed: tuple[str, str] | None, gang: Gang) -> bool:
    """Return whether a bin domain agrees with where the gang's existing pods are."""
    if fixed is None:
        return True
    zone, pool = domain
    return (not gang.same_zone or zone == fixed[0]) and (not gang.same_pool or pool == fixed[1])


@dataclass(frozen=True, slots=True)
class LPView:
    """The problem the LP phases work on: ``shapes.problem``, or the problem itself."""

    problem: Problem
    shapes: Shapes | None = None

    def demand(self, demand: Mapping[str, int]) -> dict[str, int]:
        """Return the LP rows' demand for pods per class."""
        if self.shapes is None:
            return {k: n for k, n in demand.items() if n > 0}
        return self.shapes.demand(demand)

    def key(self, class_key: str) -> str:
        """Return the LP row of a class."""
        return class_key if self.shapes is None else self.shapes.shape_of[class_key]

    def pattern(self, p: Pattern) -> Pattern:
        """Return a class-level pattern as the LP sees it."""
        return p if self.shapes is None else self.shapes.pattern(p)

    def split(
        self,
        problem: Problem,
        bins: Sequence[NewBin],
        demand: Mapping[str, int],
        existing: Sequence[ExistingPlacement] = (),
    ) -> list[NewBin] | None:
        """Return the LP's bins with class-level pods (``split``), or None."""
        if self.shapes is None:
            return list(bins)
        return split(self.shapes, problem, bins, demand, existing)


def lp_view(problem: Problem, *, min_classes: int) -> LPView:
    """Return the merged problem when it has ``min_classes`` classes or more and some merge.

    Small problems keep their classes: the integer master then gets the LP's own columns
    (it cannot use merged ones, ``solver.cpsat``), and their LPs are fast anyway.
    """
    shapes = merge(problem) if len(problem.classes) >= min_classes else None
    return LPView(problem if shapes is None else shapes.problem, shapes)
