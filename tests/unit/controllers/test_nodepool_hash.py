"""``nodepool.hash``: NodeClaims stamped by Karpenter are re-stamped, never drifted or replaced."""

from __future__ import annotations

from typing import Any

from provisioner.apis.base import parse_object
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.apis.nodepool import (
    KARPENTER_NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION,
    NodePool,
    nodepool_hash,
    restamp,
)
from provisioner.controllers.nodepool.hash import claim_restamp
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS
from tests.unit.controllers.disruption.world import World, nodepool

HASH = "karpenter.sh/nodepool-hash"
VERSION = "karpenter.sh/nodepool-hash-version"
KARPENTER_HASH = "6043272506829707052"
"""A hash as Karpenter writes it (hashstructure, a different function from Jointer's)."""


def _conditions(claim: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (claim.get("status") or {}).get("conditions") or []}


def _as_karpenter_stamped(world: World, name: str, *, drifted: bool = False) -> None:
    """Make ``name`` look launched by Karpenter: its hash, version ``v3``."""
    world.api.merge_patch(
        NODE_CLAIMS,
        name,
        {"metadata": {"annotations": {HASH: KARPENTER_HASH, VERSION: "v3"}}},
    )
    if drifted:
        claim = world.api.get(NODE_CLAIMS, name)
        conditions = [
            *claim["status"]["conditions"],
            {
                "type": "Drifted",
                "status": "True",
                "reason": "NodePoolDrifted",
                "message": "NodePoolDrifted",
                "lastTransitionTime": claim["status"]["conditions"][0]["lastTransitionTime"],
            },
        ]
        world.api.patch_status(NODE_CLAIMS, name, {"status": {"conditions": conditions}})


def _world() -> tuple[World, str]:
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "Never"}),
    )
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    (claim,) = world.claims()
    return world, claim["metadata"]["name"]


def test_jointers_hash_version_is_not_karpenters():
    assert len({NODEPOOL_HASH_VERSION, KARPENTER_NODEPOOL_HASH_VERSION}) == 2


def test_a_nodeclaim_karpenter_stamped_is_restamped_not_drifted_nor_replaced():
    world, name = _world()
    world.api.merge_patch(
        NODE_POOLS,
        "default",
        {"metadata": {"annotations": {HASH: KARPENTER_HASH, VERSION: "v3"}}},
    )
    _as_karpenter_stamped(world, name)
    world.run(30 * 60)
    (claim,) = world.claims()
    assert claim["metadata"]["name"] == name
    assert "Drifted" not in _conditions(claim)
    pool = parse_object(NodePool, world.nodepool_obj(), kind="NodePool")
    annotations = claim["metadata"]["annotations"]
    assert annotations[VERSION] == NODEPOOL_HASH_VERSION
    assert annotations[HASH] == nodepool_hash(pool)
    # the pool carries Jointer's version: Karpenter, started again, re-stamps the claims back
    pool_annotations = world.nodepool_obj()["metadata"]["annotations"]
    assert pool_annotations == {HASH: nodepool_hash(pool), VERSION: NODEPOOL_HASH_VERSION}
    assert not world.logs("disrupting node(s)")


def test_a_restamped_nodeclaim_still_drifts_when_the_template_changes_afterwards():
    world, name = _world()
    _as_karpenter_stamped(world, name)
    world.run(10)
    world.api.merge_patch(
        NODE_POOLS,
        "default",
        {"spec": {"template": {"metadata": {"labels": {"team": "infra"}}}}},
    )
    world.run(5)
    claim = world.api.get(NODE_CLAIMS, name)
    assert _conditions(claim)["Drifted"]["reason"] == "NodePoolDrifted"


def test_a_nodeclaim_already_drifted_keeps_its_hash_and_its_drift():
    world, name = _world()
    _as_karpenter_stamped(world, name, drifted=True)
    claim = parse_object(NodeClaim, world.api.get(NODE_CLAIMS, name), kind="NodeClaim")
    pool = parse_object(NodePool, world.nodepool_obj(), kind="NodePool")
    assert claim_restamp(pool, claim, {}) == {VERSION: NODEPOOL_HASH_VERSION}


def test_restamp_changes_only_another_version():
    kwargs: dict[str, Any] = {
        "hash_key": HASH,
        "version_key": VERSION,
        "current_hash": "1",
        "version": "jointer-v1",
    }
    assert restamp({HASH: "9", VERSION: "v3"}, drifted=False, **kwargs) == {
        HASH: "1",
        VERSION: "jointer-v1",
    }
    assert restamp({HASH: "9", VERSION: "v3"}, drifted=True, **kwargs) == {VERSION: "jointer-v1"}
    assert restamp({HASH: "9", VERSION: "jointer-v1"}, drifted=False, **kwargs) == {}
    assert restamp({}, drifted=False, **kwargs) == {HASH: "1", VERSION: "jointer-v1"}
