"""The cluster state's placement generation: every change but a NodeClaim's consolidation clock."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from provisioner.kube.protocol import WatchEvent, WatchEventType
from provisioner.kube.resource import NODE_CLAIMS
from provisioner.runtime.clock import FakeClock
from provisioner.state.cluster import ClusterState
from tests.unit.controllers.disruption.objects import NOW, claim, node, pod, running

CONSOLIDATABLE = {
    "type": "Consolidatable",
    "status": "True",
    "lastTransitionTime": "2026-11-01T00:05:00Z",
    "reason": "Consolidatable",
}


def _state(*objects: dict[str, Any]) -> ClusterState:
    state = ClusterState(clock=FakeClock(NOW))
    for obj in objects:
        state.apply_object(obj)
    return state


def _versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["metadata"]["resourceVersion"] = version
    return changed


def test_the_consolidation_clock_moves_only_the_generation() -> None:
    first = _versioned(claim("a"), "1")
    state = _state(first, node("a"))
    generation, placement = state.generation, state.placement_generation
    marked = _versioned(first, "2")
    marked["status"]["conditions"].append(CONSOLIDATABLE)
    marked["status"]["lastPodEventTime"] = "2026-11-01T00:00:00Z"
    state.apply(NODE_CLAIMS, WatchEvent(WatchEventType.MODIFIED, marked))
    assert state.generation > generation
    assert state.placement_generation == placement
    cleared = _versioned(first, "3")  # the condition cleared again
    state.apply_object(cleared)
    assert state.placement_generation == placement


def test_every_other_change_moves_the_placement_generation() -> None:
    first = _versioned(claim("a"), "1")

    def relabelled() -> dict[str, Any]:
        changed = _versioned(first, "2")
        changed["metadata"]["labels"]["team"] = "b"
        return changed

    def drifted() -> dict[str, Any]:
        changed = _versioned(first, "2")
        changed["status"]["conditions"].append({**CONSOLIDATABLE, "type": "Drifted"})
        return changed

    changes: dict[str, Callable[[ClusterState], object]] = {
        "a NodeClaim's labels": lambda s: s.apply_object(relabelled()),
        "another condition": lambda s: s.apply_object(drifted()),
        "a new NodeClaim": lambda s: s.apply_object(claim("b")),
        "a NodeClaim deleted": lambda s: s.apply_object(first, deleted=True),
        "a pod": lambda s: s.apply_object(running(pod("web-1"), "node-a")),
        "a relist": lambda s: s.replace(NODE_CLAIMS, [first]),
    }
    for name, change in changes.items():
        state = _state(first, node("a"))
        placement = state.placement_generation
        change(state)
        assert state.placement_generation > placement, name
