"""The cluster state validates an object once per version (uid + resourceVersion)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _pod(version: str, cpu: str = "1", uid: str = "u1") -> dict[str, Any]:
    meta = {"name": "p", "namespace": "default", "uid": uid, "resourceVersion": version}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Pending"},
    }


def _node(version: str) -> dict[str, Any]:
    meta = {"name": "n", "uid": "n1", "resourceVersion": version}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {}}


def test_the_same_version_is_not_parsed_again() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    state.apply_object(_pod("5"))
    state.apply_object(_node("7"))
    pod = state.snapshot(NOW).pods["default/p"]
    node = state.snapshot(NOW).nodes["n"]
    state.apply_object(_pod("5"))
    state.apply_object(_node("7"))
    assert state.snapshot(NOW).pods["default/p"] is pod
    assert state.snapshot(NOW).nodes["n"] is node


def test_a_new_version_a_new_uid_or_no_version_is_parsed() -> None:
    state = ClusterState(clock=FakeClock(NOW))
    state.apply_object(_pod("5"))
    for changed in (_pod("6", cpu="2"), _pod("6", cpu="3", uid="u2"), _pod("", cpu="4")):
        state.apply_object(changed)
        pod = state.snapshot(NOW).pods["default/p"]
        cpu = pod.spec.containers[0].resources.requests["cpu"]
        assert str(cpu) == changed["spec"]["containers"][0]["resources"]["requests"]["cpu"]
