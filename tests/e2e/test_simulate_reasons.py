"""`jointer simulate`: a NodePool whose EC2NodeClass is missing is named where users look."""

from __future__ import annotations

import pytest

from provisioner.kube.resource import NODE_POOLS
from tests.e2e.conftest import bundled, events, pods_of, run

pytestmark = pytest.mark.usefixtures("test_catalog")

CAUSE = 'NodeClassReady=False: EC2NodeClass "ml" not found'


def test_a_missing_nodeclass_is_named_in_the_nodepool_and_pod_events() -> None:
    report, simulation = run(bundled("missing-nodeclass"))
    ml = simulation.world.kube.get(NODE_POOLS, "ml")
    conditions = {c["type"]: c for c in ml["status"]["conditions"]}
    assert conditions["NodeClassReady"]["status"] == "False"
    assert conditions["NodeClassReady"]["message"] == 'EC2NodeClass "ml" not found'
    (warning,) = events(report, "NodeClassNotReady", "NodePool/ml")
    assert warning["type"] == "Warning"
    assert warning["message"] == f'NodePool "ml" not ready: {CAUSE}'
    train = pods_of(report, "default/train-")
    assert len(train) == 2
    assert all(p["scheduledAt"] is None for p in train)
    # the provisioner's (the simulated kube-scheduler writes its own FailedScheduling too)
    failed = [
        e
        for e in events(report, "FailedScheduling")
        if "/train-" in e["object"] and e["message"].startswith("Failed to schedule pod, ")
    ]
    assert failed
    for event in failed:
        assert event["message"].startswith(
            f'Failed to schedule pod, NodePool "ml" not ready: {CAUSE}; '
            'incompatible with nodepool "general", incompatible requirements, '
            'label "workload" does not have known values'
        ), event["message"]
    web = pods_of(report, "default/web-")
    assert web
    assert all(p["scheduledAt"] is not None for p in web)
    assert {c["nodePool"] for c in report["nodeClaims"]} == {"general"}
