"""The lean CP-SAT model: the same model and answer as OR-Tools' own, without camelCase aliases."""

from __future__ import annotations

from ortools.sat.python import cp_model

from solver.cpmodel import CpModel


def _knapsack(model: cp_model.CpModel) -> tuple[cp_model.CpModel, list[cp_model.IntVar]]:
    xs = [model.new_int_var(0, 4, f"x{i}") for i in range(3)]
    model.add(3 * xs[0] + 5 * xs[1] + 7 * xs[2] <= 20)
    model.maximize(4 * xs[0] + 7 * xs[1] + 9 * xs[2])
    return model, xs


def test_the_lean_model_is_the_same_model_with_the_same_optimum() -> None:
    plain, plain_xs = _knapsack(cp_model.CpModel())
    lean, lean_xs = _knapsack(CpModel())
    assert str(lean.proto) == str(plain.proto)
    answers = []
    for model, xs in ((plain, plain_xs), (lean, lean_xs)):
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        assert solver.solve(model) == cp_model.OPTIMAL
        answers.append((solver.objective_value, [solver.value(x) for x in xs]))
    assert answers[0] == answers[1]
    assert answers[0][0] == 28  # four of the second item fill the 20 units exactly


def test_the_lean_model_has_no_camel_case_aliases() -> None:
    assert hasattr(cp_model.CpModel(), "NewIntVar")
    assert not hasattr(CpModel(), "NewIntVar")
