"""Node classes come from the cluster state's cache; the API is asked only for unseen ones."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import EC2_NODE_CLASSES
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState
from provisioner.state.nodeclasses import NodeClassReads

NOW = datetime(2026, 11, 1, tzinfo=UTC)
KIND = EC2_NODE_CLASSES.kind


def nodeclass(name: str, version: str, subnet: str = "subnet-1") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": KIND,
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version},
        "spec": {"role": "NodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}]},
        "status": {"subnets": [{"id": subnet, "zone": "us-east-1a"}]},
    }


class LiveReads:
    """The API side: what a GET would answer, and how often it was asked."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.asked: list[str] = []

    def __call__(self, name: str) -> dict[str, Any] | None:
        self.asked.append(name)
        return self.objects.get(name)


def test_the_cache_keeps_a_node_class_whole_and_follows_its_updates() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    state.apply(EC2_NODE_CLASSES, WatchEvent(WatchEventType.ADDED, nodeclass("default", "1")))
    kept = state.node_class(KIND, "default")
    assert kept is not None
    assert kept["status"]["subnets"][0]["id"] == "subnet-1"  # the status is kept
    state.apply(
        EC2_NODE_CLASSES,
        WatchEvent(WatchEventType.MODIFIED, nodeclass("default", "2", subnet="subnet-2")),
    )
    assert state.node_class(KIND, "default")["status"]["subnets"][0]["id"] == "subnet-2"  # type: ignore[index]
    state.apply(EC2_NODE_CLASSES, WatchEvent(WatchEventType.DELETED, nodeclass("default", "3")))
    assert state.node_class(KIND, "default") is None
    assert state.node_class("OtherNodeClass", "default") is None


def test_a_relist_forgets_the_node_classes_it_did_not_find() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    state.apply_object(nodeclass("a", "1"))
    state.apply_object(nodeclass("b", "1"))
    state.replace(EC2_NODE_CLASSES, [nodeclass("b", "2")])
    assert state.node_class(KIND, "a") is None
    assert state.node_class(KIND, "b") is not None


def test_reads_come_from_the_cache_and_go_to_the_api_only_for_unseen_classes() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    live = LiveReads()
    reads = NodeClassReads(state, KIND, live)
    # created a moment ago, not delivered yet: the API answers
    live.objects["default"] = nodeclass("default", "1")
    assert reads("default") == nodeclass("default", "1")
    assert live.asked == ["default"]
    state.apply_object(nodeclass("default", "1"))
    for _ in range(5):
        assert reads("default") == nodeclass("default", "1")
    assert live.asked == ["default"]
    assert reads.live_reads == 1
    # deleted: the cache forgets it, the API says it is gone
    state.apply_object(nodeclass("default", "2"), deleted=True)
    del live.objects["default"]
    assert reads("default") is None
    assert live.asked == ["default", "default"]
