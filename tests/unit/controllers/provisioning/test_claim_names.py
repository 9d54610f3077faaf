"""NodeClaim names are unique within a plan and never those of the cluster's NodeClaims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provisioner.controllers.provisioning.planner import ClaimNames
from tests.unit.controllers.provisioning.scenario import nodepool, pod, run_plan

CPU_POOL_REQ = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]


def test_names_are_unique_at_any_count() -> None:
    # 5 characters of a 27-letter alphabet: ~7 colliding pairs expected among 20k hashes
    names = ClaimNames()
    made = [names.next("default", i, f"default/p-{i}") for i in range(20_000)]
    assert len(set(made)) == len(made)
    assert all(n.startswith("default-") and len(n) == len("default-") + 5 for n in made)


def test_names_are_stable_for_the_same_plan_and_skip_taken_ones() -> None:
    first = ClaimNames().next("default", 0, "default/p-0")
    assert ClaimNames().next("default", 0, "default/p-0") == first
    renamed = ClaimNames([first]).next("default", 0, "default/p-0")
    assert renamed != first
    assert renamed.startswith("default-")


def _claim(name: str) -> dict[str, Any]:
    """An in-flight NodeClaim too small for the pod below (2 vCPU)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["c6i.large"],
                },
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
            ],
        },
    }


def test_a_plan_never_reuses_the_name_of_a_nodeclaim_in_the_cluster(tmp_path: Path) -> None:
    objects = [nodepool("default", requirements=CPU_POOL_REQ), pod("big", cpu="3")]
    alone = run_plan(objects, tmp_path)
    [claim] = alone.plan["nodeClaims"]
    taken = claim["name"]
    again = run_plan([*objects, _claim(taken)], tmp_path)
    [renamed] = again.plan["nodeClaims"]
    assert renamed["pods"] == ["default/big"]
    assert renamed["name"] != taken
