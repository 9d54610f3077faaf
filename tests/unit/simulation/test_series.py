"""The report's time series, spending efficiency and gangs, from hand-made rows."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.kube.memory import InMemoryKube
from provisioner.kube.resource import PODS
from provisioner.simulation.recorder import Recorder
from provisioner.simulation.series import (
    gangs,
    partial_gangs,
    sample_step,
    spending_efficiency,
    time_series,
)
from provisioner.simulation.timeline import Timeline


def pod(
    name: str,
    created: float,
    scheduled: float | None,
    *,
    completed: float | None = None,
    deleted: float | None = None,
    cpu: float = 1.0,
    memory: float = 2.0,
    group: str | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "podGroup": group,
        "createdAt": created,
        "scheduledAt": scheduled,
        "node": "n" if scheduled is not None else None,
        "completedAt": completed,
        "evictions": 0,
        "deletedAt": deleted,
        "requests": {"cpu": cpu, "memoryGiB": memory},
        "protected": False,
    }


def instance(kind: str, capacity: str, launched: float, terminated: float | None, price: float):
    return {
        "id": f"i-{kind}-{launched}",
        "instanceType": kind,
        "capacityType": capacity,
        "zone": "us-east-1a",
        "launchedAt": launched,
        "terminatedAt": terminated,
        "nodeClaim": "c",
        "pricePerHour": price,
    }


def report(pods: list[dict[str, Any]], instances: list[dict[str, Any]], duration: float = 7200):
    cost = sum(
        i["pricePerHour"] * ((i["terminatedAt"] or duration) - i["launchedAt"]) / 3600
        for i in instances
    )
    return {
        "durationSeconds": duration,
        "cost": {"total": cost},
        "pods": pods,
        "ec2Instances": instances,
    }


def test_the_sample_step_is_a_whole_minute_and_bounds_the_points() -> None:
    assert sample_step(3600) == 60
    assert sample_step(7 * 24 * 3600) == 1020  # a week: 593 samples
    assert 7 * 24 * 3600 / sample_step(7 * 24 * 3600) <= 600


def test_pending_bound_nodes_and_cost_over_time() -> None:
    pods = [
        pod("a", 0, 120),  # pending for two minutes, then bound to the end
        pod("b", 0, None, deleted=300),  # never bound; deleted at 5 m
        pod("c", 60, 120, completed=3600),  # bound for an hour less a minute
    ]
    instances = [
        instance("m5.large", "spot", 30, 3630, 1.0),
        instance("c5.xlarge", "on-demand", 30, None, 2.0),
    ]
    series = time_series(report(pods, instances), step=1800)
    assert series["at"] == [0, 1800, 3600, 5400, 7200]
    assert series["pendingPods"] == [2, 0, 0, 0, 0]
    assert series["boundPods"] == [0, 2, 1, 1, 1]
    assert series["nodes"] == {
        "c5.xlarge/on-demand": [0, 1, 1, 1, 1],
        "m5.large/spot": [0, 1, 1, 0, 0],
    }
    assert series["costPerHour"] == [0, 3.0, 3.0, 2.0, 2.0]
    assert series["cost"][-1] == pytest.approx(1.0 * 3600 / 3600 + 2.0 * 7170 / 3600)
    assert series["requestedVCPU"] == [0, 2, 1, 1, 1]
    assert series["requestedMemoryGiB"] == [0, 4, 2, 2, 2]


def test_a_duration_not_a_multiple_of_the_step_ends_with_the_end() -> None:
    series = time_series(report([], [], duration=150), step=60)
    assert series["at"] == [0, 60, 120, 150]


def test_spending_efficiency_is_cost_per_requested_hour() -> None:
    pods = [pod("a", 0, 0, cpu=2, memory=8), pod("b", 0, 3600, cpu=2, memory=8)]
    efficiency = spending_efficiency(report(pods, [instance("m5.large", "spot", 0, None, 1.5)]))
    # 2 h x 2 vCPU + 1 h x 2 vCPU = 6 vCPU-hours, 24 GiB-hours, for $3
    assert efficiency == {
        "requestedVCPUHours": 6.0,
        "requestedGiBHours": 24.0,
        "perRequestedVCPUHour": 0.5,
        "perRequestedGiBHour": 0.125,
    }
    idle = spending_efficiency(report([], [instance("m5.large", "spot", 0, None, 1.5)]))
    assert idle["perRequestedVCPUHour"] is None


def test_gangs_start_when_their_last_member_binds_and_partial_ones_are_named() -> None:
    pods = [
        pod("w-0", 10, 50, group="ml/whole"),
        pod("w-1", 12, 70, group="ml/whole"),
        pod("h-0", 0, 40, group="ml/half"),
        pod("h-1", 0, None, group="ml/half"),
        pod("d-0", 0, 40, group="ml/done", completed=100),
        pod("d-1", 0, None, group="ml/done", deleted=100),
        pod("solo", 0, 5),
    ]
    rows = gangs(report(pods, []))
    assert [(g["name"], g["members"], g["timeToStartSeconds"]) for g in rows] == [
        ("ml/done", 2, None),
        ("ml/half", 2, None),
        ("ml/whole", 2, 60.0),
    ]
    assert partial_gangs(report(pods, [])) == ["ml/half"]


def test_the_recorder_notes_requests_deletion_and_protection() -> None:
    timeline = Timeline()
    kube = InMemoryKube(clock=timeline.clock.now)
    recorder = Recorder(timeline=timeline, kube=kube)
    for name, notes in (("plain", {}), ("kept", {"karpenter.sh/do-not-disrupt": "true"})):
        kube.create(
            PODS,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "annotations": notes},
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "3Gi"}}}
                    ]
                },
            },
            namespace="default",
        )
    timeline.run_until(90)
    kube.delete(PODS, "plain", namespace="default")
    records = {r.name: r for r in recorder.pods.values()}
    assert (records["default/plain"].cpu, records["default/plain"].memory_gib) == (0.5, 3.0)
    assert records["default/plain"].deleted_at == 90
    assert records["default/kept"].deleted_at is None
    assert (records["default/plain"].protected, records["default/kept"].protected) == (False, True)


def test_an_eviction_of_a_protected_pod_is_marked_and_counted() -> None:
    timeline = Timeline()
    kube = InMemoryKube(clock=timeline.clock.now)
    recorder = Recorder(timeline=timeline, kube=kube)
    labels = {"kai.scheduler/preemptibility": "non-preemptible"}
    bodies = []
    for name, extra in (("etl", {"labels": labels}), ("web", {})):
        bodies.append(
            kube.create(
                PODS,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default", **extra},
                    "spec": {"containers": [{"name": "c"}], "nodeName": "node-a"},
                },
                namespace="default",
            )
        )
    for body in bodies:
        recorder.evicted(body)
    assert [(e.pod, e.protected) for e in recorder.evictions] == [
        ("default/etl", True),
        ("default/web", False),
    ]
