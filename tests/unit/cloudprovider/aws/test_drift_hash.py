"""The EC2NodeClass drift hash: Karpenter's claims are re-stamped, never NodeClass-drifted."""

from __future__ import annotations

from cloudprovider.aws.drift import (
    KARPENTER_NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION,
    nodeclass_annotations,
    nodeclass_hash,
    restamp_nodeclass,
    static_drift,
)
from cloudprovider.aws.nodeclass import parse_nodeclass

HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
VERSION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}
KARPENTERS = {HASH: "11467530536542478447", VERSION: KARPENTER_NODECLASS_HASH_VERSION}


def test_a_karpenter_stamped_claim_is_not_drifted_and_gets_jointers_stamp():
    nodeclass = parse_nodeclass(NODECLASS)
    assert len({NODECLASS_HASH_VERSION, KARPENTER_NODECLASS_HASH_VERSION}) == 2
    assert static_drift(nodeclass, KARPENTERS) is None
    changes = restamp_nodeclass(nodeclass, KARPENTERS, drifted=False)
    assert changes == nodeclass_annotations(nodeclass)
    assert static_drift(nodeclass, {**KARPENTERS, **changes}) is None


def test_a_drifted_claim_keeps_its_hash_and_a_current_one_is_left_alone():
    nodeclass = parse_nodeclass(NODECLASS)
    assert restamp_nodeclass(nodeclass, KARPENTERS, drifted=True) == {
        VERSION: NODECLASS_HASH_VERSION
    }
    current = nodeclass_annotations(nodeclass)
    assert restamp_nodeclass(nodeclass, current, drifted=False) == {}
    assert current[HASH] == nodeclass_hash(nodeclass)
