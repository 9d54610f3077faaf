"""`jointer simulate` consolidates on the run's deterministic budget, not a 1 s wall clock.

The replay is reproducible because every search is bounded by deterministic work; production's
one-second wall-clock limit per rescheduling simulation would cut the long ones at a point that
depends on the machine's load (``disruption.controller.simulation_planner``). Here every
rescheduling simulation of a consolidating run is watched: each must get the run's own safety
cap and its deterministic budget.
"""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.controllers.disruption import rescheduling
from provisioner.controllers.provisioning import planner as planner_module
from provisioner.controllers.provisioning.planner import PlannerConfig
from tests.e2e.conftest import bundled_variant, run, shortened

pytestmark = pytest.mark.usefixtures("test_catalog")


def test_every_rescheduling_simulation_plans_on_the_deterministic_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[PlannerConfig] = []
    plan_moves = planner_module.plan_moves

    def watched(view: Any, planner: PlannerConfig, *args: Any, **kwargs: Any) -> Any:
        seen.append(planner)
        return plan_moves(view, planner, *args, **kwargs)

    monkeypatch.setattr(rescheduling, "plan_moves", watched)
    scenario = shortened(
        bundled_variant(
            "deployment-0-to-200",
            ("at: 90m", "at: 30m"),
            ("replicas: 40}", "replicas: 60}"),
        ),
        45 * 60,
    )
    report, _ = run(scenario, solver_deterministic_time=0.5, solver_time_limit=20.0)

    assert report["summary"]["disruptions"].get("Underutilized", 0) >= 1
    assert seen
    assert {(p.deterministic_time, p.time_limit_seconds, p.num_workers) for p in seen} == {
        (0.5, 20.0, 1)
    }
