"""What a run's report says over virtual time: the time series, spending efficiency and gangs.

Pure functions of the report's rows (``pods``, ``ec2Instances``, ``evictions``): the HTML report
charts them and the comparison prints them. Times are virtual seconds from the scenario start.

* a pod is *pending* from its creation until it is bound, completes or is deleted;
* a pod *requests* its effective vCPU and memory while bound (until it completes or is deleted);
* an instance costs its price from launch to termination (or the end);
* *spending efficiency* is what was paid per requested vCPU-hour (and per requested GiB-hour),
  the figure Yelp judged its Karpenter migration on;
* a gang is *partial* when, at the end, some of its live members are bound and others wait.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "MAX_POINTS",
    "gangs",
    "partial_gangs",
    "sample_step",
    "spending_efficiency",
    "time_series",
]

MAX_POINTS: Final = 600
"""At most this many samples (plus the start), whatever the duration."""
_MIN_STEP: Final = 60.0
_DIGITS: Final = 6


def sample_step(duration: float) -> float:
    """Seconds between samples: a whole minute, at least one, at most ``MAX_POINTS`` samples."""
    minutes = max(math.ceil(duration / MAX_POINTS / _MIN_STEP), 1)
    return minutes * _MIN_STEP


def _pod_end(pod: Mapping[str, Any], end: float) -> float:
    stops = [float(t) for t in (pod.get("completedAt"), pod.get("deletedAt")) if t is not None]
    return min([end, *stops])


def _level(intervals: Iterable[tuple[float, float, float]], at: Sequence[float]) -> list[float]:
    """The sum of ``weight`` over intervals ``[start, stop)`` holding each time in ``at``.

    The last time is read just before it: what still runs at the end counts there.
    """
    changes: list[tuple[float, float]] = []
    for start, stop, weight in intervals:
        if stop > start and weight:
            changes.extend(((start, weight), (stop, -weight)))
    changes.sort()
    times = [t for t, _ in changes]
    running, totals = 0.0, []
    for delta in (d for _, d in changes):
        running += delta
        totals.append(running)
    levels = []
    for i, t in enumerate(at):
        index = bisect.bisect_left(times, t) if i == len(at) - 1 else bisect.bisect_right(times, t)
        levels.append(round(totals[index - 1], _DIGITS) if index else 0.0)
    return levels


def _bound(pod: Mapping[str, Any], end: float) -> tuple[float, float] | None:
    scheduled = pod.get("scheduledAt")
    if scheduled is None:
        return None
    return float(scheduled), _pod_end(pod, end)


def _instance_span(row: Mapping[str, Any], end: float) -> tuple[float, float]:
    stop = row.get("terminatedAt")
    return float(row["launchedAt"]), float(stop) if stop is not None else end


def time_series(report: Mapping[str, Any], step: float | None = None) -> dict[str, Any]:
    """The report's ``timeSeries``: columns sampled every ``step`` seconds from 0 to the end.

    ``pendingPods`` and ``boundPods`` count pods; ``nodes`` maps ``instanceType/capacityType``
    to running instances; ``costPerHour`` is the price of the running instances ($/h) and
    ``cost`` the spend so far; ``requestedVCPU``/``requestedMemoryGiB`` sum what bound pods ask.
    """
    end = float(report["durationSeconds"])
    step = step or sample_step(end)
    count = math.floor(end / step + 1e-9)
    at = [round(i * step, 3) for i in range(count + 1)]
    if at[-1] < end:
        at.append(round(end, 3))
    pods = report["pods"]
    instances = report["ec2Instances"]
    pending = _level(
        (
            (
                float(p["createdAt"]),
                min(
                    _pod_end(p, end),
                    float(p["scheduledAt"]) if p["scheduledAt"] is not None else end,
                ),
                1.0,
            )
            for p in pods
        ),
        at,
    )
    bound = [_bound(p, end) for p in pods]
    requests = [p.get("requests") or {} for p in pods]
    nodes: dict[str, list[float]] = {}
    for key in sorted({f"{r['instanceType']}/{r['capacityType']}" for r in instances}):
        nodes[key] = _level(
            (
                (*_instance_span(r, end), 1.0)
                for r in instances
                if f"{r['instanceType']}/{r['capacityType']}" == key
            ),
            at,
        )
    rate = _level(
        ((*_instance_span(r, end), float(r.get("pricePerHour") or 0.0)) for r in instances), at
    )
    spent = [round(_spent(instances, t), _DIGITS) for t in at]
    return {
        "stepSeconds": step,
        "at": at,
        "pendingPods": [int(v) for v in pending],
        "boundPods": [
            int(v) for v in _level(((*span, 1.0) for span in bound if span is not None), at)
        ],
        "nodes": {key: [int(v) for v in values] for key, values in nodes.items()},
        "costPerHour": rate,
        "cost": spent,
        "requestedVCPU": _level(
            (
                (*span, float(r.get("cpu") or 0.0))
                for span, r in zip(bound, requests, strict=True)
                if span is not None
            ),
            at,
        ),
        "requestedMemoryGiB": _level(
            (
                (*span, float(r.get("memoryGiB") or 0.0))
                for span, r in zip(bound, requests, strict=True)
                if span is not None
            ),
            at,
        ),
    }


def _spent(instances: Iterable[Mapping[str, Any]], at: float) -> float:
    total = 0.0
    for row in instances:
        start, stop = _instance_span(row, at)
        total += float(row.get("pricePerHour") or 0.0) * max(min(stop, at) - start, 0.0) / 3600
    return total


def spending_efficiency(report: Mapping[str, Any]) -> dict[str, float | None]:
    """Requested vCPU- and GiB-hours over the run and the dollars paid for one of each."""
    end = float(report["durationSeconds"])
    cpu_hours = memory_hours = 0.0
    for pod in report["pods"]:
        span = _bound(pod, end)
        if span is None:
            continue
        hours = max(span[1] - span[0], 0.0) / 3600
        requests = pod.get("requests") or {}
        cpu_hours += float(requests.get("cpu") or 0.0) * hours
        memory_hours += float(requests.get("memoryGiB") or 0.0) * hours
    cost = float(report["cost"]["total"])
    return {
        "requestedVCPUHours": round(cpu_hours, _DIGITS),
        "requestedGiBHours": round(memory_hours, _DIGITS),
        "perRequestedVCPUHour": round(cost / cpu_hours, _DIGITS) if cpu_hours else None,
        "perRequestedGiBHour": round(cost / memory_hours, _DIGITS) if memory_hours else None,
    }


def gangs(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each pod group: members, when its first member was created and its last one bound.

    ``timeToStartSeconds`` is None while some member never bound.
    """
    members: dict[str, list[Mapping[str, Any]]] = {}
    for pod in report["pods"]:
        if pod.get("podGroup"):
            members.setdefault(str(pod["podGroup"]), []).append(pod)
    rows = []
    for name, pods in sorted(members.items()):
        created = min(float(p["createdAt"]) for p in pods)
        bound = [p["scheduledAt"] for p in pods]
        started = None if any(t is None for t in bound) else max(float(t) for t in bound)
        rows.append(
            {
                "name": name,
                "members": len(pods),
                "createdAt": created,
                "startedAt": started,
                "timeToStartSeconds": round(started - created, 3) if started is not None else None,
            }
        )
    return rows


def partial_gangs(report: Mapping[str, Any]) -> list[str]:
    """Pod groups some of whose live members are bound at the end while others still wait."""
    live: dict[str, list[bool]] = {}
    for pod in report["pods"]:
        if not pod.get("podGroup") or pod.get("deletedAt") is not None:
            continue
        if pod.get("completedAt") is not None:
            continue
        live.setdefault(str(pod["podGroup"]), []).append(pod["scheduledAt"] is not None)
    return sorted(name for name, bound in live.items() if any(bound) and not all(bound))
