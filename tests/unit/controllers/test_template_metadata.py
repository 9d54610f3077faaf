"""NodePool template labels and annotations reach the NodeClaim and its Node, as in Karpenter."""

from __future__ import annotations

from provisioner.kube.resource import NODE_POOLS
from tests.unit.controllers.disruption.world import World, nodepool

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


def _world(annotations: dict[str, str]) -> World:
    world = World()
    body = nodepool(capacity_types=("on-demand",), disruption={"consolidateAfter": "0s"})
    body["spec"]["template"]["metadata"]["annotations"] = annotations
    world.create(NODE_POOLS, body)
    world.run(1)
    world.deploy("web", 4)
    world.run(120)
    return world


def test_template_annotations_and_labels_are_on_the_nodeclaim_and_the_node():
    world = _world({DO_NOT_DISRUPT: "true", "example.com/owner": "infra"})
    (claim,) = world.claims()
    (node,) = world.nodes()
    for obj in (claim, node):
        assert obj["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"
        assert obj["metadata"]["annotations"]["example.com/owner"] == "infra"
        assert obj["metadata"]["labels"]["team"] == "ml"
    assert (
        node["metadata"]["annotations"]["karpenter.sh/nodepool-hash"]
        == (claim["metadata"]["annotations"]["karpenter.sh/nodepool-hash"])
    )


def test_a_template_do_not_disrupt_annotation_keeps_an_empty_node():
    protected = _world({DO_NOT_DISRUPT: "true"})
    protected.scale("web", 0)
    protected.run(10 * 60)
    assert len(protected.nodes()) == 1
    plain = _world({})
    plain.scale("web", 0)
    plain.run(10 * 60)
    assert plain.nodes() == []
