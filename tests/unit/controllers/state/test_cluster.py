"""ClusterState: feeding by events and relists, indexes, the synced gate, nominations."""

from __future__ import annotations

from datetime import timedelta

import pytest

from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, NODES, PODS
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState
from tests.unit.controllers.harness import nodepool, pending_pod

CLAIM = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
    "spec": {
        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    },
    "status": {"providerID": "fake://zone-a/i-1"},
}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def kube(clock):
    return InMemoryKube(clock=clock.now)


@pytest.fixture
def state(clock, kube):
    cluster = ClusterState(clock=clock)
    kube.subscribe(cluster.apply)
    return cluster


def test_synced_only_after_every_tracked_resource_is_listed(state, kube):
    assert not state.synced
    state.replace(PODS, [])
    assert not state.synced
    state.resync(kube)
    assert state.synced


def test_events_feed_typed_indexes(state, kube):
    kube.create(PODS, pending_pod("a"), namespace="default")
    kube.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "spec": {"providerID": "fake://zone-a/i-1"},
        },
    )
    assert state.pod("default/a") is not None
    assert state.node_for_provider_id("fake://zone-a/i-1").metadata.name == "n1"
    kube.delete(NODES, "n1")
    assert state.node_for_provider_id("fake://zone-a/i-1") is None
    assert state.counts()["pods"] == 1


def test_nodeclaims_indexed_by_provider_id(state):
    state.apply(NODE_CLAIMS, WatchEvent(WatchEventType.ADDED, CLAIM))
    assert state.node_claim_for_provider_id("fake://zone-a/i-1").name == "default-abcde"
    state.apply(NODE_CLAIMS, WatchEvent(WatchEventType.DELETED, CLAIM))
    assert state.node_claim_for_provider_id("fake://zone-a/i-1") is None


def test_relist_drops_objects_that_vanished(state, kube):
    kube.create(PODS, pending_pod("a"), namespace="default")
    state.replace(PODS, [])
    assert state.pod("default/a") is None


def test_malformed_nodepool_is_kept_with_its_error(state, kube):
    kube.create(NODE_POOLS, nodepool("good"))
    kube.create(NODE_POOLS, nodepool("bad", expireAfter="forever"))
    good, bad = state.nodepool("good"), state.nodepool("bad")
    assert good.nodepool is not None
    assert good.error is None
    assert bad.nodepool is None
    assert "expireAfter" in bad.error


def test_nominations_lapse_and_follow_the_claim(state, kube, clock):
    kube.create(PODS, pending_pod("a"), namespace="default")
    state.apply(NODE_CLAIMS, WatchEvent(WatchEventType.ADDED, CLAIM))
    pod = state.pod("default/a")
    state.nominate(pod, "default-abcde", until=clock.now() + timedelta(seconds=20))
    assert "default/a" in state.nominations(clock.now())
    assert state.is_nominated("default-abcde", clock.now())
    clock.step(timedelta(seconds=21))
    assert state.nominations(clock.now()) == {}
    state.nominate(pod, "default-abcde", until=clock.now() + timedelta(seconds=20))
    state.apply(NODE_CLAIMS, WatchEvent(WatchEventType.DELETED, CLAIM))
    assert state.nominations(clock.now()) == {}


def test_pod_group_objects_are_kept_raw(state):
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    state.apply_object(group)
    assert state.snapshot().group_objects == (group,)
    state.apply_object(group, deleted=True)
    assert state.snapshot().group_objects == ()
