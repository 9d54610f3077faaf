"""A simulation's view pods derived from its pass's equal those read afresh (``viewpods``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.apis.core import Pod
from provisioner.controllers.provisioning.cluster import ClusterView
from provisioner.controllers.provisioning.viewpods import (
    ViewPods,
    derive_view_pods,
    index_pods,
    view_pods,
)

NODES = ("n1", "n2", "n3")
CLAIMS = ("c1", "c2")


def _pod(i: int, node: str, phase: str, deleting: bool) -> Pod:
    meta: dict[str, Any] = {"name": f"p{i}", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return Pod.model_validate(
        {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}
    )


_pods = st.lists(
    st.tuples(
        st.sampled_from(["", "", *NODES]),
        st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
        st.booleans(),
        st.sampled_from([None, None, *CLAIMS]),
    ),
    min_size=0,
    max_size=25,
)


def _pending_copy(pod: Pod) -> Pod:
    return pod.model_copy(
        update={"spec": pod.spec.model_copy(update={"node_name": ""}), "status": None}
    )


def _same(derived: ViewPods, fresh: ViewPods) -> None:
    assert derived.pods == fresh.pods
    assert list(derived.source) == list(fresh.source)
    assert {k: list(v) for k, v in derived.index.bound.items()} == {
        k: list(v) for k, v in fresh.index.bound.items()
    }
    assert list(derived.index.pending) == list(fresh.index.pending)
    assert derived.index.pods is derived.pods


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    pods=_pods,
    edits=st.lists(
        st.tuples(st.integers(0, 24), st.sampled_from(["pending", "gone", "renominate"])),
        max_size=8,
    ),
    claim=st.sampled_from([None, *CLAIMS]),
    extra=st.lists(st.integers(0, 30), max_size=4),
)
def test_a_derived_view_equals_one_read_afresh(
    pods: list[tuple[str, str, bool, str | None]],
    edits: list[tuple[int, str]],
    claim: str | None,
    extra: list[int],
) -> None:
    """Also when the caller names the touched keys (with some untouched or unknown ones)."""
    source = {f"ns/p{i}": _pod(i, *spec[:3]) for i, spec in enumerate(pods)}
    target = {f"ns/p{i}": spec[3] for i, spec in enumerate(pods) if spec[3] is not None}
    base = view_pods(source, target)
    changed = dict(source)
    new_target = dict(target)
    touched = {f"ns/p{i}" for i in extra}
    for at, edit in edits:
        key = f"ns/p{at}"
        if key not in changed:
            continue
        touched.add(key)
        if edit == "pending":
            changed[key] = _pending_copy(changed[key])
        elif edit == "gone":
            del changed[key]
            new_target.pop(key, None)
        elif claim is None:
            new_target.pop(key, None)
        else:
            new_target[key] = claim
    fresh = view_pods(changed, new_target)
    for hint in (None, touched):
        derived = derive_view_pods(base, base.places(), changed, new_target, hint)
        assert derived is not None
        _same(derived, fresh)


def test_touched_keys_that_miss_a_change_are_not_trusted() -> None:
    source = {f"ns/p{i}": _pod(i, "n1", "Running", False) for i in range(3)}
    base = view_pods(source, {})
    fewer = {k: v for k, v in source.items() if k != "ns/p1"}
    assert derive_view_pods(base, base.places(), fewer, {}, touched=["ns/p0"]) is None


def test_a_pod_the_base_does_not_have_is_read_afresh() -> None:
    source = {"ns/p0": _pod(0, "n1", "Running", False)}
    base = view_pods(source, {})
    grown = {**source, "ns/p1": _pod(1, "", "Pending", False)}
    assert derive_view_pods(base, base.places(), grown, {}) is None


def test_unchanged_pods_stay_the_same_objects() -> None:
    source = {f"ns/p{i}": _pod(i, "" if i % 2 else "n1", "Running", False) for i in range(6)}
    target = {"ns/p1": "c1"}
    base = view_pods(source, target)
    changed = {**source, "ns/p2": _pending_copy(source["ns/p2"])}
    derived = derive_view_pods(base, base.places(), changed, target)
    assert derived is not None
    kept = [i for i in range(6) if i != 2]
    assert all(derived.pods[i] is base.pods[i] for i in kept)  # the nominated copy too


def test_a_view_trusts_its_index_only_for_its_own_pods() -> None:
    pods = (_pod(0, "n1", "Running", False), _pod(1, "", "Pending", False))
    stale = index_pods(pods[:1])
    view = ClusterView(pods=pods, pod_index=stale)
    assert [p.metadata.name for p in view.pending_pods()] == ["p1"]
    assert [p.metadata.name for p in view.bound_pods()["n1"]] == ["p0"]
