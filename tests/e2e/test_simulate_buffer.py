"""CapacityBuffer headroom, simulated end to end (``examples/scenarios/headroom.yaml``)."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.kube.resource import CAPACITY_BUFFERS, NODES, PODS
from provisioner.scheduling.quantity import parse_quantity
from tests.e2e.conftest import bundled, pods_of, run

pytestmark = pytest.mark.usefixtures("test_catalog")

CHUNK = {"cpu": 2000, "memory": 4 * 1024**3 * 1000}
"""One buffer chunk in milli-units: 2 CPU, 4Gi."""


def _free_chunks(kube: Any) -> int:
    """How many buffer chunks fit the free room of the cluster's Ready nodes, node by node."""
    used: dict[str, dict[str, int]] = {}
    for pod in kube.list(PODS).items:
        node = pod["spec"].get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in {"Succeeded", "Failed"}:
            continue
        for container in pod["spec"]["containers"]:
            for key, value in (container.get("resources") or {}).get("requests", {}).items():
                slot = used.setdefault(node, {})
                slot[key] = slot.get(key, 0) + parse_quantity(value)
    chunks = 0
    for node in kube.list(NODES).items:
        if node["metadata"].get("deletionTimestamp"):
            continue
        allocatable = node["status"]["allocatable"]
        name = node["metadata"]["name"]
        free = {
            key: parse_quantity(allocatable[key]) - used.get(name, {}).get(key, 0) for key in CHUNK
        }
        chunks += min(free[key] // CHUNK[key] for key in CHUNK)
    return chunks


def test_headroom_keeps_the_buffer_room_through_scale_up_and_consolidation() -> None:
    scenario = bundled("headroom")
    up, down = (s.at for s in scenario.steps if s.kind == "scale")
    report, simulation = run(scenario)

    claims = report["nodeClaims"]
    # the room is bought before any workload needs it
    assert [c for c in claims if c["launchedAt"] is not None and c["launchedAt"] < up]
    # pods scheduled into the room start without waiting for a node: 8 x (1 CPU, 2Gi) fit
    web = pods_of(report, "default/web-")
    at_once = [p for p in web if p["createdAt"] == up and p["scheduledAt"] == up]
    assert len(at_once) >= 8, len(at_once)
    # the buffer is re-provisioned: capacity launched after the room was used up
    assert [c for c in claims if c["launchedAt"] is not None and up < c["launchedAt"] < down]
    # consolidation ran after the scale-down, yet never removed the room
    removed = [c for c in claims if c["deletedAt"] is not None and c["deletedAt"] > down]
    assert removed
    assert set(report["summary"]["disruptions"]) <= {"Empty", "Underutilized"}
    kube = simulation.world.kube
    assert _free_chunks(kube) >= 4
    (buffer,) = kube.list(CAPACITY_BUFFERS).items
    status = buffer["status"]
    assert status["replicas"] == 4
    assert status["podTemplateRef"] == {"name": "web-chunk"}
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["ReadyForProvisioning"]["status"] == "True"
    assert conditions["Provisioning"]["reason"] == "FitsExistingCapacity"
    assert conditions["LimitedByQuotas"]["status"] == "False"
    # every pod scheduled (none lost its place to the virtual pods)
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
