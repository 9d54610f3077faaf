"""``solver.room``: pods that may use no new node against what existing nodes have left."""

from __future__ import annotations

import dataclasses
from collections import Counter

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from solver.cpsat import solve
from solver.greedy import cost_aware_ffd, karpenter_ffd
from solver.problem import ExistingBin, PodClass, Problem
from solver.room import exceeds_existing_room
from solver.validate import violations
from tests.unit.solver.builders import GPU, TEST_CONFIG, bt, pc
from tests.unit.solver.strategies import problems


def _node(id_: str, cpu: int, mem: int = 8192, *, gpus: int = 0) -> ExistingBin:
    room = {"cpu": cpu, "memory": mem, "pods": 20, GPU: gpus}
    return ExistingBin(id_, "a", "p", room, (1000,) * gpus)


def _existing_only(key: str, count: int, cpu: int, nodes: set[str], **kw: object) -> PodClass:
    return dataclasses.replace(
        pc(key, count, cpu, 512, [], **kw), allowed_existing=frozenset(nodes)
    )


def _problem(*classes: PodClass, nodes: tuple[ExistingBin, ...]) -> Problem:
    return Problem((bt("t", 4000, 8192, 100),), classes, nodes)


def test_pods_asking_for_more_than_their_nodes_have_left_cannot_all_move() -> None:
    nodes = (_node("n1", 1000), _node("n2", 1500))
    fits = _problem(_existing_only("c", 5, 500, {"n1", "n2"}), nodes=nodes)
    assert not exceeds_existing_room(fits, {"c"})
    too_many = _problem(_existing_only("c", 6, 500, {"n1", "n2"}), nodes=nodes)
    assert exceeds_existing_room(too_many, {"c"})
    # only the nodes the class may use count
    one_node = _problem(_existing_only("c", 3, 500, {"n1"}), nodes=nodes)
    assert exceeds_existing_room(one_node, {"c"})


def test_classes_that_each_fit_may_not_fit_together() -> None:
    nodes = (_node("n1", 2000),)
    a = _existing_only("a", 3, 500, {"n1"})
    b = _existing_only("b", 2, 500, {"n1"})
    problem = _problem(a, b, nodes=nodes)
    assert not exceeds_existing_room(problem, {"a"})
    assert not exceeds_existing_room(problem, {"b"})
    assert exceeds_existing_room(problem, {"a", "b"})


def test_classes_that_may_take_new_nodes_or_are_not_asked_about_are_left_out() -> None:
    nodes = (_node("n1", 500),)
    may_grow = dataclasses.replace(
        pc("g", 10, 1000, 512, ["t"]), allowed_existing=frozenset({"n1"})
    )
    stuck = _existing_only("s", 10, 1000, {"n1"})
    problem = _problem(may_grow, stuck, nodes=nodes)
    assert not exceeds_existing_room(problem, {"g"})
    assert not exceeds_existing_room(problem, set())
    assert exceeds_existing_room(problem, {"s"})


def test_whole_gpus_count_and_fractions_do_not() -> None:
    nodes = (_node("n1", 4000, gpus=1),)
    whole = dataclasses.replace(_existing_only("w", 2, 100, {"n1"}), demand={"cpu": 100, GPU: 1})
    assert exceeds_existing_room(_problem(whole, nodes=nodes), {"w"})
    shared = _existing_only("f", 2, 100, {"n1"}, gpu_fraction_milli=500)
    shared = dataclasses.replace(shared, demand={"cpu": 100, GPU: 1})
    assert not exceeds_existing_room(_problem(shared, nodes=nodes), {"f"})


def _without_new_bins(problem: Problem, data: st.DataObject) -> tuple[Problem, set[str]]:
    """``problem`` with some of its classes (returned) allowed existing bins only."""
    assume(problem.existing)
    chosen = data.draw(st.sets(st.sampled_from([c.key for c in problem.classes]), min_size=1))
    classes = tuple(
        dataclasses.replace(c, allowed_bin_types=frozenset()) if c.key in chosen else c
        for c in problem.classes
    )
    return dataclasses.replace(problem, classes=classes), chosen


@settings(max_examples=200, deadline=None)
@given(problems(), st.data())
def test_no_valid_plan_places_every_pod_when_the_room_is_exceeded(
    problem: Problem, data: st.DataObject
) -> None:
    """Whatever the greedy plans (valid plans) do, some pod of the classes stays unplaced."""
    problem, chosen = _without_new_bins(problem, data)
    stuck = exceeds_existing_room(problem, chosen)
    for plan in (cost_aware_ffd(problem), karpenter_ffd(problem)):
        assert not violations(problem, plan)
        unplaced = Counter[str]()
        for u in plan.unplaced:
            unplaced[u.class_key] += u.count
        if stuck:
            assert any(unplaced[k] for k in chosen)


@settings(max_examples=40, deadline=None)
@given(problems(), st.data())
def test_the_optimiser_never_places_every_pod_when_the_room_is_exceeded(
    problem: Problem, data: st.DataObject
) -> None:
    problem, chosen = _without_new_bins(problem, data)
    assume(exceeds_existing_room(problem, chosen))
    plan = solve(problem, TEST_CONFIG)
    assert not violations(problem, plan)
    assert any(u.class_key in chosen and u.count for u in plan.unplaced)
