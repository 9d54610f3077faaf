"""`make bench`: plan each workload at several sizes, with Jointer's optimiser and with the
Karpenter-style first-fit-decreasing planner in the same process, and write docs/benchmarks.md.

Each (workload, size) runs in a forked child process so its peak memory is its own. The
latency reported is the planning step (`Plan.solver.seconds`: problem building, solving and
NodeClaim construction), measured over several repetitions, next to the wall time of the
whole `jointer plan` command run in-process (reading the YAML, planning, writing the JSON).

Usage: ``python -m bench.run [--quick] [--sizes 100,500] [--workloads karpenter-diverse]``
(naming workloads or sizes, or ``--rows-only``, leaves out the memory, consolidation and
scenario-scale sections).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from bench import workloads

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs" / "benchmarks.md"

GENERATORS: dict[str, Callable[[int, int], workloads.Workload]] = {
    "karpenter-diverse": workloads.karpenter_diverse,
    "karpenter-generic": workloads.karpenter_generic,
    "karpenter-diverse-zonal": workloads.karpenter_diverse_zonal,
    "karpenter-diverse-us-east-1": workloads.karpenter_diverse_us_east_1,
    "realistic-mix": workloads.realistic_mix,
    "weighted-limits": workloads.weighted_limits,
    "gpu-gangs": workloads.gpu_gangs,
    "adversarial-gpu": workloads.adversarial,
    "constraint-mix": workloads.constraint_mix,
}
FULL_SIZES: dict[str, tuple[int, ...]] = {
    "karpenter-diverse": (100, 500, 1000, 5000, 10000, 20000),
    "karpenter-generic": (1000, 10000),
    "karpenter-diverse-zonal": (500, 2000, 5000),
    "karpenter-diverse-us-east-1": (500, 2000),
    "realistic-mix": (100, 500, 2000, 5000),
    "weighted-limits": (100, 500, 2000),
    "gpu-gangs": (100, 500, 2000),
    "adversarial-gpu": (100, 500),
    "constraint-mix": (1000, 5000, 10000),
}
QUICK_SIZES: dict[str, tuple[int, ...]] = {
    "karpenter-diverse": (100, 1000),
    "realistic-mix": (500,),
    "weighted-limits": (500,),
    "gpu-gangs": (100,),
    "adversarial-gpu": (100,),
    "constraint-mix": (1000,),
}
LATENCY_TARGETS = {1000: 0.5, 5000: 2.0, 10000: 4.0, 20000: 10.0}
WALL_RATIO_TARGET = 1.5
"""`jointer plan`'s wall time at most this many times its planning step (diverse mixes)."""
DIVERSE = ("karpenter-diverse", "constraint-mix")

_HOW = " ".join(
    """
How: each workload is generated with a fixed seed (`bench/workloads.py`), written as a
multi-document YAML file and planned by the `jointer plan` command run in-process
(`provisioner.app.cli.main`) once with `--policy greedy` (Karpenter-style
first-fit-decreasing, the baseline, in the same process) and several times with Jointer's
optimiser ({time_limit}).
Latency is the planning step as the plan reports it (`solver.seconds`: building the problem,
solving, building NodeClaims; file parsing excluded); p99 is the slowest repetition when there
are fewer than 100. `wall` is the median wall time of the whole command (reading the YAML
(plain block YAML line by line; a file of 8 MiB or more in two halves at once, one in a
forked process) and the catalog, building the
cluster state, planning, writing the JSON plan; not the interpreter's start-up and imports;
the catalog is parsed once per process, by the first-fit-decreasing run) and `wall/plan` its
ratio to the planning step.
Each case runs in its own forked process; peak RSS is that process's
maximum resident size (including the Python runtime, the catalog and OR-Tools). `gap` is
(cost - lower bound) / cost; `cost/FFD` below 1 means cheaper than first-fit-decreasing.
Cost, lower bound, gap and status are those of the repetition with the median cost (the
search stops on a wall-clock budget, so plans differ between repetitions); `cost range` spans
all repetitions, and the summary below checks every one of them.
`placed (FFD)` counts pods placed by each policy: the optimiser never places fewer. "Cost
never above first-fit-decreasing" compares like with like: every repetition must place at
least as many pods as first-fit-decreasing and cost no more per pod placed (the same as
costing no more when both place the same pods; a plan that places pods first-fit-decreasing
leaves unschedulable is not counted as dearer for buying their nodes). `checker` is what
`tests/plancheck.py` (the independent checker of every rule of `spec/plan.md`, which the plan
tests also use) finds wrong with the median-cost plan: `ok` or the number of violations. Latency
targets apply to `karpenter-diverse` (Karpenter: 0.89 / 5.09 / 12.07 / 35.7 s for 1k / 5k /
10k / 20k pods).
""".split(),  # noqa: SIM905 - prose wrapped to the line length
)
_WORKLOADS = " ".join(
    """
Workloads: `karpenter-diverse` is Karpenter's scheduling benchmark mix (generic pods, zonal and
hostname spread, hostname and zonal pod affinity, hostname anti-affinity) on its 400-type fake
catalog; `karpenter-diverse-zonal` the same mix with self-matching pod affinity (each zonal
group in one zone, each hostname group on one node) on six zones of unequal price, and
`karpenter-diverse-us-east-1` that mix on the built-in us-east-1 catalog (six zones);
`karpenter-generic` only its generic pods; `realistic-mix` typical deployments on the
built-in us-east-1 catalog; `weighted-limits` the same mix with a weighted on-demand NodePool
limited to a tenth of it beside an unlimited spot NodePool; `gpu-gangs` KAI gangs and
fractional-GPU pods with shapes from the Alibaba openb GPU trace (Weng et al., ATC'23);
`adversarial-gpu` single-GPU inference pods
where first-fit-decreasing grows one claim into a large multi-GPU node; `constraint-mix` a
second diverse mix generated independently of Karpenter's (services in groups of unequal size
with required or preferred hostname anti-affinity and zone spreads of skew 1 to 3, zonal
co-location groups, memory-heavy pods on a tainted pool, spot-only batch pods on another,
generic pods preferring a zone; log-normal requests) on a generated catalog of compute,
general and memory families over four zones, so that tuning cannot fit one generator.
""".split(),  # noqa: SIM905 - prose wrapped to the line length
)


@dataclass
class CaseResult:
    """One (workload, size) measurement."""

    workload: str
    pods: int
    repetitions: int
    p50: float
    p99: float
    cost: float
    cost_range: tuple[float, float]
    """The cheapest and the dearest repetition's cost."""
    greedy_cost: float
    greedy_seconds: float
    lower_bound: float
    status: str
    placed: int
    greedy_placed: int
    partial_gangs: int
    peak_rss_mib: float
    dearest_per_pod: float
    """The highest cost per pod placed of any repetition."""
    wall_p50: float = 0.0
    """Median wall time of the whole in-process `jointer plan` command."""
    violations: tuple[str, ...] = ()
    """What `tests/plancheck.py` finds wrong with the median-cost plan (empty: it passes)."""

    @property
    def vs_greedy(self) -> float:
        """Cost relative to first-fit-decreasing (0.9 = 10% cheaper)."""
        return self.cost / self.greedy_cost if self.greedy_cost else 1.0

    @property
    def never_dearer(self) -> bool:
        """Every repetition places at least FFD's pods at no more cost per pod placed."""
        if self.placed < self.greedy_placed:
            return False
        if not self.greedy_placed:
            return self.cost_range[1] <= 1e-9
        return self.dearest_per_pod <= self.greedy_cost / self.greedy_placed + 1e-9

    @property
    def wall_ratio(self) -> float:
        """The command's wall time over its planning step (medians)."""
        return self.wall_p50 / self.p50 if self.p50 else 0.0

    @property
    def gap(self) -> float:
        """(cost - lower bound) / cost."""
        return (self.cost - self.lower_bound) / self.cost if self.cost else 0.0


def _write_inputs(workload: workloads.Workload, directory: Path) -> tuple[str, str | None]:
    import yaml  # noqa: PLC0415

    objects = directory / "objects.yaml"
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with objects.open("w", encoding="utf-8") as handle:
        yaml.dump_all(workload.objects, handle, Dumper=dumper, sort_keys=False)
    catalog = None
    if workload.catalog is not None:
        catalog_path = directory / "catalog.json"
        catalog_path.write_text(json.dumps(workload.catalog))
        catalog = str(catalog_path)
    return str(objects), catalog


def _gang_members(workload: workloads.Workload) -> dict[str, tuple[str, int]]:
    minimums = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"]["minMember"]
        for o in workload.objects
        if o["kind"] == "PodGroup"
    }
    members: dict[str, tuple[str, int]] = {}
    for o in workload.objects:
        if o["kind"] != "Pod":
            continue
        group = o["metadata"].get("annotations", {}).get("pod-group-name")
        namespace = o["metadata"]["namespace"]
        if group and minimums.get((namespace, group), 1) > 1:
            members[f"{namespace}/{o['metadata']['name']}"] = (group, minimums[(namespace, group)])
    return members


def _partial_gangs(plan: dict[str, Any], members: dict[str, tuple[str, int]]) -> int:
    placed: dict[str, int] = {}
    minimum: dict[str, int] = {}
    for pod, (group, size) in members.items():
        minimum[group] = size
        placed.setdefault(group, 0)
        del pod
    on_nodes = [p for c in plan["nodeClaims"] for p in c["pods"]]
    on_nodes += [p for n in plan["existingNodes"] for p in n["pods"]]
    for pod in on_nodes:
        if pod in members:
            placed[members[pod][0]] += 1
    return sum(1 for group, n in placed.items() if 0 < n < minimum[group])


def _placed(plan: dict[str, Any]) -> int:
    return sum(len(c["pods"]) for c in plan["nodeClaims"]) + sum(
        len(n["pods"]) for n in plan["existingNodes"]
    )


def plan_command(
    objects: str, catalog: str | None, policy: str, time_limit: float | None
) -> tuple[dict[str, Any], float]:
    """Run `jointer plan` in-process; its JSON plan and its wall time in seconds.

    Raises:
        RuntimeError: the command failed (with its standard error).
    """
    from provisioner.app.cli import main  # noqa: PLC0415

    argv = ["plan", "-f", objects, "--region", "us-east-1", "--policy", policy, "-o", "json"]
    if catalog is not None:
        argv += ["--catalog", catalog]
    if time_limit is not None:
        argv += ["--time-limit", f"{time_limit:g}"]
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    wall = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"jointer plan exited {status}: {err.getvalue()}")
    document: dict[str, Any] = json.loads(out.getvalue())
    return document, wall


def _run_case(name: str, size: int, repetitions: int, time_limit: float | None) -> CaseResult:
    workload = GENERATORS[name](size, 1)
    members = _gang_members(workload)
    with tempfile.TemporaryDirectory() as tmp:
        objects, catalog = _write_inputs(workload, Path(tmp))
        greedy_plan, _ = plan_command(objects, catalog, "greedy", time_limit)
        greedy_seconds = float(greedy_plan["solver"]["seconds"])
        timings: list[float] = []
        walls: list[float] = []
        plans: list[dict[str, Any]] = []
        for _ in range(repetitions):
            plan, wall = plan_command(objects, catalog, "jointer", time_limit)
            timings.append(float(plan["solver"]["seconds"]))
            walls.append(wall)
            plans.append(plan)
    timings.sort()
    plans.sort(key=lambda p: float(p["costPerHour"]))
    plan = plans[len(plans) // 2]
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return CaseResult(
        workload=name,
        pods=size,
        repetitions=repetitions,
        p50=statistics.median(timings),
        p99=timings[min(len(timings) - 1, round(0.99 * (len(timings) - 1)))],
        cost=plan["costPerHour"],
        cost_range=(plans[0]["costPerHour"], plans[-1]["costPerHour"]),
        greedy_cost=greedy_plan["costPerHour"],
        greedy_seconds=greedy_seconds,
        lower_bound=plan["lowerBoundPerHour"],
        status=plan["solver"]["status"],
        placed=min(_placed(p) for p in plans),
        greedy_placed=_placed(greedy_plan),
        partial_gangs=max(_partial_gangs(p, members) for p in plans),
        dearest_per_pod=max(p["costPerHour"] / max(1, _placed(p)) for p in plans),
        peak_rss_mib=peak_rss,
        wall_p50=statistics.median(walls),
        violations=tuple(check(workload, plan)),
    )


def check(workload: workloads.Workload, plan: Mapping[str, Any]) -> list[str]:
    """What the independent plan checker (`tests/plancheck.py`) finds wrong with ``plan``."""
    from cloudprovider.aws.catalog import read_catalog  # noqa: PLC0415
    from tests.plancheck import catalogs_for, check_plan  # noqa: PLC0415

    objects = workload.objects
    catalog = read_catalog(workload.catalog) if workload.catalog else catalogs_for(objects)
    return check_plan(objects, catalog, plan)


def _child(queue: Any, name: str, size: int, repetitions: int, time_limit: float | None) -> None:
    try:
        queue.put(_run_case(name, size, repetitions, time_limit))
    except Exception as error:  # noqa: BLE001 - reported by the parent
        queue.put(error)


def run_in_child(name: str, size: int, repetitions: int, time_limit: float | None) -> CaseResult:
    """Run one case in a forked process (own peak memory)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, name, size, repetitions, time_limit))
    process.start()
    result: CaseResult | Exception = queue.get()
    process.join()
    if isinstance(result, Exception):
        raise result
    return result


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB RAM, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def _table(results: Sequence[CaseResult]) -> list[str]:
    lines = [
        (
            "| workload | pods | p50 s | p99 s | target p99 | wall s | wall/plan | cost $/h "
            "| cost range | FFD $/h | cost/FFD | lower bound $/h | gap | status | placed (FFD) "
            "| partial gangs | checker | peak RSS MiB |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        target = LATENCY_TARGETS.get(r.pods) if r.workload == "karpenter-diverse" else None
        lines.append(
            f"| {r.workload} | {r.pods} | {r.p50:.2f} | {r.p99:.2f} | "
            f"{f'{target:.1f}' if target else '-'} | {r.wall_p50:.2f} | {r.wall_ratio:.2f} | "
            f"{r.cost:.2f} | "
            f"{r.cost_range[0]:.2f} to {r.cost_range[1]:.2f} | {r.greedy_cost:.2f} | "
            f"{r.vs_greedy:.3f} | {r.lower_bound:.2f} | {r.gap * 100:.1f}% | {r.status} | "
            f"{r.placed} ({r.greedy_placed}) | {r.partial_gangs} | "
            f"{len(r.violations) or 'ok'} | {r.peak_rss_mib:.0f} |"
        )
    return lines


def write_results(
    results: Sequence[CaseResult],
    *,
    time_limit: float | None,
    seconds: float,
    state_memory: dict[str, float] | None = None,
    sections: Sequence[str] = (),
) -> str:
    """Render docs/benchmarks.md."""
    gaps = [r.gap for r in results if r.pods >= 500]
    summary = [
        f"- Median gap to the lower bound from 500 pods up: {statistics.median(gaps) * 100:.1f}%."
        if gaps
        else "",
        _ffd_summary(results),
        f"- Partial gang placements: {sum(r.partial_gangs for r in results)}.",
        _checker_summary(results),
        _wall_summary(results),
    ]
    text = [
        "# Benchmarks",
        "",
        (
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {_machine()}; "
            f"`make bench` took {seconds:.0f} s."
        ),
        "",
        _HOW.format(
            time_limit="the default `--time-limit`: 5 s, and the adaptive budget, which keeps the"
            " whole 5 s when pods request GPUs"
            if time_limit is None
            else f"`--time-limit {time_limit:g}`"
        ),
        "",
        *_table(results),
        "",
        *[line for line in summary if line],
        "",
        *_state_lines(state_memory),
        *sections,
        _WORKLOADS,
        "",
    ]
    return "\n".join(text)


def _ffd_summary(results: Sequence[CaseResult]) -> str:
    """Whether every row places FFD's pods at no more cost per pod placed."""
    dearer = [f"{r.workload} {r.pods}" for r in results if not r.never_dearer]
    verdict = f"NO ({', '.join(dearer)})" if dearer else "yes"
    return (
        "- Cost never above first-fit-decreasing (at least as many pods placed, cost per pod "
        f"placed no higher): {verdict}."
    )


def _checker_summary(results: Sequence[CaseResult]) -> str:
    """Whether every row's median-cost plan passes the independent checker."""
    failed = [r for r in results if r.violations]
    verdict = (
        "yes"
        if not failed
        else "NO ("
        + "; ".join(
            f"{r.workload} {r.pods}: {len(r.violations)}, first: {r.violations[0]}" for r in failed
        )
        + ")"
    )
    return f"- Every row's median-cost plan passes `tests/plancheck.py`: {verdict}."


def _wall_summary(results: Sequence[CaseResult]) -> str:
    """Whether `jointer plan` stays within 1.5x its planning step on the diverse mixes."""
    diverse = [r for r in results if r.workload in DIVERSE and r.pods >= 1000]
    if not diverse:
        return ""
    worst = max(diverse, key=lambda r: r.wall_ratio)
    holds = "yes" if worst.wall_ratio <= WALL_RATIO_TARGET else "NO"
    return (
        f"- `jointer plan` wall time within {WALL_RATIO_TARGET:g}x the planning step on the "
        f"diverse mixes from 1,000 pods: {holds} (worst {worst.wall_ratio:.2f}x, "
        f"{worst.workload} {worst.pods})."
    )


MEMORY_TARGET_MIB: Final = 350e6 / 2**20
"""Issue 21: controller memory at 5,000 nodes and 50,000 pods at most 350 MB."""


def _state_lines(memory: dict[str, float] | None) -> list[str]:
    if memory is None:
        return []
    return [
        "## State cache memory",
        "",
        (
            f"`bench/state_memory.py` fills the cluster state cache with "
            f"{memory['nodes']:.0f} nodes and {memory['pods']:.0f} pods the way the informers "
            "do (target, issue 21: controller memory at most 350 MB = 333.8 MiB): the "
            f"process's resident size grew by {memory['rss_growth_mib']:.0f} MiB to "
            f"{memory['peak_rss_mib']:.0f} MiB in total; target holds: "
            f"{'yes' if memory['peak_rss_mib'] <= MEMORY_TARGET_MIB else 'NO'}."
        ),
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and write docs/benchmarks.md."""
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--workloads", default=None, help="comma-separated workload names")
    parser.add_argument("--sizes", default=None, help="comma-separated pod counts")
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument(
        "--rows-only",
        action="store_true",
        help="only the planner rows (implied by --workloads or --sizes): no memory, "
        "consolidation or scenario-scale sections",
    )
    args = parser.parse_args(argv)
    rows_only = bool(args.rows_only or args.workloads or args.sizes)
    plan = QUICK_SIZES if args.quick else FULL_SIZES
    names = args.workloads.split(",") if args.workloads else list(plan)
    started = time.monotonic()
    results: list[CaseResult] = []
    for name in names:
        sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else plan[name]
        for size in sizes:
            repetitions = 5 if size <= 1000 else 3
            result = run_in_child(name, size, repetitions, args.time_limit)
            results.append(result)
            sys.stderr.write(
                f"{name} {size}: p50 {result.p50:.2f}s p99 {result.p99:.2f}s "
                f"wall {result.wall_p50:.2f}s cost "
                f"{result.cost:.2f} ffd {result.greedy_cost:.2f} lb {result.lower_bound:.2f} "
                f"{result.status} rss {result.peak_rss_mib:.0f}MiB\n"
            )
    from bench import state_memory  # noqa: PLC0415

    memory = None if args.quick or rows_only else state_memory.run(5000, 50000)
    from bench import consolidation, scenario_scale  # noqa: PLC0415

    disruption: Sequence[str] = ()
    if not rows_only:
        disruption = consolidation.report((500,) if args.quick else (500, 2000, 5000))
    scale = None if args.quick or rows_only else scenario_scale.measure_capped()
    text = write_results(
        results,
        time_limit=args.time_limit,
        seconds=time.monotonic() - started,
        state_memory=memory,
        sections=disruption,
    )
    text += "\n".join(scenario_scale.lines(scale))
    Path(args.output).write_text(text)
    sys.stderr.write(f"wrote {args.output}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
