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
        (_unlisted_type, "launches its largest listed instance type"),
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


WEIGHTED: list[dict[str, Any]] = [
    nodepool("pref", limits={"cpu": "8"}, weight=10),
    nodepool("rest"),
    *(pod(f"w-{i}", cpu="1") for i in range(20)),
]


@pytest.mark.parametrize("policy", ["jointer", "karpenter"])
def test_weighted_pool_with_limits_falls_through(tmp_path: Path, policy: str) -> None:
    run = run_plan(WEIGHTED, tmp_path, policy=policy)
    assert run.violations == []
    assert run.plan["unschedulable"] == []
    pods = {"pref": 0, "rest": 0}
    for claim in run.plan["nodeClaims"]:
        pods[claim["nodePool"]] += len(claim["pods"])
    assert pods["pref"] > 0
    assert pods["rest"] > 0
    assert pods["pref"] + pods["rest"] == 20


@pytest.fixture(scope="module")
def weighted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = run_plan(WEIGHTED, tmp_path_factory.mktemp("weighted"))
    assert run.violations == []
    return run.plan


def _claims_of(plan: dict[str, Any], pool: str) -> list[dict[str, Any]]:
    return [c for c in plan["nodeClaims"] if c["nodePool"] == pool]


def test_checker_flags_a_lighter_pool_while_the_heavier_has_limits_left(
    weighted: dict[str, Any],
) -> None:
    plan = copy.deepcopy(weighted)
    dropped = _claims_of(plan, "pref")[0]
    _claims_of(plan, "rest")[0]["pods"].extend(dropped["pods"])
    plan["nodeClaims"].remove(dropped)
    violations = check_plan(WEIGHTED, small_catalog(), plan)
    assert any("NodePool pref (weight 10) could take it" in v for v in violations), violations


def test_checker_flags_a_lighter_pool_while_a_heavier_claim_has_room(
    weighted: dict[str, Any],
) -> None:
    from provisioner.scheduling.quantity import parse_quantity  # noqa: PLC0415

    plan = copy.deepcopy(weighted)
    claim = _claims_of(plan, "pref")[0]
    moved = claim["pods"].pop()
    _claims_of(plan, "rest")[0]["pods"].append(moved)
    requests = claim["requests"]  # minus the moved pod's (1 CPU, 512Mi): milli-units
    requests["cpu"] = f"{parse_quantity(requests['cpu']) - 1000}m"
    requests["memory"] = f"{(parse_quantity(requests['memory']) - 512 * 2**20 * 1000) // 1000}"
    requests["pods"] = str(int(requests["pods"]) - 1)
    violations = check_plan(WEIGHTED, small_catalog(), plan)
    assert any(f"pod {moved}: placed on NodePool rest" in v for v in violations), violations


def test_checker_flags_listed_types_that_together_break_the_limits(tmp_path: Path) -> None:
    """A claim may launch as any listed type: the largest of each must fit the limits."""
    objects = [nodepool("default", limits={"cpu": "24"})]
    objects += [pod(f"a-{i}", cpu="1500m") for i in range(4)]
    run = run_plan(objects, tmp_path)
    assert run.violations == []
    plan = copy.deepcopy(run.plan)
    for claim in plan["nodeClaims"]:
        claim["instanceTypes"].append("m6i.2xlarge")  # alone within the limits, not together
    if len(plan["nodeClaims"]) < 4:
        plan["nodeClaims"] += [
            {**copy.deepcopy(plan["nodeClaims"][0]), "name": f"extra-{i}", "pods": []}
            for i in range(4 - len(plan["nodeClaims"]))
        ]
    violations = check_plan(objects, small_catalog(), plan)
    assert any("largest listed instance type" in v for v in violations), violations
