# ruff: noqa: PT018
"""InMemoryKube: metadata stamping, concurrency, finalizers, status isolation, watches, PDBs."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from provisioner.kube import errors
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.pdb import check_eviction
from provisioner.kube.protocol import KubeClient, WatchEventType
from provisioner.kube.resource import (
    EVENTS,
    LEASES,
    NODE_CLAIMS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
)


def nodeclaim(name="nc-1", **spec) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeClassRef": {"name": "default"}, **spec}}


def pod(name, *, labels=None, ready=True, node=None) -> dict[str, Any]:
    body = {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def test_create_stamps_metadata(kube, clock):
    obj = kube.create(NODE_CLAIMS, nodeclaim())
    meta = obj["metadata"]
    assert meta["uid"] and meta["resourceVersion"] == "1" and meta["generation"] == 1
    assert meta["creationTimestamp"] == "2025-01-01T00:00:00Z"
    assert obj["apiVersion"] == "karpenter.sh/v1" and obj["kind"] == "NodeClaim"


def test_create_duplicate_raises_already_exists(kube):
    kube.create(NODE_CLAIMS, nodeclaim())
    with pytest.raises(errors.AlreadyExistsError):
        kube.create(NODE_CLAIMS, nodeclaim())


def test_generate_name_makes_unique_names(kube):
    a = kube.create(NODE_CLAIMS, {"metadata": {"generateName": "default-"}, "spec": {}})
    b = kube.create(NODE_CLAIMS, {"metadata": {"generateName": "default-"}, "spec": {}})
    assert a["metadata"]["name"].startswith("default-")
    assert a["metadata"]["name"] != b["metadata"]["name"]


def test_create_without_name_is_invalid(kube):
    with pytest.raises(errors.InvalidError):
        kube.create(NODE_CLAIMS, {"metadata": {}})


def test_namespaced_create_requires_namespace(kube):
    with pytest.raises(errors.BadRequestError):
        kube.create(PODS, {"metadata": {"name": "p"}})


def test_custom_resource_drops_status_on_create(kube):
    obj = kube.create(NODE_CLAIMS, {**nodeclaim(), "status": {"providerID": "x"}})
    assert "status" not in obj


def test_get_missing_raises_not_found_which_is_a_lookup_error(kube):
    with pytest.raises(LookupError):
        kube.get(NODES, "missing")


def test_resource_version_is_a_global_counter(kube):
    kube.create(NODE_CLAIMS, nodeclaim("a"))
    obj = kube.create(NODES, {"metadata": {"name": "n"}})
    assert obj["metadata"]["resourceVersion"] == "2"
    assert kube.list(NODES).resource_version == "2"


def test_generation_bumps_on_spec_change_only(kube):
    kube.create(NODE_CLAIMS, nodeclaim())
    labelled = kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    changed = kube.merge_patch(NODE_CLAIMS, "nc-1", {"spec": {"expireAfter": "720h"}})
    assert changed["metadata"]["generation"] == 2
    status = kube.patch_status(NODE_CLAIMS, "nc-1", {"status": {"providerID": "aws:///i-1"}})
    assert status["metadata"]["generation"] == 2


def test_noop_patch_keeps_resource_version(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    same = kube.merge_patch(NODE_CLAIMS, "nc-1", {"spec": {"nodeClassRef": {"name": "default"}}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_merge_patch_semantics_lists_replace_none_deletes(kube):
    kube.create(NODE_CLAIMS, nodeclaim(taints=[{"key": "a"}], extra="x"))
    patched = kube.merge_patch(
        NODE_CLAIMS, "nc-1", {"spec": {"taints": [{"key": "b"}], "extra": None}}
    )
    assert patched["spec"]["taints"] == [{"key": "b"}]
    assert "extra" not in patched["spec"]


def test_merge_patch_ignores_status_and_immutable_metadata(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    patched = kube.merge_patch(
        NODE_CLAIMS,
        "nc-1",
        {"status": {"providerID": "x"}, "metadata": {"uid": "forged", "labels": {"a": "b"}}},
    )
    assert "status" not in patched
    assert patched["metadata"]["uid"] == created["metadata"]["uid"]


def test_patch_status_touches_only_status(kube):
    kube.create(NODE_CLAIMS, nodeclaim())
    patched = kube.patch_status(
        NODE_CLAIMS, "nc-1", {"spec": {"expireAfter": "1h"}, "status": {"providerID": "x"}}
    )
    assert patched["status"] == {"providerID": "x"}
    assert "expireAfter" not in patched["spec"]


def test_patch_status_on_resource_without_status_subresource_is_not_found(kube):
    kube.create(LEASES, {"metadata": {"name": "l", "namespace": "default"}, "spec": {}})
    with pytest.raises(errors.NotFoundError):
        kube.patch_status(LEASES, "l", {"status": {}}, namespace="default")


def test_stale_resource_version_conflicts(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    stale = created["metadata"]["resourceVersion"]
    kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(errors.ConflictError):
        kube.merge_patch(NODE_CLAIMS, "nc-1", {"spec": {"x": 1}}, resource_version=stale)
    with pytest.raises(errors.ConflictError):
        kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"resourceVersion": stale}})
    with pytest.raises(errors.ConflictError):
        kube.patch_status(NODE_CLAIMS, "nc-1", {"status": {}}, resource_version=stale)


def test_current_resource_version_precondition_passes(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    rv = created["metadata"]["resourceVersion"]
    patched = kube.merge_patch(NODE_CLAIMS, "nc-1", {"spec": {"x": 1}}, resource_version=rv)
    assert patched["spec"]["x"] == 1


def test_delete_without_finalizers_removes(kube):
    kube.create(NODE_CLAIMS, nodeclaim())
    kube.delete(NODE_CLAIMS, "nc-1")
    with pytest.raises(errors.NotFoundError):
        kube.get(NODE_CLAIMS, "nc-1")


def test_delete_with_finalizers_sets_deletion_timestamp_until_finalizers_removed(kube, clock):
    body = nodeclaim()
    body["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    kube.create(NODE_CLAIMS, body)
    clock.advance(5)
    kube.delete(NODE_CLAIMS, "nc-1")
    terminating = kube.get(NODE_CLAIMS, "nc-1")
    assert terminating["metadata"]["deletionTimestamp"] == "2025-01-01T00:00:05Z"
    kube.delete(NODE_CLAIMS, "nc-1")  # idempotent while terminating
    assert (
        kube.get(NODE_CLAIMS, "nc-1")["metadata"]["resourceVersion"]
        == (terminating["metadata"]["resourceVersion"])
    )
    kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.NotFoundError):
        kube.get(NODE_CLAIMS, "nc-1")


def test_no_new_finalizers_while_deleting(kube):
    body = nodeclaim()
    body["metadata"]["finalizers"] = ["a"]
    kube.create(NODE_CLAIMS, body)
    kube.delete(NODE_CLAIMS, "nc-1")
    with pytest.raises(errors.InvalidError):
        kube.merge_patch(NODE_CLAIMS, "nc-1", {"metadata": {"finalizers": ["a", "b"]}})


def test_deletion_timestamp_cannot_be_patched(kube):
    kube.create(NODE_CLAIMS, nodeclaim())
    patched = kube.merge_patch(
        NODE_CLAIMS, "nc-1", {"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}}
    )
    assert "deletionTimestamp" not in patched["metadata"]


def test_delete_preconditions(kube):
    created = kube.create(NODE_CLAIMS, nodeclaim())
    with pytest.raises(errors.ConflictError):
        kube.delete(NODE_CLAIMS, "nc-1", uid="other")
    with pytest.raises(errors.ConflictError):
        kube.delete(NODE_CLAIMS, "nc-1", resource_version="999")
    kube.delete(NODE_CLAIMS, "nc-1", uid=created["metadata"]["uid"])


def test_graceful_pod_deletion_waits_for_grace_zero(clock):
    kube = InMemoryKube(clock=clock, graceful_pod_deletion=True)
    kube.create(PODS, pod("p", node="n1"))
    kube.delete(PODS, "p", namespace="default")
    terminating = kube.get(PODS, "p", namespace="default")
    assert terminating["metadata"]["deletionTimestamp"] == "2025-01-01T00:00:30Z"
    kube.delete(PODS, "p", namespace="default", grace_period_seconds=0)
    assert kube.list(PODS).items == []


def test_unbound_pod_is_deleted_at_once_even_with_graceful_deletion(clock):
    kube = InMemoryKube(clock=clock, graceful_pod_deletion=True)
    kube.create(PODS, pod("p"))
    kube.delete(PODS, "p", namespace="default")
    assert kube.list(PODS).items == []


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("app=web", ["a", "b"], id="equals"),
        pytest.param("app==web", ["a", "b"], id="double-equals"),
        pytest.param("app!=web", ["c", "d"], id="not-equals-matches-absent"),
        pytest.param("tier in (front, back)", ["a", "c"], id="in"),
        pytest.param("tier notin (front)", ["b", "c", "d"], id="notin"),
        pytest.param("tier", ["a", "c"], id="exists"),
        pytest.param("!tier", ["b", "d"], id="not-exists"),
        pytest.param("app=web,tier", ["a"], id="and"),
        pytest.param("", ["a", "b", "c", "d"], id="empty"),
    ],
)
def test_label_selectors(kube, selector, expected):
    for name, labels in {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web"},
        "c": {"app": "db", "tier": "back"},
        "d": {},
    }.items():
        kube.create(NODES, {"metadata": {"name": name, "labels": labels}})
    names = [o["metadata"]["name"] for o in kube.list(NODES, label_selector=selector).items]
    assert names == expected


def test_bad_label_selector_is_bad_request(kube):
    with pytest.raises(errors.BadRequestError):
        kube.list(NODES, label_selector="a in (b")


def test_field_selector_on_node_name(kube):
    kube.create(PODS, pod("p1", node="n1"))
    kube.create(PODS, pod("p2", node="n2"))
    kube.create(PODS, pod("p3"))
    items = kube.list(PODS, field_selector="spec.nodeName=n1").items
    assert [o["metadata"]["name"] for o in items] == ["p1"]
    unbound = kube.list(PODS, field_selector="spec.nodeName=").items
    assert [o["metadata"]["name"] for o in unbound] == ["p3"]


def test_list_by_namespace(kube):
    kube.create(PODS, pod("p1"))
    other = pod("p2")
    other["metadata"]["namespace"] = "kube-system"
    kube.create(PODS, other)
    assert [o["metadata"]["name"] for o in kube.list(PODS, namespace="kube-system").items] == ["p2"]


def test_watch_resumes_from_resource_version(kube):
    kube.create(NODES, {"metadata": {"name": "n1"}})
    rv = kube.list(NODES).resource_version
    kube.create(NODES, {"metadata": {"name": "n2"}})
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    kube.delete(NODES, "n2")
    events = list(kube.watch(NODES, resource_version=rv))
    assert [(e.type, e.object["metadata"]["name"]) for e in events[:-1]] == [
        (WatchEventType.ADDED, "n2"),
        (WatchEventType.MODIFIED, "n1"),
        (WatchEventType.DELETED, "n2"),
    ]
    assert events[-1].type == WatchEventType.BOOKMARK
    assert events[-1].resource_version == kube.resource_version


def test_watch_without_resource_version_starts_with_current_objects(kube):
    kube.create(NODES, {"metadata": {"name": "n1"}})
    events = list(kube.watch(NODES))
    assert [e.type for e in events] == [WatchEventType.ADDED, WatchEventType.BOOKMARK]


def test_watch_from_too_old_version_is_gone(clock):
    kube = InMemoryKube(clock=clock, history_window=2)
    for i in range(4):
        kube.create(NODES, {"metadata": {"name": f"n{i}"}})
    with pytest.raises(errors.GoneError):
        kube.watch(NODES, resource_version="1")
    assert len(list(kube.watch(NODES, resource_version="2"))) == 3


def test_compact_expires_watches(kube):
    kube.create(NODES, {"metadata": {"name": "n1"}})
    kube.create(NODES, {"metadata": {"name": "n2"}})
    kube.compact()
    with pytest.raises(errors.GoneError):
        kube.watch(NODES, resource_version="1")
    assert [e.type for e in kube.watch(NODES, resource_version="2")] == [WatchEventType.BOOKMARK]


def test_watch_selector_transitions(kube):
    kube.create(NODES, {"metadata": {"name": "n1", "labels": {"pool": "a"}}})
    rv = kube.resource_version
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"pool": "b"}}})
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"pool": "a"}}})
    events = list(kube.watch(NODES, resource_version=rv, label_selector="pool=a"))
    assert [e.type for e in events] == [
        WatchEventType.DELETED,
        WatchEventType.ADDED,
        WatchEventType.BOOKMARK,
    ]


def test_watch_with_timeout_waits_for_a_change_from_another_thread(kube):
    rv = kube.resource_version
    stream = kube.watch(NODES, resource_version=rv, timeout=5)
    creator = threading.Thread(target=lambda: kube.create(NODES, {"metadata": {"name": "n1"}}))
    creator.start()
    first = next(stream)
    creator.join()
    stream.close()
    assert first.type == WatchEventType.ADDED


def test_subscribe_delivers_in_order_without_reentrancy(kube):
    seen: list[Any] = []

    def on_event(resource, event):
        seen.append((resource.kind, event.type, event.object["metadata"]["name"]))
        if resource == NODES and event.type == WatchEventType.ADDED:
            kube.create(NODE_CLAIMS, nodeclaim("from-callback"))
            seen.append("callback returned")

    unsubscribe = kube.subscribe(on_event)
    kube.create(NODES, {"metadata": {"name": "n1"}})
    unsubscribe()
    kube.create(NODES, {"metadata": {"name": "n2"}})
    assert seen == [
        ("Node", WatchEventType.ADDED, "n1"),
        "callback returned",
        ("NodeClaim", WatchEventType.ADDED, "from-callback"),
    ]


def test_bind_sets_node_name_and_condition(kube):
    kube.create(PODS, pod("p"))
    bound = kube.bind("default", "p", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert any(c["type"] == "PodScheduled" for c in bound["status"]["conditions"])
    with pytest.raises(errors.ConflictError):
        kube.bind("default", "p", "n2")


def pdb(name="web", **spec) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


def test_evict_without_pdb_deletes(kube):
    kube.create(PODS, pod("p"))
    kube.evict("default", "p")
    assert kube.list(PODS).items == []


def test_evict_respects_min_available(kube):
    kube.create(POD_DISRUPTION_BUDGETS, pdb(minAvailable=2))
    for name in ("a", "b", "c"):
        kube.create(PODS, pod(name))
    kube.evict("default", "a")
    with pytest.raises(errors.TooManyRequestsError):
        kube.evict("default", "b")
    assert len(kube.list(PODS).items) == 2


def test_evict_respects_max_unavailable_percent_counting_terminating_pods(clock):
    kube = InMemoryKube(clock=clock, graceful_pod_deletion=True)
    kube.create(POD_DISRUPTION_BUDGETS, pdb(maxUnavailable="50%"))
    for name in ("a", "b", "c", "d"):
        kube.create(PODS, pod(name, node="n1"))
    kube.evict("default", "a")
    kube.evict("default", "b")
    with pytest.raises(errors.TooManyRequestsError):
        kube.evict("default", "c")


def test_unhealthy_pod_is_evictable_while_budget_met(kube):
    kube.create(POD_DISRUPTION_BUDGETS, pdb(minAvailable=1))
    kube.create(PODS, pod("healthy"))
    kube.create(PODS, pod("sick", ready=False))
    kube.evict("default", "sick")
    with pytest.raises(errors.TooManyRequestsError):
        kube.evict("default", "healthy")


def test_pod_with_two_pdbs_cannot_be_evicted(kube):
    kube.create(POD_DISRUPTION_BUDGETS, pdb("one", minAvailable=0))
    kube.create(POD_DISRUPTION_BUDGETS, pdb("two", minAvailable=0))
    kube.create(PODS, pod("p"))
    with pytest.raises(errors.ServerError):
        kube.evict("default", "p")


def test_evict_uid_precondition_and_missing_pod(kube):
    kube.create(PODS, pod("p"))
    with pytest.raises(errors.ConflictError):
        kube.evict("default", "p", uid="other")
    with pytest.raises(errors.NotFoundError):
        kube.evict("default", "missing")


def test_create_event_names_involved_object(kube, clock):
    node = kube.create(NODES, {"metadata": {"name": "n1"}})
    event = kube.create_event(node, reason="Unconsolidatable", message="m", type="Warning")
    assert event["metadata"]["namespace"] == "default"
    assert event["metadata"]["name"].startswith("n1.")
    assert event["involvedObject"]["uid"] == node["metadata"]["uid"]
    assert kube.list(EVENTS, namespace="default").items[0]["reason"] == "Unconsolidatable"


def test_fail_next_is_one_shot_and_calls_are_recorded(kube):
    kube.fail_next("get", errors.ServerError("boom"), resource=NODES)
    with pytest.raises(errors.ServerError):
        kube.get(NODES, "n")
    with pytest.raises(errors.NotFoundError):
        kube.get(NODES, "n")
    assert [c.verb for c in kube.calls] == ["get", "get"]


def test_returned_objects_are_copies(kube):
    created = kube.create(NODES, {"metadata": {"name": "n1"}})
    created["metadata"]["labels"] = {"mutated": "yes"}
    assert "labels" not in kube.get(NODES, "n1")["metadata"]


def test_no_returned_or_delivered_object_can_change_what_is_stored(kube):
    body = pod("p", node="n1")
    events = []
    kube.subscribe(lambda resource, event: events.append(event.object))
    created = kube.create(PODS, body)
    patched = kube.merge_patch(PODS, "p", {"metadata": {"labels": {"v": "2"}}}, namespace="default")
    body["metadata"]["labels"]["app"] = "body"
    for obj in (created, patched, kube.get(PODS, "p", namespace="default"), *events):
        obj["metadata"]["labels"]["app"] = "caller"
        obj["spec"]["containers"].append({"name": "x"})
        obj["status"]["conditions"][0]["status"] = "False"
    for obj in [*kube.list(PODS).items, *kube.view(PODS)]:
        assert obj["metadata"]["labels"] == {"app": "web", "v": "2"}
        assert obj["spec"]["containers"] == [{"name": "c", "image": "i"}]
        assert obj["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


def test_view_shares_the_stored_objects_frozen(kube):
    kube.create(PODS, pod("a", labels={"app": "web"}))
    kube.create(PODS, pod("b", labels={"app": "db"}, node="n1"))
    [viewed] = kube.view(PODS, label_selector="app=db")
    assert viewed is kube.view(PODS, field_selector="spec.nodeName=n1")[0]
    assert viewed == kube.get(PODS, "b", namespace="default")
    assert isinstance(viewed, dict) and isinstance(viewed["spec"]["containers"], list)
    changes = [
        lambda: viewed.__setitem__("spec", {}),
        lambda: viewed["metadata"].update(name="x"),
        lambda: viewed["metadata"].setdefault("annotations", {}),
        lambda: viewed["metadata"]["labels"].pop("app"),
        lambda: viewed.__delitem__("status"),
        lambda: viewed["spec"]["containers"].append({}),
        viewed["spec"]["containers"][0].clear,
        lambda: viewed["status"]["conditions"].__setitem__(0, {}),
        viewed["status"]["conditions"].sort,
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert kube.get(PODS, "b", namespace="default")["metadata"]["labels"] == {"app": "db"}
    thawed = copy.deepcopy(viewed)
    thawed["metadata"]["labels"]["app"] = "mine"  # a copy is plain and mutable
    assert type(thawed) is dict and type(thawed["spec"]["containers"]) is list
    assert json.loads(json.dumps(viewed)) == kube.get(PODS, "b", namespace="default")
    assert [c.verb for c in kube.calls][-1] == "get"
    assert kube.view(PODS, namespace="other") == []


def test_a_frozen_subscriber_gets_the_stored_snapshot_others_a_copy_each(kube):
    frozen, copied = [], []
    kube.subscribe(lambda resource, event: frozen.append(event.object), frozen=True)
    kube.subscribe(lambda resource, event: copied.append(event.object))
    kube.create(PODS, pod("p"))
    assert frozen[0] is kube.view(PODS)[0]
    with pytest.raises(TypeError, match="read-only"):
        frozen[0]["metadata"]["labels"]["app"] = "x"
    copied[0]["metadata"]["labels"]["app"] = "x"
    assert kube.get(PODS, "p", namespace="default")["metadata"]["labels"] == {"app": "web"}


def test_lists_stay_sorted_by_namespace_and_name_as_objects_come_and_go(kube):
    def names() -> list[tuple[str, str]]:
        listed = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in kube.view(PODS)]
        assert listed == [
            (o["metadata"]["namespace"], o["metadata"]["name"]) for o in kube.list(PODS).items
        ]
        return listed

    kube.create(PODS, pod("b"))
    kube.create(PODS, pod("a"))
    assert names() == [("default", "a"), ("default", "b")]
    kube.create(PODS, {**pod("c"), "metadata": {"name": "c", "namespace": "aaa"}})
    kube.merge_patch(PODS, "b", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    assert names() == [("aaa", "c"), ("default", "a"), ("default", "b")]
    kube.delete(PODS, "a", namespace="default")
    assert names() == [("aaa", "c"), ("default", "b")]
    assert [o["metadata"]["name"] for o in kube.view(PODS, namespace="default")] == ["b"]


def test_a_namespace_is_selected_exactly_among_namespaces_sharing_its_prefix(kube):
    for namespace in ("a", "a-b", "ab", "a\u00e9", "b"):
        for name in ("y", "x"):
            body = pod(name, labels={"app": "web" if name == "x" else "api"})
            body["metadata"]["namespace"] = namespace
            kube.create(PODS, body)

    def named(**kwargs: Any) -> list[tuple[str, str]]:
        viewed = [
            (o["metadata"]["namespace"], o["metadata"]["name"]) for o in kube.view(PODS, **kwargs)
        ]
        listed = [
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in kube.list(PODS, **kwargs).items
        ]
        assert viewed == listed
        return viewed

    assert named(namespace="a") == [("a", "x"), ("a", "y")]
    assert named(namespace="ab", label_selector="app=api") == [("ab", "y")]
    assert named(namespace="a-b", field_selector="metadata.name=x") == [("a-b", "x")]
    assert named(namespace="aa") == []
    assert named(namespace="c") == []
    assert len(named()) == 10
    assert named(label_selector="app=web")[:2] == [("a", "x"), ("a-b", "x")]


def test_an_eviction_reads_the_namespace_s_pods_only_when_a_budget_covers_the_pod():
    def unread() -> Iterator[dict[str, Any]]:
        yield from ()  # a generator: reading it raises
        raise AssertionError("the pods were read")

    budget = {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "api"}}},
    }
    check_eviction(pod("p"), [budget], unread())  # app=web: no budget covers it
    with pytest.raises(AssertionError, match="the pods were read"):
        check_eviction(pod("p", labels={"app": "api"}), [budget], unread())


def test_in_memory_kube_satisfies_the_protocol(kube):
    client: KubeClient = kube  # checked by mypy
    assert client is kube
