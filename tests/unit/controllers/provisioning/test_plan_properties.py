"""Property test: random small clusters always get plans the independent checker accepts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.controllers.provisioning.scenario import ZONES, nodepool, pod, run_plan, zone_spread

CAPACITY_TYPES = ("spot", "on-demand")
CATEGORIES = ("c", "m", "r", "g")
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}


@st.composite
def _pool(draw: st.DrawFn, index: int) -> dict[str, Any]:
    requirements: list[dict[str, Any]] = []
    categories = draw(st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=3, unique=True))
    requirements.append(
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": categories}
    )
    if draw(st.booleans()):
        capacity = draw(st.lists(st.sampled_from(CAPACITY_TYPES), min_size=1, unique=True))
        requirements.append(
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity}
        )
    if draw(st.booleans()):
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True))
        requirements.append(
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}
        )
    taints = []
    if draw(st.booleans()):
        taints.append(TAINT)
    if "g" in categories:
        taints.append(GPU_TAINT)
    limits = {"cpu": str(draw(st.integers(8, 64)))} if draw(st.integers(0, 3)) == 0 else None
    return nodepool(
        f"pool{index}",
        requirements=requirements,
        taints=taints,
        limits=limits,
        weight=draw(st.sampled_from([None, 10, 50])),
        labels={"team": f"t{index}"},
    )


@st.composite
def _cluster(draw: st.DrawFn) -> list[dict[str, Any]]:
    pools = [draw(_pool(i)) for i in range(draw(st.integers(2, 3)))]
    objects: list[dict[str, Any]] = [*pools]
    count = draw(st.integers(5, 30))
    gangs = draw(st.integers(0, 2))
    if gangs:
        objects.append(
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": "q"},
                "spec": {"resources": {"gpu": {"quota": -1, "limit": -1}}},
            }
        )
    gang_of: dict[int, str] = {}
    for g in range(gangs):
        size = draw(st.integers(2, 4))
        start = draw(st.integers(0, count - 1))
        members = [i for i in range(start, min(start + size, count)) if i not in gang_of]
        if len(members) < 2:
            continue
        name = f"pg-{g}"
        for i in members:
            gang_of[i] = name
        objects.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"minMember": len(members), "queue": "q"},
            }
        )
    apps = ("web", "api", "batch")
    for i in range(count):
        app = draw(st.sampled_from(apps))
        kwargs: dict[str, Any] = {
            "cpu": f"{draw(st.sampled_from([100, 250, 500, 1000, 1500, 3000]))}m",
            "memory": f"{draw(st.sampled_from([128, 512, 1024, 4096, 12288]))}Mi",
            "labels": {"app": app},
        }
        tolerations = []
        if draw(st.booleans()):
            tolerations.append({"key": "dedicated", "operator": "Exists"})
        if draw(st.integers(0, 4)) == 0:
            tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists"})
            if draw(st.booleans()):
                kwargs["gpu"] = "1"
            else:
                kwargs["annotations"] = {"gpu-fraction": draw(st.sampled_from(["0.25", "0.5"]))}
        kwargs["tolerations"] = tolerations
        selector = draw(
            st.sampled_from(
                [
                    None,
                    {"topology.kubernetes.io/zone": "us-east-1b"},
                    {"karpenter.sh/capacity-type": "spot"},
                    {"team": "t1"},
                ]
            )
        )
        if selector:
            kwargs["node_selector"] = selector
        spread = draw(
            st.sampled_from([None, "topology.kubernetes.io/zone", "kubernetes.io/hostname"])
        )
        if spread and i not in gang_of:
            kwargs["spreads"] = [zone_spread(app, draw(st.integers(1, 2)), spread)]
        if i in gang_of:
            kwargs.setdefault("annotations", {})["pod-group-name"] = gang_of[i]
            kwargs["labels"]["kai.scheduler/queue"] = "q"
            kwargs["scheduler"] = "kai-scheduler"
        objects.append(pod(f"p-{i}", **kwargs))
    return objects


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_cluster())
def test_random_clusters_plan_validly_and_beat_greedy(objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        jointer = run_plan(objects, Path(directory), deterministic_time=0.5)
        greedy = run_plan(objects, Path(directory), policy="greedy")
    assert jointer.violations == [], jointer.violations
    assert greedy.violations == [], greedy.violations
    if set(jointer.placed()) == set(greedy.placed()):
        assert jointer.plan["costPerHour"] <= greedy.plan["costPerHour"] + 1e-6
