"""Lower bounds on the cost of new capacity.

Both bounds take ``demand``: pods per class key that must go to new bins (for a plan, what it
places on new capacity) and bound the cost of *any* set of new bins that holds those pods under
the problem's rules. They relax the integer problem, so they can only be lower:

* ``fluid_bound``: an LP (GLOP) where each class may be split fractionally over offerings and
  bins are bought fractionally: ``min sum_t price_t y_t`` s.t. ``sum_t z_ct = d_c``,
  ``sum_c dem_cr z_ct <= cap_tr y_t`` per resource, GPU
  ``sum_c (1000 gpu_c + frac_c) z_ct <= 1000 cap_t,gpu y_t`` (a bin's whole GPUs plus its
  devices hosting fractions are at most its GPUs, and those devices hold at most 1000 each),
  and per hostname group ``sum_{c in g} z_ct <= cap_g y_t``; the GPU rows are repeated with
  fractions rounded by dual feasible functions (``_dff``). Every feasible packing gives a
  feasible point (y_t = number of bins of type t), so the LP value is a lower bound. It is
  solved by delayed column generation over offerings (``_fluid_lp``), and never reported
  below ``resource_bound``, the whole-bins count of hostname groups, or the mixture duals
  (``_Mixture``: feasible duals of the same LP built without solving it, each offering priced
  by a mix of its resource rows; they stand in when the LP does not finish, e.g. thousands
  of distinct pod shapes).
* ``tiered_bound``: for plans that fall through NodePool weight tiers, the cheapest of the
  fluid LPs (with the pools' limits as rows) of the cases rule 9 leaves.
* ``resource_bound``: total demand per resource at the cheapest price per unit.

Capacities in the LP rows are what some mix of the pods' sizes can fill
(``reachable_capacity``): no bin holds more, so the relaxation stays valid.
* the column-generation (Farley) bound lives in ``solver.colgen.proven_bound``; the knapsack
  bounds it needs (``knapsack_upper``, ``fast_knapsack_upper``) are here.

Floating point: values are scaled down by ``1e-6`` relative (and 1e-3 absolute) before taking
the ceiling (costs are integers), so GLOP's tolerances never lift a bound above a feasible cost.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import numpy.typing as npt
from ortools.linear_solver import pywraplp

from solver.problem import GPU_MILLI, AntiAffinity, BinType, PodClass, Problem, SpreadConstraint
from solver.problem import TopologyKey as Key
from solver.weights import eligible_types, fits_one, top_tier

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


def safe_floor(value: float) -> int:
    """Round an LP bound to a safe integer bound.

    Plans cost whole micro-dollars, so the ceiling of the tolerance-reduced LP value is still
    below every feasible cost.
    """
    return max(0, math.ceil(value * (1 - _SAFETY) - 1e-3))


_REACH_UNITS = 1 << 16
"""``reachable_capacity`` computes exact subset sums up to this many units of the gcd."""


def reachable_capacity(cap: int, sizes: tuple[int, ...]) -> int:
    """Return the largest sum of pod sizes (any number of each of ``sizes``) at most ``cap``.

    The pods on one bin use at most this much of a resource (e.g. 1750m of a 1930m CPU when
    every pod asks a multiple of 250m), so it may replace the capacity in any LP row. Exact
    by subset sums over multiples of the sizes' gcd when that is small; else the capacity
    rounded down to a multiple of the gcd.
    """
    if cap <= 0 or not sizes:
        return max(0, cap)
    g = math.gcd(*sizes)
    units = cap // g
    if units > _REACH_UNITS:
        return units * g
    mask = (1 << (units + 1)) - 1
    reach = 1
    for size in sizes:
        step = size // g
        while step <= units:
            reach = (reach | (reach << step)) & mask
            step *= 2
    return (reach.bit_length() - 1) * g


def resource_bound(problem: Problem, demand: Mapping[str, int]) -> int:
    """A cheap lower bound in micro-dollars for placing ``demand`` (pods per class) on new bins.

    Any plan buys at least the total demand ``D_r`` of every resource ``r``, and a bin of type
    ``t`` supplies at most ``capacity_t[r]`` of it for ``price_t``; so every plan costs at least
    ``max_r D_r * min_t price_t / capacity_t[r]`` over the bin types some class may use. Weak,
    but computed in one pass, and never 0 when something must be bought: it stands in when the
    fluid LP runs out of time.
    """
    totals: dict[str, int] = {}
    allowed: set[frozenset[str]] = set()
    for c in problem.classes:
        count = demand.get(c.key, 0)
        if count <= 0:
            continue
        allowed.add(c.allowed_bin_types)
        for name, amount in c.demand.items():
            totals[name] = totals.get(name, 0) + amount * count
    usable = frozenset().union(*allowed)
    rates: dict[str, float] = {}
    for b in problem.bin_types:
        if b.id not in usable:
            continue
        for name, cap in b.capacity.items():
            if cap > 0 and name in totals:
                rate = b.price_micros / cap
                if rate < rates.get(name, math.inf):
                    rates[name] = rate
    best = 0
    for name, total in totals.items():
        if total > 0 and name in rates:
            best = max(best, math.floor(total * rates[name]))
    return best


@dataclasses.dataclass(frozen=True, slots=True)
class _Fluid:
    """The fluid LP's data over merged classes ("reps") and merged offerings ("types").

    Every row has one coefficient per rep and one capacity per type, so one bin of type ``t``
    can hold the fractional contents ``a`` with ``coef @ a <= cap[:, t]`` and ``a_c = 0`` for
    reps not in ``eligible[t]``.
    """

    counts: npt.NDArray[np.float64]
    """Pods per rep (n,)."""
    coef: npt.NDArray[np.float64]
    """Per-pod coefficient per row and rep (R, n)."""
    cap: npt.NDArray[np.float64]
    """Per-bin capacity per row and type (R, T)."""
    price: npt.NDArray[np.float64]
    """Price per type in dollars (T,)."""
    eligible: npt.NDArray[np.bool_]
    """Whether a rep may use a type: allowed and one pod fits an empty bin (T, n)."""
    bins: float
    """A bound in dollars from the number of bins alone (see ``_rows_of``)."""
    large: npt.NDArray[np.bool_]
    """Rows that also get a large-pod row per offering (resources and GPUs, (R,))."""
    ids: npt.NDArray[np.intp] = dataclasses.field(
        default_factory=lambda: np.zeros(0, dtype=np.intp)
    )
    """Index in ``problem.bin_types`` of each type's offering (T,)."""


def _dff(fraction: int, k: int) -> float:
    """Fekete-Schepers dual feasible function ``u_k`` on a GPU fraction in milli-devices.

    ``u_k(x) = x`` if ``(k + 1) x`` is integral, else ``floor((k + 1) x) / k``. For fractions
    sharing one device (``sum x <= 1``) it keeps ``sum u_k(x) <= 1``, so it may replace the
    fractions in any per-device capacity row.
    """
    if (k + 1) * fraction % GPU_MILLI == 0:
        return float(fraction)
    return GPU_MILLI * ((k + 1) * fraction // GPU_MILLI) / k


def _aggregate(
    problem: Problem, demand: Mapping[str, int], split: npt.NDArray[np.float64] | None = None
) -> _Fluid | None:
    """Build the fluid LP data; None when no pod with demand fits any allowed offering.

    ``split``: more key columns per offering (T, k); offerings differing in them never merge.

    Classes with equal demand, GPU fraction, hostname groups and allowed types are
    interchangeable in the fluid LP, so they merge. Offerings with equal capacities in the
    demanded resources, GPU devices and eligible classes merge into their cheapest one (other
    resources appear in no row). Both keep the LP value unchanged. Eligibility (allowed and
    one pod fits, as ``fits_one``) is one vectorised comparison per distinct allowed set.
    """
    caps = hostname_caps(problem)
    groups = frozenset(caps)
    merged: dict[tuple[object, ...], int] = {}
    reps: list[PodClass] = []
    counts: list[int] = []
    for c in problem.classes:
        n = demand.get(c.key, 0)
        if n <= 0:
            continue
        sig = (
            frozenset((r, v) for r, v in c.demand.items() if v),
            c.gpu_fraction_milli,
            c.topology & groups,
            c.allowed_bin_types,
        )
        i = merged.get(sig)
        if i is None:
            merged[sig] = len(reps)
            reps.append(c)
            counts.append(n)
        else:
            counts[i] += n
    if not reps:
        return None
    types = problem.bin_types
    gpu = problem.gpu_resource
    names = sorted({r for c in reps for r, v in c.demand.items() if v > 0} | {gpu})
    capm = np.array([[t.capacity.get(r, 0) for r in names] for t in types], dtype=np.float64)
    capm = capm.reshape(len(types), len(names))
    devices = np.array([t.gpus for t in types], dtype=np.float64)
    need = np.array([[c.demand.get(r, 0) for r in names] for c in reps], dtype=np.float64)
    frac = np.array([c.gpu_fraction_milli > 0 for c in reps], dtype=np.bool_)
    need[:, names.index(gpu)] += frac  # a fraction takes one free device
    fits = (capm[:, None, :] >= need[None, :, :]).all(axis=2)
    fits &= ~frac[None, :] | (devices >= 1)[:, None]
    by_set: dict[frozenset[str], list[int]] = {}
    for i, c in enumerate(reps):
        by_set.setdefault(c.allowed_bin_types, []).append(i)
    allowed = np.zeros_like(fits)
    for ids, cols in by_set.items():
        mask = np.fromiter((t.id in ids for t in types), dtype=np.bool_, count=len(types))
        allowed[:, cols] = mask[:, None]
    eligible = fits & allowed
    usable = eligible.any(axis=0)
    if not usable.any():
        return None
    keep = np.flatnonzero(usable)
    reps = [reps[i] for i in keep]
    eligible = eligible[:, keep]
    # cheapest offering per (capacities, devices, eligible reps)
    price = np.array([t.price_micros for t in types], dtype=np.float64)
    parts = [capm, devices[:, None], np.packbits(eligible, axis=1).astype(np.float64)]
    if split is not None:
        parts.append(split.reshape(len(types), -1))
    key = np.concatenate(parts, axis=1)
    order = np.lexsort((np.arange(len(types)), price))
    _, first = np.unique(key[order], axis=0, return_index=True)
    chosen = np.sort(order[first])
    chosen = chosen[eligible[chosen].any(axis=1)]
    data = _rows_of(
        problem,
        reps,
        np.array(counts, dtype=np.float64)[keep],
        ([types[j] for j in chosen], eligible[chosen]),
        caps,
    )
    return dataclasses.replace(data, ids=chosen)


def _rows_of(
    problem: Problem,
    reps: list[PodClass],
    counts: npt.NDArray[np.float64],
    offerings: tuple[list[BinType], npt.NDArray[np.bool_]],
    caps: Mapping[str, int],
) -> _Fluid:
    """Return the LP rows: resources, GPU rows and hostname group rows.

    Bins bound: every rep with demand needs a bin of a type eligible for it, and a hostname
    group with cap ``k`` and ``n`` pods needs ``ceil(n / k)`` bins, each eligible for one of
    its reps; so a plan costs at least that many of the cheapest such bins.

    GPU rows (milli-devices): whole GPUs plus the devices hosting fractions are at most the
    GPU capacity, and those devices are at most ``gpus``; each device holds fractions summing
    to at most 1000, so both rows hold with the fractions themselves and, by the DFF property,
    with ``_dff(f, k)`` in their place (a fraction above 1/2 then takes a whole device, three
    of 400 need two devices, ...).
    """
    types, eligible = offerings
    gpu = problem.gpu_resource
    coef: list[list[float]] = []
    cap: list[list[float]] = []
    for r in sorted({r for c in reps for r, v in c.demand.items() if v > 0} - {gpu}):
        coef.append([float(c.demand.get(r, 0)) for c in reps])
        sizes = tuple(sorted({c.demand.get(r, 0) for c in reps} - {0}))
        reach: dict[int, int] = {}
        for t in types:
            v = t.capacity.get(r, 0)
            if v not in reach:
                reach[v] = reachable_capacity(v, sizes)
        cap.append([float(reach[t.capacity.get(r, 0)]) for t in types])
    large = len(coef) + 1  # the resources and the first GPU row
    whole = [GPU_MILLI * c.demand.get(gpu, 0) for c in reps]
    fracs = [c.gpu_fraction_milli for c in reps]
    gcap = [float(GPU_MILLI * t.capacity.get(gpu, 0)) for t in types]
    dcap = [float(GPU_MILLI * t.gpus) for t in types]
    if any(whole) or any(fracs):
        coef.append([float(w + f) for w, f in zip(whole, fracs, strict=True)])
        cap.append(gcap)
    if any(fracs):
        coef.append([float(f) for f in fracs])
        cap.append(dcap)
    for k in sorted({GPU_MILLI // f for f in fracs if f})[:_DFF_ROWS]:
        coef.append([w + _dff(f, k) for w, f in zip(whole, fracs, strict=True)])
        cap.append(gcap)
        coef.append([_dff(f, k) for f in fracs])
        cap.append(dcap)
    price = np.array([t.price_micros * _UNIT for t in types], dtype=np.float64)
    cheapest = np.where(eligible, price[:, None], np.inf).min(axis=0)
    bins = float(cheapest.max())
    for gid, n in sorted(caps.items()):
        member = [1.0 if gid in c.topology else 0.0 for c in reps]
        if any(member):
            coef.append(member)
            cap.append([float(n)] * len(types))
            pods = float(np.dot(member, counts))
            low = float(cheapest[np.array(member, dtype=np.bool_)].min())
            bins = max(bins, math.ceil(pods / n - 1e-9) * low)
    return _Fluid(
        counts=counts,
        coef=np.array(coef, dtype=np.float64).reshape(len(coef), len(reps)),
        cap=np.array(cap, dtype=np.float64).reshape(len(cap), len(types)),
        price=price,
        eligible=eligible,
        bins=bins,
        large=np.arange(len(coef)) < large,
    )


_DFF_ROWS = 3
"""At most this many distinct ``u_k`` roundings of GPU fractions get their own rows."""


class _Mixture:
    """Dual points of the fluid LP that price every offering by one mix of its rows.

    For weights ``lam >= 0`` over the rows ``R'`` (the resources and the first GPU row) with
    ``sum lam <= 1``, give offering ``t`` the row prices ``u_rt = price_t lam_r / cap_rt``
    (0 on every other row). Then ``u_t @ cap_t <= price_t`` (the bin-count column's dual
    constraint) and ``pi_c = min_{t eligible for c} u_t @ coef_c`` meets every flow column's:
    a feasible dual of the fluid LP, so ``pi @ counts`` is a lower bound whatever ``lam``
    (LP weak duality; no solve, so it also holds when the LP does not finish). With one row it
    is a per-class resource bound (each class at its cheapest eligible price per unit).
    """

    def __init__(self, data: _Fluid) -> None:
        rows = np.flatnonzero(data.large & (data.coef > 0).any(axis=1))
        coef, cap = data.coef[rows], data.cap[rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(coef[:, None, :] > 0, coef[:, None, :] / cap[:, :, None], 0.0)
        # a pod that does not fit a row's (reachable) capacity cannot use the offering
        usable = data.eligible & np.isfinite(share).all(axis=0)
        share = np.where(np.isfinite(share), share, 0.0)
        self.rows = len(rows)
        self.cost = (data.price[None, :, None] * share).reshape(self.rows, -1)
        self.shape = usable.shape
        self.blocked = np.where(usable, 0.0, np.inf).ravel()
        self.counts = data.counts
        self.evaluations = 0
        self.lam = np.zeros(self.rows)

    def value(self, lam: npt.NDArray[np.float64]) -> float:
        """Return the bound in dollars of the row weights ``lam`` (``sum lam <= 1``)."""
        self.evaluations += 1
        per = (lam @ self.cost + self.blocked).reshape(self.shape).min(axis=0)
        per = np.where(np.isfinite(per), per, 0.0)  # a class nothing holds: no plan places it
        return float(per @ self.counts)

    def best(self, evaluations: int, deadline: float | None = None) -> float:
        """Return the best bound found in about ``evaluations`` evaluations.

        The bound is concave in ``lam`` (a sum of minima of linear functions): from the best
        row vertex, ``_ascend`` searches towards each row's vertex in turn. Past ``deadline``
        only the vertices are tried (a per-class resource bound).
        """
        if not self.rows:
            return 0.0
        vertices = np.eye(self.rows)
        started = time.monotonic()
        values = [self.value(v) for v in vertices]
        self.lam = vertices[int(np.argmax(values))]
        best = max(values)
        # a sweep of ``_ascend`` costs this many evaluations: only start one that ends in time
        sweep = (time.monotonic() - started) * (2 * _GOLDEN_STEPS + 1)
        while self.evaluations < evaluations and self.rows > 1 and not _past(deadline, sweep):
            self.lam, found = _ascend(self.value, self.lam, best)
            if found <= best * (1 + 1e-4):
                return max(best, found)
            best = found
        return best

    def refined(self) -> float:
        """Return the bound after each binding offering gets its own weights.

        Weights may differ per offering (each ``u_t`` is feasible alone). Starting from the
        best common weights, every offering that is some class's cheapest gets, in turn,
        the weights maximising ``sum_c d_c min(other_c, u_t @ coef_c)`` over the classes it
        may hold (``other_c``: the class's best price elsewhere; ``_ascend``). Each step
        keeps a feasible dual and never lowers it.
        """
        if not self.rows:
            return 0.0
        types, classes = self.shape
        cost = self.cost.reshape(self.rows, types, classes)
        blocked = self.blocked.reshape(types, classes)
        lam = np.repeat(self.lam[None, :], types, axis=0)
        value = np.einsum("tr,rtc->tc", lam, cost) + blocked
        for t in np.unique(value.argmin(axis=0)[np.isfinite(value.min(axis=0))]).tolist():
            cols = np.flatnonzero(np.isfinite(blocked[t]))
            gain = _Gain(
                cost[:, t, cols],
                self.counts[cols],
                np.delete(value[:, cols], t, axis=0).min(axis=0, initial=np.inf),
            )
            lam[t], _ = _ascend(gain, lam[t], gain(lam[t]))
            value[t, cols] = lam[t] @ gain.cost
        per = value.min(axis=0)
        return float(np.where(np.isfinite(per), per, 0.0) @ self.counts)


@dataclasses.dataclass(frozen=True, slots=True)
class _Gain:
    """What one offering's weights ``w`` are worth: ``sum_c d_c min(other_c, w @ cost_c)``."""

    cost: npt.NDArray[np.float64]
    counts: npt.NDArray[np.float64]
    other: npt.NDArray[np.float64]

    def __call__(self, w: npt.NDArray[np.float64]) -> float:
        return float(np.minimum(self.other, w @ self.cost) @ self.counts)


def _ascend(
    f: Callable[[npt.NDArray[np.float64]], float], lam: npt.NDArray[np.float64], value: float
) -> tuple[npt.NDArray[np.float64], float]:
    """Return better weights for the concave ``f`` (and their value) than ``lam`` (``value``).

    One golden-section search per row on the segment from the best weights so far to the
    row's vertex; the weights stay in the simplex.
    """
    golden = (math.sqrt(5) - 1) / 2
    for vertex in np.eye(len(lam)):
        lo, hi = 0.0, 1.0
        for _ in range(_GOLDEN_STEPS):
            a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
            if f((1 - a) * lam + a * vertex) < f((1 - b) * lam + b * vertex):
                lo = a
            else:
                hi = b
        step = (lo + hi) / 2
        candidate = (1 - step) * lam + step * vertex
        found = f(candidate)
        if found > value:
            lam, value = candidate, found
    return lam, value


def _past(deadline: float | None, ahead: float = 0.0) -> bool:
    """Return whether ``deadline`` passes within ``ahead`` seconds."""
    return deadline is not None and time.monotonic() + ahead >= deadline


_GOLDEN_STEPS = 6
"""Golden-section steps per segment of ``_Mixture.best`` (the segment shrinks to 5 %)."""
_MIXTURE_EVALUATIONS = 30
"""About this many evaluations of ``_Mixture.value`` per fluid bound."""
_ADD_PER_ROUND = 1
"""Offerings added to the restricted fluid LP in the first round; each later round adds
twice as many as the one before (at most the offerings that price out).

Doubling keeps the few rounds of a problem whose classes merge (Karpenter's diverse mix: 3
rounds) and cuts the rounds where each of hundreds of classes is its own row, which makes
every re-solve slow (constraint mix, 1k pods: 34 rounds and 2.7 s adding one at a time)."""


def fluid_bound(
    problem: Problem, demand: Mapping[str, int], *, deadline: float | None = None
) -> int:
    """Return the fluid LP lower bound in micro-dollars for placing ``demand`` on new bins.

    Never below ``resource_bound`` nor the bins bound (``_rows_of``). Classes with demand but
    no offering that can hold one pod are ignored (nothing can place them, so no plan does).
    The LP is built over merged classes and types (``_aggregate``) and solved by delayed
    column generation over offerings
    (``_fluid_lp``); stopped at ``deadline``, its duals still give a valid (Farley) bound,
    and the dual points of ``_Mixture`` (which need no solve) are then tried as well.
    """
    simple = resource_bound(problem, demand)
    data = _aggregate(problem, demand)
    if data is None:
        return simple
    solved, lp = _fluid_lp(data, deadline)
    value = max(lp or 0.0, data.bins)
    if not solved:
        # the mixture's duals are feasible ones of the same LP: below its optimum, so only
        # worth computing when the LP stopped before it; then in full, past the deadline
        # (0.2 s on 4,600 classes), as it often beats the stopped LP's bound
        mixture = _Mixture(data)
        value = max(value, mixture.best(_MIXTURE_EVALUATIONS), mixture.refined())
    return max(simple, safe_floor(value / _UNIT))


_Key = tuple[str, str] | int
"""A limit row ``(pool, resource)`` or an offering index (its ``max_count``)."""


def tiered_bound(
    problem: Problem, demand: Mapping[str, int], *, deadline: float | None = None
) -> int:
    """Return a lower bound for placing ``demand`` on new bins that respects pool weights.

    Rule 9 (``solver.weights``, checked by ``solver.validate``): a pod of a class without gang
    or topology (a *tiered* class when its eligible offerings span several weights) goes below
    its top tier only when no top-tier offering fresh-fits after the plan. For one witness
    offering ``t`` per class that means ``t``'s ``max_count`` is used up (``y_t >= max_count``)
    or, for some limited resource ``r`` of its pool ``P``, ``used_P,r >= L_P,r - usage_t,r + 1``:
    the class's *keys* and thresholds. Every valid plan is in one of the cases
    (``tier_cases``), each the fluid LP over every offering (``_Master``) with the pools'
    limits and ``max_count`` as rows plus the case's rows; the bound is the cheapest case,
    never below ``fluid_bound`` of the problem without weights. Falls back to that bound when
    a case LP is not solved by ``deadline``.
    """
    unweighted = dataclasses.replace(problem, pool_weights={})
    base = fluid_bound(unweighted, demand, deadline=deadline)
    if not any(problem.pool_weights.values()):
        return base
    top, cases = tier_cases(problem, demand)
    if not top:
        return base
    restricted = dataclasses.replace(
        problem,
        classes=tuple(
            dataclasses.replace(c, allowed_bin_types=top.get(c.key, c.allowed_bin_types))
            for c in problem.classes
        ),
    )
    split = _limit_columns(problem)
    best = math.inf
    for rows in cases:
        value = _limited_lp(restricted if rows is None else problem, demand, split, rows, deadline)
        if value is None:
            return base
        best = min(best, value)
    if math.isinf(best):
        return base
    return max(base, safe_floor(best / _UNIT))


def tier_cases(
    problem: Problem, demand: Mapping[str, int]
) -> tuple[dict[str, frozenset[str]], list[dict[_Key, int] | None]]:
    """Return the tiered classes' top tiers and cases covering every valid plan.

    A case is None (every tiered pod on its top tier) or rows ``used_key >= threshold``. A
    tiered class is *forced* below its top tier when its demand of some resource exceeds what
    every top-tier pool has left of it (``_forced``). Without forced classes: case None, or
    some class fell through, which holds one of its keys (``_witness_keys``): one case per key
    with the least threshold over the classes. With forced classes, see ``_cover``.
    """
    index = {t.id: i for i, t in enumerate(problem.bin_types)}
    top: dict[str, frozenset[str]] = {}
    keys: list[tuple[bool, dict[_Key, int]]] = []
    for c in problem.classes:
        n = demand.get(c.key, 0)
        if n <= 0 or c.gang is not None or c.topology:
            continue
        tier = top_tier(problem, c)
        if len(tier) == len(eligible_types(problem, c)):
            continue
        top[c.key] = tier
        types = [problem.bin_types[index[t]] for t in sorted(tier)]
        keys.append((_forced(problem, c, n, types), _witness_keys(problem, types, index)))
    forced = [own for is_forced, own in keys if is_forced]
    if forced:
        return top, list(_cover(forced))
    least: dict[_Key, int] = {}
    for _, own in keys:
        for k, v in own.items():
            least[k] = min(v, least.get(k, v))
    return top, [None, *({k: v} for k, v in least.items())]


def _witness_keys(
    problem: Problem, tier: list[BinType], index: Mapping[str, int]
) -> dict[_Key, int]:
    """Return the keys of the class's witness: the top-tier offering that blocks last.

    The witness has no ``max_count`` if one can, then the least share of its pool's limits.
    Its keys: ``(P, r) -> L_P,r - usage_r + 1`` per limited resource and, with a
    ``max_count``, its index ``-> max_count``. No keys: it always fits (the class never falls).
    """
    limits = {lim.pool: lim.remaining for lim in problem.limits}

    def size(bt: BinType) -> tuple[bool, float]:
        use = bt.usage_for_limits()
        lim = limits.get(bt.pool, {})
        return bt.max_count is not None, max(
            (use.get(r, 0) / v for r, v in lim.items() if v > 0), default=0.0
        )

    w = min(tier, key=size)
    own: dict[_Key, int] = {
        (w.pool, r): v - w.usage_for_limits().get(r, 0) + 1
        for r, v in limits.get(w.pool, {}).items()
    }
    if w.max_count is not None:
        own[index[w.id]] = w.max_count
    return own


def _forced(problem: Problem, c: PodClass, n: int, tier: list[BinType]) -> bool:
    """Return whether ``n`` pods of ``c`` cannot all go to their top tier ``tier``.

    True when, for some resource, every top-tier pool limits it, every top-tier offering
    counts at least its capacity against the limit, and the pods ask more than the pools left.
    """
    limits = {lim.pool: lim.remaining for lim in problem.limits}
    pools = {bt.pool for bt in tier}
    for r, v in c.demand.items():
        if v <= 0 or not all(r in limits.get(p, {}) for p in pools):
            continue
        if any(bt.usage_for_limits().get(r, 0) < bt.capacity.get(r, 0) for bt in tier):
            continue
        if n * v > sum(limits[p][r] for p in pools):
            return True
    return False


def _cover(forced: list[dict[_Key, int]]) -> Iterator[dict[_Key, int]]:
    """Yield cases covering every plan in which each forced class holds one of its keys.

    For each key ``k`` and each of its thresholds ``v``: ``used_k >= v`` plus, for the forced
    classes ``v`` does not block that have one other key, that key's threshold. A plan is in
    the case of one class's key ``k`` at the largest threshold of the classes holding ``k``.
    Cases whose rows are all at least another's (no lower LP value) are left out.
    """
    cases: list[dict[_Key, int]] = []
    for k in dict.fromkeys(k for own in forced for k in own):
        for v in sorted({own[k] for own in forced if k in own}):
            rows = {k: v}
            for own in forced:
                others = [o for o in own if o != k]
                if (k not in own or own[k] > v) and len(others) == 1:
                    rows[others[0]] = max(own[others[0]], rows.get(others[0], 0))
            cases.append(rows)
    for i, c in enumerate(cases):
        if not any(
            j != i and o.keys() <= c.keys() and all(o[k] <= c[k] for k in o) and (o != c or j < i)
            for j, o in enumerate(cases)
        ):
            yield c


def _limit_columns(problem: Problem) -> npt.NDArray[np.float64]:
    """Return per offering its pool, limit usage and ``max_count`` (they must not merge)."""
    pools = sorted({t.pool for t in problem.bin_types})
    limited = sorted({(lim.pool, r) for lim in problem.limits for r in lim.remaining})
    rows = []
    for i, t in enumerate(problem.bin_types):
        use = t.usage_for_limits()
        row = [float(pools.index(t.pool)), -1.0 if t.max_count is None else float(i)]
        row += [float(use.get(r, 0)) if t.pool == p else 0.0 for p, r in limited]
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(problem.bin_types), -1)


def _limited_lp(
    problem: Problem,
    demand: Mapping[str, int],
    split: npt.NDArray[np.float64],
    rows: Mapping[_Key, int] | None,
    deadline: float | None,
) -> float | None:
    """Return the fluid LP value in dollars over every offering with limits and ``rows``.

    ``rows``: ``used_P,r >= v`` for a key ``(P, r)``, ``y_i >= v`` for an offering index.
    ``inf`` when infeasible, None when not solved by ``deadline``.
    """
    data = _aggregate(problem, demand, split)
    if data is None:
        return math.inf
    master = _Master(data)
    for t in range(len(data.ids)):
        master.add(t)
    _limit_rows(master, problem, data.ids.tolist(), rows or {})
    s = master.solver
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.SetTimeLimit(max(1, int(left * 1000)))
    code = s.Solve()
    if code == pywraplp.Solver.INFEASIBLE:
        return math.inf
    if code != pywraplp.Solver.OPTIMAL:
        return None
    return float(s.Objective().Value())


def _limit_rows(
    master: _Master, problem: Problem, ids: list[int], rows: Mapping[_Key, int]
) -> None:
    """Add the pools' limits, ``max_count`` and ``rows`` to a master holding every offering."""
    s = master.solver
    types = [problem.bin_types[i] for i in ids]

    def row(lo: float, hi: float, coef: list[float]) -> None:
        ct = s.Constraint(lo, hi)
        for y, a in zip(master.ys, coef, strict=True):
            if a:
                ct.SetCoefficient(y, a)

    def usage(pool: str, r: str) -> list[float]:
        return [float(bt.usage_for_limits().get(r, 0)) if bt.pool == pool else 0.0 for bt in types]

    for lim in problem.limits:
        for r, v in lim.remaining.items():
            row(-s.infinity(), float(v), usage(lim.pool, r))
    for y, bt in zip(master.ys, types, strict=True):
        if bt.max_count is not None:
            y.SetUb(float(bt.max_count))
    for key, v in rows.items():
        if isinstance(key, int):
            row(float(v), s.infinity(), [1.0 if i == key else 0.0 for i in ids])
        else:
            row(float(v), s.infinity(), usage(*key))


class _Master:
    """The fluid LP restricted to some offerings (GLOP, grown incrementally)."""

    def __init__(self, data: _Fluid) -> None:
        self.data = data
        self.solver = pywraplp.Solver.CreateSolver("GLOP")
        # presolve costs more than it saves on these small, re-solved LPs
        self.solver.SetSolverSpecificParametersAsString("use_preprocessing: false")
        inf = self.solver.infinity()
        self.demand = [self.solver.Constraint(float(n), inf) for n in data.counts]
        self.objective = self.solver.Objective()
        self.objective.SetMinimization()
        self.types: list[int] = []
        self.rows: list[list[tuple[int, pywraplp.Constraint]]] = []
        self.large: list[list[tuple[int, pywraplp.Constraint]]] = []
        self.covers: list[npt.NDArray[np.bool_]] = []
        self.ys: list[pywraplp.Variable] = []

    def add(self, t: int) -> None:
        """Add offering ``t``: its bin count, one flow per eligible rep and its capacity rows.

        Row ``r`` of ``t`` reads ``sum_c coef_rc z_ct / cap_rt <= y_t``; its dual divided by
        ``cap_rt`` is the row's price ``u_r`` in the certificate (see ``certificates``).
        Each resource row with a pod larger than half the capacity also gets a large-pod row
        ``sum_c u(coef_rc / cap_rt) z_ct <= y_t`` with the dual feasible function ``u(x) = 1``
        above 1/2, ``1/2`` at 1/2, else 0: one bin holds at most one pod larger than half of
        it (or two of exactly half), so every packing satisfies it.
        """
        d, s = self.data, self.solver
        inf = s.infinity()
        y = s.NumVar(0, inf, "")
        self.objective.SetCoefficient(y, float(d.price[t]))
        reps = np.flatnonzero(d.eligible[t])
        zs = [s.NumVar(0, inf, "") for _ in reps]
        for i, z in zip(reps.tolist(), zs, strict=True):
            self.demand[i].SetCoefficient(z, 1)
        rows: list[tuple[int, pywraplp.Constraint]] = []
        for r in range(d.coef.shape[0]):
            cap = float(d.cap[r, t])
            used = np.flatnonzero(d.coef[r, reps])
            if not len(used) or cap <= 0:
                continue
            ct = s.Constraint(-inf, 0)
            ct.SetCoefficient(y, -1)
            for j, a in zip(used.tolist(), (d.coef[r, reps[used]] / cap).tolist(), strict=True):
                ct.SetCoefficient(zs[j], a)
            rows.append((r, ct))
        large: list[tuple[int, pywraplp.Constraint]] = []
        for r in np.flatnonzero(d.large).tolist():
            cap = float(d.cap[r, t])
            twice = 2 * d.coef[r, reps]
            if cap <= 0 or not (twice > cap).any():
                continue
            ct = s.Constraint(-inf, 0)
            ct.SetCoefficient(y, -1)
            for j in np.flatnonzero(twice >= cap).tolist():
                ct.SetCoefficient(zs[j], 1.0 if twice[j] > cap else 0.5)
            large.append((r, ct))
        self.types.append(t)
        self.ys.append(y)
        self.rows.append(rows)
        self.large.append(large)
        # offerings whose eligible reps are all eligible on t (t's certificate applies to them)
        self.covers.append(~(d.eligible & ~d.eligible[t]).any(axis=1))

    def solve(self, deadline: float | None) -> bool:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.solver.SetTimeLimit(max(1, int(left * 1000)))
        return bool(self.solver.Solve() == pywraplp.Solver.OPTIMAL)

    def duals(self) -> npt.NDArray[np.float64]:
        """Return the (non-negative) duals ``pi`` of the demand rows."""
        return np.array([max(0.0, ct.dual_value()) for ct in self.demand], dtype=np.float64)

    def certificates(self) -> npt.NDArray[np.float64]:
        """Return row prices ``u`` (types in the master x rows) from the capacity rows' duals.

        LP duality of the master gives, for master offering ``t0``, ``pi_c <= u @ coef[:, c]``
        for every rep eligible on ``t0``. Then any offering ``t`` whose eligible reps are
        eligible on ``t0`` has ``max pi @ a <= u @ cap[:, t]`` over its fractional contents.
        """
        d = self.data
        out = np.zeros((len(self.types), d.coef.shape[0]), dtype=np.float64)
        for m, (t, rows) in enumerate(zip(self.types, self.rows, strict=True)):
            for r, ct in rows:
                out[m, r] = max(0.0, -ct.dual_value()) / float(d.cap[r, t])
        return out

    def large_uppers(self) -> npt.NDArray[np.float64] | None:
        """Return what the large-pod rows add to the certificates (master types x types).

        With ``e_r`` the dual of master offering ``t0``'s large-pod row ``r``, rep ``c``
        also gets ``e_r u(coef_rc / cap_r,t0)`` in its certificate. In one bin of ``t`` those
        terms sum to at most ``e_r`` when ``cap_rt <= cap_r,t0`` (``u`` only grows, and ``t``'s
        own large-pod row holds), and else to at most ``e_r * 2 cap_rt / cap_r,t0`` (as
        ``u(x) <= 2x``). None when no large-pod row has a dual.
        """
        d = self.data
        duals = np.zeros((len(self.types), d.coef.shape[0]), dtype=np.float64)
        for m, rows in enumerate(self.large):
            for r, ct in rows:
                duals[m, r] = max(0.0, -ct.dual_value())
        if not duals.any():
            return None
        own = d.cap[:, self.types].T  # (M, R): the master offerings' capacities
        with np.errstate(divide="ignore", invalid="ignore"):
            grown = np.where(own[:, :, None] > 0, 2 * d.cap[None, :, :] / own[:, :, None], 0.0)
        factor = np.where(d.cap[None, :, :] <= own[:, :, None], 1.0, grown)
        out: npt.NDArray[np.float64] = np.einsum("mr,mrt->mt", duals, factor)
        return out


def _seed(data: _Fluid) -> list[int]:
    """Return starting offerings: each rep's cheapest, and per row the cheapest per capacity."""
    price = data.price
    out: set[int] = set()
    for i in range(data.eligible.shape[1]):
        col = np.flatnonzero(data.eligible[:, i])
        out.add(int(col[np.argmin(price[col])]))
    with np.errstate(divide="ignore"):
        per = np.where(data.cap > 0, price[None, :] / data.cap, np.inf)
    for r in range(per.shape[0]):
        if np.isfinite(per[r]).any():
            out.add(int(np.argmin(per[r])))
    return sorted(out)


def _fluid_lp(data: _Fluid, deadline: float | None) -> tuple[bool, float | None]:
    """Solve the fluid LP by adding offerings as needed; return a valid bound in dollars.

    Returns whether the LP was solved to its optimum, and the bound.

    Each round solves the restricted LP and bounds every offering's best fractional contents
    ``v_t >= max pi @ a`` with the certificates of the master offerings whose eligible reps
    include ``t``'s (``inf`` without one). Offerings with ``v_t > price_t`` join the master.
    Farley: ``theta = min(1, min_t price_t / v_t)`` makes ``theta pi`` dual feasible for the
    full fluid LP (``theta pi @ a <= price_t`` for every bin's contents), so
    ``theta pi @ counts`` is a lower bound; when no offering is left to add, ``theta = 1`` up to
    tolerances and the bound is the LP value. The bound is None if the first LP is not
    solved.
    """
    master = _Master(data)
    for t in _seed(data):
        master.add(t)
    value: float | None = None
    add = _ADD_PER_ROUND
    while True:
        if not master.solve(deadline):
            return False, value
        pi = master.duals()
        certs = master.certificates() @ data.cap
        extra = master.large_uppers()
        if extra is not None:
            certs += extra
        sub = np.array(master.covers)
        upper = np.where(sub, certs, np.inf).min(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(upper > 0, data.price / upper, np.inf)
        theta = min(1.0, float(ratio.min()))
        value = max(value or 0.0, theta * float(pi @ data.counts))
        ratio[master.types] = np.inf
        todo = [t for t in np.argsort(ratio, kind="stable") if ratio[t] < 1 - 1e-9]
        todo, add = todo[:add], 2 * add
        if not todo:
            return True, value
        if deadline is not None and time.monotonic() >= deadline:
            return False, value
        for t in todo:
            master.add(int(t))


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
