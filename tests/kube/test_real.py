# ruff: noqa: PT018
"""RealKube (the official client) against kmock + shim over HTTP on 127.0.0.1.

Covers the CRUD round trip, status patches, optimistic concurrency and conflict retry,
finalizers, label and field selectors, watch expiry (410) and relist, an API server that goes
away and comes back, events, evictions vs PDBs, and Lease leader election.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from provisioner.kube import errors
from provisioner.kube.informer import ExponentialBackoff, Informer
from provisioner.kube.leader import LeaderElectionConfig, LeaderElector
from provisioner.kube.protocol import WatchEventType
from provisioner.kube.resource import (
    EVENTS,
    LEASES,
    NODE_CLAIMS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
)
from provisioner.kube.retry import conflict_retry

WATCH_TIMEOUT = 0.5  # bounded idle wait that ends a watch with no traffic


def nodeclaim(name="nc-1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"pool": "default"}},
        "spec": {"nodeClassRef": {"name": "d"}},
    }


def pod(name, labels=None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_crud_round_trip(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["generation"] == 1
    assert kube.get(NODE_CLAIMS, "nc-1")["spec"] == {"nodeClassRef": {"name": "d"}}
    listed = kube.list(NODE_CLAIMS)
    assert [i["metadata"]["name"] for i in listed.items] == ["nc-1"]
    assert listed.items[0]["kind"] == "NodeClaim" and listed.resource_version
    patched = kube.merge_patch(NODE_CLAIMS, "nc-1", {"spec": {"expireAfter": "1h"}})
    assert patched["metadata"]["generation"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    status = kube.patch_status(NODE_CLAIMS, "nc-1", {"status": {"providerID": "aws:///z/i-1"}})
    assert status["status"]["providerID"] == "aws:///z/i-1"
    assert status["metadata"]["generation"] == 2
    kube.delete(NODE_CLAIMS, "nc-1")
    with pytest.raises(errors.NotFoundError):
        kube.get(NODE_CLAIMS, "nc-1")


def test_duplicate_create_is_already_exists(kube):
    kube.create(NODES, {"metadata": {"name": "n1"}})
    with pytest.raises(errors.AlreadyExistsError):
        kube.create(NODES, {"metadata": {"name": "n1"}})


def test_stale_patch_conflicts_and_conflict_retry_recovers(kube):
    created = kube.create(NODES, {"metadata": {"name": "n1"}, "spec": {"taints": []}})
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(errors.ConflictError):
        kube.merge_patch(
            NODES,
            "n1",
            {"spec": {"taints": [{"key": "a"}]}},
            resource_version=created["metadata"]["resourceVersion"],
        )
    attempts: list[Any] = []

    def add_taint():
        node = kube.get(NODES, "n1")
        if not attempts:  # someone else writes between our read and our patch
            kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"racer": "1"}}})
        attempts.append(1)
        taints = [
            *node["spec"]["taints"],
            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        ]
        return kube.merge_patch(
            NODES,
            "n1",
            {"spec": {"taints": taints}},
            resource_version=node["metadata"]["resourceVersion"],
        )

    result = conflict_retry(add_taint)
    assert len(attempts) == 2
    assert result["spec"]["taints"] == [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]


def test_finalizers_hold_deletion(kube):
    body = nodeclaim()
    body["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    created = kube.create(NODE_CLAIMS, body)
    with pytest.raises(errors.ConflictError):
        kube.delete(NODE_CLAIMS, "nc-1", uid="not-the-uid")
    kube.delete(NODE_CLAIMS, "nc-1", uid=created["metadata"]["uid"])
    assert kube.get(NODE_CLAIMS, "nc-1")["metadata"]["deletionTimestamp"]
    kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.NotFoundError):
        kube.get(NODE_CLAIMS, "nc-1")


def test_selectors(kube):
    kube.create(PODS, pod("a", {"app": "web"}))
    kube.create(PODS, pod("b", {"app": "db"}))
    web = kube.list(PODS, namespace="default", label_selector="app in (web)")
    assert [i["metadata"]["name"] for i in web.items] == ["a"]
    by_name = kube.list(PODS, field_selector="metadata.name=b")  # emulated client-side
    assert [i["metadata"]["name"] for i in by_name.items] == ["b"]


def test_watch_streams_changes_after_resource_version(kube):
    rv = kube.list(NODES).resource_version
    kube.create(NODES, {"metadata": {"name": "n1"}})
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    events = list(kube.watch(NODES, resource_version=rv, timeout=WATCH_TIMEOUT))
    # kmock replays the current state of changed objects (as ADDED), not the history
    assert events[-1].type in {WatchEventType.ADDED, WatchEventType.MODIFIED}
    assert events[-1].object["metadata"]["labels"] == {"a": "b"}
    assert (
        list(
            kube.watch(
                NODES, resource_version=kube.list(NODES).resource_version, timeout=WATCH_TIMEOUT
            )
        )
        == []
    )


def test_a_deletion_between_two_watches_is_replayed(kube):
    """An informer that resumes from its resourceVersion must learn of a deletion it missed."""
    kube.create(NODES, {"metadata": {"name": "n1"}})
    kube.create(NODES, {"metadata": {"name": "n2"}})
    rv = kube.list(NODES).resource_version
    kube.delete(NODES, "n1")
    kube.merge_patch(NODES, "n2", {"metadata": {"labels": {"a": "b"}}})
    events = list(kube.watch(NODES, resource_version=rv, timeout=WATCH_TIMEOUT))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        (WatchEventType.DELETED, "n1"),
        (WatchEventType.ADDED, "n2"),
    ]
    later = kube.list(NODES).resource_version
    assert list(kube.watch(NODES, resource_version=later, timeout=WATCH_TIMEOUT)) == []


def test_watch_expiry_raises_gone_and_informer_relists(api, kube):
    seen = []
    informer = Informer(
        kube,
        NODES,
        on_add=lambda o: seen.append(o["metadata"]["name"]),
        watch_timeout=WATCH_TIMEOUT,
    )
    kube.create(NODES, {"metadata": {"name": "n1"}})
    informer.sync_once()
    api.call(lambda: api.emulator.expire_next_watch("nodes"))
    with pytest.raises(errors.GoneError):
        list(kube.watch(NODES, resource_version=informer.resource_version, timeout=WATCH_TIMEOUT))
    api.call(lambda: api.emulator.expire_next_watch("nodes"))
    kube.create(NODES, {"metadata": {"name": "n2"}})
    assert informer.sync_once() == 0.0  # 410: relist at once, no backoff
    assert informer.resource_version is None
    informer.sync_once()
    assert informer.relists == 2
    assert seen == ["n1", "n2"]


def test_api_server_goes_away_and_comes_back(api, kube):
    seen = []
    informer = Informer(
        kube,
        NODES,
        on_add=lambda o: seen.append(o["metadata"]["name"]),
        backoff=ExponentialBackoff(initial=0.8, cap=30),
        watch_timeout=WATCH_TIMEOUT,
    )
    informer.sync_once()
    api.stop()
    with pytest.raises(errors.UnreachableError):
        kube.get(NODES, "n1")
    assert [informer.sync_once(), informer.sync_once(), informer.sync_once()] == [0.8, 1.6, 3.2]
    api.start()
    kube.create(NODES, {"metadata": {"name": "n1"}})
    assert informer.sync_once() == 0.0
    assert informer.failures == 0 and seen == ["n1"]


def test_events(kube):
    node = kube.create(NODES, {"metadata": {"name": "n1"}})
    event = kube.create_event(node, reason="DisruptionBlocked", message="pdb", type="Warning")
    assert event["metadata"]["name"].startswith("n1.")
    listed = kube.list(EVENTS, namespace="default").items
    assert listed[0]["involvedObject"]["name"] == "n1" and listed[0]["type"] == "Warning"


def test_eviction_respects_pdb(kube):
    kube.create(
        POD_DISRUPTION_BUDGETS,
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    kube.create(PODS, pod("a"))
    kube.create(PODS, pod("b"))
    kube.evict("default", "a")
    with pytest.raises(errors.TooManyRequestsError):
        kube.evict("default", "b")
    assert [i["metadata"]["name"] for i in kube.list(PODS).items] == ["b"]
    with pytest.raises(errors.NotFoundError):
        kube.evict("default", "a")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self):
        return self.now


def test_leader_election_over_http(kube):
    clock = Clock()

    def candidate(identity: str) -> LeaderElector:
        config = LeaderElectionConfig(
            name="karpenter-leader-election", namespace="kube-system", identity=identity
        )
        return LeaderElector(kube, config, clock=clock)

    a, b = candidate("a"), candidate("b")
    a.step()
    b.step()
    assert (a.is_leader, b.is_leader) == (True, False)
    clock.now += timedelta(seconds=16)
    b.step()
    assert b.is_leader
    assert (
        kube.get(LEASES, "karpenter-leader-election", namespace="kube-system")["spec"][
            "holderIdentity"
        ]
        == "b"
    )
    b.release()
    a.step()
    assert a.is_leader


def test_a_chunked_list_and_a_chunked_relist(kube):
    for name in ("n1", "n2", "n3"):
        kube.create(NODES, {"metadata": {"name": name}})
    pages = list(kube.list_pages(NODES, limit=2))
    names = [o["metadata"]["name"] for page in pages for o in page.items]
    assert sorted(names) == ["n1", "n2", "n3"]
    assert all(o["kind"] == "Node" for page in pages for o in page.items)
    assert pages[-1].resource_version
    seen = []
    informer = Informer(
        kube,
        NODES,
        on_add=lambda o: seen.append(o["metadata"]["name"]),
        watch_timeout=WATCH_TIMEOUT,
        page_size=2,
    )
    informer.sync_once()
    assert sorted(seen) == ["n1", "n2", "n3"]
    assert informer.resource_version == pages[-1].resource_version
