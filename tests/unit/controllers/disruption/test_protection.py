"""Consolidation never evicts protected pods, never splits a gang, never violates a PDB.

Mixed scenarios: do-not-disrupt pods, KAI non-preemptible pods, a GPU reservation pod, a
PodDisruptionBudget and gangs share the cluster with a workload that scales down. Everything is
checked from the evictions the controllers made (and, for the PDB, at every instant).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from provisioner.kube.resource import NODE_POOLS, PODS
from tests.unit.controllers.disruption.checks import BudgetCheck
from tests.unit.controllers.disruption.world import World, nodepool, pod

PROTECTED_NS = "default"


def lws(group: str, index: int, size: int, *, cpu: str = "300m") -> dict[str, Any]:
    return pod(
        f"{group}-{index}",
        cpu=cpu,
        labels={
            "app": group,
            "leaderworkerset.sigs.k8s.io/name": group,
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        },
        annotations={"leaderworkerset.sigs.k8s.io/size": str(size)},
    )


class PdbCheck:
    """At every instant at least ``minimum`` pods labelled ``app=<app>`` are Ready."""

    def __init__(self, app: str, minimum: int) -> None:
        self.app = app
        self.minimum = minimum
        self.armed = False

    def __call__(self, world: World) -> None:
        ready = 0
        for p in world.raw(PODS):
            if p["metadata"].get("labels", {}).get("app") != self.app:
                continue
            if p["metadata"].get("deletionTimestamp"):
                continue
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", [])
            ):
                ready += 1
        if ready >= self.minimum:
            self.armed = True
        if self.armed:
            assert ready >= self.minimum, f"only {ready} {self.app} pods ready"


def build(world: World, gangs: int = 2, gang_size: int = 3) -> dict[str, set[str]]:
    world.create(NODE_POOLS, nodepool(capacity_types=("on-demand",)))
    world.run(1)
    world.deploy("web", 120, cpu="500m")
    world.deploy("db", 6, cpu="500m", labels={"app": "db"})
    world.pdb("db", {"app": "db"}, minAvailable=5)
    members: dict[str, set[str]] = {}
    for g in range(gangs):
        group = f"trainer{g}"
        members[group] = set()
        for i in range(gang_size):
            world.create(PODS, lws(group, i, gang_size))
            members[group].add(f"default/{group}-{i}")
    world.run(180)
    assert not world.pending()
    # protected pods, each pinned to its own node (as if the scheduler had put them there)
    nodes = sorted(n["metadata"]["name"] for n in world.nodes())
    kai = pod(
        "serve-0",
        cpu="100m",
        annotations={"pod-group-name": "pg-serve-0"},
        schedulerName="kai-scheduler",
    )
    kai["spec"]["priorityClassName"] = "inference"  # KAI priority 125: non-preemptible
    pinned = [
        pod("batch-0", cpu="100m", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        kai,
        pod(
            "gpu-reservation-x-abcde",
            cpu="100m",
            namespace="kai-resource-reservation",
            labels={"app": "kai-resource-reservation", "runai-gpu-group": "g1"},
        ),
    ]
    protected: set[str] = set()
    for index, body in enumerate(pinned):
        body["spec"]["nodeName"] = nodes[index % len(nodes)]
        world.create(PODS, body)
        namespace = body["metadata"]["namespace"]
        world._start_pod(namespace, body["metadata"]["name"])
        protected.add(f"{namespace}/{body['metadata']['name']}")
    members["protected"] = protected
    return members


def assert_safe(world: World, groups: dict[str, set[str]]) -> None:
    evicted = {e.key for e in world.kube.evictions}
    assert not evicted & groups["protected"], evicted & groups["protected"]
    by_time: dict[str, set[Any]] = defaultdict(set)
    for e in world.kube.evictions:
        by_time[e.key].add(e.at)
    for group, keys in groups.items():
        if group == "protected":
            continue
        hit = keys & evicted
        if hit:
            assert hit == keys, f"gang {group} partially evicted: {sorted(hit)}"
            times = {t for k in keys for t in by_time[k]}
            assert len(times) == 1, f"gang {group} evicted at different times: {times}"


def test_scale_down_with_protected_pods_gangs_and_a_pdb():
    world = World()
    groups = build(world)
    nodes_before = len(world.nodes())
    cost_before = world.cost()
    world.checks.append(BudgetCheck())
    world.checks.append(PdbCheck("db", 5))
    world.scale("web", 10)
    world.run(20 * 60)
    assert_safe(world, groups)
    assert world.cost() < cost_before
    assert len(world.nodes()) < nodes_before
    assert world.kube.evictions
    live = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in world.pods()}
    assert groups["protected"] <= live
    blocked = {e["message"] for e in world.events("DisruptionBlocked")}
    assert any('"karpenter.sh/do-not-disrupt" annotation' in m for m in blocked)
    assert any("non-preemptible" in m for m in blocked)
    assert any("GPU reservation pod" in m for m in blocked)
    evicted = {e.key for e in world.kube.evictions}
    assert groups["trainer0"] <= evicted or groups["trainer1"] <= evicted  # a gang moved whole
    assert any(k.startswith("default/db-") for k in evicted)  # the PDB was exercised


def test_a_gang_is_moved_whole_when_one_of_its_nodes_is_consolidated():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 40, cpu="700m")
    for i in range(4):
        world.create(PODS, lws("gang", i, 4, cpu="200m"))
    world.run(180)
    gang = {f"default/gang-{i}" for i in range(4)}
    assert len({world.pod_node()[k] for k in gang}) == 2  # the gang spans two nodes
    world.checks.append(BudgetCheck())
    world.scale("web", 6)
    world.run(20 * 60)
    assert_safe(world, {"gang": gang, "protected": set()})
    assert gang <= {e.key for e in world.kube.evictions}


def test_a_gang_with_a_protected_member_pins_all_its_nodes():
    world = World()
    world.create(
        NODE_POOLS,
        nodepool(
            capacity_types=("on-demand",),
            disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]},
        ),
    )
    world.run(1)
    world.deploy("web", 40, cpu="700m")
    for i in range(4):
        member = lws("gang", i, 4, cpu="200m")
        if i == 3:
            member["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
        world.create(PODS, member)
    world.run(180)
    gang = {f"default/gang-{i}" for i in range(4)}
    gang_nodes = {world.pod_node()[k] for k in gang}
    world.scale("web", 0)
    world.run(10 * 60)
    assert not gang & {e.key for e in world.kube.evictions}
    assert gang_nodes <= {n["metadata"]["name"] for n in world.nodes()}
    assert any(
        m.startswith("Pod group leaderworkerset/default/gang-0 cannot move")
        for m in {e["message"] for e in world.events("DisruptionBlocked")}
    )
