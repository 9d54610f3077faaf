"""The reasons of unschedulable pods: builder (requirements, taints, unready NodePools) and
planner (the limit that ran out)."""

from __future__ import annotations

from typing import Any

from provisioner.apis.base import parse_object
from provisioner.apis.core import Pod
from provisioner.apis.nodepool import NodePool
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.offerings import PoolTemplate, pool_template
from provisioner.controllers.provisioning.planner import PlannerConfig, plan
from provisioner.controllers.provisioning.reasons import UnavailablePool
from tests.unit.controllers.provisioning.scenario import nodepool, pod, small_catalog

CONFIG = PlannerConfig(policy="greedy", num_workers=1, deterministic_time=0.1)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
NOT_FOUND = 'NodeClassReady=False: EC2NodeClass "gpu" not found'


def _template(body: dict[str, Any], *, types: bool = True) -> PoolTemplate:
    model = parse_object(NodePool, body, kind="NodePool")
    return pool_template(model, small_catalog().instance_types if types else ())


def _reasons(
    pods: list[dict[str, Any]],
    pools: list[PoolTemplate],
    unavailable: tuple[UnavailablePool, ...] = (),
) -> dict[str, str]:
    view = ClusterView(
        pods=tuple(parse_object(Pod, p, kind="Pod") for p in pods),
        pools=tuple(pools),
        unavailable=unavailable,
        region="us-east-1",
    )
    return {u.pod: u.reason for u in plan(view, CONFIG).unschedulable}


def _gpu_pool() -> UnavailablePool:
    template = _template(
        nodepool("gpu", taints=[GPU_TAINT], labels={"workload": "yes"}), types=False
    )
    return UnavailablePool("gpu", NOT_FOUND, template)


def test_an_unready_nodepool_is_named_only_for_pods_it_could_take() -> None:
    general = _template(nodepool("general"))
    pods = [
        pod("train", node_selector={"workload": "yes"}, tolerations=[{"operator": "Exists"}]),
        pod("untolerated", node_selector={"workload": "yes"}),
    ]
    reasons = _reasons(pods, [general], (_gpu_pool(),))
    assert reasons["default/train"] == (
        f'NodePool "gpu" not ready: {NOT_FOUND}; '
        'incompatible with nodepool "general", incompatible requirements, '
        'label "workload" does not have known values'
    )
    # it could not tolerate the gpu pool's taint: only the ready pool is explained
    assert reasons["default/untolerated"] == (
        'incompatible with nodepool "general", incompatible requirements, '
        'label "workload" does not have known values'
    )


def test_no_ready_nodepool_names_the_unready_ones() -> None:
    pods = [pod("train", tolerations=[{"operator": "Exists"}])]
    assert _reasons(pods, [], (_gpu_pool(),)) == {
        "default/train": f'no NodePool is ready to provision capacity: NodePool "gpu" not ready: '
        f"{NOT_FOUND}"
    }
    assert _reasons(pods, []) == {"default/train": "no NodePool is ready to provision capacity"}


def test_a_pod_too_large_for_the_ready_pools_names_the_unready_one_too() -> None:
    general = _template(nodepool("general"))
    pods = [pod("huge", cpu="500", tolerations=[{"operator": "Exists"}])]
    reason = _reasons(pods, [general], (_gpu_pool(),))["default/huge"]
    assert reason.startswith("no instance type in NodePool general has enough resources")
    assert reason.endswith(f'; NodePool "gpu" not ready: {NOT_FOUND}')


def test_the_taint_and_the_requirement_no_offering_meets_are_named() -> None:
    general = _template(nodepool("general", weight=10))
    tainted = _template(nodepool("tainted", taints=[GPU_TAINT]))
    odd = pod("odd", node_selector={"topology.kubernetes.io/zone": "us-east-1z"})
    assert _reasons([odd], [general, tainted]) == {
        "default/odd": 'incompatible with nodepool "general", no instance type offering '
        "satisfies topology.kubernetes.io/zone In [us-east-1z]; "
        'incompatible with nodepool "tainted", did not tolerate taint '
        "nvidia.com/gpu=true:NoSchedule"
    }


def test_the_binding_limit_is_named() -> None:
    # 8 pods of 1 CPU / 6Gi: memory (16Gi) runs out long before cpu (100)
    limited = _template(nodepool("on-demand", limits={"cpu": "100", "memory": "16Gi"}))
    pods = [pod(f"web-{i}", cpu="1", memory="6Gi") for i in range(8)]
    reasons = _reasons(pods, [limited])
    assert reasons
    expected = (
        'all available instance types exceed limits for nodepool: "on-demand" '
        "(memory limit 16Gi reached)"
    )
    assert set(reasons.values()) == {expected}
