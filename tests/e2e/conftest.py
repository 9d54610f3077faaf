"""Helpers of the simulation tests: bundled scenarios, runs, and report queries.

Runs use the production controller manager unless a test passes the stub factory of
``tests/e2e/stub_controllers.py``. Every run is deterministic (seeded moto ids, seeded names,
one CP-SAT worker with a deterministic budget); nothing sleeps and nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudprovider.aws.catalog import Catalog, builtin_catalog, catalog_to_wire
from provisioner.apis.labels import LABEL_INSTANCE_FAMILY
from provisioner.simulation.runner import ControllersFactory, RunOptions, Simulation
from provisioner.simulation.scenario import Scenario, Step, load_scenario, parse_scenario
from provisioner.simulation.wiring import manager_factory

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
TEST_FAMILIES = frozenset(
    {"c6a", "c6i", "c7i", "m6a", "m6i", "m7i", "r6a", "r6i", "r7i"}
    | {"g4dn", "g5", "g5g", "g6", "g6e", "p5"}
)
"""The families the bundled scenarios' NodePools pick from (amd64 c/m/r, NVIDIA g and p5)."""
_CATALOG: dict[str, Path] = {}


@pytest.fixture(scope="session")
def test_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog file with the built-in us-east-1 data of ``TEST_FAMILIES`` only.

    Runs read it instead of the whole built-in catalog (1,325 types): the controllers list
    instance types on every provisioning and disruption pass, and a tenth of the types keeps
    the suite fast while every scenario still has the types its NodePools choose from.
    """
    catalog = builtin_catalog("us-east-1")
    chosen = tuple(
        t for t in catalog.instance_types if t.labels.get(LABEL_INSTANCE_FAMILY) in TEST_FAMILIES
    )
    path = tmp_path_factory.mktemp("catalog") / "us-east-1.json"
    path.write_text(json.dumps(catalog_to_wire(Catalog(catalog.region, chosen))))
    _CATALOG["path"] = path
    return path


def bundled(name: str) -> Scenario:
    return load_scenario(SCENARIOS / f"{name}.yaml")


def bundled_variant(name: str, *replacements: tuple[str, str]) -> Scenario:
    """A bundled scenario with some of its text replaced (each replacement must apply)."""
    text = (SCENARIOS / f"{name}.yaml").read_text()
    for old, new in replacements:
        assert old in text, f"{old!r} not in {name}.yaml"
        text = text.replace(old, new)
    return parse_scenario(yaml.safe_load(text), source=f"{name} (variant)", base=SCENARIOS)


def shortened(scenario: Scenario, duration: float) -> Scenario:
    """The scenario cut to ``duration`` virtual seconds (later steps dropped)."""
    return dataclasses.replace(
        scenario, duration=duration, steps=tuple(s for s in scenario.steps if s.at <= duration)
    )


def inline(body: dict[str, Any], *, base: Path = SCENARIOS) -> Scenario:
    return parse_scenario(body, source="inline", base=base)


def with_steps(scenario: Scenario, steps: Iterable[Step], **changes: Any) -> Scenario:
    return dataclasses.replace(
        scenario, steps=tuple(sorted(steps, key=lambda s: (s.at, s.index))), **changes
    )


def run(
    scenario: Scenario,
    *,
    factory: ControllersFactory = manager_factory,
    full_catalog: bool = False,
    **options: Any,
) -> tuple[dict[str, Any], Simulation]:
    """Replay ``scenario`` (on the test catalog unless it names one or ``full_catalog``)."""
    if scenario.catalog is None and not full_catalog:
        # modules that run scenarios use the ``test_catalog`` fixture (pytestmark)
        scenario = dataclasses.replace(scenario, catalog=_CATALOG["path"])
    options.setdefault("solver_deterministic_time", 0.5)
    simulation = Simulation(scenario, factory=factory, options=RunOptions(**options))
    return simulation.run(), simulation


def pods_of(report: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [p for p in report["pods"] if p["name"].startswith(prefix)]


def events(report: dict[str, Any], reason: str, obj: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in report["events"] if e["reason"] == reason and (obj is None or e["object"] == obj)
    ]


@pytest.fixture
def scenario_dir(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
