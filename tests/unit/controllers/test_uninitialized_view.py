"""Managed nodes not yet initialized are planned with the NodeClaim's allocatable."""

from provisioner.apis.base import parse_object
from provisioner.apis.core import Node
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.controllers.provisioning.controller import _uninitialized_view


def _claim() -> NodeClaim:
    return parse_object(
        NodeClaim,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "gpu-abcde", "labels": {"karpenter.sh/nodepool": "gpu"}},
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": [],
                "startupTaints": [{"key": "example.com/agent", "effect": "NoSchedule"}],
            },
            "status": {
                "providerID": "aws:///us-east-1a/i-0abc",
                "allocatable": {"cpu": "3920m", "memory": "14162Mi", "nvidia.com/gpu": "1"},
            },
        },
        kind="NodeClaim",
    )


def _node(labels: dict[str, str], allocatable: dict[str, str]) -> Node:
    return Node.model_validate(
        {
            "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": labels},
            "spec": {
                "providerID": "aws:///us-east-1a/i-0abc",
                "taints": [
                    {"key": "example.com/agent", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                ],
            },
            "status": {"allocatable": allocatable},
        }
    )


def test_gpu_not_yet_advertised_is_taken_from_the_nodeclaim():
    node = _node({"karpenter.sh/registered": "true"}, {"cpu": "3920m", "memory": "14162Mi"})
    view = _uninitialized_view(node, _claim())
    assert view.status.allocatable["nvidia.com/gpu"] == "1"
    assert view.status.allocatable["cpu"] == "3920m"
    assert view.spec.taints == ()


def test_initialized_node_is_planned_as_it_reports_itself():
    node = _node({"karpenter.sh/initialized": "true"}, {"cpu": "3920m", "memory": "14162Mi"})
    view = _uninitialized_view(node, _claim())
    assert "nvidia.com/gpu" not in view.status.allocatable
    assert len(view.spec.taints) == 2
