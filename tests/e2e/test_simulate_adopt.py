"""Issue 18's adoption acceptance: Jointer takes over nodes Karpenter launched, drifting none.

``examples/scenarios/adopt-from-karpenter.yaml`` seeds four nodes exactly as Karpenter leaves
them (instances with Karpenter's tags, NodeClaims with its hashes, versions, finalizer and
status, registered Nodes, the workload bound to them) and runs two virtual hours.
"""

from __future__ import annotations

from typing import Any

import pytest

from cloudprovider.aws.drift import NODECLASS_HASH_VERSION
from provisioner.apis.nodepool import NODEPOOL_HASH_VERSION
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.simulation.scenario import ScenarioError
from tests.e2e.conftest import bundled, events, inline, run

pytestmark = pytest.mark.usefixtures("test_catalog")

SCALE_DOWN = 3600.0


def _adopted(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["nodeClaims"] if c["launchedAt"] == 0.0]


def test_karpenters_nodes_are_taken_over_without_drift_and_consolidated_later() -> None:
    scenario = bundled("adopt-from-karpenter")
    assert scenario.duration == 2 * 3600
    report, simulation = run(scenario)

    adopted = _adopted(report)
    assert len(adopted) == 4
    assert events(report, "KarpenterNodesSeeded")
    # nothing drifted, nothing replaced before the workload shrank
    assert "Drifted" not in report["summary"]["disruptions"]
    assert all(c["deletionReason"] != "Drifted" for c in report["nodeClaims"])
    assert not [e for e in report["events"] if "Drift" in e["message"]]
    assert all(c["deletedAt"] is None or c["deletedAt"] >= SCALE_DOWN for c in adopted)
    # every pod ran on the adopted nodes from the start
    first = [p for p in report["pods"] if p["createdAt"] == 0.0]
    assert len(first) == 12
    assert all(p["scheduledAt"] == 0.0 for p in first)
    assert {p["node"] for p in first} == {c["node"] for c in adopted}
    # more replicas: Jointer launches next to the adopted nodes
    assert any(c["launchedAt"] and c["launchedAt"] > 0 for c in report["nodeClaims"])
    # less: adopted nodes are consolidated like Jointer's own
    consolidated = [c for c in adopted if c["deletionReason"] in {"Empty", "Underutilized"}]
    assert consolidated
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    # the survivors carry Jointer's hash versions (re-stamped, not drifted)
    survivors = {c["name"] for c in adopted if c["deletedAt"] is None}
    assert survivors
    for claim in simulation.world.kube.list(NODE_CLAIMS).items:
        if claim["metadata"]["name"] in survivors:
            annotations = claim["metadata"]["annotations"]
            assert annotations["karpenter.sh/nodepool-hash-version"] == NODEPOOL_HASH_VERSION
            assert (
                annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"] == NODECLASS_HASH_VERSION
            )
            kinds = {c["type"] for c in claim["status"]["conditions"]}
            assert "Drifted" not in kinds


def test_a_karpenter_nodes_step_names_the_bad_field() -> None:
    body = {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "bad"},
        "spec": {
            "duration": "1m",
            "steps": [
                {
                    "at": "0s",
                    "karpenterNodes": {
                        "nodePool": "general",
                        "nodes": [{"instanceType": "c6a.xlarge", "zone": "a", "count": 0}],
                    },
                }
            ],
        },
    }
    with pytest.raises(ScenarioError, match=r"karpenterNodes\.nodes\[0\]\.count"):
        inline(body)


def test_seeding_without_the_nodepool_is_a_warning_naming_it() -> None:
    scenario = inline(
        {
            "apiVersion": "jointer.dev/v1alpha1",
            "kind": "Scenario",
            "metadata": {"name": "missing-pool"},
            "spec": {
                "duration": "1m",
                "steps": [
                    {
                        "at": "0s",
                        "karpenterNodes": {
                            "nodePool": "general",
                            "nodes": [{"instanceType": "c6a.xlarge", "zone": "us-east-1a"}],
                        },
                    }
                ],
            },
        }
    )
    report, _ = run(scenario)
    (warning,) = events(report, "KarpenterNodesFailed")
    assert "NodePool 'general' not found" in warning["message"]
