"""The rescheduling simulations' planner: a wall-clock budget, or the run's deterministic one."""

from __future__ import annotations

import pytest

from provisioner.controllers.disruption.config import DisruptionConfig
from provisioner.controllers.disruption.controller import simulation_planner
from provisioner.controllers.provisioning.planner import PlannerConfig


def test_a_wall_clock_run_gives_each_simulation_the_disruption_budget() -> None:
    planner = PlannerConfig(time_limit_seconds=30.0, num_workers=2, random_seed=5)
    simulations = simulation_planner(planner, DisruptionConfig(simulation_time_limit_seconds=1.0))
    assert simulations.time_limit_seconds == 1.0
    assert simulations.deterministic_time is None
    assert (simulations.num_workers, simulations.random_seed) == (2, 5)


def test_a_short_planner_limit_still_caps_the_simulations() -> None:
    planner = PlannerConfig(time_limit_seconds=0.5)
    config = DisruptionConfig(simulation_time_limit_seconds=1.0)
    assert simulation_planner(planner, config).time_limit_seconds == 0.5


def test_a_reproducible_run_is_not_cut_by_the_one_second_wall_clock() -> None:
    # jointer simulate: the search is bounded by deterministic work; the wall clock is a cap
    planner = PlannerConfig(
        time_limit_seconds=30.0, num_workers=1, random_seed=3, deterministic_time=1.0
    )
    simulations = simulation_planner(planner, DisruptionConfig(simulation_time_limit_seconds=1.0))
    assert simulations.time_limit_seconds == 30.0
    assert simulations.deterministic_time == 1.0
    assert (simulations.policy, simulations.num_workers, simulations.random_seed) == (
        planner.policy,
        1,
        3,
    )


@pytest.mark.parametrize("deterministic", [None, 1.0])
def test_the_simulations_keep_the_provisioners_scheduling_policies(
    deterministic: float | None,
) -> None:
    # PREFERENCE_POLICY=Ignore and MIN_VALUES_POLICY=BestEffort hold for consolidation's
    # simulations as for provisioning (Karpenter simulates with the provisioner's options)
    planner = PlannerConfig(
        ignore_preferences=True,
        min_values_best_effort=True,
        adaptive_budget=False,
        deterministic_time=deterministic,
    )
    simulations = simulation_planner(planner, DisruptionConfig())
    assert simulations.ignore_preferences
    assert simulations.min_values_best_effort
    assert not simulations.adaptive_budget
