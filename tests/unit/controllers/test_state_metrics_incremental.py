"""``metrics.node`` refreshes incrementally: unchanged pods are not re-read, unchanged series not
rewritten, and the gauges equal those of a controller computing everything afresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from provisioner.apis.core import Node, Pod
from provisioner.controllers import statemetrics
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.statemetrics import NodeMetricsController, PodMetricsController
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.reconciler import Request
from provisioner.scheduling.resources import requests_of
from provisioner.state.statenode import StateNode, state_node

START = datetime(2026, 1, 1, tzinfo=UTC)


def node(name: str) -> Node:
    return Node.model_validate(
        {
            "metadata": {
                "name": name,
                "labels": {"node.kubernetes.io/instance-type": "m.large"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "status": {
                "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "58"},
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
            },
        }
    )


def pod(name: str, node_name: str, cpu: str, *, daemon: bool = False) -> Pod:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": cpu}, "limits": {"memory": "1Gi"}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }
    if daemon:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}
        ]
    return Pod.model_validate(body)


class State:
    """The part of the cluster state ``metrics.node`` reads."""

    def __init__(self, nodes: list[StateNode]) -> None:
        self.nodes = nodes

    def state_nodes(self, now: datetime | None = None) -> list[StateNode]:
        del now
        return list(self.nodes)


def gauges(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if s.name.startswith(("karpenter_nodes_", "karpenter_cluster_utilization"))
    }


def fresh(state: State, clock: FakeClock) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The gauges of a new controller that has seen nothing before."""
    registry = CollectorRegistry()
    controller = NodeMetricsController(state=state, metrics=Metrics(registry), clock=clock)  # type: ignore[arg-type]
    controller.reconcile(Request())
    return gauges(registry)


def test_node_gauges_are_incremental_and_equal_a_fresh_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = node("a"), node("b")
    pods_a = [pod(f"a-{i}", "a", "100m") for i in range(5)] + [pod("ds", "a", "50m", daemon=True)]
    pods_b = [pod(f"b-{i}", "b", "250m") for i in range(3)]
    state = State([state_node(a, None, pods_a), state_node(b, None, pods_b)])
    clock = FakeClock(START + timedelta(hours=1))
    registry = CollectorRegistry()
    controller = NodeMetricsController(state=state, metrics=Metrics(registry), clock=clock)  # type: ignore[arg-type]
    reads: list[str] = []
    original = requests_of

    def counting(item: Pod) -> dict[str, int]:
        reads.append(item.metadata.name)
        return original(item)

    monkeypatch.setattr(statemetrics, "requests_of", counting)
    controller.reconcile(Request())
    assert len(reads) == 9
    assert gauges(registry) == fresh(state, clock)

    reads.clear()
    clock.step(timedelta(seconds=5))
    writes: list[float] = []
    written = Gauge.set

    def recording(self: Gauge, value: float) -> None:
        writes.append(value)
        written(self, value)

    monkeypatch.setattr(Gauge, "set", recording)
    controller.reconcile(Request())
    assert reads == []  # nothing changed: no pod is read again
    assert sorted(writes) == [3605.0, 3605.0]  # only the two lifetimes move
    monkeypatch.undo()

    # one pod on b changes, one on a goes: only b's pods are read again
    monkeypatch.setattr(statemetrics, "requests_of", counting)
    pods_b[1] = pod("b-1", "b", "1")
    state.nodes = [state_node(a, None, pods_a[1:]), state_node(b, None, pods_b)]
    controller.reconcile(Request())
    assert sorted(reads) == ["b-1"]
    assert gauges(registry) == fresh(state, clock)
    requests = gauges(registry)[
        (
            "karpenter_nodes_total_pod_requests",
            tuple(
                sorted(
                    {
                        **statemetrics.node_labels(b, managed=False),
                        "resource_type": "cpu",
                    }.items()
                )
            ),
        )
    ]
    assert requests == pytest.approx(1.5)

    state.nodes = [state_node(b, None, pods_b)]  # a is gone: its series go too
    controller.reconcile(Request())
    assert gauges(registry) == fresh(state, clock)
    assert not [key for key in gauges(registry) if ("node_name", "a") in key[1]]


class PodState:
    """The part of the cluster state ``metrics.pod`` reads."""

    def __init__(self, nodes: list[Node], pods: list[Pod]) -> None:
        self.generation, self._nodes, self._pods = 1, nodes, pods

    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def pods(self) -> list[Pod]:
        return list(self._pods)

    def change(self, nodes: list[Node], pods: list[Pod]) -> None:
        self.generation, self._nodes, self._pods = self.generation + 1, nodes, pods


def pod_gauges(state: PodState) -> set[tuple[tuple[str, str], ...]]:
    registry = CollectorRegistry()
    controller = PodMetricsController(state=state, metrics=Metrics(registry))  # type: ignore[arg-type]
    controller.reconcile(Request())
    return series(registry)


def series(registry: CollectorRegistry) -> set[tuple[tuple[str, str], ...]]:
    return {
        tuple(sorted(s.labels.items()))
        for family in registry.collect()
        for s in family.samples
        if s.name == "karpenter_pods_state"
    }


def test_pod_state_labels_are_computed_once_per_pod_and_node_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = node("a")
    pods = [pod(f"p-{i}", "a", "100m") for i in range(4)]
    state = PodState([a], pods)
    registry = CollectorRegistry()
    controller = PodMetricsController(state=state, metrics=Metrics(registry))  # type: ignore[arg-type]
    labelled: list[str] = []
    original = statemetrics.pod_state_labels

    def counting(item: Pod, at: Node | None) -> dict[str, str]:
        labelled.append(item.metadata.name)
        return original(item, at)

    monkeypatch.setattr(statemetrics, "pod_state_labels", counting)
    controller.reconcile(Request())
    assert len(labelled) == 4
    labelled.clear()
    written: list[str] = []
    update = statemetrics.GaugeStore.update

    def writing(store: statemetrics.GaugeStore, key: str, samples: Any) -> None:
        written.append(key)
        update(store, key, samples)

    monkeypatch.setattr(statemetrics.GaugeStore, "update", writing)
    moved = pod("p-1", "b", "100m")
    state.change([a, node("b")], [pods[0], moved, pods[2]])  # p-3 is gone
    controller.reconcile(Request())
    assert labelled == ["p-1"]
    assert written == ["default/p-1"]  # unchanged pods' series are not written again
    monkeypatch.undo()
    assert series(registry) == pod_gauges(state)
    assert not [labels for labels in series(registry) if ("name", "p-3") in labels]
    labelled.clear()
    monkeypatch.setattr(statemetrics, "pod_state_labels", counting)
    state.change([node("a"), node("b")], [pods[0], moved, pods[2]])  # new Node objects
    controller.reconcile(Request())
    assert sorted(labelled) == ["p-0", "p-1", "p-2"]
