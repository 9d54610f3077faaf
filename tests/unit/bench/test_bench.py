"""The bench's second diverse workload, its wall-time reporting and its FFD comparison."""

from __future__ import annotations

import collections
import dataclasses
import time
import types
from pathlib import Path
from typing import Any

from bench import run, workloads


def test_constraint_mix_is_seeded_sized_and_diverse() -> None:
    first = workloads.constraint_mix(600)
    assert first.objects == workloads.constraint_mix(600).objects
    pools = [o for o in first.objects if o["kind"] == "NodePool"]
    pods = [o for o in first.objects if o["kind"] == "Pod"]
    assert len(pods) == 600
    assert {p["metadata"]["name"] for p in pools} == {"general", "memory", "batch"}
    tiers = collections.Counter(p["metadata"]["labels"]["tier"] for p in pods)
    assert set(tiers) == {"service", "colocated", "memory", "batch", "generic"}
    anti = [
        p["spec"]["affinity"]["podAntiAffinity"]
        for p in pods
        if p["metadata"]["labels"]["tier"] == "service"
    ]
    assert any("requiredDuringSchedulingIgnoredDuringExecution" in a for a in anti)
    assert any("preferredDuringSchedulingIgnoredDuringExecution" in a for a in anti)
    skews = {c["maxSkew"] for p in pods for c in p["spec"].get("topologySpreadConstraints", ())}
    assert skews >= {1, 2, 3}
    requests = {p["spec"]["containers"][0]["resources"]["requests"]["cpu"] for p in pods}
    assert len(requests) > 50  # log-normal, not a handful of choices
    assert first.catalog is not None
    assert len(first.catalog["instanceTypes"]) == 33


def test_plan_command_times_the_whole_command_and_places_every_pod(tmp_path: Path) -> None:
    workload = workloads.constraint_mix(120)
    objects, catalog = run._write_inputs(workload, tmp_path)
    assert objects.endswith(".yaml")
    plan, wall = run.plan_command(objects, catalog, "jointer", 1.0)
    assert plan["unschedulable"] == []
    assert sum(len(c["pods"]) for c in plan["nodeClaims"]) == 120
    assert wall >= float(plan["solver"]["seconds"]) > 0


def _result(workload: str, pods: int, plan: float, wall: float) -> run.CaseResult:
    return run.CaseResult(
        workload=workload,
        pods=pods,
        repetitions=1,
        p50=plan,
        p99=plan,
        cost=10.0,
        cost_range=(10.0, 10.0),
        greedy_cost=11.0,
        greedy_seconds=0.1,
        lower_bound=9.0,
        status="FEASIBLE",
        placed=pods,
        greedy_placed=pods,
        partial_gangs=0,
        peak_rss_mib=100.0,
        dearest_per_pod=10.0 / pods,
        wall_p50=wall,
    )


def test_the_report_shows_wall_next_to_planning_and_checks_the_ratio() -> None:
    good = [_result("karpenter-diverse", 1000, 1.0, 1.4), _result("constraint-mix", 5000, 2.0, 2.9)]
    text = run.write_results(good, time_limit=None, seconds=1.0)
    assert "| wall s | wall/plan |" in text
    assert "| 1.40 | 1.40 |" in text
    assert "within 1.5x the planning step on the diverse mixes from 1,000 pods: yes" in text
    slow = [*good, _result("constraint-mix", 10000, 2.0, 3.2)]
    text = run.write_results(slow, time_limit=None, seconds=1.0)
    assert "from 1,000 pods: NO (worst 1.60x, constraint-mix 10000)" in text


def test_the_ffd_comparison_is_per_pod_placed_and_never_with_fewer_pods() -> None:
    fair = _result("weighted-limits", 500, 1.0, 1.2)
    # FFD leaves 100 pods unschedulable; the optimiser places them too, dearer in total only
    more = dataclasses.replace(
        fair, cost=11.5, cost_range=(11.4, 11.5), greedy_placed=400, dearest_per_pod=11.5 / 500
    )
    assert more.never_dearer
    text = run.write_results([fair, more], time_limit=None, seconds=1.0)
    assert "- Cost never above first-fit-decreasing (at least as many pods placed" in text
    assert "cost per pod placed no higher): yes." in text
    dearer = dataclasses.replace(fair, cost_range=(10.0, 11.5), dearest_per_pod=11.5 / 500)
    fewer = dataclasses.replace(fair, pods=2000, placed=1999, greedy_placed=2000)
    assert not dearer.never_dearer
    assert not fewer.never_dearer
    text = run.write_results([fair, dearer, fewer], time_limit=None, seconds=1.0)
    assert "no higher): NO (weighted-limits 500, weighted-limits 2000)." in text


def test_an_unfinished_scale_replay_is_reported_as_missing_its_target() -> None:
    from bench import scenario_scale  # noqa: PLC0415

    replayed = {
        "hours": 24,
        "pods": 5000,
        "podsScheduled": 5000,
        "nodeClaims": 40,
        "reconciles": 1000,
        "wallSeconds": 120.0,
        "peakRssMiB": 300,
    }
    finished = scenario_scale.lines(replayed)
    assert any("target ≤ 300 s: yes" in line for line in finished)
    assert not any("of CPU" in line for line in finished)
    timed = scenario_scale.lines({**replayed, "cpuSeconds": 100.0})
    assert any("in 120 s of wall time (100 s of CPU)" in line for line in timed)
    unfinished = scenario_scale.lines(
        {"hours": 24, "podsPlanned": 5000, "wallSeconds": 900.0, "unfinished": True}
    )
    assert any(
        "had not finished after 900 s of wall time and was stopped (target ≤ 300 s: NO)." in line
        for line in unfinished
    )
    assert not any("virtual hour" in line for line in unfinished)
    reached = scenario_scale.lines(
        {
            "hours": 24,
            "podsPlanned": 5000,
            "wallSeconds": 600.0,
            "unfinished": True,
            "virtualHours": 8.0,
        }
    )
    assert any(
        "stopped at virtual hour 8.0 of 24 (about 1,800 s for the whole day at that pace; "
        "target ≤ 300 s: NO)." in line
        for line in reached
    )


def test_a_capped_replay_stops_at_its_cap() -> None:
    from bench import scenario_scale  # noqa: PLC0415

    result = scenario_scale.measure_capped(pods=2000, hours=24, cap_seconds=1.0)
    assert result["unfinished"] is True
    assert result["podsPlanned"] == 2000
    assert 0.0 <= result["virtualHours"] < 24


def test_a_replay_reports_its_virtual_time_while_it_runs() -> None:
    import multiprocessing  # noqa: PLC0415

    from bench import scenario_scale  # noqa: PLC0415

    progress: Any = multiprocessing.get_context("fork").Value("d", 0.0)
    timeline = types.SimpleNamespace(now=0.0)
    simulation: Any = types.SimpleNamespace(world=types.SimpleNamespace(timeline=timeline))
    sampler = scenario_scale.ProgressSampler(progress)
    sampler.start(simulation)
    timeline.now = 1234.5
    waited = 0.0
    while progress.value != 1234.5 and waited < 10:  # the sampler copies it within 0.5 s
        time.sleep(0.05)
        waited += 0.05
    sampler.stop()
    assert progress.value == 1234.5
    timeline.now = 99.0  # stop() joined the thread: nothing copies this any more
    assert progress.value == 1234.5
    result = scenario_scale.measure(pods=20, hours=1, progress=progress)
    assert result["hours"] == 1
    assert progress.value == 3600.0


def test_each_row_is_checked_and_a_violation_fails_the_summary(tmp_path: Path) -> None:
    workload = workloads.constraint_mix(120)
    objects, catalog = run._write_inputs(workload, tmp_path)
    plan, _ = run.plan_command(objects, catalog, "jointer", 1.0)
    assert run.check(workload, plan) == []
    claims = plan["nodeClaims"]
    assert len(claims) >= 2
    broken = {**plan, "nodeClaims": [{**claims[0], "pods": []}, *claims[1:]]}
    found = run.check(workload, broken)
    assert found  # the first claim's pods are now in no plan entry
    passing = _result("constraint-mix", 1000, 1.0, 1.2)
    failing = dataclasses.replace(passing, pods=5000, violations=tuple(found))
    text = run.write_results([passing, failing], time_limit=None, seconds=1.0)
    assert "| 0 | ok | 100 |" in text
    assert f"| 0 | {len(found)} | 100 |" in text
    assert "median-cost plan passes `tests/plancheck.py`: NO (constraint-mix 5000: " in text
    assert "passes `tests/plancheck.py`: yes." in run.write_results(
        [passing], time_limit=None, seconds=1.0
    )
