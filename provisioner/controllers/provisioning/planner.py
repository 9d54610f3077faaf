"""One planning step: build the problem, solve it, turn the solution into NodeClaims.

This is the provisioning controller's scheduling step; `jointer plan` runs exactly this with
files as input. Each new NodeClaim lists every instance type that fits its pods (cheapest
first, as Karpenter hands CreateFleet its flexibility), and is priced on the cheapest of them.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import time
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from typing import Final, Literal, NamedTuple

from provisioner.apis import labels as wk
from provisioner.controllers.provisioning.builder import Build, build_problem
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.offerings import Option
from provisioner.controllers.provisioning.plan import (
    ExistingNodePlacement,
    IgnoredPod,
    NodeClaimPlan,
    Plan,
    SolverReport,
    UnschedulablePod,
)
from provisioner.controllers.provisioning.podfacts import PodFacts
from provisioner.controllers.provisioning.reasons import limit_reached
from provisioner.controllers.provisioning.units import demand_units
from provisioner.scheduling.resources import add
from solver.config import SolverConfig
from solver.problem import GPU_MILLI, BinType, Solution, Status, UnplacedReason
from solver.room import exceeds_existing_room

__all__ = ["MAX_INSTANCE_TYPES", "NewCapacityLimit", "PlannerConfig", "plan", "plan_moves"]

PRICE_ROUNDING: Final = 1e-6
"""The solver sees prices in micro-dollars per hour."""

MAX_INSTANCE_TYPES: Final = 600
"""Karpenter's cap on the instance types of one NodeClaim (``MaxInstanceTypes``)."""

NODES: Final = "nodes"
GPU: Final = "nvidia.com/gpu"

Policy = Literal["jointer", "greedy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerConfig:
    """How to plan.

    Attributes:
        policy: ``jointer`` (optimiser) or ``greedy`` (Karpenter-style first-fit-decreasing).
        time_limit_seconds: the optimiser's wall-clock budget.
        adaptive_budget: stop on the solver's own budget, which grows with the pending pods
            (``solver.cpsat.budget_seconds``), when it comes before the time limit (which
            is a cap, not a floor).
        num_workers: CP-SAT workers.
        random_seed: CP-SAT seed.
        deterministic_time: CP-SAT deterministic budget (tests), or None.
        log: receives solver progress lines.
        ignore_preferences: ``PREFERENCE_POLICY=Ignore``: preferred affinities and
            ``ScheduleAnyway`` spreads are dropped before planning.
        min_values_best_effort: ``MIN_VALUES_POLICY=BestEffort``: a NodeClaim whose
            candidates cannot meet ``minValues`` lists them all instead of failing, and is
            annotated ``karpenter.sh/nodeclaim-min-values-relaxed: "true"``.
    """

    policy: Policy = "jointer"
    time_limit_seconds: float = 5.0
    adaptive_budget: bool = True
    num_workers: int = 2
    random_seed: int = 0
    deterministic_time: float | None = None
    log: Callable[[str], None] | None = None
    ignore_preferences: bool = False
    min_values_best_effort: bool = False


def plan(view: ClusterView, config: PlannerConfig | None = None) -> Plan:
    """Plan new capacity for the pending pods of ``view``.

    Raises:
        PodError: for a pod or DaemonSet whose spec cannot be read.
    """
    config = config or PlannerConfig()
    if config.policy != "greedy":
        # imported before the clock starts: a first import (OR-Tools, 0.5-1 s) is not planning
        from solver import cpsat  # noqa: F401, PLC0415 - ortools is heavy; import when planning
    with _collector_paused():
        started = time.monotonic()
        build = build_problem(view)
        solution = _solve(build, config, spent=time.monotonic() - started)
        return _to_plan(
            build,
            solution,
            time.monotonic() - started,
            best_effort=config.min_values_best_effort,
            names=ClaimNames(_taken(view)),
        )


@dataclass(frozen=True, slots=True)
class NewCapacityLimit:
    """The new capacity worth buying for a consolidation's moving pods.

    A consolidation's replacement must cost less than the nodes it replaces, and may not be
    spot when every one of them is spot and spot-to-spot consolidation is off; other
    offerings can only lead to a rejected command.

    Attributes:
        below_per_hour: offerings at this hourly price or above are left out.
        spot: whether spot offerings may be used.
        reason: why a moving pod that finds no place cannot move (the consolidation's own
            words: no replacement it could take exists).
    """

    below_per_hour: float
    reason: str
    spot: bool = True

    def admits(self, bin_type: BinType) -> bool:
        """Whether new bins of ``bin_type`` may carry the moving pods."""
        if not self.spot and bin_type.capacity_type == wk.CAPACITY_TYPE_SPOT:
            return False
        return bin_type.price_micros < self.below_per_hour * 1_000_000


def plan_moves(
    view: ClusterView,
    config: PlannerConfig,
    moving: Collection[str],
    *,
    limit: NewCapacityLimit | None = None,
) -> tuple[Plan, ...]:
    """Plan ``view`` for a rescheduling simulation that moves the pods ``moving`` (keys).

    Returns the optimiser's plan, then the greedy plans it started from (none with the
    ``greedy`` policy), for the caller to judge by its own measure: a consolidation takes at
    most one replacement node, and the optimiser, which minimises the cost of all new
    capacity, may spread the moving pods over two cheap nodes where first-fit puts them on
    one. A greedy plan that puts every moving pod on an existing node ends the search at once
    and is returned alone: no plan moves them for less. With ``limit``, classes of moving
    pods only (pending pods of the same shape keep every offering) may use only the
    offerings it admits: when none is admitted, they fit on existing nodes or not at all,
    and when they ask for more than those nodes have left (``solver.room``) no search can
    move them all, so the greedy plans are returned without one.
    The ``greedy`` policy plans Karpenter's way: first-fit-decreasing over every offering,
    judged afterwards (``limit`` is not applied).

    Raises:
        PodError: for a pod or DaemonSet whose spec cannot be read.
    """
    if config.policy == "greedy":
        return (plan(view, config),)
    from solver import cpsat  # noqa: PLC0415 - ortools is heavy; import when planning

    with _collector_paused():
        started = time.monotonic()
        build = build_problem(view)
        if limit is not None:
            build = _limited(build, moving, limit)
        classes = _classes_of(build, moving)
        if not build.problem.classes:
            solved = cpsat.Solved(Solution((), (), (), 0, 0, Status.OPTIMAL), ())
        else:
            decisive: Callable[[Solution], bool] = functools.partial(_moves_onto_existing, classes)
            if limit is not None and exceeds_existing_room(build.problem, classes):
                # no plan moves every pod, so no search changes the consolidation's answer;
                # the greedy plans say which pod stays and why
                decisive = _any_plan
            solved = cpsat.solve_with_greedy(
                build.problem,
                # no minimum search: a pass runs many simulations, each timed by its own
                # budget as before (the minimum is for a dry run in a fresh process)
                _solver_config(config, spent=time.monotonic() - started, least=0.0),
                decisive=decisive,
            )
        seconds = time.monotonic() - started
        plans = [solved.best] + [g for g in solved.greedy if g is not solved.best]
        if _moves_onto_existing(classes, solved.best):
            plans = [solved.best]
        return tuple(
            _to_plan(
                build,
                solution,
                seconds,
                best_effort=config.min_values_best_effort,
                names=ClaimNames(_taken(view)),
            )
            for solution in plans
        )


def _limited(build: Build, moving: Collection[str], limit: NewCapacityLimit) -> Build:
    """``build`` with the classes made only of ``moving`` pods limited to ``limit``."""
    types = {t.id: t for t in build.problem.bin_types}
    classes = []
    narrowed: dict[str, str] = {}
    for pod_class in build.problem.classes:
        if all(p.key in moving for p in build.class_pods.get(pod_class.key, ())):
            allowed = frozenset(
                t for t in pod_class.allowed_bin_types if t in types and limit.admits(types[t])
            )
            if allowed != pod_class.allowed_bin_types:
                narrowed[pod_class.key] = limit.reason
                pod_class = dataclasses.replace(pod_class, allowed_bin_types=allowed)  # noqa: PLW2901
        classes.append(pod_class)
    problem = dataclasses.replace(build.problem, classes=tuple(classes))
    return dataclasses.replace(build, problem=problem, narrowed=narrowed)


def _taken(view: ClusterView) -> set[str]:
    return {n.claim_name for n in view.nodes} | {n.name for n in view.nodes}


def _classes_of(build: Build, pods: Collection[str]) -> frozenset[str]:
    """The problem classes holding any of ``pods``."""
    return frozenset(
        key for key, members in build.class_pods.items() if any(p.key in pods for p in members)
    )


def _any_plan(_: Solution) -> bool:
    return True


def _moves_onto_existing(classes: frozenset[str], solution: Solution) -> bool:
    """Whether ``solution`` places every pod of ``classes`` on existing nodes."""
    if any(u.class_key in classes for u in solution.unplaced):
        return False
    return not any(k in classes for b in solution.new_bins for k in b.placement.counts)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector for one planning step.

    A step allocates millions of short-lived objects, most of them freed by reference
    counting anyway; the collector's full passes over the heap (informer caches included)
    made the step's latency vary by up to 1.8x at 10k pods. It runs again afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _solve(build: Build, config: PlannerConfig, *, spent: float) -> Solution:
    from solver import cpsat, greedy  # noqa: PLC0415 - ortools is heavy; import when planning

    if not build.problem.classes:
        return Solution((), (), (), 0, 0, Status.OPTIMAL)
    if config.policy == "greedy":
        return greedy.karpenter_ffd(build.problem)
    return cpsat.solve(build.problem, _solver_config(config, spent=spent))


def _solver_config(
    config: PlannerConfig, *, spent: float, least: float | None = None
) -> SolverConfig:
    """The solver's configuration; ``least``: its minimum search (None: the solver's)."""
    solver = SolverConfig(
        time_limit_seconds=config.time_limit_seconds,
        adaptive_budget=config.adaptive_budget,
        num_workers=config.num_workers,
        random_seed=config.random_seed,
        deterministic_time=config.deterministic_time,
        spent_seconds=spent,
        log_callback=config.log,
    )
    return solver if least is None else dataclasses.replace(solver, min_search_seconds=least)


def _to_plan(
    build: Build, solution: Solution, seconds: float, *, best_effort: bool, names: ClaimNames
) -> Plan:
    queues = {key: list(pods) for key, pods in build.class_pods.items()}
    claims: list[NodeClaimPlan] = []
    unschedulable = [UnschedulablePod(pod, reason) for pod, reason in build.unschedulable]
    room = _LimitRoom(build, [build.options[b.bin_type] for b in solution.new_bins])
    fraction_of = {c.key: c.gpu_fraction_milli for c in build.problem.classes}
    gang_of = {c.key: c.gang for c in build.problem.classes if c.gang is not None}
    launchable = _by_launch_target(build.options, best_effort=best_effort, shared=build.shared)
    for index, new_bin in enumerate(solution.new_bins):
        option = build.options[new_bin.bin_type]
        pods = [
            pod
            for key, n in sorted(new_bin.placement.counts.items())
            for pod in _take(queues, key, n)
        ]
        allowed = [build.class_allowed[key] for key in new_bin.placement.counts]
        fractions = [
            fraction_of[key] for key, n in new_bin.placement.counts.items() for _ in range(n)
        ]
        claim = _node_claim(
            names.next(option.pool.name, index, pods[0].key if pods else ""),
            option,
            pods,
            allowed,
            launchable[_launch_target(option)],
            budget=room.budget(index),
            fractions=tuple(fractions),
        )
        if isinstance(claim, str):
            unschedulable.extend(UnschedulablePod(pod.key, claim) for pod in pods)
            room.listed(index, ())
        else:
            gangs = sorted({gang_of[key] for key in new_bin.placement.counts if key in gang_of})
            planned = claim.plan
            claims.append(dataclasses.replace(planned, gangs=tuple(gangs)) if gangs else planned)
            room.listed(index, claim.options)
    existing = [
        ExistingNodePlacement(
            placement.bin_id,
            tuple(
                pod.key
                for key, n in sorted(placement.placement.counts.items())
                for pod in _take(queues, key, n)
            ),
        )
        for placement in solution.existing
    ]
    left = _limits_left(build, [build.options[b.bin_type] for b in solution.new_bins])
    for unplaced in solution.unplaced:
        reason = build.narrowed.get(unplaced.class_key) or _unplaced_reason(
            build, unplaced.class_key, unplaced.reason, left
        )
        unschedulable.extend(
            UnschedulablePod(pod.key, reason)
            for pod in _take(queues, unplaced.class_key, unplaced.count)
        )
    for key, rest in queues.items():  # defensive: every pod is reported exactly once
        unschedulable.extend(
            UnschedulablePod(
                pod.key, _unplaced_reason(build, key, UnplacedReason.NO_CAPACITY, left)
            )
            for pod in rest
        )
    lower_bound = solution.lower_bound_micros / 1_000_000
    cost = sum(claim.price_per_hour for claim in claims)
    status = str(solution.status)
    # prices reach the solver rounded to micro-dollars: equal up to that rounding is proven
    if claims and cost - lower_bound <= PRICE_ROUNDING * len(claims):
        status = str(Status.OPTIMAL)
    return Plan(
        node_claims=tuple(claims),
        existing_nodes=tuple(e for e in existing if e.pods),
        unschedulable=tuple(sorted(unschedulable, key=lambda u: u.pod)),
        ignored=tuple(IgnoredPod(pod, reason) for pod, reason in sorted(build.ignored)),
        lower_bound_per_hour=lower_bound,
        solver=SolverReport(status, seconds),
    )


def _limit_usage(option: Option) -> dict[str, int]:
    """What one node of ``option`` counts against its NodePool's limits (solver units)."""
    return {**demand_units(option.instance_type.capacity), NODES: 1}


class _LimitRoom:
    """How far each new NodeClaim's listed types may reach into its NodePool's limits.

    A NodeClaim may be launched as any type it lists, so the pool's limits must hold when
    every claim launches as its largest listed type (Karpenter counts the largest option).
    The solver keeps the *chosen* types within the limits; the slack they leave is shared
    out in claim order: a claim may list types up to its chosen type's usage plus an even
    share of the slack left (what a claim does not use passes to the later ones). The chosen
    type is always listed, so the plan costs what the solver found.
    """

    def __init__(self, build: Build, chosen: Sequence[Option]) -> None:
        remaining = {limit.pool: limit.remaining for limit in build.problem.limits}
        self._chosen = [_limit_usage(option) for option in chosen]
        self._pool = [o.pool.name if o.pool.name in remaining else None for o in chosen]
        used: dict[str, dict[str, int]] = {}
        self._left: dict[str, int] = {}
        for pool, usage in zip(self._pool, self._chosen, strict=True):
            if pool is not None:
                used[pool] = add(used.get(pool, {}), usage)
                self._left[pool] = self._left.get(pool, 0) + 1
        self._slack = {
            pool: {name: max(amount - used[pool].get(name, 0), 0) for name, amount in room.items()}
            for pool, room in remaining.items()
            if pool in used
        }

    def budget(self, index: int) -> Mapping[str, int] | None:
        """The most any type listed by new bin ``index`` may count against its pool's limits."""
        pool = self._pool[index]
        if pool is None:
            return None
        share = self._left[pool]
        chosen = self._chosen[index]
        return {
            name: chosen.get(name, 0) + slack // share for name, slack in self._slack[pool].items()
        }

    def listed(self, index: int, options: Sequence[Option]) -> None:
        """Record what bin ``index`` listed: its largest listed type takes from the slack."""
        pool = self._pool[index]
        if pool is None:
            return
        self._left[pool] -= 1
        chosen = self._chosen[index]
        largest = dict(chosen)
        for option in options:
            for name, amount in _limit_usage(option).items():
                largest[name] = max(largest.get(name, 0), amount)
        slack = self._slack[pool]
        for name in slack:
            slack[name] = max(slack[name] - (largest.get(name, 0) - chosen.get(name, 0)), 0)


def _within(option: Option, budget: Mapping[str, int] | None) -> bool:
    if budget is None:
        return True
    usage = _limit_usage(option)
    return all(usage.get(name, 0) <= amount for name, amount in budget.items())


def _fractions_fit(fractions: Sequence[int], option: Option, whole_milli: int) -> bool:
    """Whether GPU fractions (milli-GPU each) pack first-fit-decreasing onto the free devices."""
    wanted = sorted((f for f in fractions if f), reverse=True)
    if not wanted:
        return True
    devices = (option.instance_type.capacity.get(GPU, 0) - whole_milli) // GPU_MILLI
    free = [GPU_MILLI] * max(devices, 0)
    for fraction in wanted:
        slot = next((i for i, room in enumerate(free) if room >= fraction), None)
        if slot is None:
            return False
        free[slot] -= fraction
    return True


def _take(queues: dict[str, list[PodFacts]], key: str, count: int) -> list[PodFacts]:
    queue = queues.get(key, [])
    taken, queues[key] = queue[:count], queue[count:]
    return taken


def _launch_target(option: Option) -> tuple[str, str, str]:
    # a reserved launch targets one reservation: its capacity type "is" the reservation
    return (option.pool.name, option.offering.zone, option.offering.key.partition("/")[2])


def _by_launch_target(
    options: Mapping[str, Option],
    *,
    best_effort: bool = False,
    shared: dict[object, object] | None = None,
) -> _LaunchTargets:
    """Options grouped by what one NodeClaim launch shares: pool, zone, capacity type."""
    return _LaunchTargets(options, best_effort=best_effort, shared=shared)


class _LaunchTargets:
    """The :class:`_TargetIndex` of each launch target, built when a NodeClaim first asks.

    A plan usually launches into a few targets of the thousands its options span (a
    consolidation simulation into one or none), so only those are indexed. With ``shared``
    (:attr:`Build.shared`: the options are a disruption pass's, the same objects build after
    build) the grouping and the indexes are kept there for the next plans.
    """

    def __init__(
        self,
        options: Mapping[str, Option],
        *,
        best_effort: bool = False,
        shared: dict[object, object] | None = None,
    ) -> None:
        self._options = options
        self._best_effort = best_effort
        self._shared: dict[object, object] = {} if shared is None else shared

    def __getitem__(self, target: tuple[str, str, str]) -> _TargetIndex:
        key = ("launch-target", target, self._best_effort)
        index = self._shared.get(key)
        if not isinstance(index, _TargetIndex):
            index = _TargetIndex(self._groups()[target], best_effort=self._best_effort)
            self._shared[key] = index
        return index

    def _groups(self) -> _TargetGroups:
        known = self._shared.get("launch-targets")
        if isinstance(known, _TargetGroups):
            return known
        groups = _TargetGroups()
        for option in self._options.values():
            groups.setdefault(_launch_target(option), []).append(option)
        self._shared["launch-targets"] = groups
        return groups


class _TargetGroups(dict[tuple[str, str, str], list[Option]]):
    """The options of each launch target."""


class _TargetIndex:
    """The options of one launch target, cheapest first, as bits of a mask.

    A launch target has at most one option per instance type, so "the instance types that
    fit, cheapest first" is the set bits of an integer mask in order: the allowed sets and the
    per-resource capacity thresholds become masks once, and each NodeClaim ANDs a few of them
    instead of testing every option.
    """

    def __init__(self, options: Sequence[Option], *, best_effort: bool = False) -> None:
        self.best_effort = best_effort
        self.options = sorted(options, key=lambda o: (o.price, o.instance_type.name))
        self._bit = {o.id: 1 << i for i, o in enumerate(self.options)}
        self._all = (1 << len(self.options)) - 1
        names = sorted({name for o in self.options for name in o.capacity})
        self._thresholds = {name: self._threshold(name) for name in names}
        self._allowed: dict[frozenset[str], int] = {}
        self._listings: dict[int, _Listing | None] = {}

    def _threshold(self, name: str) -> tuple[list[int], list[int]]:
        """Distinct capacities of ``name`` ascending, and per value the options with at least it."""
        by_value: dict[int, int] = {}
        for i, option in enumerate(self.options):
            value = option.capacity.get(name, 0)
            by_value[value] = by_value.get(value, 0) | (1 << i)
        values = sorted(by_value)
        masks = [0] * len(values)
        running = 0
        for k in range(len(values) - 1, -1, -1):
            running |= by_value[values[k]]
            masks[k] = running
        return values, masks

    def bit(self, option: Option) -> int:
        """The bit of ``option`` (one of this target's)."""
        return self._bit[option.id]

    def allowed(self, ids: frozenset[str]) -> int:
        """The mask of this target's options among ``ids`` (cached per set)."""
        mask = self._allowed.get(ids)
        if mask is None:
            mask = 0
            for option_id, bit in self._bit.items():
                if option_id in ids:
                    mask |= bit
            self._allowed[ids] = mask
        return mask

    def fitting(self, requests: Mapping[str, int]) -> int:
        """The mask of the options ``requests`` fit on (as :func:`fits` decides)."""
        mask = self._all
        for name, milli in requests.items():
            if milli <= 0:
                continue
            threshold = self._thresholds.get(name)
            if threshold is None:
                return 0
            values, masks = threshold
            k = bisect_left(values, milli)
            if k == len(values):
                return 0
            mask &= masks[k]
        return mask

    def members(self, mask: int) -> list[Option]:
        """The options of ``mask``, cheapest first."""
        bits = format(mask, "b")[::-1]
        return list(compress(self.options, map(int, bits)))

    def listing(self, mask: int) -> _Listing | None:
        """What a NodeClaim whose candidates are ``mask`` lists (cached per mask).

        The candidates cheapest first, cut to Karpenter's cap (further when the pool's
        ``minValues`` need it), or None when ``minValues`` cannot be met (under BestEffort:
        every candidate, marked relaxed). A launch target has one pool and one option per
        instance type, so the names are unique.
        """
        if mask in self._listings:
            return self._listings[mask]
        unique = self.members(mask)
        listing: _Listing | None = None
        requirements = unique[0].pool.requirements
        length: int | None = len(unique)
        relaxed = False
        if requirements.has_min_values():
            length = requirements.min_values_prefix([o.labels for o in unique])
            if length is None and self.best_effort:
                length, relaxed = len(unique), True
            if length is not None:
                unique = unique[: max(length, min(len(unique), MAX_INSTANCE_TYPES))]
        if length is not None:
            unique = unique[:MAX_INSTANCE_TYPES]
            names = tuple(o.instance_type.name for o in unique)
            listing = _Listing(tuple(unique), names, relaxed)
        self._listings[mask] = listing
        return listing


class _Listing(NamedTuple):
    """The instance types of one NodeClaim, cheapest first: the options and their names."""

    options: tuple[Option, ...]
    names: tuple[str, ...]
    relaxed: bool = False


def _node_claim(
    name: str,
    chosen: Option,
    pods: Sequence[PodFacts],
    allowed: Sequence[frozenset[str]],
    target: _TargetIndex,
    *,
    budget: Mapping[str, int] | None = None,
    fractions: tuple[int, ...] = (),
) -> _Claim | str:
    """The NodeClaim for one new bin (with the options it lists), or why it cannot launch."""
    pod_requests = add(*(pod.requests for pod in pods)) if pods else {}
    mask = target.fitting(pod_requests) if allowed else 0
    for ids in allowed:
        mask &= target.allowed(ids)
    if budget is not None or any(fractions):
        whole = pod_requests.get(GPU, 0)
        mask = sum(
            target.bit(option)
            for option in target.members(mask)
            if _within(option, budget) and _fractions_fit(fractions, option, whole)
        )
    listing = target.listing(mask | target.bit(chosen))
    if listing is None:
        return "pod didn't schedule because NodePool couldn't meet minValues requirements"
    cheapest = listing.options[0]
    requests = add(pod_requests, cheapest.daemon_requests)
    plan = NodeClaimPlan(
        name=name,
        node_pool=chosen.pool.name,
        instance_types=listing.names,
        instance_type=cheapest.instance_type.name,
        capacity_type=cheapest.offering.capacity_type,
        zone=cheapest.offering.zone,
        price_per_hour=cheapest.price,
        reservation_id=cheapest.reservation_id,
        requests=requests,
        pods=tuple(pod.key for pod in pods),
        min_values_relaxed=listing.relaxed,
    )
    return _Claim(plan, listing.options)


class _Claim(NamedTuple):
    """A planned NodeClaim and the options it lists."""

    plan: NodeClaimPlan
    options: tuple[Option, ...]


_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


class ClaimNames:
    """NodeClaim names for one plan, unique whatever the count.

    ``<pool>-<five characters>`` like Kubernetes' generateName, stable for the same plan;
    never one given earlier in the plan nor one in ``taken`` (the cluster's NodeClaims and
    Nodes): a taken name is hashed again.
    """

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._used = set(taken)

    def next(self, pool: str, index: int, first_pod: str) -> str:
        """The name of the plan's ``index``-th new NodeClaim (of ``pool``, first pod)."""
        seed = f"{pool}/{index}/{first_pod}"
        attempt = 0
        while True:
            name = f"{pool}-{_suffix(seed if attempt == 0 else f'{seed}/{attempt}')}"
            if name not in self._used:
                self._used.add(name)
                return name
            attempt += 1


def _suffix(seed: str) -> str:
    """Five characters of Kubernetes' generateName alphabet, from a hash of ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _limits_left(build: Build, chosen: Sequence[Option]) -> dict[str, dict[str, int]]:
    """Per limited NodePool, what its limits leave after the plan's new nodes (solver units)."""
    left = {limit.pool: dict(limit.remaining) for limit in build.problem.limits}
    for option in chosen:
        room = left.get(option.pool.name)
        if room is not None:
            usage = _limit_usage(option)
            for name in room:
                room[name] -= usage.get(name, 0)
    return left


def _limit_reasons(
    build: Build, class_key: str, left: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """For each limited NodePool the class may use, the limit one more node of it would break.

    The limit named is the one that rules out most of the class's instance types there (the
    first of the NodePool's limits on a tie).
    """
    by_pool: dict[str, list[Option]] = {}
    for option_id in sorted(build.class_allowed.get(class_key, ())):
        option = build.options[option_id]
        if option.pool.name in left:
            by_pool.setdefault(option.pool.name, []).append(option)
    reasons = []
    for pool in sorted(by_pool, key=lambda p: (-by_pool[p][0].pool.weight, p)):
        room = left[pool]
        blocked: dict[str, int] = {}
        for option in by_pool[pool]:
            usage = _limit_usage(option)
            for name, amount in room.items():
                if usage.get(name, 0) > amount:
                    blocked[name] = blocked.get(name, 0) + 1
        limits = by_pool[pool][0].pool.limits or {}
        named = [name for name in limits if blocked.get(name)]
        if named:
            resource = max(named, key=lambda name: blocked[name])
            reasons.append(limit_reached(pool, resource, limits[resource]))
    return reasons


def _unplaced_reason(
    build: Build,
    class_key: str,
    reason: UnplacedReason,
    left: Mapping[str, Mapping[str, int]] | None = None,
) -> str:
    pods = build.class_pods.get(class_key, [])
    first = pods[0] if pods else None
    gang = next((c.gang for c in build.problem.classes if c.key == class_key), None)
    if reason is UnplacedReason.GANG and gang is not None:
        info = build.gangs.get(gang)
        minimum = info.min_count if info is not None else "?"
        name = info.key if info is not None else gang
        return (
            f"pod group {name} cannot be placed whole: fewer than {minimum} of its members "
            "fit on one NodePool in one zone, so none are placed"
        )
    if reason is UnplacedReason.LIMIT:
        reasons = _limit_reasons(build, class_key, left or {})
        if first is not None:
            signature = first.signature
            reasons += build.explainer.not_ready(signature.tolerations, signature.alternatives)
        return "; ".join(reasons) or "NodePool limits or offering counts are exhausted"
    if reason is UnplacedReason.TOPOLOGY:
        return "topology spread or pod (anti-)affinity constraints cannot be met"
    what = first.key if first is not None else class_key
    return f"no capacity fits {what} under its constraints"
