"""The cache shares identical parts of its objects without changing what any reader sees."""

from __future__ import annotations

import copy
import pickle
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import orjson
import pydantic
import pytest

from provisioner.apis.base import to_wire
from provisioner.apis.core import Node, Pod
from provisioner.apis.nodeclaim import NodeClaim
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState
from provisioner.state.intern import FrozenDict, Interner

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _pod(index: int, **overrides: Any) -> dict[str, Any]:
    """A pod using every field scheduling, disruption and PDB code reads."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{index}",
            "generateName": "web-",
            "namespace": "shop",
            "uid": f"uid-{index}",
            "resourceVersion": str(100 + index),
            "creationTimestamp": "2026-10-31T23:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "uid": "rs-1",
                    "controller": True,
                }
            ],
            "finalizers": ["example.com/keep"],
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        },
        "spec": {
            "nodeName": f"node-{index % 3}",
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "karpenter.sh/capacity-type",
                                        "operator": "In",
                                        "values": ["spot", "on-demand"],
                                    }
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                },
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ],
            "initContainers": [
                {"name": "init", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/web:1",
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": 1},
                        "limits": {"memory": "1Gi"},
                    },
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                }
            ],
            "overhead": {"cpu": "10m"},
            "priority": 1000,
            "priorityClassName": "high",
            "schedulerName": "default-scheduler",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{index}"}}],
            "terminationGracePeriodSeconds": 30,
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-01T00:00:00Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": f"2026-11-01T00:00:{index % 60:02d}Z",
                },
            ],
        },
    }
    pod.update(overrides)
    return pod


def _fields_sets(model: Any) -> list[Any]:
    """Every sub-model's ``model_fields_set``, depth first (what ``exclude_unset`` reads)."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, pydantic.BaseModel):
            found.append((type(value).__name__, sorted(value.model_fields_set)))
            for item in value.__dict__.values():
                walk(item)
        elif isinstance(value, tuple):
            for item in value:
                walk(item)

    walk(model)
    return found


def _cached_pods(*objects: dict[str, Any]) -> list[Pod]:
    state = ClusterState(clock=FakeClock(NOW))
    for obj in objects:
        state.apply_object(obj)
    pods = state.snapshot(NOW).pods
    return [pods[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] for o in objects]


def test_a_pod_reads_the_same_through_the_cache() -> None:
    raw = [_pod(i) for i in range(3)]
    cached = _cached_pods(*raw)
    for obj, pod in zip(raw, cached, strict=True):
        expected = Pod.model_validate(obj)
        assert pod == expected
        assert to_wire(pod) == to_wire(expected)
        assert pod.model_dump(exclude_unset=True) == expected.model_dump(exclude_unset=True)
        assert _fields_sets(pod) == _fields_sets(expected)
        assert orjson.loads(orjson.dumps(pod.metadata.labels)) == obj["metadata"]["labels"]
    first = cached[0]
    assert first.metadata.annotations["karpenter.sh/do-not-disrupt"] == "true"
    assert first.metadata.owner_references[0].controller is True
    assert first.spec.containers[0].resources.requests == {
        "cpu": "250m",
        "memory": "512Mi",
        "nvidia.com/gpu": 1,
    }
    assert first.spec.tolerations[1].toleration_seconds == 300
    assert first.spec.volumes[0].persistent_volume_claim is not None
    assert first.status is not None
    assert first.status.conditions[1].last_transition_time == datetime(2026, 11, 1, tzinfo=UTC)


def test_replicas_share_their_identical_parts_and_keep_their_own() -> None:
    a, b = _cached_pods(_pod(1), _pod(2))
    assert a.spec.containers is b.spec.containers
    assert a.spec.tolerations is b.spec.tolerations
    assert a.spec.affinity is b.spec.affinity
    assert a.spec.topology_spread_constraints is b.spec.topology_spread_constraints
    assert a.metadata.labels is b.metadata.labels
    assert a.metadata.owner_references is b.metadata.owner_references
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    assert a.metadata.name != b.metadata.name
    assert a.spec.volumes != b.spec.volumes
    assert a.spec.node_name != b.spec.node_name
    assert a.status is not None
    assert b.status is not None
    assert a.status.conditions[0] is b.status.conditions[0]  # no timestamp: shared
    assert a.status.conditions[1] != b.status.conditions[1]  # stamped: its own


def test_a_change_to_one_pod_cannot_reach_another() -> None:
    a, b = _cached_pods(_pod(1), _pod(2))
    before = to_wire(b)
    with pytest.raises(TypeError, match="read-only"):
        a.metadata.labels["app"] = "other"
    with pytest.raises(TypeError):
        a.spec.containers[0].resources.requests.update(cpu="8")
    with pytest.raises(TypeError):
        a.metadata.labels.pop("app")
    with pytest.raises(pydantic.ValidationError):
        a.spec.containers[0].name = "other"  # type: ignore[misc]
    changed = a.model_copy(update={"spec": a.spec.model_copy(update={"node_name": "x"})})
    assert changed.spec.node_name == "x"
    assert "node_name" in changed.spec.model_fields_set
    deep = a.model_copy(deep=True)
    deep.metadata.labels["app"] = "other"  # a deep copy is the caller's own
    labels = copy.copy(a.metadata.labels)
    labels["app"] = "other"
    unpickled = pickle.loads(pickle.dumps(a))  # noqa: S301 - our own object
    assert unpickled == a
    assert isinstance(unpickled.metadata.labels, FrozenDict)
    assert to_wire(b) == before
    assert a.metadata.labels == {"app": "web", "pod-template-hash": "abc"}


def test_equal_values_of_different_types_or_set_fields_are_not_merged() -> None:
    interner = Interner()
    variants = [
        ({"tolerationSeconds": 1}, 1),
        ({"tolerationSeconds": 1}, 1.0),
        ({"operator": "Equal"}, "1"),
        ({}, True),
    ]
    raw = []
    for index, (toleration, cpu) in enumerate(variants):
        obj = _pod(index)
        obj["spec"] = {
            "tolerations": [toleration],
            "containers": [{"resources": {"requests": {"cpu": cpu}}}],
        }
        raw.append(obj)
    shared = [interner.share(Pod.model_validate(obj)) for obj in raw]
    plain = [Pod.model_validate(obj) for obj in raw]

    def cpu_type(pod: Pod) -> type:
        return type(pod.spec.containers[0].resources.requests["cpu"])

    assert [cpu_type(p) for p in shared] == [cpu_type(p) for p in plain]
    assert {cpu_type(p) for p in shared} >= {int, float, str}
    assert [_fields_sets(p) for p in shared] == [_fields_sets(p) for p in plain]
    assert shared[2].spec.tolerations[0].model_fields_set == {"operator"}
    assert shared[3].spec.tolerations[0].model_fields_set == set()


def test_a_full_table_starts_afresh_and_changes_nothing() -> None:
    interner = Interner(limit=3)
    raw = [_pod(i) for i in range(5)]
    shared = [interner.share(Pod.model_validate(obj)) for obj in raw]
    assert len(interner) <= 3
    for obj, pod in zip(raw, shared, strict=True):
        assert pod == Pod.model_validate(obj)
        assert _fields_sets(pod) == _fields_sets(Pod.model_validate(obj))


def test_nodes_and_nodeclaims_read_the_same_through_the_cache() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    nodes: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for index in range(2):
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"n{index}",
                "uid": f"n{index}",
                "resourceVersion": "1",
                "labels": {"kubernetes.io/hostname": f"n{index}", "zone": "a"},
            },
            "spec": {
                "providerID": f"aws:///a/i-{index}",
                "taints": [{"key": "k", "effect": "NoSchedule"}],
            },
            "status": {
                "allocatable": {"cpu": "3920m", "memory": "7Gi"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        claim: dict[str, Any] = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": f"c{index}", "uid": f"c{index}", "resourceVersion": "1"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                ],
            },
            "status": {"providerID": f"aws:///a/i-{index}"},
        }
        state.apply_object(node)
        state.apply_object(claim)
        nodes.append((node, claim))
    for node, claim in nodes:
        name = node["metadata"]["name"]
        assert state.node(name) == Node.model_validate(node)
        cached = state.node_claim(claim["metadata"]["name"])
        assert cached == NodeClaim.model_validate(claim)
        assert cached is not None
        assert state.node_claim_for_provider_id(node["spec"]["providerID"]) is cached
    first, second = state.node("n0"), state.node("n1")
    assert first is not None
    assert second is not None
    assert first.status.allocatable is second.status.allocatable
    assert first.spec.taints is second.spec.taints


def test_replica_pods_cost_a_fraction_of_their_parsed_size() -> None:
    raw = [_pod(i) for i in range(1000)]
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        plain = [Pod.model_validate(obj) for obj in raw]
        parsed = tracemalloc.get_traced_memory()[0] - start
        del plain
        start = tracemalloc.get_traced_memory()[0]
        state = ClusterState(clock=FakeClock(NOW))
        for obj in raw:
            state.apply_object(obj)
        cached = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert state.counts()["pods"] == 1000
    assert cached < parsed * 0.45, (cached, parsed)
