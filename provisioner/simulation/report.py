"""The report of a run (``spec/simulate.md``, ``--report``) and its summary table.

``ec2Instances`` is read from moto at the end of the run (every instance ever launched, orphans
included) with the launch and termination times the account recorded in virtual time;
``cost.total`` sums price x running time over them. Pods, NodeClaims, evictions and events come
from the :class:`~provisioner.simulation.recorder.Recorder`. Everything is sorted, so a seed
gives the same report byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from provisioner.simulation.cloud import Launch, capacity_type_of
from provisioner.simulation.recorder import Recorder
from provisioner.simulation.series import gangs, partial_gangs, spending_efficiency, time_series

__all__ = [
    "API_VERSION",
    "DISRUPTION_REASONS",
    "KIND",
    "build_report",
    "orphan_instances",
    "summary_table",
]

API_VERSION: Final = "jointer.dev/v1alpha1"
KIND: Final = "SimulationReport"
DISRUPTION_REASONS: Final = frozenset(
    {
        "Underutilized",
        "Empty",
        "Drifted",
        "Expired",
        "SpotInterrupted",
        "RebalanceRecommendation",
        "ScheduledChange",
        "InstanceStopped",
        "InstanceTerminated",
        "Unhealthy",
    }
)
"""Deletion reasons counted as disruptions in the summary (launch failures are not)."""
_GONE_STATES: Final = frozenset({"shutting-down", "terminated"})
_TIME_DIGITS: Final = 3
_COST_DIGITS: Final = 6

Price = Callable[[str, str, str], float | None]
"""(instance type, zone, capacity type) -> USD per hour, None when unknown."""


def _t(value: float | None) -> float | None:
    return None if value is None else round(value, _TIME_DIGITS)


def _percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return round(ordered[rank - 1], _TIME_DIGITS)


def _instances(
    raw: Sequence[Mapping[str, Any]],
    launches: Mapping[str, Launch],
    price: Price,
    nodeclaim_of: Callable[[Mapping[str, Any]], str],
) -> list[dict[str, Any]]:
    rows = []
    for instance in raw:
        instance_id = str(instance.get("InstanceId", ""))
        launch = launches.get(instance_id)
        instance_type = str(instance.get("InstanceType", ""))
        zone = str(instance.get("Placement", {}).get("AvailabilityZone", ""))
        capacity_type = capacity_type_of(instance)
        gone = instance.get("State", {}).get("Name") in _GONE_STATES
        rows.append(
            {
                "id": instance_id,
                "instanceType": instance_type,
                "capacityType": capacity_type,
                "zone": zone,
                "launchedAt": _t(launch.at if launch is not None else 0.0),
                "terminatedAt": _t(launch.terminated_at)
                if gone and launch is not None
                else (0.0 if gone else None),
                "nodeClaim": nodeclaim_of(instance) or None,
                "pricePerHour": price(instance_type, zone, capacity_type),
            }
        )
    rows.sort(key=lambda r: (r["launchedAt"], r["nodeClaim"] or "", r["id"]))
    return rows


def _cost(instances: Sequence[Mapping[str, Any]], end: float) -> float:
    total = 0.0
    for row in instances:
        stop = row["terminatedAt"] if row["terminatedAt"] is not None else end
        total += (row["pricePerHour"] or 0.0) * max(stop - row["launchedAt"], 0.0) / 3600
    return total


def orphan_instances(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Instances still running at the end with no live NodeClaim (none should exist)."""
    live = {c["name"] for c in report["nodeClaims"] if c["deletedAt"] is None}
    return [
        row
        for row in report["ec2Instances"]
        if row["terminatedAt"] is None and row["nodeClaim"] not in live
    ]


def build_report(
    *,
    scenario: str,
    policy: str,
    seed: int,
    duration: float,
    recorder: Recorder,
    instances: Sequence[Mapping[str, Any]],
    launches: Mapping[str, Launch],
    price: Price,
    nodeclaim_of: Callable[[Mapping[str, Any]], str],
    launch_failures: int,
    extra_events: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Assemble the ``SimulationReport`` document."""
    ec2 = _instances(instances, launches, price, nodeclaim_of)
    total = _cost(ec2, duration)
    pods = sorted(recorder.pods.values(), key=lambda p: (p.created_at, p.name, p.uid))
    claims = sorted(recorder.node_claims.values(), key=lambda c: (c.created_at, c.name, c.uid))
    waits = [p.scheduled_at - p.created_at for p in pods if p.scheduled_at is not None]
    disruptions: dict[str, int] = {}
    for claim in claims:
        if claim.deletion_reason in DISRUPTION_REASONS:
            disruptions[claim.deletion_reason] = disruptions.get(claim.deletion_reason, 0) + 1
    events: list[dict[str, Any]] = [
        {
            "at": _t(e.at),
            "type": e.type,
            "reason": e.reason,
            "object": e.object,
            "message": e.message,
        }
        for e in recorder.events
    ]
    events.extend(dict(e) for e in extra_events)
    events.sort(key=lambda e: float(e["at"]))
    report: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "scenario": scenario,
        "policy": policy,
        "seed": seed,
        "durationSeconds": _t(duration),
        "cost": {
            "total": round(total, _COST_DIGITS),
            "perHourAverage": round(total * 3600 / duration, _COST_DIGITS) if duration else 0.0,
        },
        "pods": [
            {
                "name": p.name,
                "podGroup": p.pod_group,
                "createdAt": _t(p.created_at),
                "scheduledAt": _t(p.scheduled_at),
                "node": p.node,
                "completedAt": _t(p.completed_at),
                "evictions": p.evictions,
                "deletedAt": _t(p.deleted_at),
                "requests": {"cpu": round(p.cpu, 3), "memoryGiB": round(p.memory_gib, 6)},
                "protected": p.protected,
            }
            for p in pods
        ],
        "nodeClaims": [
            {
                "name": c.name,
                "nodePool": c.node_pool,
                "instanceType": c.instance_type,
                "capacityType": c.capacity_type,
                "zone": c.zone,
                "node": c.node,
                "launchedAt": _t(c.launched_at),
                "initializedAt": _t(c.initialized_at),
                "deletedAt": _t(c.deleted_at),
                "deletionReason": c.deletion_reason,
                "pricePerHour": price(c.instance_type, c.zone or "", c.capacity_type or "")
                if c.instance_type and c.capacity_type
                else None,
            }
            for c in claims
        ],
        "ec2Instances": ec2,
        "evictions": [
            {
                "at": _t(e.at),
                "pod": e.pod,
                "node": e.node,
                "reason": e.reason,
                "protected": e.protected,
            }
            for e in sorted(recorder.evictions, key=lambda e: (e.at, e.pod))
        ],
        "events": events,
        "summary": {
            "podsTotal": len(pods),
            "podsScheduled": len(waits),
            "timeToScheduleSeconds": {
                "p50": _percentile(waits, 0.5),
                "p95": _percentile(waits, 0.95),
                "max": _percentile(waits, 1.0),
            },
            "nodeClaimsLaunched": sum(1 for c in claims if c.launched_at is not None),
            "launchFailures": launch_failures,
            "disruptions": dict(sorted(disruptions.items())),
        },
    }
    summary = report["summary"]
    summary["spendingEfficiency"] = spending_efficiency(report)
    summary["protectedPodEvictions"] = sum(1 for e in recorder.evictions if e.protected)
    summary["partialGangs"] = partial_gangs(report)
    report["gangs"] = gangs(report)
    report["timeSeries"] = time_series(report)
    return report


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:d}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def summary_table(report: Mapping[str, Any]) -> str:
    """The human summary printed at the end of a run."""
    summary = report["summary"]
    waits = summary["timeToScheduleSeconds"]
    instances = report["ec2Instances"]
    by_type: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in instances:
        by_type.setdefault((row["instanceType"], row["capacityType"]), []).append(row)
    end = report["durationSeconds"]
    lines = [
        (
            f"scenario {report['scenario']}  policy {report['policy']}  seed {report['seed']}  "
            f"virtual time {_clock(end)}"
        ),
        "",
        f"  pods           {summary['podsTotal']} created, {summary['podsScheduled']} scheduled",
    ]
    if waits["p50"] is not None:
        lines.append(
            f"  time to bind   p50 {waits['p50']:.1f}s  p95 {waits['p95']:.1f}s  "
            f"max {waits['max']:.1f}s"
        )
    disruptions = ", ".join(f"{k} {v}" for k, v in summary["disruptions"].items()) or "none"
    lines += [
        (
            f"  nodeclaims     {len(report['nodeClaims'])} created, "
            f"{summary['nodeClaimsLaunched']} launched, {summary['launchFailures']} failed launches"
        ),
        f"  disruptions    {disruptions}",
        f"  evictions      {len(report['evictions'])}",
        (
            f"  ec2 instances  {len(instances)} launched, "
            f"{sum(1 for r in instances if r['terminatedAt'] is None)} running at the end, "
            f"{len(orphan_instances(report))} orphaned"
        ),
        (
            f"  cost           ${report['cost']['total']:.2f} total, "
            f"${report['cost']['perHourAverage']:.2f}/h average"
        ),
    ]
    efficiency = summary.get("spendingEfficiency") or {}
    if efficiency.get("perRequestedVCPUHour") is not None:
        lines.append(
            f"  efficiency     ${efficiency['perRequestedVCPUHour']:.4f} per requested vCPU-hour, "
            f"${efficiency['perRequestedGiBHour']:.4f} per requested GiB-hour"
        )
    if by_type:
        lines += [
            "",
            f"  {'INSTANCE TYPE':<16}{'CAPACITY':<11}{'COUNT':>6}{'HOURS':>9}{'COST':>10}",
        ]
        for (instance_type, capacity_type), rows in sorted(by_type.items()):
            hours = sum(
                ((r["terminatedAt"] if r["terminatedAt"] is not None else end) - r["launchedAt"])
                / 3600
                for r in rows
            )
            cost = sum(
                (r["pricePerHour"] or 0.0)
                * ((r["terminatedAt"] if r["terminatedAt"] is not None else end) - r["launchedAt"])
                / 3600
                for r in rows
            )
            lines.append(
                f"  {instance_type:<16}{capacity_type:<11}{len(rows):>6}{hours:>9.2f}{cost:>10.2f}"
            )
    return "\n".join(lines)
