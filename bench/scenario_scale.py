"""Scenario scale (issue 21 item 4): a 24-hour, 5,000-pod scenario replayed by ``jointer simulate``.

:func:`build` generates, from a seed, a day of a mid-sized cluster: ten web Deployments of
mixed sizes following a diurnal curve (scaled every virtual hour, 40 % of their peak at night),
an hourly batch Job whose pods run 30 minutes, and a NodePool of spot and on-demand c/m/r
types with consolidation on. :func:`measure` replays it with the production controllers on the
embedded cluster (the same run as ``jointer simulate``) and reports the wall and CPU time next
to what was replayed (pods, NodeClaims, disruptions, total cost: a change that only makes the
replay faster leaves them equal). The target: at most five minutes of wall time on 2 cores.

Usage: ``python -m bench.scenario_scale [--pods 5000] [--hours 24] [--seed 1]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import resource
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from provisioner.simulation.objects import nodepool_manifest, requirement
from provisioner.simulation.runner import RunOptions, Simulation
from provisioner.simulation.scenario import Scenario, parse_scenario
from provisioner.simulation.wiring import manager_factory

__all__ = [
    "WALL_TARGET_SECONDS",
    "build",
    "lines",
    "measure",
    "measure_capped",
    "pods_created",
]

WALL_TARGET_SECONDS: Final = 300.0
"""Issue 21: a 24-hour, 5,000-pod scenario replays in at most 5 minutes."""
SCENARIOS: Final = Path(__file__).resolve().parent.parent / "examples" / "scenarios"
DEPLOYMENTS: Final = 10
NIGHT: Final = 0.4
"""Night-time replicas as a share of the peak."""
PEAK_HOUR: Final = 14
JOB_SHARE: Final = 0.4
"""The share of the pods created by the hourly batch Jobs."""
_SIZES: Final = (("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("500m", "2Gi"))

_NODEPOOL: Final = nodepool_manifest(
    "general",
    [
        requirement("karpenter.k8s.aws/instance-category", "In", "c", "m", "r"),
        requirement("karpenter.k8s.aws/instance-generation", "Gt", "5"),
        requirement("kubernetes.io/arch", "In", "amd64"),
        requirement("karpenter.sh/capacity-type", "In", "spot", "on-demand"),
    ],
    disruption={
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "5m",
        "budgets": [{"nodes": "10%"}],
    },
)


def _diurnal(hour: int) -> float:
    """The share of the peak a web Deployment runs at ``hour`` (1.0 at 14:00, 0.4 at 02:00)."""
    phase = math.cos(2 * math.pi * (hour - PEAK_HOUR) / 24)
    return NIGHT + (1 - NIGHT) * (phase + 1) / 2


def _deployment(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": f"registry.example/{name}:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ]
                },
            },
        },
    }


def _job(name: str, pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "batch"},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                "metadata": {"annotations": {"sim.jointer.dev/runtime": "30m"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "work",
                            "image": "registry.example/etl:1",
                            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                        }
                    ],
                },
            },
        },
    }


def _documents(text: Sequence[dict[str, Any]]) -> str:
    return "\n---\n".join(json.dumps(document) for document in text)


def build(pods: int = 5000, hours: int = 24, seed: int = 1) -> dict[str, Any]:
    """The scenario document: about ``pods`` pods created over ``hours`` virtual hours."""
    rng = random.Random(seed)
    web_pods = pods * (1 - JOB_SHARE)
    job_pods = max(round(pods * JOB_SHARE / hours), 1)
    # a Deployment creates about its peak in a day: its night replicas, then the climb
    peaks = [rng.uniform(0.5, 1.5) for _ in range(DEPLOYMENTS)]
    scale = web_pods / sum(peaks) * 24 / max(hours, 24)
    deployments = [
        (f"web-{index}", max(round(peak * scale), 1), _SIZES[rng.randrange(len(_SIZES))])
        for index, peak in enumerate(peaks)
    ]
    steps: list[dict[str, Any]] = [
        {"at": "0s", "applyFile": "nodeclass.yaml"},
        {
            "at": "0s",
            "apply": _documents(
                [
                    _NODEPOOL,
                    *(
                        _deployment(name, max(round(peak * _diurnal(0)), 1), cpu, memory)
                        for name, peak, (cpu, memory) in deployments
                    ),
                ]
            ),
        },
    ]
    for hour in range(hours):
        if hour:
            steps.extend(
                {
                    "at": f"{hour * 3600}s",
                    "scale": {
                        "kind": "Deployment",
                        "namespace": "web",
                        "name": name,
                        "replicas": max(round(peak * _diurnal(hour % 24)), 1),
                    },
                }
                for name, peak, _ in deployments
            )
        steps.append(
            {"at": f"{hour * 3600 + 300}s", "apply": _documents([_job(f"etl-{hour}", job_pods)])}
        )
    return {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": f"scale-{hours}h-{pods}-pods"},
        "spec": {
            "region": "us-east-1",
            "clusterName": "demo",  # nodeclass.yaml discovers by this tag
            "duration": f"{hours}h",
            "nodeStartup": "60s",
            "steps": steps,
        },
    }


def scenario(pods: int = 5000, hours: int = 24, seed: int = 1) -> Scenario:
    """The generated scenario, parsed (``nodeclass.yaml`` from examples/scenarios/)."""
    return parse_scenario(build(pods, hours, seed), source="bench scenario", base=SCENARIOS)


def pods_created(report: dict[str, Any]) -> int:
    """How many pods the replay created."""
    return int(report["summary"]["podsTotal"])


def measure(
    pods: int = 5000,
    hours: int = 24,
    seed: int = 1,
    *,
    catalog: Path | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Replay the generated scenario and time it.

    ``progress`` (a ``multiprocessing.Value("d")``), when given, is kept at the virtual
    seconds replayed so far (sampled every ``PROGRESS_SECONDS`` of wall time by a thread,
    so the replay itself is not touched).
    """
    generated = scenario(pods, hours, seed)
    if catalog is not None:
        generated = dataclasses.replace(generated, catalog=catalog)
    options = RunOptions(seed=seed)
    sampler = None if progress is None else ProgressSampler(progress)
    if sampler is not None:
        options = dataclasses.replace(options, on_start=sampler.start)
    simulation = Simulation(generated, factory=manager_factory, options=options)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        report = simulation.run()
    finally:
        if sampler is not None:
            sampler.stop()
    if progress is not None:
        progress.value = generated.duration  # replayed to the end
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    world = simulation.world
    summary = report["summary"]
    return {
        "hours": hours,
        "pods": pods_created(report),
        "podsScheduled": int(summary["podsScheduled"]),
        "nodeClaims": int(summary["nodeClaimsLaunched"]),
        "disruptions": dict(summary["disruptions"]),
        "costTotal": float(report["cost"]["total"]),
        "wallSeconds": round(wall, 1),
        "cpuSeconds": round(cpu, 1),
        "actions": world.timeline.actions_run,
        "reconciles": world.driver.reconciles,
        "peakRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


PROGRESS_SECONDS: Final = 0.5
"""How often (wall seconds) a capped replay's virtual time is sampled."""


class ProgressSampler:
    """Copies a replay's virtual seconds to a shared value from a thread, until stopped.

    Used as the replay's ``on_start`` hook, so the replay itself is untouched.

    Args:
        progress: a ``multiprocessing.Value("d")``.
    """

    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, simulation: Simulation) -> None:
        """Start sampling ``simulation``'s timeline every ``PROGRESS_SECONDS``."""
        timeline = simulation.world.timeline

        def sample() -> None:
            while True:
                self._progress.value = timeline.now
                if self._stopped.wait(PROGRESS_SECONDS):
                    return

        self._thread = threading.Thread(target=sample, name="replay-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (the value keeps the last sample)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()


def _measure_into(queue: Any, progress: Any, pods: int, hours: int, seed: int) -> None:
    queue.put(measure(pods, hours, seed, progress=progress))


def measure_capped(
    pods: int = 5000, hours: int = 24, seed: int = 1, *, cap_seconds: float = 600.0
) -> dict[str, Any]:
    """:func:`measure` in a child process, stopped after ``cap_seconds`` of wall time.

    A replay that has not finished by then is reported as unfinished (``make bench`` must end
    even while the replay misses its target by far).
    """
    import multiprocessing  # noqa: PLC0415
    import queue as queues  # noqa: PLC0415

    context = multiprocessing.get_context("fork")
    results: Any = context.Queue()
    progress: Any = context.Value("d", 0.0)
    child = context.Process(target=_measure_into, args=(results, progress, pods, hours, seed))
    started = time.perf_counter()
    child.start()
    try:
        result: dict[str, Any] = results.get(timeout=cap_seconds)
    except queues.Empty:
        child.terminate()
        child.join()
        return {
            "hours": hours,
            "podsPlanned": pods,
            "wallSeconds": round(time.perf_counter() - started, 1),
            "unfinished": True,
            "virtualHours": round(progress.value / 3600, 2),
        }
    child.join()
    return result


def lines(result: dict[str, Any] | None) -> list[str]:
    """The section of docs/benchmarks.md."""
    if result is None:
        return []
    if result.get("unfinished"):
        return [
            "## Scenario scale",
            "",
            (
                f"`bench/scenario_scale.py` generates a {result['hours']}-hour day (ten web "
                "Deployments on a diurnal curve, scaled hourly; an hourly batch Job; about "
                f"{result['podsPlanned']:,} pods) and replays it with `jointer simulate`'s "
                "engine and the production controllers. The replay had not finished after "
                f"{result['wallSeconds']:.0f} s of wall time and was stopped{_reached(result)}."
            ),
            "",
        ]
    holds = "yes" if result["wallSeconds"] <= WALL_TARGET_SECONDS else "NO"
    return [
        "## Scenario scale",
        "",
        (
            f"`bench/scenario_scale.py` generates a {result['hours']}-hour day (ten web "
            "Deployments on a diurnal curve, scaled hourly; an hourly batch Job) and replays it "
            "with `jointer simulate`'s engine and the production controllers: "
            f"{result['pods']:,} pods created ({result['podsScheduled']:,} scheduled), "
            f"{result['nodeClaims']} NodeClaims launched, {result['reconciles']:,} reconciles, "
            f"in {result['wallSeconds']:.0f} s of wall time{_cpu(result)} (target ≤ "
            f"{WALL_TARGET_SECONDS:.0f} s: {holds}); peak RSS {result['peakRssMiB']} MiB."
        ),
        "",
    ]


def _reached(result: dict[str, Any]) -> str:
    """Where a stopped replay got, the whole day's wall time at that pace, and the target."""
    target = f"target ≤ {WALL_TARGET_SECONDS:.0f} s: NO"
    reached = float(result.get("virtualHours") or 0.0)
    if reached <= 0:
        return f" ({target})"
    pace = result["wallSeconds"] * result["hours"] / reached
    return (
        f" at virtual hour {reached:.1f} of {result['hours']} (about {pace:,.0f} s for the "
        f"whole day at that pace; {target})"
    )


def _cpu(result: dict[str, Any]) -> str:
    cpu = result.get("cpuSeconds")
    return "" if cpu is None else f" ({cpu:.0f} s of CPU)"


def main(argv: Sequence[str] | None = None) -> int:
    """Replay the scale scenario and print the measurement."""
    parser = argparse.ArgumentParser(prog="bench.scenario_scale")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", default=None, help="also write the scenario YAML here")
    args = parser.parse_args(argv)
    if args.write:
        Path(args.write).write_text(json.dumps(build(args.pods, args.hours, args.seed), indent=1))
    result = measure(args.pods, args.hours, args.seed)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.write("\n".join(lines(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
