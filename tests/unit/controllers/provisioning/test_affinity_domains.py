"""Required pod affinity and anti-affinity to the group's own pods on a multi-zone catalog.

kube-scheduler's first-pod rule: a pod whose affinity term matches its own labels may go
anywhere only while no matching pod exists; every later one must find a match in its domain.
So such a group lands in ONE zone (or on one node), chosen for cost; with matches already
running, only in their domains. Self-matching anti-affinity allows one pod per domain.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.controllers.provisioning.scenario import (
    SMALL_CATALOG,
    node,
    nodepool,
    pod,
    run_plan,
)

CPU_POOL_REQ = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
POLICIES = ["jointer", "greedy"]


def _catalog(cheap: str = "us-east-1b") -> dict[str, Any]:
    """The small catalog with every price 10 % lower in ``cheap``."""
    data = copy.deepcopy(SMALL_CATALOG)
    for instance_type in data["instanceTypes"]:
        for offering in instance_type["offerings"]:
            if offering["zone"] == cheap:
                offering["price"] = round(offering["price"] * 0.9, 5)
    return data


def _term(key: str, kind: str = "podAffinity") -> dict[str, Any]:
    return {
        kind: {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": key, "labelSelector": {"matchLabels": {"affinity-zone": "a"}}}
            ]
        }
    }


def _group(n: int, key: str, kind: str = "podAffinity", cpu: str = "1") -> list[dict[str, Any]]:
    labels = {"affinity-zone": "a"}
    return [
        pod(f"g-{i}", labels=labels, affinity=_term(key, kind), cpu=cpu, memory="1Gi")
        for i in range(n)
    ]


def _clean(run: Any) -> None:
    assert run.violations == [], run.violations


@pytest.mark.parametrize("policy", POLICIES)
def test_zonal_self_affinity_lands_in_one_zone_chosen_for_cost(tmp_path: Path, policy: str) -> None:
    objects = [nodepool("default", requirements=CPU_POOL_REQ), *_group(40, ZONE)]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog("us-east-1b"))
    _clean(run)
    assert run.unschedulable() == {}
    zones = {c["zone"] for c in run.plan["nodeClaims"]}
    assert zones == {"us-east-1b"}
    assert len(run.plan["nodeClaims"]) > 1


@pytest.mark.parametrize("policy", POLICIES)
def test_zonal_self_affinity_does_not_fill_free_nodes_in_other_zones(
    tmp_path: Path, policy: str
) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-a", zone="us-east-1a"),
        node("n-c", zone="us-east-1c"),
        *_group(6, ZONE),
    ]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog())
    _clean(run)
    assert run.unschedulable() == {}
    zone_of = {"n-a": "us-east-1a", "n-c": "us-east-1c"}
    zone_of.update({c["name"]: c["zone"] for c in run.plan["nodeClaims"]})
    assert len({zone_of[run.placed()[f"default/g-{i}"]] for i in range(6)}) == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_zonal_self_affinity_follows_a_running_match(tmp_path: Path, policy: str) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-c", zone="us-east-1c", cpu="1", memory="2Gi"),
        pod("running", labels={"affinity-zone": "a"}, node_name="n-c", cpu="500m"),
        *_group(20, ZONE),
    ]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog("us-east-1b"))
    _clean(run)
    assert run.unschedulable() == {}
    assert {c["zone"] for c in run.plan["nodeClaims"]} == {"us-east-1c"}


@pytest.mark.parametrize("policy", POLICIES)
def test_hostname_self_affinity_lands_on_one_node(tmp_path: Path, policy: str) -> None:
    # two c6i.xlarge (3 pods each) cost less than one m6i.2xlarge: only the rule keeps them together
    objects = [nodepool("default", requirements=CPU_POOL_REQ), *_group(6, HOST)]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog())
    _clean(run)
    assert run.unschedulable() == {}
    assert len({run.placed()[f"default/g-{i}"] for i in range(6)}) == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_hostname_self_affinity_follows_a_running_match(tmp_path: Path, policy: str) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        node("n-a", zone="us-east-1a", cpu="4", memory="16Gi"),
        pod("running", labels={"affinity-zone": "a"}, node_name="n-a", cpu="500m"),
        *_group(3, HOST, cpu="500m"),
    ]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog())
    _clean(run)
    assert run.plan["nodeClaims"] == []
    assert {run.placed()[f"default/g-{i}"] for i in range(3)} == {"n-a"}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("key", "domains"), [(ZONE, 3), (HOST, 5)])
def test_self_anti_affinity_one_per_domain(
    tmp_path: Path, policy: str, key: str, domains: int
) -> None:
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        *_group(5, key, kind="podAntiAffinity", cpu="250m"),
    ]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog())
    _clean(run)
    where = run.placed()
    placed = [where[f"default/g-{i}"] for i in range(5) if f"default/g-{i}" in where]
    assert len(placed) == domains
    assert len(set(placed)) == domains
    if key == ZONE:
        zones = {c["zone"] for c in run.plan["nodeClaims"] if c["pods"]}
        assert len(zones) == 3


@pytest.mark.parametrize("policy", POLICIES)
def test_hostname_and_zonal_groups_sharing_a_label(tmp_path: Path, policy: str) -> None:
    """Karpenter's diverse mix: hostname and zonal self-affinity groups select one label."""
    objects = [
        nodepool("default", requirements=CPU_POOL_REQ),
        *(
            pod(f"h-{i}", labels={"affinity-zone": "a"}, affinity=_term(HOST), cpu=cpu)
            for i, cpu in enumerate(("100m", "250m", "500m"))
        ),
        *(
            pod(f"z-{i}", labels={"affinity-zone": "a"}, affinity=_term(ZONE), cpu=cpu)
            for i, cpu in enumerate(("100m", "250m", "500m"))
        ),
    ]
    run = run_plan(objects, tmp_path, policy=policy, catalog=_catalog())
    _clean(run)
    assert run.unschedulable() == {}
    assert len({run.placed()[f"default/h-{i}"] for i in range(3)}) == 1
