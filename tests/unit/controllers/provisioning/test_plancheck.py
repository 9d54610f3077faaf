"""The plan checker itself: it accepts a valid plan and flags each kind of corruption."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.plancheck import check_plan
from tests.unit.controllers.provisioning.scenario import (
    node,
    nodepool,
    pod,
    run_plan,
    small_catalog,
    zone_spread,
)

TAINTED = nodepool("tainted", taints=[{"key": "x", "effect": "NoSchedule"}])
OBJECTS: list[dict[str, Any]] = [
    nodepool("default", limits={"cpu": "40"}),
    TAINTED,
    node("n-a", cpu="2", memory="4Gi"),
    pod("bound", node_name="n-a", cpu="1500m", labels={"app": "web"}),
    *(
        pod(f"web-{i}", cpu="1", labels={"app": "web"}, spreads=[zone_spread("web")])
        for i in range(4)
    ),
]


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = run_plan(OBJECTS, tmp_path_factory.mktemp("plancheck"))
    assert run.violations == []
    assert len(run.plan["nodeClaims"]) >= 2
    return run.plan


def _drop_pod(plan: dict[str, Any]) -> None:
    plan["nodeClaims"][0]["pods"].pop()


def _duplicate_pod(plan: dict[str, Any]) -> None:
    plan["unschedulable"].append({"pod": plan["nodeClaims"][0]["pods"][0], "reason": "x"})


def _price(plan: dict[str, Any]) -> None:
    plan["nodeClaims"][0]["pricePerHour"] += 0.01
    plan["costPerHour"] += 0.01


def _cost(plan: dict[str, Any]) -> None:
    plan["costPerHour"] += 1


def _bound(plan: dict[str, Any]) -> None:
    plan["lowerBoundPerHour"] = plan["costPerHour"] + 1


def _too_small(plan: dict[str, Any]) -> None:
    claim = plan["nodeClaims"][0]
    claim["pods"].extend(p for c in plan["nodeClaims"][1:] for p in c["pods"])
    for c in plan["nodeClaims"][1:]:
        c["pods"] = []


def _taint(plan: dict[str, Any]) -> None:
    plan["nodeClaims"][0]["nodePool"] = "tainted"


def _unlisted_type(plan: dict[str, Any]) -> None:
    plan["nodeClaims"][0]["instanceTypes"].append("p4d.24xlarge")


def _not_cheapest(plan: dict[str, Any]) -> None:
    claim = plan["nodeClaims"][0]
    claim["instanceTypes"].reverse()


def _spread(plan: dict[str, Any]) -> None:
    zone = plan["nodeClaims"][0]["zone"]
    for claim in plan["nodeClaims"]:
        claim["zone"] = zone


def _existing_overflow(plan: dict[str, Any]) -> None:
    moved = [p for c in plan["nodeClaims"] for p in c["pods"]]
    plan["existingNodes"] = [{"name": "n-a", "pods": moved}]
    plan["nodeClaims"] = []
    plan["costPerHour"] = 0
    plan["lowerBoundPerHour"] = 0


@pytest.mark.parametrize(
    ("corrupt", "expected"),
    [
        (_drop_pod, "missing from the plan"),
        (_duplicate_pod, "appears 2 times"),
        (_price, "pricePerHour"),
        (_cost, "costPerHour"),
        (_bound, "lowerBoundPerHour"),
        (_too_small, "too small"),
        (_taint, "does not tolerate"),
        (_unlisted_type, "would exceed NodePool default limits"),
        (_not_cheapest, "not sorted cheapest first"),
        (_spread, "spread skew"),
        (_existing_overflow, "over allocatable"),
    ],
    ids=lambda v: getattr(v, "__name__", str(v))[:30],
)
def test_checker_flags_corruption(
    valid: dict[str, Any], corrupt: Callable[[dict[str, Any]], None], expected: str
) -> None:
    plan = copy.deepcopy(valid)
    corrupt(plan)
    violations = check_plan(OBJECTS, small_catalog(), plan)
    assert any(expected in v for v in violations), violations


def test_checker_flags_partial_gang(tmp_path: Path) -> None:
    from tests.unit.controllers.provisioning.test_regressions import _gang  # noqa: PLC0415

    objects = _gang(3, 3)
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    plan = copy.deepcopy(run.plan)
    claim = plan["nodeClaims"][0]
    removed = claim["pods"].pop()
    plan["unschedulable"].append({"pod": removed, "reason": "x"})
    assert any("partial placement" in v for v in check_plan(objects, small_catalog(), plan))
