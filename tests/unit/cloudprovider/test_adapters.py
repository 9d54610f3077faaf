"""From karpenter.sh/v1 NodeClaims and NodePools to the CloudProvider port's values."""

from __future__ import annotations

from cloudprovider.adapters import claim_view, launch_request
from provisioner.apis.nodeclaim import NodeClaim

NODECLAIM = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {
        "name": "default-x2k4p",
        "uid": "u-1",
        "labels": {"karpenter.sh/nodepool": "default", "team": "a"},
        "annotations": {"karpenter.k8s.aws/ec2nodeclass-hash": "123"},
    },
    "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        ],
        "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}},
        "taints": [{"key": "gpu", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "init", "value": "x", "effect": "NoSchedule"}],
    },
    "status": {"providerID": "aws:///us-east-1a/i-0abc", "imageID": "ami-1"},
}


def test_launch_request_carries_what_the_provider_needs():
    request = launch_request(NodeClaim.model_validate(NODECLAIM))

    assert (request.name, request.uid, request.nodepool) == ("default-x2k4p", "u-1", "default")
    assert request.node_class.name == "default"
    assert request.requirements["karpenter.sh/capacity-type"].has("spot")
    assert request.requests == {"cpu": 1500, "memory": 1024**3 * 1000}
    assert [(t.key, t.value) for t in request.taints] == [("gpu", "")]
    assert [(t.key, t.value) for t in request.startup_taints] == [("init", "x")]


def test_claim_view_for_drift_and_delete():
    view = claim_view(NodeClaim.model_validate(NODECLAIM))

    assert view.provider_id == "aws:///us-east-1a/i-0abc"
    assert view.instance_id == "i-0abc"
    assert view.image_id == "ami-1"
    assert view.node_class == "default"
    assert view.annotations["karpenter.k8s.aws/ec2nodeclass-hash"] == "123"
