"""The plan checker flags self-matching pod affinity spread over domains (issue 17, item 1)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.plancheck import check_plan
from tests.unit.controllers.provisioning.scenario import (
    SMALL_CATALOG,
    node,
    nodepool,
    pod,
    run_plan,
    small_catalog,
)

CPU_POOL_REQ = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
ZONE = "topology.kubernetes.io/zone"
LABELS = {"affinity-zone": "a"}


def _affinity(key: str) -> dict[str, Any]:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": LABELS}}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _objects(*extra: dict[str, Any], key: str = ZONE, n: int = 12) -> list[dict[str, Any]]:
    return [
        nodepool("default", requirements=CPU_POOL_REQ),
        *extra,
        *(pod(f"g-{i}", labels=LABELS, affinity=_affinity(key), cpu="1") for i in range(n)),
    ]


def _respread(plan: dict[str, Any], zone: str) -> dict[str, Any]:
    """``plan`` with its last NodeClaim moved to ``zone`` (same prices in every zone)."""
    bad = copy.deepcopy(plan)
    bad["nodeClaims"][-1]["zone"] = zone
    return bad


def test_checker_flags_self_affinity_spread_over_zones(tmp_path: Path) -> None:
    objects = _objects()
    run = run_plan(objects, tmp_path, catalog=SMALL_CATALOG)
    assert run.violations == []
    claims = run.plan["nodeClaims"]
    assert len(claims) >= 2
    assert len({c["zone"] for c in claims}) == 1
    other = next(z for z in ("us-east-1a", "us-east-1b") if z != claims[0]["zone"])
    violations = check_plan(objects, small_catalog(), _respread(run.plan, other))
    assert any("affinity on topology.kubernetes.io/zone unmet" in v for v in violations)


def test_checker_flags_self_affinity_away_from_a_running_match(tmp_path: Path) -> None:
    objects = _objects(
        node("n-c", zone="us-east-1c", cpu="1", memory="2Gi"),
        pod("running", labels=LABELS, node_name="n-c", cpu="500m"),
    )
    run = run_plan(objects, tmp_path, catalog=SMALL_CATALOG)
    assert run.violations == []
    assert {c["zone"] for c in run.plan["nodeClaims"]} == {"us-east-1c"}
    violations = check_plan(objects, small_catalog(), _respread(run.plan, "us-east-1a"))
    assert any("one runs elsewhere" in v for v in violations)


@pytest.mark.parametrize("n", [6])
def test_checker_flags_hostname_self_affinity_on_two_nodes(tmp_path: Path, n: int) -> None:
    objects = _objects(key="kubernetes.io/hostname", n=n)
    run = run_plan(objects, tmp_path, catalog=SMALL_CATALOG)
    assert run.violations == []
    assert len(run.plan["nodeClaims"]) == 1
    bad = copy.deepcopy(run.plan)
    claim = bad["nodeClaims"][0]
    twin = copy.deepcopy(claim)
    twin["name"] = claim["name"] + "-twin"
    half = len(claim["pods"]) // 2
    claim["pods"], twin["pods"] = claim["pods"][:half], claim["pods"][half:]
    bad["nodeClaims"].append(twin)
    bad["costPerHour"] = round(bad["costPerHour"] + twin["pricePerHour"], 6)
    violations = check_plan(objects, small_catalog(), bad)
    assert any("affinity on kubernetes.io/hostname unmet" in v for v in violations), violations
