"""State nodes: Nodes and NodeClaims joined once, as controllers and `jointer plan` read them."""

from provisioner.apis.base import parse_object
from provisioner.apis.core import Node
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.state.statenode import join_state_nodes, state_node


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
    view = state_node(node, _claim())
    assert view.allocatable is not None
    assert view.allocatable["nvidia.com/gpu"] == 1000
    assert view.allocatable["cpu"] == 3920
    assert view.taints == ()


def test_initialized_node_is_planned_as_it_reports_itself():
    node = _node({"karpenter.sh/initialized": "true"}, {"cpu": "3920m", "memory": "14162Mi"})
    view = state_node(node, _claim())
    assert view.allocatable is not None
    assert "nvidia.com/gpu" not in view.allocatable
    assert len(view.taints) == 2


def test_nodes_join_their_nodeclaims_by_provider_id_and_in_flight_claims_stand_alone():
    claim = _claim()
    in_flight = parse_object(
        NodeClaim,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "gpu-fghij", "labels": {"karpenter.sh/nodepool": "gpu"}},
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["g5.xlarge", "g5.2xlarge"],
                    },
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]},
                ],
                "taints": [{"key": "gpu", "effect": "NoSchedule"}],
            },
        },
        kind="NodeClaim",
    )
    node = _node({"karpenter.sh/initialized": "true"}, {"cpu": "3920m"})
    joined = join_state_nodes([node], [claim, in_flight], [], {"ml/job-0": "gpu-fghij"})
    assert list(joined) == ["ip-10-0-0-1.ec2.internal", "nodeclaim/gpu-fghij"]
    registered = joined["ip-10-0-0-1.ec2.internal"]
    assert registered.claim_name == "gpu-abcde"
    assert registered.pool == "gpu"
    flying = joined["nodeclaim/gpu-fghij"]
    assert flying.name == ""
    assert not flying.registered
    assert flying.allocatable is None
    assert flying.instance_types == ("g5.2xlarge", "g5.xlarge")
    assert flying.zone == "b"
    assert flying.nominated == ("ml/job-0",)
    assert [t.key for t in flying.taints] == ["gpu"]
