# ruff: noqa: PT018
"""Informer: list then watch, bookmarks, relist on Gone, backoff on errors, cache diffing."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from provisioner.kube import errors
from provisioner.kube.informer import ExponentialBackoff, Informer, last_state, strip_managed_fields
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import KubeClient, ObjectList
from provisioner.kube.resource import NODE_CLAIMS, NODES, PODS


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def add(self, obj):
        self.events.append(("add", obj["metadata"]["name"]))

    def update(self, old, new):
        self.events.append(("update", new["metadata"]["name"]))

    def delete(self, obj):
        self.events.append(("delete", obj["metadata"]["name"]))


def make(kube, recorder, **kwargs) -> Informer:
    return Informer(
        kube,
        NODES,
        on_add=recorder.add,
        on_update=recorder.update,
        on_delete=recorder.delete,
        watch_timeout=None,
        **kwargs,
    )


def node(name, **labels) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_list_then_watch_delivers_callbacks(kube):
    kube.create(NODES, node("n1"))
    recorder = Recorder()
    informer = make(kube, recorder)
    assert informer.sync_once() == 0.0
    assert informer.has_synced
    kube.create(NODES, node("n2"))
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    kube.delete(NODES, "n2")
    informer.sync_once()
    assert recorder.events == [("add", "n1"), ("add", "n2"), ("update", "n1"), ("delete", "n2")]
    assert [o["metadata"]["name"] for o in informer.items()] == ["n1"]
    cached = informer.get("n1")
    assert cached is not None
    assert cached["metadata"]["labels"] == {"a": "b"}


def test_bookmark_advances_resource_version(kube):
    informer = make(kube, Recorder())
    informer.sync_once()
    kube.create(NODES, node("n1"))
    kube.delete(NODES, "n1")
    informer.sync_once()
    assert informer.resource_version == kube.resource_version


def test_relist_on_gone_reports_what_changed_meanwhile(clock):
    kube = InMemoryKube(clock=clock, history_window=1)
    kube.create(NODES, node("stays"))
    kube.create(NODES, node("goes"))
    recorder = Recorder()
    informer = make(kube, recorder)
    informer.sync_once()
    kube.delete(NODES, "goes")
    kube.merge_patch(NODES, "stays", {"metadata": {"labels": {"x": "y"}}})
    kube.create(NODES, node("new"))
    assert informer.sync_once() == 0.0  # watch: 410 Gone -> relist at once
    assert informer.resource_version is None
    informer.sync_once()
    assert recorder.events[2:] == [("delete", "goes"), ("add", "new"), ("update", "stays")]
    assert informer.relists == 2


def test_errors_back_off_exponentially_with_cap_and_reset(kube):
    informer = make(kube, Recorder(), backoff=ExponentialBackoff(initial=1, factor=2, cap=3))
    for _ in range(3):
        kube.fail_next("list", errors.UnreachableError("down"))
    assert [informer.sync_once() for _ in range(3)] == [1, 2, 3]
    assert informer.failures == 3
    assert informer.sync_once() == 0.0
    assert informer.failures == 0 and informer.has_synced


def test_watch_error_relists_after_backoff(kube):
    informer = make(kube, Recorder(), backoff=ExponentialBackoff(initial=0.5))
    informer.sync_once()
    kube.fail_next("watch", errors.ServerError("boom"))
    assert informer.sync_once() == 0.5
    assert informer.resource_version is None


def test_label_selector_limits_cache(kube):
    kube.create(NODES, node("a", pool="x"))
    kube.create(NODES, node("b", pool="y"))
    informer = make(kube, Recorder(), label_selector="pool=x")
    informer.sync_once()
    kube.merge_patch(NODES, "b", {"metadata": {"labels": {"pool": "x"}}})
    kube.merge_patch(NODES, "a", {"metadata": {"labels": {"pool": "y"}}})
    informer.sync_once()
    assert [o["metadata"]["name"] for o in informer.items()] == ["b"]


def test_run_stops_and_uses_injected_wait(kube):
    stop = threading.Event()
    waits = []

    def wait(delay, event):
        waits.append(delay)
        event.set()

    kube.fail_next("list", errors.UnreachableError("down"))
    make(kube, Recorder(), backoff=ExponentialBackoff(initial=2)).run(stop, wait=wait)
    assert waits == [2]


@pytest.mark.parametrize(("failures", "expected"), [(0, 0.0), (1, 0.8), (2, 1.6), (10, 30.0)])
def test_default_backoff_matches_client_go(failures, expected):
    assert ExponentialBackoff().delay(failures) == pytest.approx(expected)


def test_strip_managed_fields_leaves_the_given_object_alone() -> None:
    managed = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:metadata": {}}}]
    original: dict[str, Any] = {
        "metadata": {"name": "n1", "managedFields": managed},
        "spec": {"a": 1},
    }
    stripped = strip_managed_fields(original)
    assert stripped == {"metadata": {"name": "n1"}, "spec": {"a": 1}}
    assert original["metadata"]["managedFields"] == managed
    assert stripped["spec"] is original["spec"]
    plain = {"metadata": {"name": "n2"}}
    assert strip_managed_fields(plain) is plain


def test_the_transform_runs_once_on_lists_and_watches_before_caching(kube):
    managed = [{"manager": "kubectl", "operation": "Update"}]
    kube.create(NODES, {"metadata": {"name": "n1", "managedFields": managed}})
    seen: list[Any] = []
    calls: list[str] = []

    def transform(obj):
        calls.append(obj["metadata"]["name"])
        return strip_managed_fields(obj)

    informer = Informer(
        kube,
        NODES,
        on_add=seen.append,
        on_update=lambda _old, new: seen.append(new),
        watch_timeout=None,
        transform=transform,
    )
    informer.sync_once()
    kube.create(NODES, {"metadata": {"name": "n2", "managedFields": managed}})
    kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
    informer.sync_once()
    assert calls == ["n1", "n2", "n1"]
    assert [o["metadata"]["name"] for o in seen] == ["n1", "n2", "n1"]
    assert all("managedFields" not in o["metadata"] for o in seen)
    assert all("managedFields" not in o["metadata"] for o in informer.items())
    stored = kube.get(NODES, "n1")
    assert stored["metadata"]["managedFields"] == managed


def test_callbacks_get_copies_unless_told_they_only_read(kube):
    kube.create(NODES, node("n1"))
    for copies in (True, False):
        delivered: list[Any] = []
        informer = Informer(kube, NODES, on_add=delivered.append, watch_timeout=None, copies=copies)
        informer.sync_once()
        cached = informer._cache[("", "n1")]  # what the informer holds
        assert delivered == [cached]
        assert (delivered[0] is cached) is not copies


class PagedKube:
    """``InMemoryKube`` listing in chunks (as ``RealKube.list_pages`` does), counting them."""

    def __init__(self, kube: InMemoryKube) -> None:
        self.kube = kube
        self.pages = 0

    def list(self, resource, **kwargs):
        return self.kube.list(resource, **kwargs)

    def watch(self, resource, **kwargs):
        return self.kube.watch(resource, **kwargs)

    def list_pages(self, resource, *, namespace=None, label_selector=None, limit=500):
        listed = self.kube.list(resource, namespace=namespace, label_selector=label_selector)
        for start in range(0, max(len(listed.items), 1), limit):
            self.pages += 1
            yield ObjectList(listed.items[start : start + limit], listed.resource_version)


def test_a_paged_relist_reports_what_changed_chunk_by_chunk(clock):
    kube = InMemoryKube(clock=clock, history_window=1)
    for name in ("a", "b", "c", "gone"):
        kube.create(NODES, node(name))
    paged = PagedKube(kube)
    recorder = Recorder()
    informer = Informer(
        cast("KubeClient", paged),
        NODES,
        on_add=recorder.add,
        on_update=recorder.update,
        on_delete=recorder.delete,
        watch_timeout=None,
        page_size=2,
        keep=last_state(NODES),
    )
    informer.sync_once()
    assert paged.pages == 2
    assert recorder.events == [("add", "a"), ("add", "b"), ("add", "c"), ("add", "gone")]
    kube.delete(NODES, "gone")
    kube.merge_patch(NODES, "b", {"metadata": {"labels": {"x": "y"}}})
    kube.create(NODES, node("d"))
    recorder.events.clear()
    informer._resource_version = None  # what a 410 does: relist
    informer.sync_once()
    assert recorder.events == [("update", "b"), ("add", "d"), ("delete", "gone")]
    assert informer.resource_version == kube.resource_version
    assert [o["metadata"]["name"] for o in informer.items()] == ["a", "b", "c", "d"]
    kept = informer.get("b")
    assert kept is not None
    assert kept["metadata"]["labels"] == {"x": "y"}


def test_a_client_without_chunks_lists_whole(kube):
    kube.create(NODES, node("n1"))
    recorder = Recorder()
    informer = make(kube, recorder, page_size=1)
    informer.sync_once()
    assert recorder.events == [("add", "n1")]


def test_the_last_state_kept_is_what_deletions_are_read_for() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "b"}},
        "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": []},
    }
    claim = {"kind": "NodeClaim", "metadata": {"name": "c"}, "spec": {"nodeClassRef": {}}}
    assert last_state(PODS)(pod) == {
        "kind": "Pod",
        "metadata": pod["metadata"],
        "spec": {"nodeName": "n"},
        "status": {"phase": "Running"},
    }
    assert last_state(PODS)({"kind": "Pod", "metadata": {}, "spec": {}}) == {
        "kind": "Pod",
        "metadata": {},
    }
    assert last_state(NODE_CLAIMS)({**claim, "status": {}}) == claim
    assert last_state(NODE_CLAIMS)(claim) is claim
    assert "status" in pod
