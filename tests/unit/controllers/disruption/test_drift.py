"""Drift: provider drift (a new AMI) and NodePool drift replace nodes, within budgets."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cloudprovider.fake import FakeCloudProvider
from cloudprovider.protocol import CloudNodeClaim, LaunchRequest
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS
from tests.unit.controllers.disruption.checks import BudgetCheck
from tests.unit.controllers.disruption.world import TYPES, World, nodepool


@dataclass(slots=False)
class AmiCloud(FakeCloudProvider):
    """Launches the current AMI; instances on another AMI are drifted (``AMIDrift``)."""

    ami: str = "ami-v1"

    def create(self, request: LaunchRequest) -> CloudNodeClaim:
        launched = FakeCloudProvider.create(self, request)
        if launched.image_id == "ami-fake":
            launched = replace(launched, image_id=self.ami)
            self.created[launched.provider_id] = launched
        return launched

    def is_drifted(self, claim: CloudNodeClaim) -> str | None:
        self.drift_calls.append(claim)
        return "AMIDrift" if claim.image_id and claim.image_id != self.ami else None


def field(obj: dict[str, Any], kind: str, name: str) -> str | None:
    found = condition(obj, kind)
    return None if found is None else str(found[name])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def test_a_new_ami_replaces_every_node_one_at_a_time():
    cloud = AmiCloud(instance_types=list(TYPES))
    world = World(cloud=cloud)
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 60, cpu="700m")
    world.run(180)
    old = {c["metadata"]["name"] for c in world.claims()}
    assert len(old) >= 2
    budget = BudgetCheck(reason="Drifted")
    reasons: dict[str, str] = {}

    def record_drift(w: World) -> None:
        for claim in w.raw(NODE_CLAIMS):
            found = condition(claim, "Drifted")
            if found is not None:
                reasons[claim["metadata"]["name"]] = found["reason"]

    world.checks.extend([budget, record_drift])
    cloud.ami = "ami-v2"  # the AMI alias moved to a new version
    world.run(25 * 60)
    assert set(reasons) == old
    assert set(reasons.values()) == {"AMIDrift"}
    assert not old & {c["metadata"]["name"] for c in world.claims()}
    assert {c["status"]["imageID"] for c in world.claims()} == {"ami-v2"}
    assert not world.pending()
    assert budget.peak["default"] == 1
    commands = [log["command"] for log in world.logs("disrupting node(s)")]
    assert len(commands) == len(old)
    assert all(c.startswith("Drifted/") for c in commands)
    assert world.metric(
        "karpenter_nodeclaims_disrupted_total",
        reason="drifted",
        nodepool="default",
        capacity_type="on-demand",
        consolidation_policy="WhenEmptyOrUnderutilized",
        termination_mode="graceful",
    ) == len(old)
    assert {e["message"] for e in world.events("Evicted")} == {"Evicted pod: Drifted"}


def test_a_changed_nodepool_template_drifts_its_nodeclaims():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "Never"}),
    )
    world.run(1)
    world.deploy("web", 10)
    world.run(120)
    (old,) = world.claims()
    pool = world.nodepool_obj()
    world.api.merge_patch(
        NODE_POOLS,
        "default",
        {"spec": {"template": {"metadata": {"labels": {"team": "infra"}}}}},
        resource_version=pool["metadata"]["resourceVersion"],
    )
    world.run(5)
    (claim,) = [c for c in world.claims() if c["metadata"]["name"] == old["metadata"]["name"]]
    assert field(claim, "Drifted", "reason") == "NodePoolDrifted"
    world.run(300)
    (new,) = world.claims()
    assert new["metadata"]["name"] != old["metadata"]["name"]
    assert new["metadata"]["labels"]["team"] == "infra"
    assert condition(new, "Drifted") is None


def test_drift_that_goes_away_clears_the_condition():
    cloud = AmiCloud(instance_types=list(TYPES))
    world = World(cloud=cloud)
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    cloud.ami = "ami-v2"
    world.run(5 * 60 + 10)
    (claim,) = world.claims()
    assert condition(claim, "Drifted") is not None
    assert not world.logs("disrupting node(s)")  # the budget blocks drift
    cloud.ami = "ami-v1"
    world.run(5 * 60 + 10)
    (claim,) = world.claims()
    assert condition(claim, "Drifted") is None
