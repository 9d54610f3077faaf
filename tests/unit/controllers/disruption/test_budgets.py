"""Disruption budgets (count, percent, reasons, cron schedules in UTC) and the cron evaluator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from provisioner.apis.base import parse_object
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.disruption.budgets import (
    UNBOUNDED,
    BudgetNode,
    allowed_disruptions,
    budget_mapping,
)
from provisioner.controllers.disruption.schedule import CronError, CronSchedule, is_active

NOON = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)  # a Wednesday


def pool(*budgets: dict[str, Any], name: str = "default") -> NodePool:
    body: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [],
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": "default",
                    },
                }
            },
        },
    }
    if budgets:
        body["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": list(budgets)}
    return parse_object(NodePool, body, kind="NodePool")


@pytest.mark.parametrize(
    ("budgets", "total", "expected"),
    [
        pytest.param((), 10, 1, id="default-10-percent"),
        pytest.param((), 11, 2, id="percent-rounds-up"),
        pytest.param((), 0, 0, id="no-nodes"),
        pytest.param(({"nodes": "3"},), 100, 3, id="count"),
        pytest.param(({"nodes": "50%"}, {"nodes": "2"}), 10, 2, id="minimum-wins"),
        pytest.param(({"nodes": "0"},), 10, 0, id="zero-blocks"),
        pytest.param(({"nodes": "100%"},), 7, 7, id="all"),
    ],
)
def test_allowed_disruptions(budgets, total, expected):
    assert allowed_disruptions(pool(*budgets), total, "Underutilized", NOON) == expected


def test_budget_reasons_apply_only_to_their_reasons():
    nodepool = pool({"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "5"})
    assert allowed_disruptions(nodepool, 10, "Drifted", NOON) == 0
    assert allowed_disruptions(nodepool, 10, "Empty", NOON) == 5


def test_no_applicable_budget_is_unbounded():
    nodepool = pool({"nodes": "0", "reasons": ["Drifted"]})
    assert allowed_disruptions(nodepool, 10, "Underutilized", NOON) == UNBOUNDED


def test_scheduled_budget_is_active_only_within_its_duration():
    # business hours on weekdays: nothing may be disrupted 09:00-17:00 UTC
    nodepool = pool({"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}, {"nodes": "4"})
    assert allowed_disruptions(nodepool, 10, "Empty", NOON) == 0
    assert allowed_disruptions(nodepool, 10, "Empty", NOON.replace(hour=8, minute=59)) == 4
    assert allowed_disruptions(nodepool, 10, "Empty", NOON.replace(hour=17)) == 4
    saturday = NOON + timedelta(days=3)
    assert allowed_disruptions(nodepool, 10, "Empty", saturday) == 4


def test_budget_mapping_counts_disrupting_nodes():
    pools = {"a": pool({"nodes": "3"}, name="a"), "b": pool({"nodes": "50%"}, name="b")}
    nodes = [
        BudgetNode(pool="a", counted=True, disrupting=True),
        BudgetNode(pool="a", counted=True, disrupting=False),
        BudgetNode(pool="a", counted=False, disrupting=True),  # uninitialized/terminating
        *[BudgetNode(pool="b", counted=True, disrupting=False) for _ in range(4)],
        BudgetNode(pool="b", counted=True, disrupting=True),
    ]
    mapping = budget_mapping(pools, nodes, "Underutilized", NOON)
    assert mapping == {"a": 2, "b": 2}  # b: ceil(50% of 5) = 3, minus 1 disrupting


def test_budget_mapping_never_negative():
    pools = {"a": pool({"nodes": "1"}, name="a")}
    nodes = [BudgetNode(pool="a", counted=True, disrupting=True) for _ in range(3)]
    assert budget_mapping(pools, nodes, "Empty", NOON) == {"a": 0}


@pytest.mark.parametrize(
    ("schedule", "duration", "now", "active"),
    [
        pytest.param(
            "@daily", timedelta(hours=1), NOON.replace(hour=0, minute=30), True, id="daily-in"
        ),
        pytest.param("@daily", timedelta(hours=1), NOON, False, id="daily-out"),
        pytest.param("@hourly", timedelta(minutes=10), NOON.replace(minute=5), True, id="hourly"),
        pytest.param(
            "*/15 * * * *", timedelta(minutes=1), NOON.replace(minute=45), True, id="step"
        ),
        pytest.param(
            "*/15 * * * *", timedelta(minutes=1), NOON.replace(minute=46), False, id="step-after"
        ),
        pytest.param(
            "0 0 1 * *", timedelta(days=2), datetime(2026, 3, 2, 23, tzinfo=UTC), True, id="monthly"
        ),
        pytest.param(
            "0 0 1 jan *",
            timedelta(hours=1),
            datetime(2026, 1, 1, 0, 59, tzinfo=UTC),
            True,
            id="names",
        ),
        pytest.param("0 12 13 * 5", timedelta(minutes=5), NOON, False, id="dom-or-dow-neither"),
        pytest.param("0 12 4 * 5", timedelta(minutes=5), NOON, True, id="dom-or-dow-dom"),
        pytest.param("0 12 13 * 3", timedelta(minutes=5), NOON, True, id="dom-or-dow-dow"),
        pytest.param(
            "0 12 * * 7", timedelta(minutes=5), NOON + timedelta(days=4), True, id="sunday-7"
        ),
        pytest.param("30 23 * * *", timedelta(hours=13), NOON, True, id="yesterday"),
    ],
)
def test_cron_activity(schedule, duration, now, active):
    assert is_active(schedule, duration, now) is active


@pytest.mark.parametrize(
    "schedule", ["* * *", "60 * * * *", "* 24 * * *", "5-1 * * * *", "*/0 * * * *", "@often"]
)
def test_bad_schedules_raise(schedule):
    with pytest.raises(CronError):
        CronSchedule.parse(schedule)


def test_unparsable_schedule_blocks_the_budget():
    nodepool = pool({"nodes": "5"})
    broken = nodepool.budgets[0].model_copy(update={"schedule": "61 * * * *", "duration": "1h"})
    spec = nodepool.spec.model_copy(
        update={"disruption": nodepool.spec.disruption.model_copy(update={"budgets": (broken,)})}
    )
    assert allowed_disruptions(nodepool.model_copy(update={"spec": spec}), 10, "Empty", NOON) == 0
