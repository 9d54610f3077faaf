"""The greedy phase on two cores: the cost-aware plan and its bound from a forked child."""

import dataclasses
import time

import pytest

from solver import cpsat, tiers
from solver.ahead import FORK_FROM, NOTHING_AHEAD, Ahead, forks
from solver.bounds import fluid_bound
from solver.config import SolverConfig
from solver.cpsat import _fluid, _greedy_tiers, _whole_plan_due, solve
from solver.forked import Forked, fork_allowed
from solver.greedy import GreedyTimeout, karpenter_ffd, plan_tiers
from solver.problem import Affinity, Problem, Solution, TopologyKey
from solver.weights import apply_pool_weights
from tests.unit.solver.builders import TEST_CONFIG, bt, pc
from tests.unit.solver.synthetic import diverse

TYPES = (bt("small", 3000, 8192, 100), bt("big", 6000, 16384, 210))
IDS = [t.id for t in TYPES]


def _group_filler() -> Problem:
    # Karpenter's first fit starts the one-node group on the filler's node: two pods stay out
    return Problem(
        TYPES,
        (
            pc("filler", 1, 4000, 512, IDS),
            pc("g", 6, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=(Affinity("aff", None, TopologyKey.HOSTNAME),),
    )


def _timeless(plan: Solution) -> Solution:
    return dataclasses.replace(plan, seconds=0.0)


def _quiet(_message: str) -> None:
    pass


def _children(monkeypatch: pytest.MonkeyPatch) -> list[Forked[object] | None]:
    """Keep each child ``Forked.start`` makes (None: the fork failed)."""
    children: list[Forked[object] | None] = []
    start = Forked.start

    def kept(fn):
        child = start(fn)
        children.append(child)
        return child

    monkeypatch.setattr(Forked, "start", kept)
    return children


@pytest.mark.parametrize("problem", [_group_filler(), diverse(80)], ids=["group", "diverse"])
def test_the_child_makes_the_same_plans_and_the_bound_of_the_cost_aware_plans_pods(
    problem: Problem,
) -> None:
    hard = time.monotonic() + 60
    alone, nothing = _greedy_tiers(problem, hard, _quiet)
    assert nothing == NOTHING_AHEAD
    forked, ahead = _greedy_tiers(problem, hard, _quiet, soft=time.monotonic() + 1)
    assert [[_timeless(r) for r in t.rounds] for t in forked] == [
        [_timeless(r) for r in t.rounds] for t in alone
    ]
    demand = forked[0].rounds[0].new_counts()
    # the child's second value, asked for by the search
    assert ahead.bound_of(demand) == fluid_bound(apply_pool_weights(problem), demand)
    assert ahead.bound_of({**demand, "other": 1}) is None
    # made while the child worked where Karpenter's plan left pods out and groups are held
    # to one node
    karpenter = forked[-1].rounds[0]
    one_bin = any(
        isinstance(t, Affinity) and t.key is TopologyKey.HOSTNAME for t in problem.topology
    )
    if karpenter.unplaced and one_bin and _whole_plan_due(karpenter, forked[0]):
        assert ahead.whole == karpenter_ffd(problem, fall_through=False, whole_groups=True)
    elif not (karpenter.unplaced and one_bin):
        assert ahead.whole is None


class _Child:
    """A forked child's stand-in sending ``values`` (None: it failed).

    ``ready``: what ``ready`` answers (whether the next value has come).
    """

    def __init__(self, *values: object, ready: bool = True) -> None:
        self.values = list(values)
        self.closed = False
        self.came = ready

    def ready(self) -> bool:
        return self.came

    def next(self, _deadline: float | None) -> tuple[bool, object]:
        value = self.values.pop(0) if self.values else None
        return value is not None, value

    def result(self, deadline: float | None) -> tuple[bool, object]:
        self.closed = True
        return self.next(deadline)

    def close(self) -> None:
        self.closed = True


def test_a_failed_child_leaves_the_plans_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    failed = _Child()
    monkeypatch.setattr(Forked, "start", lambda _fn: failed)
    messages: list[str] = []
    p = _group_filler()
    hard = time.monotonic() + 60
    plans, ahead = _greedy_tiers(p, hard, messages.append, soft=time.monotonic() + 1)
    alone, _ = _greedy_tiers(p, hard, _quiet)
    assert [_timeless(t.solution) for t in plans] == [_timeless(t.solution) for t in alone]
    assert ahead.bound_of(plans[0].rounds[0].new_counts()) is None
    assert ahead.whole is not None
    assert "cost-aware greedy made here: the forked child failed or is late" in messages
    assert failed.closed


def test_the_search_takes_the_bound_made_ahead_only_for_the_same_pods() -> None:
    p = _group_filler()
    demand = {"filler": 1, "g": 6}
    times = (time.monotonic() + 1, time.monotonic() + 60)

    def ahead() -> Ahead:
        return Ahead(child=_Child((dict(demand), 123)))  # type: ignore[arg-type]

    assert _fluid(p, demand, ahead(), times) == 123
    assert _fluid(p, {"g": 6}, ahead(), times) == fluid_bound(p, {"g": 6})
    assert _fluid(p, demand, NOTHING_AHEAD, times) == fluid_bound(p, demand)


def test_the_child_is_ended_when_the_search_never_asks_for_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a decisive greedy plan ends the solve before any search
    children = _children(monkeypatch)
    monkeypatch.setattr(cpsat, "forks", lambda _problem, _config: True)
    solved = cpsat.solve_with_greedy(diverse(80), TEST_CONFIG, decisive=lambda _plan: True)
    assert solved.best in solved.greedy
    assert len(children) == 1
    assert children[0] is not None
    assert children[0]._closed


def test_a_solve_that_forks_plans_as_one_that_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    p = diverse(80)
    alone = solve(p, TEST_CONFIG)
    made_here: list[int] = []
    real = fluid_bound

    def counted(*args: object, **kwargs: object) -> int:
        made_here.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cpsat, "forks", lambda _problem, _config: True)
    monkeypatch.setattr("solver.cpsat.fluid_bound", counted)
    forked = solve(p, TEST_CONFIG)
    assert _timeless(forked) == _timeless(alone)
    assert made_here == []  # the first tier's bound came from the child


def test_the_greedy_phase_forks_only_for_large_wall_clock_runs_on_two_workers() -> None:
    small = diverse(20)
    large = Problem(TYPES, (pc("a", FORK_FROM, 100, 128, IDS),))
    wall = SolverConfig(time_limit_seconds=5, num_workers=2)
    assert not forks(small, wall)
    assert forks(large, wall) == fork_allowed()
    assert not forks(large, dataclasses.replace(wall, num_workers=1))
    assert not forks(large, dataclasses.replace(wall, deterministic_time=1.0))


def test_the_child_is_ended_when_this_process_fails_first(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("broken")

    children = _children(monkeypatch)
    monkeypatch.setattr("solver.cpsat.plan_tiers", broken)
    with pytest.raises(RuntimeError, match="broken"):
        _greedy_tiers(_group_filler(), time.monotonic() + 60, _quiet, soft=time.monotonic() + 1)
    assert len(children) == 1
    assert children[0] is not None
    assert children[0]._closed


def _too_big_and_group() -> Problem:
    # both greedy plans leave the pod no offering holds out and place the one-node group
    return Problem(
        TYPES,
        (
            pc("huge", 1, 99_000, 512, IDS),
            pc("g", 3, 500, 512, IDS, topology=frozenset({"aff"})),
        ),
        topology=(Affinity("aff", None, TopologyKey.HOSTNAME),),
    )


def _with_child(
    monkeypatch: pytest.MonkeyPatch, problem: Problem, *, ready: bool
) -> tuple[list[str], Ahead, list[tiers.Tiers]]:
    hard = time.monotonic() + 60
    cost_aware = plan_tiers(problem, karpenter=False, deadline=hard)
    child = _Child(cost_aware, (cost_aware.rounds[0].new_counts(), 1), ready=ready)
    monkeypatch.setattr(Forked, "start", lambda _fn: child)
    messages: list[str] = []
    plans, ahead = _greedy_tiers(problem, hard, messages.append, soft=time.monotonic() + 1)
    assert plans[0] is cost_aware
    return messages, ahead, plans


def test_the_whole_group_plan_is_given_up_once_the_cost_aware_plan_places_as_many_pods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = _too_big_and_group()
    messages, ahead, plans = _with_child(monkeypatch, p, ready=True)
    karpenter, cost_aware = plans[1].rounds[0], plans[0].rounds[0]
    assert karpenter.unplaced
    assert not _whole_plan_due(karpenter, plans[0])
    assert len(cost_aware.unplaced) == len(karpenter.unplaced)
    assert ahead.whole is None
    assert "whole-group greedy given up: the cost-aware plan places as many pods" in messages
    # the search would not have used it: ``_whole_groups`` keeps the candidates as they are
    candidates = [cost_aware, karpenter]
    assert cpsat._whole_groups(p, candidates, time.monotonic() + 60, _quiet) == (
        candidates,
        [karpenter],
    )


def test_the_whole_group_plan_is_made_when_the_cost_aware_plan_places_more_or_is_not_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = karpenter_ffd(_group_filler(), fall_through=False, whole_groups=True)
    # the cost-aware plan places the group whole, Karpenter's leaves two pods out
    _, ahead, _ = _with_child(monkeypatch, _group_filler(), ready=True)
    assert ahead.whole == whole
    # not in yet: made in case it is wanted
    p = _too_big_and_group()
    messages, ahead, _ = _with_child(monkeypatch, p, ready=False)
    assert ahead.whole == karpenter_ffd(p, fall_through=False, whole_groups=True)
    assert not any("given up" in m for m in messages)


class _Refusing(_Child):
    """A child that raised what the cost-aware planner raised."""

    def next(self, _deadline: float | None) -> tuple[bool, object]:
        raise GreedyTimeout


def test_a_child_that_ran_out_of_time_leaves_karpenters_plan_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = _Refusing()
    monkeypatch.setattr(Forked, "start", lambda _fn: child)
    messages: list[str] = []
    p = _group_filler()
    plans, _ = _greedy_tiers(p, time.monotonic() + 60, messages.append, soft=time.monotonic() + 1)
    assert [_timeless(t.solution) for t in plans] == [
        _timeless(karpenter_ffd(p, fall_through=False))
    ]
    assert "cost-aware greedy skipped: time limit" in messages
