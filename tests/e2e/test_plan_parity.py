"""The parity proof: `jointer plan` on a snapshot decides what the controller decided.

Every bundled scenario is replayed by `jointer simulate`; at each of the provisioning
controller's first batches the embedded cluster is written out as manifests (with the
provisioner's nominations and the instance types the cloud offered then), `jointer plan` runs
on them with the simulation's planner settings, and its NodeClaims (pool, instance types, zone,
capacity type, pods), existing-capacity placements and unschedulable pods must be exactly the
controller's. Each plan example is also applied to an empty simulated cluster: the controller's
first batch must be what `jointer plan` prints for the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.simulation.scenario import load_scenario
from tests.e2e.conftest import SCENARIOS, inline, run, shortened
from tests.e2e.parity import Recorder, replan, summary

pytestmark = pytest.mark.usefixtures("test_catalog")

PLAN_EXAMPLES = sorted((SCENARIOS.parent / "plan").glob("*.yaml"))
SCENARIO_FILES = sorted(p for p in SCENARIOS.glob("*.yaml") if p.name != "nodeclass.yaml")
SEED = 1
DETERMINISTIC = 0.5
HORIZON = 2 * 3600.0
"""Virtual seconds a bundled scenario is replayed for (its first batches come far earlier)."""


def _check(recorder: Recorder, region: str, policy: str = "jointer") -> None:
    assert recorder.batches, "the controller ran no provisioning batch"
    for batch in recorder.batches:
        offline = replan(
            batch, region=region, policy=policy, seed=SEED, deterministic=DETERMINISTIC
        )
        assert summary(offline) == summary(batch.decision), f"batch at {batch.at} differs"


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_plan_on_a_snapshot_decides_what_the_controller_decided(path: Path, tmp_path: Path) -> None:
    # the first batches come within minutes: long scenarios (a week) are replayed to HORIZON
    scenario = load_scenario(path)
    scenario = shortened(scenario, min(scenario.duration, HORIZON))
    recorder = Recorder(tmp_path, scenario.region, limit=3)
    run(scenario, factory=recorder.factory(), seed=SEED, solver_deterministic_time=DETERMINISTIC)
    _check(recorder, scenario.region)


@pytest.mark.parametrize("name", ["spot-outage", "kai-gang-8-gpus"])
def test_plan_agrees_with_the_controller_under_the_karpenter_style_policy_too(
    name: str, tmp_path: Path
) -> None:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    recorder = Recorder(tmp_path, scenario.region, limit=3)
    run(
        scenario,
        factory=recorder.factory(),
        seed=SEED,
        solver_deterministic_time=DETERMINISTIC,
        policy="greedy",
    )
    _check(recorder, scenario.region, policy="greedy")


@pytest.mark.parametrize("path", PLAN_EXAMPLES, ids=lambda p: p.stem)
def test_the_controller_launches_what_plan_prints_for_an_example(
    path: Path, tmp_path: Path
) -> None:
    scenario = inline(
        {
            "apiVersion": "jointer.dev/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": path.stem},
            "spec": {
                "region": "us-east-1",
                "clusterName": "demo",
                "duration": "2m",
                "steps": [{"at": "0s", "applyFile": str(path)}],
            },
        }
    )
    recorder = Recorder(tmp_path, scenario.region, limit=1)
    run(scenario, factory=recorder.factory(), seed=SEED, solver_deterministic_time=DETERMINISTIC)
    _check(recorder, scenario.region)
    first = recorder.batches[0].decision
    assert first.node_claims, "the example launches nothing"
