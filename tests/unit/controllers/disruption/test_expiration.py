"""Expiration: forceful, separate from disruption methods and their budgets."""

from __future__ import annotations

from typing import Any

from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, PODS
from provisioner.runtime.reconciler import Request
from tests.unit.controllers.disruption.world import World, nodepool, pod


def field(obj: dict[str, Any], kind: str, name: str) -> str | None:
    found = condition(obj, kind)
    return None if found is None else str(found[name])


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def test_expired_nodeclaims_are_deleted_even_with_a_zero_budget():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            expireAfter="10m",
            disruption={"consolidateAfter": "Never", "budgets": [{"nodes": "0"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 10)
    world.run(60)
    (first,) = world.claims()
    deleted: dict[str, str] = {}

    def watch(w: World) -> None:
        for claim in w.raw(NODE_CLAIMS):
            if (
                claim["metadata"].get("deletionTimestamp")
                and claim["metadata"]["name"] not in deleted
            ):
                found = condition(claim, "DisruptionReason")
                deleted[claim["metadata"]["name"]] = found["reason"] if found else ""

    world.checks.append(watch)
    world.run(10 * 60)
    assert deleted.get(first["metadata"]["name"]) == "Expired"
    assert first["metadata"]["name"] not in {c["metadata"]["name"] for c in world.claims()}
    assert (
        world.metric(
            "karpenter_nodeclaims_disrupted_total",
            reason="expired",
            nodepool="default",
            capacity_type="on-demand",
            consolidation_policy="",
            termination_mode="forceful",
        )
        >= 1
    )
    assert world.logs("deleting expired nodeclaim")
    assert {e["message"] for e in world.events("Evicted")} == {"Evicted pod: Forceful Termination"}
    world.run(120)
    assert not world.pending()


def test_expiration_ignores_do_not_disrupt_but_drain_honours_it_until_the_grace_period():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            expireAfter="10m",
            terminationGracePeriod="3m",
            disruption={"consolidateAfter": "Never"},
        ),
    )
    world.run(1)
    world.create(PODS, pod("batch", annotations={"karpenter.sh/do-not-disrupt": "true"}))
    world.run(60)
    (first,) = world.claims()
    world.run(10 * 60)
    claim = world.api.get(NODE_CLAIMS, first["metadata"]["name"])
    assert claim["metadata"].get("deletionTimestamp")
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
    assert "default/batch" in world.pod_node()
    assert not world.kube.evictions
    world.run(4 * 60)
    assert "default/batch" not in world.pod_node()
    assert not world.kube.evictions  # deleted at the grace period, never evicted
    assert world.events("Disrupted")
    assert world.events("TerminationGracePeriodExpiring")
    assert first["metadata"]["name"] not in {c["metadata"]["name"] for c in world.claims()}


def test_expire_after_never_keeps_nodeclaims():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            expireAfter="Never",
            disruption={"consolidateAfter": "Never"},
        ),
    )
    world.run(1)
    world.deploy("web", 2)
    world.run(3600)
    assert len(world.claims()) == 1
    expiration = next(r for r in world.manager.reconcilers if r.name == "nodeclaim.expiration")
    assert (
        expiration.reconcile(Request(name=world.claims()[0]["metadata"]["name"])).requeue_after
        is None
    )
