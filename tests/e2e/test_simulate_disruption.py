"""Issue 6 acceptance through `jointer simulate`.

* The bundled 0→200 scenario, scaled down to 60 replicas at 30 minutes: within 15 virtual
  minutes consolidation must cut the hourly cost of the running instances by at least 40%,
  while at no instant more nodes are being disrupted than the NodePool's default budget (10% of
  its nodes, rounded up) allows.
* `protected-workloads`: consolidation runs, but never evicts a do-not-disrupt pod or a member of
  a non-preemptible KAI gang, never deletes a node hosting one, and never takes the API
  Deployment below its PodDisruptionBudget.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.e2e.conftest import bundled, bundled_variant, run, shortened

pytestmark = pytest.mark.usefixtures("test_catalog")

SCALE_DOWN_AT = 30 * 60
WINDOW = 15 * 60
VOLUNTARY = ("Empty", "Underutilized", "Drifted")
API_MIN_AVAILABLE = 7  # the PodDisruptionBudget of examples/scenarios/protected-workloads.yaml


def _hourly_cost(report: dict[str, Any], at: float) -> float:
    return float(
        sum(
            instance["pricePerHour"]
            for instance in report["ec2Instances"]
            if instance["launchedAt"] <= at
            and (instance["terminatedAt"] is None or instance["terminatedAt"] > at)
        )
    )


def _live_claims(report: dict[str, Any], at: float) -> int:
    return sum(
        1
        for claim in report["nodeClaims"]
        if claim["initializedAt"] is not None
        and claim["initializedAt"] <= at
        and (claim["deletedAt"] is None or claim["deletedAt"] > at)
    )


def _disrupting(report: dict[str, Any], at: float) -> int:
    ended = {i["nodeClaim"]: i["terminatedAt"] for i in report["ec2Instances"]}
    return sum(
        1
        for claim in report["nodeClaims"]
        if claim["deletionReason"] in VOLUNTARY
        and claim["deletedAt"] is not None
        and claim["deletedAt"] <= at
        and (ended.get(claim["name"]) is None or ended[claim["name"]] > at)
    )


def test_a_scale_down_from_200_to_60_is_consolidated_within_budget() -> None:
    scenario = shortened(
        bundled_variant(
            "deployment-0-to-200",
            ("at: 90m", "at: 30m"),
            ("replicas: 40}", "replicas: 60}"),
        ),
        SCALE_DOWN_AT + WINDOW + 60,
    )
    report, _ = run(scenario)

    before = _hourly_cost(report, SCALE_DOWN_AT)
    after = _hourly_cost(report, SCALE_DOWN_AT + WINDOW)
    assert before > 0
    assert after <= 0.6 * before, (before, after)

    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    assert report["summary"]["disruptions"].get("Underutilized", 0) >= 1

    moments = sorted({c["deletedAt"] for c in report["nodeClaims"] if c["deletedAt"] is not None})
    for at in moments:
        allowed = max(1, math.ceil(0.1 * _live_claims(report, at - 1e-6)))
        assert _disrupting(report, at) <= allowed, (at, _disrupting(report, at), allowed)


def test_consolidation_never_touches_protected_pods_gangs_or_pdbs() -> None:
    report, _ = run(bundled("protected-workloads"))

    assert sum(report["summary"]["disruptions"].values()) >= 1
    evicted = {e["pod"] for e in report["evictions"]}
    protected = [
        p["name"]
        for p in report["pods"]
        if p["name"].startswith(("finance/ledger-", "research/etl-"))
    ]
    assert len(protected) == 8
    assert not evicted & set(protected)
    hosts = {p["node"] for p in report["pods"] if p["name"] in protected}
    for claim in report["nodeClaims"]:
        if claim["node"] in hosts:
            assert claim["deletedAt"] is None, claim

    api = [p for p in report["pods"] if p["name"].startswith("web/api-")]
    first_eviction: dict[str, float] = {}
    for eviction in report["evictions"]:
        first_eviction.setdefault(eviction["pod"], eviction["at"])
    for at in sorted(set(first_eviction.values())):
        available = sum(
            1
            for p in api
            if p["scheduledAt"] is not None
            and p["scheduledAt"] <= at
            and first_eviction.get(p["name"], float("inf")) > at
        )
        assert available >= API_MIN_AVAILABLE, (at, available)
