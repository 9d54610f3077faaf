"""The users' stories as bundled scenarios (issue 20): each story's claim, checked on the report.

* ``runai-friction``: Run:ai's four friction points with Karpenter.
* ``gpu-inference-walkthrough``: Karpenter's log lines and events for one GPU pod's life.
* ``spot-drought-and-headroom``: a week of spot drought with on-demand fallback, CapacityBuffer
  headroom, node recycling by ``expireAfter`` (its first hours replayed, expiry shortened).
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any, cast

import pytest
import structlog

from provisioner.simulation.scenario import CapacityOutageStep, ScaleStep
from tests.e2e.conftest import (
    SCENARIOS,
    bundled,
    bundled_variant,
    events,
    pods_of,
    run,
    shortened,
)

pytestmark = pytest.mark.usefixtures("test_catalog")


# -- runai-friction ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runai(test_catalog: Any) -> dict[str, Any]:
    report, _ = run(bundled("runai-friction"))
    return report


def test_over_quota_pods_get_no_node(runai: dict[str, Any]) -> None:
    (serving,) = pods_of(runai, "team-b/")
    assert serving["scheduledAt"] is None
    hosts = {p["node"] for p in runai["pods"] if p["node"]}
    launched = [c for c in runai["nodeClaims"] if c["launchedAt"] is not None]
    assert launched
    assert all(c["node"] in hosts for c in launched)  # no node was bought for team-b
    (blocked,) = {e["message"] for e in events(runai, "FailedScheduling", "Pod/team-b/serving")}
    assert "over its queue quota" in blocked


def test_fractional_gpu_pods_share_devices_held_by_reservation_pods(
    runai: dict[str, Any],
) -> None:
    notebooks = pods_of(runai, "team-a/notebook-")
    assert len(notebooks) == 4
    assert all(p["scheduledAt"] is not None for p in notebooks)
    by_node: dict[str, int] = {}
    for pod in notebooks:
        by_node[pod["node"]] = by_node.get(pod["node"], 0) + 1
    assert sorted(by_node.values()) == [2, 2]  # two halves per device
    claims = {c["node"]: c for c in runai["nodeClaims"]}
    assert {claims[n]["instanceType"] for n in by_node} == {"g5.xlarge"}  # one GPU each
    reservations = pods_of(runai, "kai-resource-reservation/gpu-reservation-")
    assert sorted(p["node"] for p in reservations) == sorted(by_node)


def test_non_preemptible_work_and_reservation_pods_are_never_consolidated_away(
    runai: dict[str, Any],
) -> None:
    deleted_at = next(s.at for s in bundled("runai-friction").steps if s.kind == "delete")
    protected = [
        *pods_of(runai, "team-a/train-"),
        *pods_of(runai, "kai-resource-reservation/"),
        *pods_of(runai, "team-a/notebook-"),
    ]
    nodes = {p["node"] for p in protected}
    assert all(c["deletedAt"] is None for c in runai["nodeClaims"] if c["node"] in nodes)
    assert runai["evictions"] == []
    assert runai["summary"]["disruptions"] == {}
    late = [e for e in events(runai, "DisruptionBlocked") if e["at"] > deleted_at]
    for reservation in pods_of(runai, "kai-resource-reservation/"):
        message = f'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod={reservation["name"]})'
        assert any(e["message"] == message for e in late)
    assert any("Pod is non-preemptible" in e["message"] for e in late)


def test_a_multi_node_pool_gang_lands_in_one_node_pool(runai: dict[str, Any]) -> None:
    gang = pods_of(runai, "team-a/train-")
    assert len(gang) == 4
    assert len({p["scheduledAt"] for p in gang}) == 1
    pools = {c["nodePool"] for c in runai["nodeClaims"] if c["node"] in {p["node"] for p in gang}}
    assert len(pools) == 1


# -- gpu-inference-walkthrough -------------------------------------------------------------------


class _Lines:
    """A structlog processor that keeps every log line (and drops it)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def __call__(self, _: Any, __: str, event: MutableMapping[str, Any]) -> Any:
        self.lines.append(dict(event))
        raise structlog.DropEvent


LIFECYCLE = (
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
)


def test_the_gpu_walkthrough_logs_and_records_what_karpenter_does() -> None:
    kept = _Lines()
    logger = structlog.wrap_logger(structlog.PrintLogger(), processors=[kept])
    report, _ = run(bundled("gpu-inference-walkthrough"), logger=logger)
    messages = [line["event"] for line in kept.lines]
    first, second = report["nodeClaims"]
    assert (first["instanceType"], first["deletionReason"]) == ("g4dn.xlarge", "Expired")
    assert (second["instanceType"], second["deletionReason"]) == ("g4dn.xlarge", "Empty")

    def claim_lines(name: str) -> list[str]:
        return [
            line["event"]
            for line in kept.lines
            if (line.get("NodeClaim") or {}).get("name") == name
        ]

    # the two walks, in Karpenter's order
    for claim in (first, second):
        walk = [m for m in claim_lines(claim["name"]) if m in LIFECYCLE]
        assert walk == list(LIFECYCLE[2:])
    assert messages.count("found provisionable pod(s)") == 2
    assert messages.count("computed new nodeclaim(s) to fit pod(s)") == 2
    assert "deleting expired nodeclaim" in claim_lines(first["name"])
    assert claim_lines(first["name"])[-1] == claim_lines(second["name"])[-1] == "deleted nodeclaim"
    (disrupting,) = [line for line in kept.lines if line["event"] == "disrupting node(s)"]
    pattern = rf"Empty/[0-9a-f-]{{36}}: delete: nodepools=\[gpu\]: \[{re.escape(second['node'])}\]"
    assert re.fullmatch(pattern + r" \(savings: \$\d+\.\d\d\)", disrupting["command"])
    # the events of the same walk
    for claim in (first, second):
        nominated = [e for e in events(report, "Nominated") if e["at"] <= claim["launchedAt"]]
        assert f"Pod should schedule on: nodeclaim/{claim['name']}" in {
            e["message"] for e in nominated
        }
    assert [e["message"] for e in events(report, "DisruptionTerminating")] == [
        "Disrupting Node: Empty",
        "Disrupting NodeClaim: Empty",
    ]
    scale_down = next(s.at for s in bundled("gpu-inference-walkthrough").steps if s.kind == "scale")
    assert second["deletedAt"] >= scale_down + 60  # consolidateAfter: 1m
    assert first["deletedAt"] == pytest.approx(first["launchedAt"] + 20 * 60, abs=1)
    assert [e["message"] for e in events(report, "Evicted")] == [
        "Evicted pod: Forceful Termination"
    ]


# -- spot-drought-and-headroom -------------------------------------------------------------------


WEEK_HOURS = 246
TEST_HOURS = 6
TEST_EXPIRY_HOURS = 4


def test_the_spot_drought_story_is_a_real_week_with_ten_day_recycling() -> None:
    scenario = bundled("spot-drought-and-headroom")
    assert scenario.duration == WEEK_HOURS * 3600
    peaks = [
        s.at for s in scenario.steps if isinstance(s.action, ScaleStep) and s.action.replicas == 12
    ]
    assert peaks == [(day * 24 + 1) * 3600 for day in range(7)]
    text = (SCENARIOS / "spot-drought-and-headroom.yaml").read_text()
    assert "expireAfter: 240h" in text
    assert "kind: CapacityBuffer" in text
    assert "priorityClassName" not in text  # the placeholder Deployment is history now


def test_spot_drought_falls_back_headroom_absorbs_peaks_and_nodes_are_recycled() -> None:
    # The week's first hours (Monday 08:00 to 14:00) with expireAfter 4h standing in for 240h:
    # the drought, the first peak and a recycling all fall inside them.
    scenario = shortened(
        bundled_variant(
            "spot-drought-and-headroom",
            ("expireAfter: 240h", f"expireAfter: {TEST_EXPIRY_HOURS}h"),
        ),
        TEST_HOURS * 3600,
    )
    report, _ = run(scenario)
    outages = [s for s in scenario.steps if isinstance(s.action, CapacityOutageStep)]
    dry_zones, everywhere = (
        cast("CapacityOutageStep", outages[0].action),
        cast("CapacityOutageStep", outages[1].action),
    )
    launched = [c for c in report["nodeClaims"] if c["launchedAt"] is not None]

    # spot is never bought where it is dry; during the total drought capacity is on-demand
    zonal_end = outages[0].at + dry_zones.duration
    for claim in launched:
        if outages[0].at <= claim["launchedAt"] < zonal_end and claim["capacityType"] == "spot":
            assert claim["zone"] not in dry_zones.zones
    total_end = outages[1].at + everywhere.duration
    during = [c for c in launched if outages[1].at <= c["launchedAt"] < total_end]
    assert during
    assert {c["capacityType"] for c in during} == {"on-demand"}
    assert "spot" in {c["capacityType"] for c in launched if c["launchedAt"] >= total_end}
    assert report["summary"]["launchFailures"] >= 1

    # headroom: at the peak, at least the buffer's worth of api replicas bind at once
    api = pods_of(report, "shop/api-")
    buffered = 4
    peaks = [
        s.at for s in scenario.steps if isinstance(s.action, ScaleStep) and s.action.replicas == 12
    ]
    assert peaks
    for at in peaks:
        new = [p for p in api if p["createdAt"] == at]
        assert len(new) == 8
        assert sum(1 for p in new if p["scheduledAt"] == at) >= buffered
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    assert not events(report, "Preempted")  # the room is a buffer, not placeholder pods

    # recycling: nodes expire after expireAfter; the buffer's worth of their api pods come back
    # at once in the room, the rest on the capacity bought for them
    expired = [c for c in report["nodeClaims"] if c["deletionReason"] == "Expired"]
    assert expired
    for claim in expired:
        assert claim["deletedAt"] == pytest.approx(
            claim["launchedAt"] + TEST_EXPIRY_HOURS * 3600, abs=1
        )
        replacements = [p for p in api if p["createdAt"] == claim["deletedAt"]]
        assert replacements
        at_once = sum(1 for p in replacements if p["scheduledAt"] == p["createdAt"])
        assert at_once >= min(len(replacements), buffered)
        assert all(p["scheduledAt"] is not None for p in replacements)
