"""Benchmark workloads: Kubernetes objects (as dicts) plus an optional instance catalog.

* ``karpenter_diverse`` — Karpenter's scheduling benchmark (scheduling_benchmark_test.go):
  pods split evenly between generic pods, zonal and hostname topology spread, hostname and
  zonal pod affinity, and hostname anti-affinity; CPU from {100m, 250m, 500m, 1, 1.5}, memory
  from {100Mi .. 4Gi}; on Karpenter's fake catalog of 400 types (type i: i vCPU, 2i GiB,
  10i pods, price 0.1/vCPU + 0.1/GB, kube-reserved 100m/10Mi, zones test-zone-1..3).
* ``karpenter_diverse_zonal`` / ``karpenter_diverse_us_east_1`` — that mix with its pod
  affinity groups matching themselves, on six fake zones of unequal price / on the built-in
  us-east-1 catalog.
* ``realistic_mix`` — deployments of typical web/API/worker shapes on the built-in us-east-1
  catalog, some spread across zones.
* ``weighted_limits`` — the realistic mix with a weighted on-demand NodePool limited to a tenth
  of the mix beside an unlimited spot NodePool (weights falling through, limits held whichever
  listed type each NodeClaim launches).
* ``gpu_gangs`` — KAI-style gangs and fractional-GPU pods with shapes drawn from the Alibaba
  openb GPU trace (Weng et al., USENIX ATC 2023), on the built-in us-east-1 catalog.
* ``adversarial`` — GPU pods that first-fit-decreasing packs onto one oversized node.
* ``constraint_mix`` — a second diverse mix, generated independently of Karpenter's: services
  in groups of unequal size with required or preferred hostname anti-affinity and zone spreads
  of skew 1 to 3, zonal co-location groups, memory-heavy pods on a tainted pool, spot-only
  batch pods on another, generic pods preferring a zone; log-normal requests; three pools on
  a generated catalog of compute, general and memory families over four zones.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.simulation.objects import nodepool_manifest

Obj = dict[str, Any]

FAKE_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
_CPU_CHOICES = ("100m", "250m", "500m", "1", "1500m")
_MEM_CHOICES = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
_LABEL_VALUES = ("a", "b", "c", "d", "e", "f", "g")


@dataclass
class Workload:
    """A named plan input: objects and, when not the built-in one, a catalog document."""

    name: str
    objects: list[Obj]
    catalog: Obj | None = None
    notes: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def karpenter_fake_catalog(count: int = 400, zones: tuple[str, ...] = FAKE_ZONES) -> Obj:
    """Karpenter's ``fake.InstanceTypes(count)`` as a catalog document.

    With more than Karpenter's three zones, zone k's prices are k % higher than the first's
    (so the zone a group is held to matters).
    """
    types = []
    for i in range(count):
        cpu, mem_gi, pods = i + 1, 2 * (i + 1), 10 * (i + 1)
        price = round(0.1 * cpu + 0.1 * mem_gi * 2**30 / 1e9, 6)
        markup = {
            z: 1 + (k / 100 if len(zones) > len(FAKE_ZONES) else 0) for k, z in enumerate(zones)
        }
        offerings = [
            {
                "zone": zone,
                "capacityType": ct,
                "price": round(price * markup[zone], 6),
                "available": True,
            }
            for ct, in_zones in (("spot", zones[:2]), ("on-demand", zones))
            for zone in in_zones
        ]
        types.append(
            {
                "name": f"fake-it-{i}",
                "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                "capacity": {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": str(pods)},
                "allocatable": {
                    "cpu": f"{cpu * 1000 - 100}m",
                    "memory": f"{mem_gi * 1024 - 10}Mi",
                    "pods": str(pods),
                },
                "offerings": offerings,
            }
        )
    return {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "InstanceCatalog",
        "region": "test",
        "instanceTypes": types,
    }


def nodepool(name: str = "default", requirements: list[Obj] | None = None, **spec: Any) -> Obj:
    """A NodePool referencing the default EC2NodeClass."""
    return nodepool_manifest(name, requirements, **spec)


def pod(
    name: str,
    requests: dict[str, str],
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    spec: Obj | None = None,
) -> Obj:
    """A pending, unschedulable pod."""
    body: Obj = {
        "containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}]
    }
    body.update(spec or {})
    metadata: Obj = {"name": name, "namespace": namespace, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": body,
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def _resources(rng: random.Random) -> dict[str, str]:
    return {"cpu": rng.choice(_CPU_CHOICES), "memory": rng.choice(_MEM_CHOICES)}


def _diverse_pods(count: int, rng: random.Random, *, self_affinity: bool = False) -> Iterator[Obj]:
    per_kind = count // 6
    index = 0

    def next_name() -> str:
        nonlocal index
        index += 1
        return f"bench-{index - 1}"

    def label() -> dict[str, str]:
        return {"my-label": rng.choice(_LABEL_VALUES)}

    for _ in range(per_kind):
        yield pod(next_name(), _resources(rng), labels=label())
    for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname"):
        for _ in range(per_kind):
            tsc = {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": label()},
            }
            yield pod(
                next_name(),
                _resources(rng),
                labels=label(),
                spec={"topologySpreadConstraints": [tsc]},
            )
    for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone"):
        for _ in range(per_kind):
            own = rng.choice(_LABEL_VALUES)
            term = {"labelSelector": {"matchLabels": {"my-affininity": own}}, "topologyKey": key}
            affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
            yield pod(
                next_name(),
                _resources(rng),
                labels={"my-affininity": own if self_affinity else rng.choice(_LABEL_VALUES)},
                spec={"affinity": affinity},
            )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "nginx"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    for _ in range(per_kind):
        yield pod(next_name(), _resources(rng), labels={"app": "nginx"}, spec={"affinity": anti})
    while index < count:
        yield pod(next_name(), _resources(rng), labels=label())


def karpenter_diverse(count: int, seed: int = 1) -> Workload:
    """Karpenter's diverse benchmark pods on its 400-type fake catalog."""
    rng = random.Random(seed)
    objects = [nodepool(), *_diverse_pods(count, rng)]
    return Workload(f"karpenter-diverse-{count}", objects, karpenter_fake_catalog())


MULTI_ZONES = tuple(f"test-zone-{i}" for i in range(1, 7))


def karpenter_diverse_zonal(count: int, seed: int = 1) -> Workload:
    """Karpenter's diverse mix with self-matching pod affinity on six zones of unequal price.

    The affinity pods carry the label their term selects (as ``affinity-zone=a`` to
    ``affinity-zone=a`` in Karpenter's benchmark), so each zonal group must land in one zone
    and each hostname group on one node (kube-scheduler's first-pod rule); the zonal spreads
    use all six zones.
    """
    rng = random.Random(seed)
    objects = [nodepool(), *_diverse_pods(count, rng, self_affinity=True)]
    catalog = karpenter_fake_catalog(zones=MULTI_ZONES)
    return Workload(f"karpenter-diverse-zonal-{count}", objects, catalog)


def karpenter_diverse_us_east_1(count: int, seed: int = 1) -> Workload:
    """The self-affine diverse mix on the built-in us-east-1 catalog (six real zones)."""
    rng = random.Random(seed)
    requirements = [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
    ]
    objects = [nodepool(requirements=requirements), *_diverse_pods(count, rng, self_affinity=True)]
    return Workload(f"karpenter-diverse-us-east-1-{count}", objects)


def karpenter_generic(count: int, seed: int = 1) -> Workload:
    """Only Karpenter's generic benchmark pods (no topology) on the fake catalog."""
    rng = random.Random(seed)
    objects: list[Obj] = [nodepool()]
    objects += [pod(f"bench-{i}", _resources(rng), labels={"my-label": "a"}) for i in range(count)]
    return Workload(f"karpenter-generic-{count}", objects, karpenter_fake_catalog())


_MIX = (
    # (name, cpu, memory, weight, zone spread)
    ("web", "250m", "512Mi", 30, True),
    ("api", "500m", "1Gi", 25, True),
    ("worker", "1", "2Gi", 20, False),
    ("cache", "500m", "4Gi", 8, True),
    ("java", "2", "6Gi", 10, False),
    ("analytics", "4", "16Gi", 5, False),
    ("ingest", "1500m", "1Gi", 2, False),
)


def realistic_mix(count: int, seed: int = 1) -> Workload:
    """Typical deployments on the built-in us-east-1 catalog (c/m/r, generation > 4)."""
    rng = random.Random(seed)
    requirements = [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    objects: list[Obj] = [nodepool("default", requirements)]
    weights = [w for *_, w, _ in _MIX]
    for i in range(count):
        app, cpu, mem, _, spread = rng.choices(_MIX, weights=weights)[0]
        spec: Obj = {}
        if spread:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        objects.append(
            pod(f"{app}-{i}", {"cpu": cpu, "memory": mem}, labels={"app": app}, spec=spec)
        )
    return Workload(f"realistic-mix-{count}", objects)


def _trace_path() -> Path:
    shared = os.environ.get("JOINTER_SHARED", str(Path(__file__).resolve().parents[2] / "shared"))
    return Path(shared) / "data" / "openb-gpu-trace" / "openb_pod_list_default.csv"


def _gpu_pool() -> Obj:
    return nodepool(
        "gpu",
        [
            {
                "key": "karpenter.k8s.aws/instance-gpu-manufacturer",
                "operator": "In",
                "values": ["nvidia"],
            },
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
        template_spec={"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
    )


_GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def gpu_gangs(count: int, seed: int = 1) -> Workload:
    """KAI gangs (whole GPUs) and fractional-GPU pods with shapes from the openb trace."""
    rng = random.Random(seed)
    with _trace_path().open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if int(r["num_gpu"]) > 0]
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"resources": {"gpu": {"quota": -1, "limit": -1}}},
    }
    objects: list[Obj] = [_gpu_pool(), queue]
    made = 0
    group = 0
    while made < count:
        row = rng.choice(rows)
        cpu = max(1000, min(int(row["cpu_milli"]), 16000))
        mem = max(1024, min(int(row["memory_mib"]), 65536))
        gpus, gpu_milli = int(row["num_gpu"]), int(row["gpu_milli"])
        name = f"pg-{group}"
        if gpus == 1 and gpu_milli < 1000:
            annotations = {"pod-group-name": name, "gpu-fraction": f"{gpu_milli / 1000:.2f}"}
            size, requests = 1, {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}
        else:
            size = min(rng.choice((2, 4, 8)), count - made)
            annotations = {"pod-group-name": name}
            requests = {"cpu": f"{cpu}m", "memory": f"{mem}Mi", "nvidia.com/gpu": str(min(gpus, 8))}
        objects.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"minMember": size, "queue": "research"},
            }
        )
        objects.extend(
            pod(
                f"job-{group}-{member}",
                requests,
                namespace="ml",
                labels={"kai.scheduler/queue": "research"},
                annotations=annotations,
                spec={"schedulerName": "kai-scheduler", "tolerations": _GPU_TOLERATION},
            )
            for member in range(size)
        )
        made += size
        group += 1
    return Workload(f"gpu-gangs-{count}", objects)


def adversarial(count: int, seed: int = 1) -> Workload:
    """Single-GPU pods where first-fit-decreasing grows one claim into an 8-GPU node."""
    rng = random.Random(seed)
    objects: list[Obj] = [_gpu_pool()]
    for i in range(count):
        cpu = rng.choice(("2", "3"))
        objects.append(
            pod(
                f"infer-{i}",
                {"cpu": cpu, "memory": "8Gi", "nvidia.com/gpu": "1"},
                namespace="serving",
                spec={"tolerations": _GPU_TOLERATION},
            )
        )
    return Workload(f"adversarial-gpu-{count}", objects)


def weighted_limits(count: int, seed: int = 1) -> Workload:
    """The realistic mix with a weighted, limited on-demand pool beside an unlimited spot pool.

    ``on-demand`` (weight 10, c/m/r/t of both architectures) may grow to 10 % of the mix's CPU
    and memory; ``spot`` (weight 0, same types) takes the rest. Every NodeClaim of
    ``on-demand`` must keep the pool within its limits whichever listed type is launched.
    """
    rng = random.Random(seed)
    requirements = [
        {
            "key": "karpenter.k8s.aws/instance-category",
            "operator": "In",
            "values": ["c", "m", "r", "t"],
        },
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["3"]},
    ]
    weights = [w for *_, w, _ in _MIX]
    pods: list[Obj] = []
    cpu_milli = memory_mi = 0
    for i in range(count):
        app, cpu, mem, _, spread = rng.choices(_MIX, weights=weights)[0]
        cpu_milli += int(float(cpu[:-1]) if cpu.endswith("m") else float(cpu) * 1000)
        memory_mi += int(mem[:-2]) * (1024 if mem.endswith("Gi") else 1)
        spec: Obj = {}
        if spread:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        pods.append(pod(f"{app}-{i}", {"cpu": cpu, "memory": mem}, labels={"app": app}, spec=spec))
    limits = {
        "cpu": str(max(8, cpu_milli // 10_000)),
        "memory": f"{max(32, memory_mi // 10 // 1024)}Gi",
    }
    capacity_type = "karpenter.sh/capacity-type"
    on_demand = nodepool(
        "on-demand",
        [*requirements, {"key": capacity_type, "operator": "In", "values": ["on-demand"]}],
        weight=10,
        limits=limits,
    )
    spot = nodepool(
        "spot", [*requirements, {"key": capacity_type, "operator": "In", "values": ["spot"]}]
    )
    return Workload(f"weighted-limits-{count}", [on_demand, spot, *pods], meta={"limits": limits})


MIX_ZONES = ("mix-zone-a", "mix-zone-b", "mix-zone-c", "mix-zone-d")
_FAMILIES = (("c", 2, 0.0340), ("m", 4, 0.0384), ("r", 8, 0.0504))
"""(instance category, GiB per vCPU, on-demand price per vCPU-hour)."""
_SIZES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96)
_CATEGORY = "karpenter.k8s.aws/instance-category"


def mix_catalog() -> Obj:
    """A generated catalog: compute, general and memory families of 11 sizes on four zones.

    Zone k costs 2k % more; spot (about 35 % of on-demand, cheaper in bigger sizes) is offered
    in three zones. Pods per node: 8 per vCPU, at most 250.
    """
    types = []
    for category, gib_per_cpu, per_cpu in _FAMILIES:
        for cpu in _SIZES:
            memory_gi = cpu * gib_per_cpu
            price = per_cpu * cpu
            pods = min(250, 8 * cpu + 2)
            offerings = [
                {
                    "zone": zone,
                    "capacityType": capacity_type,
                    "price": round(price * (1 + 0.02 * k) * factor, 6),
                    "available": True,
                }
                for k, zone in enumerate(MIX_ZONES)
                for capacity_type, factor in (
                    ("on-demand", 1.0),
                    *((("spot", 0.38 - 0.002 * cpu**0.5),) if k < 3 else ()),
                )
            ]
            types.append(
                {
                    "name": f"{category}9.{cpu}x",
                    "labels": {
                        "kubernetes.io/arch": "amd64",
                        "kubernetes.io/os": "linux",
                        _CATEGORY: category,
                    },
                    "capacity": {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods)},
                    "allocatable": {
                        "cpu": f"{cpu * 1000 - 60 - 10 * cpu}m",
                        "memory": f"{memory_gi * 1024 - 255 - 11 * pods}Mi",
                        "pods": str(pods),
                    },
                    "offerings": offerings,
                }
            )
    return {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "InstanceCatalog",
        "region": "test",
        "instanceTypes": types,
    }


def _lognormal_requests(
    rng: random.Random, cpu_median: float, gib_per_cpu: float, *, cap: float = 8.0
) -> dict[str, str]:
    """CPU log-normal around ``cpu_median`` (25m steps), memory around ``gib_per_cpu``."""
    cpu = min(cap, max(0.05, rng.lognormvariate(0, 0.8) * cpu_median))
    cpu_milli = max(25, round(cpu * 40) * 25)
    memory_mi = max(64, round(cpu_milli / 1000 * gib_per_cpu * 1024 * rng.uniform(0.6, 1.5)))
    return {"cpu": f"{cpu_milli}m", "memory": f"{memory_mi // 16 * 16}Mi"}


def _spread(key: str, skew: int, selector: dict[str, str], *, hard: bool) -> Obj:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": selector},
    }


def _pod_term(selector: dict[str, str], key: str) -> Obj:
    return {"labelSelector": {"matchLabels": selector}, "topologyKey": key}


_ZONE = "topology.kubernetes.io/zone"
_HOST = "kubernetes.io/hostname"


def _mix_group(rng: random.Random, kind: str, group: int, size: int) -> Iterator[Obj]:
    """One group of ``size`` pods of ``kind`` (their own labels and constraints)."""
    app = f"{kind}-{group}"
    selector = {"svc": app}
    labels = {"svc": app, "tier": kind}
    spec: Obj = {}
    namespace = "default"
    if kind == "service":
        # a Deployment: preferred or required spread over hosts, a zone spread of skew 1-3
        cpu, ratio = rng.choice(((0.25, 1.0), (0.5, 2.0), (1.0, 2.0), (2.0, 4.0)))
        term = _pod_term(selector, _HOST)
        anti = (
            {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            if rng.random() < 0.4
            else {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": term}
                ]
            }
        )
        spec["affinity"] = {"podAntiAffinity": anti}
        spec["topologySpreadConstraints"] = [
            _spread(_ZONE, rng.choice((1, 1, 2, 3)), selector, hard=rng.random() < 0.6)
        ]
    elif kind == "colocated":
        # a cache and its clients: every member in the zone of the first
        cpu, ratio = 0.5, 3.0
        spec["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(selector, _ZONE)]
            }
        }
    elif kind == "memory":
        cpu, ratio = 1.0, 8.0
        namespace = "data"
        spec["nodeSelector"] = {_CATEGORY: "r"}
        spec["tolerations"] = [
            {"key": "workload", "operator": "Equal", "value": "memory", "effect": "NoSchedule"}
        ]
        spec["topologySpreadConstraints"] = [_spread(_HOST, 2, selector, hard=False)]
    elif kind == "batch":
        cpu, ratio = 1.5, 2.5
        namespace = "batch"
        spec["tolerations"] = [{"key": "batch", "operator": "Exists", "effect": "NoSchedule"}]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "karpenter.sh/capacity-type",
                                    "operator": "In",
                                    "values": ["spot"],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    else:
        # generic pods, preferring one zone
        cpu, ratio = 0.3, 2.0
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": _ZONE, "operator": "In", "values": [rng.choice(MIX_ZONES)]}
                            ]
                        },
                    }
                ]
            }
        }
    requests = _lognormal_requests(rng, cpu, ratio)
    for member in range(size):
        if kind in ("batch", "generic"):
            requests = _lognormal_requests(rng, cpu, ratio)
        yield pod(f"{app}-{member}", requests, namespace=namespace, labels=labels, spec=spec)


_MIX_KINDS = (
    # (kind, share of the pods, group sizes)
    ("service", 0.35, (2, 3, 4, 6, 10, 16, 24, 40)),
    ("colocated", 0.10, (2, 3, 5, 8)),
    ("memory", 0.15, (1, 2, 4)),
    ("batch", 0.25, (10, 25, 50, 100)),
    ("generic", 0.15, (20, 50)),
)


def constraint_mix(count: int, seed: int = 7) -> Workload:
    """A diverse mix generated independently of ``karpenter_diverse`` (see the module doc)."""
    rng = random.Random(seed)
    on_demand = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    general = nodepool(
        "general",
        [{"key": _CATEGORY, "operator": "In", "values": ["c", "m"]}, on_demand],
        weight=10,
    )
    memory = nodepool(
        "memory",
        [{"key": _CATEGORY, "operator": "In", "values": ["r"]}],
        template_spec={"taints": [{"key": "workload", "value": "memory", "effect": "NoSchedule"}]},
    )
    batch = nodepool(
        "batch",
        [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        template_spec={"taints": [{"key": "batch", "value": "true", "effect": "NoSchedule"}]},
    )
    pods: list[Obj] = []
    groups = 0
    for kind, share, sizes in _MIX_KINDS:
        target = round(count * share)
        made = 0
        while made < target:
            size = min(rng.choice(sizes), target - made)
            pods.extend(_mix_group(rng, kind, groups, size))
            made += size
            groups += 1
    while len(pods) < count:
        pods.extend(_mix_group(rng, "generic", groups, count - len(pods)))
        groups += 1
    rng.shuffle(pods)
    objects = [general, memory, batch, *pods[:count]]
    return Workload(f"constraint-mix-{count}", objects, mix_catalog())
