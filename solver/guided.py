"""The fluid-guided plan: first fit with each pod kept to the instance families an LP gives it.

On a catalog of families with different memory per CPU (AWS's c, m and r: about 2, 4 and
8 GiB), the cheap plans put the CPU-heavy pods on the CPU-rich family and the memory-heavy
ones on the memory-rich family, so that every node fills both. First-fit-decreasing opens
each node for the pod at hand, and the moves of ``solver.improve`` change a node or two at a
time, so neither finds that split: on the constraint mix (10,000 pods) the spot pool's nodes
were all m-family, CPU full and a third of their memory idle, at $68.45 an hour where the
same pods on c and m nodes together have a fluid cost of $62.98.

A small LP finds it (``_split``): the pods bucketed by memory per CPU, the offerings grouped
into families (``_families``: NodePool, capacity type, zone and memory per CPU), each bucket's
CPU and memory dealt fractionally over the families it may use at each family's cheapest
rate. Each class is then kept to the families its bucket uses, and Karpenter's first fit
plans that problem. Classes that must share a node (hostname affinity, co-location) keep
the families any of them uses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from ortools.linear_solver import pywraplp

from solver.greedy import karpenter_ffd, unplaced_entries
from solver.problem import Affinity, BinType, CoLocation, PodClass, Problem, Solution
from solver.problem import TopologyKey as Key

_CPU, _MEMORY = "cpu", "memory"
_RESOURCES = (_CPU, _MEMORY)
_GAP = 0.5
"""Offerings more than this many octaves of memory per CPU above the next lower one start
another family. AWS's families are an octave apart (c 2, m 4, r 8 GiB a CPU); within one,
the small sizes have up to about 0.35 octaves less once the kubelet's reservations are
taken. Families closer than this merge into one (a catalog of one family is not guided)."""
_STEPS = 8
"""Pods are bucketed by memory per CPU in steps of ``1 / _STEPS`` octave."""
_USED = 1e-6
"""A share of a bucket below this is GLOP's tolerance, not a use."""


def guided_plan(problem: Problem, *, deadline: float | None = None) -> Solution | None:
    """Return Karpenter's first fit of ``problem`` with each class kept to its LP families.

    None when the guide does not apply (``guided_problem``). The plan is valid for
    ``problem``: each class only loses offerings; its pods left out carry the reasons of
    ``problem``.

    Raises:
        GreedyTimeout: when ``deadline`` (a ``time.monotonic()`` value) passes first.
    """
    guided = guided_problem(problem)
    if guided is None:
        return None
    plan = karpenter_ffd(guided, deadline=deadline, fall_through=False)
    # pods left out are explained by the problem's own offerings, not the cut ones
    return dataclasses.replace(plan, unplaced=unplaced_entries(problem, plan.placed_counts()))


def guided_problem(problem: Problem) -> Problem | None:
    """Return ``problem`` with each class's offerings cut to the families the LP gives it.

    None when that changes nothing: pods request GPUs (their nodes are priced by the GPUs,
    which the LP search packs), the offerings are of one family, the LP has no solution, or
    no class loses an offering.
    """
    if problem.requests_gpus():
        return None
    family = _families(problem.bin_types)
    if len({f[3] for f in family.values()}) < 2:  # noqa: PLR2004 - one family: nothing to split
        return None
    used = _split(problem, family)
    if used is None:
        return None
    kept = _shared(problem, used)
    classes: list[PodClass] = []
    changed = False
    for c in problem.classes:
        allowed = frozenset(
            t for t in c.allowed_bin_types if t not in family or family[t][3] in kept[c.key]
        )
        if kept[c.key] and allowed and allowed != c.allowed_bin_types:
            changed = True
            c = dataclasses.replace(c, allowed_bin_types=allowed)  # noqa: PLW2901 - the cut class
        classes.append(c)
    return dataclasses.replace(problem, classes=tuple(classes)) if changed else None


Family = tuple[str, str, str, int]
"""NodePool, capacity type, zone and memory-per-CPU cluster of an offering."""


def _families(types: tuple[BinType, ...]) -> dict[str, Family]:
    """Return the family of each offering with CPU and memory.

    Memory per CPU clusters: sorted by it, an offering more than ``_GAP`` octaves above the
    one before starts a new cluster.
    """
    octave = {
        t.id: math.log2(t.capacity[_MEMORY] / t.capacity[_CPU])
        for t in types
        if t.capacity.get(_CPU, 0) > 0 and t.capacity.get(_MEMORY, 0) > 0
    }
    cluster: dict[str, int] = {}
    last, n = -math.inf, -1
    for tid in sorted(octave, key=lambda i: (octave[i], i)):
        if octave[tid] - last > _GAP:
            n += 1
        cluster[tid], last = n, octave[tid]
    return {
        t.id: (t.pool, t.capacity_type, t.zone, cluster[t.id]) for t in types if t.id in cluster
    }


def _split(problem: Problem, family: Mapping[str, Family]) -> dict[str, set[int]] | None:
    """Return the memory-per-CPU clusters each class's bucket uses in the LP, or None.

    The LP: each bucket's total CPU and memory dealt in shares over the families it may use;
    a family holds what its nodes' capacity holds, bought fractionally at the family's
    cheapest price per CPU (``_rates``); the cost is minimised.
    """
    rate = _rates(problem.bin_types, family)
    buckets = _buckets(problem.classes, family)
    if not buckets:
        return None
    solver = pywraplp.Solver.CreateSolver("GLOP")
    inf = solver.infinity()
    rows = {(f, r): solver.Constraint(-inf, 0) for f in rate for r in _RESOURCES}
    objective = solver.Objective()
    for f, t in rate.items():
        y = solver.NumVar(0, inf, "")
        objective.SetCoefficient(y, t.price_micros * 1e-6)
        for r in _RESOURCES:
            rows[f, r].SetCoefficient(y, -float(t.capacity[r]))
    objective.SetMinimization()
    shares: list[tuple[list[PodClass], Family, pywraplp.Variable]] = []
    for may, classes in buckets:
        whole = solver.Constraint(1, 1)
        need = {r: float(sum(c.demand[r] * c.count for c in classes)) for r in _RESOURCES}
        for f in sorted(may & rate.keys()):
            x = solver.NumVar(0, 1, "")
            whole.SetCoefficient(x, 1)
            for r in _RESOURCES:
                rows[f, r].SetCoefficient(x, need[r])
            shares.append((classes, f, x))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    used: dict[str, set[int]] = {}
    for classes, f, x in shares:
        if x.solution_value() > _USED:
            for c in classes:
                used.setdefault(c.key, set()).add(f[3])
    return used


def _rates(types: tuple[BinType, ...], family: Mapping[str, Family]) -> dict[Family, BinType]:
    """Return each family's offering of the lowest price per CPU."""
    rate: dict[Family, BinType] = {}
    for t in types:
        f = family.get(t.id)
        if f is None:
            continue
        best = rate.get(f)
        if best is None or t.price_micros * best.capacity[_CPU] < (
            best.price_micros * t.capacity[_CPU]
        ):
            rate[f] = t
    return rate


def _buckets(
    classes: tuple[PodClass, ...], family: Mapping[str, Family]
) -> list[tuple[frozenset[Family], list[PodClass]]]:
    """Return the classes with CPU and memory bucketed by their families and memory per CPU.

    Memory per CPU to ``1 / _STEPS`` octave; each bucket with the families it may use.
    """
    buckets: dict[tuple[frozenset[Family], int], list[PodClass]] = {}
    families: dict[frozenset[str], frozenset[Family]] = {}
    for c in classes:
        cpu, memory = c.demand.get(_CPU, 0), c.demand.get(_MEMORY, 0)
        if c.count <= 0 or cpu <= 0 or memory <= 0:
            continue
        may = families.get(c.allowed_bin_types)
        if may is None:
            may = frozenset(family[t] for t in c.allowed_bin_types if t in family)
            families[c.allowed_bin_types] = may
        if may:
            buckets.setdefault((may, round(_STEPS * math.log2(memory / cpu))), []).append(c)
    return [(may, members) for (may, _), members in buckets.items()]


def _shared(problem: Problem, used: Mapping[str, set[int]]) -> dict[str, set[int]]:
    """Return each class's clusters, classes that must share a node given each other's.

    Classes of one hostname ``Affinity``, and a hostname ``CoLocation``'s carriers and
    targets, must be able to share a node. A class without clusters (no bucket) is left as
    it is.
    """
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def join(key: str, tid: str) -> None:
        a, b = root(key), root("topology/" + tid)
        if a != b:
            parent[a] = b

    linked = {
        t.id: t
        for t in problem.topology
        if isinstance(t, Affinity | CoLocation) and t.key is Key.HOSTNAME
    }
    for c in problem.classes:
        for tid in sorted(c.topology & linked.keys()):
            join(c.key, tid)
    for t in linked.values():
        # a co-location's carriers must reach a node of its targets
        for key in sorted(t.carriers if isinstance(t, CoLocation) else ()):
            join(key, t.id)
    together: dict[str, set[int]] = {}
    for c in problem.classes:
        together.setdefault(root(c.key), set()).update(used.get(c.key, set()))
    return {c.key: together[root(c.key)] if c.key in used else set() for c in problem.classes}
