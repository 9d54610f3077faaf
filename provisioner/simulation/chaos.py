"""The chaos soak: a seeded, churning workload on ``jointer simulate`` with faults at random.

:func:`soak_scenario` builds the workload (Deployments scaling, Jobs, KAI gangs, fractional-GPU
pods, PodDisruptionBudgets, do-not-disrupt pods) and :func:`plan_faults` draws the faults, both
from one seed. :class:`Chaos` injects the faults through the seams production code meets:

* **EC2** (the simulated account's botocore hooks): ``InsufficientInstanceCapacity`` storms,
  ``RequestLimitExceeded`` bursts, spot interruption warnings, rebalance recommendations and
  state-change notifications through EventBridge and SQS, instances stopped behind Jointer's
  back, and instances whose kubelet never registers a Node;
* **the API server** (:class:`ChaosKube`, the controllers' Kubernetes port): 409 conflicts,
  410 Gone (with the API's history compacted) and 5xx, as the real adapter raises them;
* **the process**: controller restarts at a quiet moment, right after a CreateFleet returned
  (mid-launch) and right after an eviction (mid-drain); queues and caches are lost.

Every :data:`OBSERVE_EVERY` virtual seconds (and at the end) the
:class:`~provisioner.simulation.invariants.InvariantChecker` checks the invariants on what the
API, the account and the record hold. :func:`run_soak` runs it all and returns a
:class:`SoakResult`; :func:`render_reliability` writes ``docs/reliability.md`` from it.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from cloudprovider.aws.catalog import Catalog, builtin_catalog, catalog_to_wire
from provisioner.apis import labels as wk
from provisioner.kube.errors import ConflictError, GoneError, KubeApiError, ServerError
from provisioner.kube.forwarding import ForwardingKube
from provisioner.kube.pdb import desired_healthy, is_pod_healthy, matching_pods
from provisioner.kube.protocol import KubeClient, WatchEvent, WatchEventType
from provisioner.kube.resource import (
    EVENTS,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    Resource,
)
from provisioner.runtime.reconciler import Request
from provisioner.scheduling.resources import parse_resource_list
from provisioner.simulation.cloud import Launch
from provisioner.simulation.driver import ControllerCrash
from provisioner.simulation.invariants import (
    INVARIANTS,
    Claim,
    Eviction,
    Gang,
    Instance,
    InvariantChecker,
    Observation,
    PendingPod,
    Pool,
    Violation,
)
from provisioner.simulation.objects import (
    is_deleting,
    labels_of,
    name_of,
    nodepool_manifest,
    pod_key,
    requirement,
    uid_of,
)
from provisioner.simulation.recorder import EvictionRecord
from provisioner.simulation.runner import ControllersFactory, RunOptions, Simulation
from provisioner.simulation.scenario import Scenario, parse_scenario
from provisioner.simulation.wiring import manager_factory

__all__ = [
    "FAULTS",
    "OBSERVE_EVERY",
    "ChaosKube",
    "Fault",
    "SoakResult",
    "plan_faults",
    "render_reliability",
    "run_soak",
    "soak_scenario",
]

OBSERVE_EVERY: Final = 60.0
"""Virtual seconds between invariant checks."""
HOUR: Final = 3600.0
SOAK_WALL_TARGET_SECONDS: Final = 600.0
"""Issue 21: ``make soak`` (24 virtual hours) in at most 10 minutes of wall time."""
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
_INTERRUPTION: Final = "interruption"
_STOPPED: Final = "InstanceStopped"

FAULTS: Final[Mapping[str, tuple[str, float]]] = {
    "iceStorm": ("InsufficientInstanceCapacity on spot or a set of types, 10-30 min", 0.4),
    "ec2Throttling": ("a burst of 5-40 EC2 calls answered RequestLimitExceeded (503)", 1.0),
    "kubeConflict": ("409 Conflict on the next update of the controllers", 3.0),
    "kubeGone": ("watches expire (history compacted): the relist gets 410 Gone, retries", 1.0),
    "kubeServerError": ("500/503 on the next create or update of the controllers", 2.0),
    "controllerRestart": ("controllers restarted, queues and caches lost", 0.25),
    "restartMidLaunch": ("controllers crash right after a CreateFleet returned", 0.25),
    "restartMidDrain": ("controllers crash right after an eviction", 0.25),
    "spotInterruption": ("two-minute spot interruption warnings via EventBridge/SQS", 1.0),
    "rebalanceRecommendation": ("EC2 rebalance recommendations via EventBridge/SQS", 1.0),
    "stateChange": ("an instance stopped outside Jointer, state-change via EventBridge", 0.25),
    "neverJoin": ("a launched instance whose kubelet never registers its Node", 0.34),
}
"""Every fault: what it does, and how many per virtual hour (at least one per run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One planned fault: when, which, and its parameters."""

    at: float
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)


def plan_faults(seed: int, hours: float) -> list[Fault]:
    """The faults of a soak, drawn from ``seed`` (every kind at least once), in time order."""
    rng = random.Random(f"faults-{seed}")  # noqa: S311 - reproducible, not secret
    duration = hours * HOUR
    faults: list[Fault] = []
    for kind, (_, per_hour) in FAULTS.items():
        count = max(1, round(per_hour * hours))
        for _ in range(count):
            at = round(rng.uniform(0.1 * min(duration, HOUR), duration * 0.9), 1)
            faults.append(Fault(at=at, kind=kind, params=_params(kind, rng)))
    return sorted(faults, key=lambda f: (f.at, f.kind))


def _params(kind: str, rng: random.Random) -> dict[str, Any]:
    match kind:
        case "iceStorm":
            families = rng.choice([["c6i", "c7i"], ["m6i", "m6a"], ["r6i", "c6a"]])
            if rng.random() < 0.5:  # noqa: PLR2004
                return {"capacityType": "spot", "for": rng.randint(10, 30) * 60}
            return {"families": families, "for": rng.randint(10, 30) * 60}
        case "ec2Throttling":
            return {"calls": rng.randint(5, 40)}
        case "kubeServerError":
            return {"code": rng.choice([500, 503])}
        case "spotInterruption":
            return {"count": rng.randint(1, 3)}
        case _:
            return {}


# -- the workload -----------------------------------------------------------------------------


def _deployment(
    name: str,
    namespace: str,
    cpu: str,
    memory: str,
    *,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name, **(labels or {})},
                    "annotations": dict(annotations or {}),
                },
                "spec": {
                    "containers": [
                        {
                            "name": name,
                            "image": f"registry.example/{name}:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                    **(extra or {}),
                },
            },
        },
    }


SOAK_FAMILIES: Final = frozenset({"c6a", "c6i", "c7i", "m6a", "m6i", "m7i", "r6i", "g5", "g6"})
"""The instance families of the soak's NodePools."""
_GPU_TOLERATION: Final = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
_BASE: Final[Sequence[Mapping[str, Any]]] = (
    nodepool_manifest(
        "general",
        [
            requirement(wk.LABEL_INSTANCE_FAMILY, "In", *sorted(SOAK_FAMILIES - {"g5", "g6"})),
            requirement(wk.LABEL_CAPACITY_TYPE, "In", "spot", "on-demand"),
        ],
        limits={"cpu": "1200"},
        disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "2m"},
    ),
    nodepool_manifest(
        "gpu",
        [
            requirement(wk.LABEL_INSTANCE_FAMILY, "In", "g5", "g6"),
            requirement(wk.LABEL_CAPACITY_TYPE, "In", "on-demand"),
        ],
        template_spec={"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        limits={"nvidia.com/gpu": "24"},
        disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
    ),
    {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {
            "resources": {
                "gpu": {"quota": -1, "limit": -1},
                "cpu": {"quota": -1, "limit": -1},
                "memory": {"quota": -1, "limit": -1},
            }
        },
    },
    _deployment("frontend", "web", "500m", "1Gi"),
    _deployment("api", "web", "250m", "512Mi"),
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "api", "namespace": "web"},
        "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": "api"}}},
    },
    _deployment("ledger", "finance", "500m", "1Gi", annotations={DO_NOT_DISRUPT: "true"}),
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "ledger", "namespace": "finance"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "ledger"}}},
    },
    _deployment("worker", "batch", "1", "2Gi"),
    _deployment(
        "notebook",
        "research",
        "500m",
        "1Gi",
        annotations={"gpu-fraction": "0.5"},
        labels={"kai.scheduler/queue": "research"},
        extra={"schedulerName": "kai-scheduler", "tolerations": [_GPU_TOLERATION]},
    ),
)
_RANGES: Final[Mapping[tuple[str, str], tuple[int, int]]] = {
    ("web", "frontend"): (150, 700),
    ("web", "api"): (80, 400),
    ("finance", "ledger"): (10, 40),
    ("batch", "worker"): (0, 300),
    ("research", "notebook"): (0, 6),
}
"""Deployment replica ranges at full scale (~1,500 pods at the peak, Jobs and gangs apart)."""
SCALE_EVERY: Final = 900.0
JOB_EVERY: Final = 1800.0
GANG_EVERY: Final = 5400.0


def _job(index: int, parallelism: int, runtime: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"etl-{index}", "namespace": "batch"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {
                    "labels": {"app": "etl"},
                    "annotations": {"sim.jointer.dev/runtime": f"{runtime}m"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "etl",
                            "image": "registry.example/etl:1",
                            "resources": {"requests": {"cpu": "1500m", "memory": "3Gi"}},
                        }
                    ],
                },
            },
        },
    }


def _gang(index: int, members: int, runtime: int) -> list[dict[str, Any]]:
    name = f"train-{index}"
    return [
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": f"pg-{name}", "namespace": "research"},
            "spec": {"minMember": members, "queue": "research"},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "research"},
            "spec": {
                "parallelism": members,
                "completions": members,
                "template": {
                    "metadata": {
                        "labels": {"kai.scheduler/queue": "research"},
                        "annotations": {
                            "pod-group-name": f"pg-{name}",
                            "sim.jointer.dev/runtime": f"{runtime}m",
                        },
                    },
                    "spec": {
                        "schedulerName": "kai-scheduler",
                        "restartPolicy": "Never",
                        "tolerations": [_GPU_TOLERATION],
                        "containers": [
                            {
                                "name": "trainer",
                                "image": "registry.example/trainer:1",
                                "resources": {
                                    "requests": {
                                        "cpu": "3",
                                        "memory": "12Gi",
                                        "nvidia.com/gpu": "1",
                                    },
                                    "limits": {"nvidia.com/gpu": "1"},
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]


def soak_scenario(
    seed: int,
    hours: float,
    *,
    pods: int = 2000,
    catalog: Path | None = None,
    base: Path | None = None,
) -> Scenario:
    """The soak's workload and its step-shaped faults (ICE storms, spot interruptions, restarts).

    Args:
        seed: seeds replica counts, Job sizes and the faults.
        hours: virtual hours.
        pods: the scale of the workload (~``pods`` pods at the peak).
        catalog: a catalog file (None: the built-in one).
        base: where ``applyFile: nodeclass.yaml`` is read from (examples/scenarios).
    """
    rng = random.Random(f"workload-{seed}")  # noqa: S311 - reproducible, not secret
    factor = pods / 2000
    duration = hours * HOUR
    here = base or Path(__file__).resolve().parents[2] / "examples" / "scenarios"
    steps: list[dict[str, Any]] = [
        {"at": "0s", "applyFile": "nodeclass.yaml"},
        {"at": "0s", "apply": yaml.safe_dump_all(_BASE, sort_keys=False)},
    ]
    at = 30.0
    while at < duration:
        for (namespace, name), (low, high) in _RANGES.items():
            replicas = round(rng.randint(low, high) * factor)
            if name == "ledger":
                replicas = max(replicas, 3)
            steps.append(
                {
                    "at": f"{at:g}s",
                    "scale": {
                        "kind": "Deployment",
                        "namespace": namespace,
                        "name": name,
                        "replicas": replicas,
                    },
                }
            )
        at += SCALE_EVERY
    for index, at in enumerate(_times(JOB_EVERY, duration, offset=120.0)):
        job = _job(index, max(1, round(rng.randint(30, 100) * factor)), rng.randint(10, 40))
        steps.append({"at": f"{at:g}s", "apply": yaml.safe_dump(job, sort_keys=False)})
    for index, at in enumerate(_times(GANG_EVERY, duration, offset=300.0)):
        gang = _gang(index, rng.choice([2, 4]), rng.randint(30, 60))
        steps.append({"at": f"{at:g}s", "apply": yaml.safe_dump_all(gang, sort_keys=False)})
    for fault in plan_faults(seed, hours):
        step = _fault_step(fault)
        if step is not None:
            steps.append(step)
    steps.sort(key=lambda s: _seconds(s["at"]))
    body = {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": f"chaos-soak-{seed}"},
        "spec": {
            "region": "us-east-1",
            "clusterName": "demo",
            "duration": f"{duration:g}s",
            "nodeStartup": "60s",
            **({"catalog": str(catalog)} if catalog is not None else {}),
            "steps": steps,
        },
    }
    return parse_scenario(body, source=f"chaos soak (seed {seed})", base=here)


def _times(every: float, duration: float, *, offset: float) -> list[float]:
    times = []
    at = offset
    while at < duration:
        times.append(at)
        at += every
    return times


def _seconds(text: str) -> float:
    return float(text.removesuffix("s"))


def _fault_step(fault: Fault) -> dict[str, Any] | None:
    at = f"{fault.at:g}s"
    match fault.kind:
        case "iceStorm":
            outage: dict[str, Any] = {"for": f"{fault.params['for']}s"}
            if "capacityType" in fault.params:
                outage["capacityType"] = fault.params["capacityType"]
                outage["instanceTypes"] = ["*"]
            else:
                outage["instanceTypes"] = [
                    f"{family}.{size}"
                    for family in fault.params["families"]
                    for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")
                ]
            return {"at": at, "capacityOutage": outage}
        case "spotInterruption":
            return {"at": at, "spotInterruption": {"count": fault.params["count"]}}
        case "controllerRestart":
            return {"at": at, "restartController": {}}
        case _:
            return None


# -- the API server's faults ------------------------------------------------------------------

_WRITES: Final = frozenset({"create", "patch", "update", "delete"})


class ChaosKube(ForwardingKube):
    """The controllers' Kubernetes port, answering queued faults as the API server would.

    Each queued fault fails the next call of one of its verbs (RBAC verbs: ``get``, ``list``,
    ``create``, ``patch``, ``delete``) with its error; everything else is forwarded.
    """

    def __init__(
        self,
        inner: KubeClient,
        faults: list[tuple[str, frozenset[str], KubeApiError]],
        raised: dict[str, int],
    ) -> None:
        super().__init__(inner)
        self._faults = faults
        self._raised = raised

    def _before(
        self,
        verb: str,
        resource: Resource,
        *,
        namespace: str | None = None,  # noqa: ARG002 - every call fails alike
        name: str | None = None,  # noqa: ARG002
        subresource: str = "",  # noqa: ARG002
    ) -> None:
        for index, (kind, verbs, error) in enumerate(self._faults):
            if verb in verbs and resource != EVENTS:
                del self._faults[index]
                self._raised[kind] = self._raised.get(kind, 0) + 1
                raise error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _conflict() -> ConflictError:
    return ConflictError(
        "Operation cannot be fulfilled: the object has been modified; please apply your "
        "changes to the latest version and try again",
        reason="Conflict",
    )


def _server_error(code: int) -> ServerError:
    if code == 503:  # noqa: PLR2004
        return ServerError("the server is currently unable to handle the request", code=503)
    return ServerError("etcdserver: request timed out", code=500, reason="InternalError")


# -- running ----------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class SoakResult:
    """What a soak did and found.

    Attributes:
        seed: the seed.
        hours: virtual hours.
        faults: injected faults by kind (planned ones that found nothing to act on are not
            counted: an interruption with no spot node, an armed crash with no launch).
        planned: planned faults by kind.
        checks: invariant checks made.
        violations: every violation found.
        pods: pods that ever existed.
        node_claims: NodeClaims that ever existed.
        instances: instances ever launched.
        restarts: controller restarts.
        wall_seconds: wall-clock seconds (filled in by the caller).
    """

    seed: int
    hours: float
    faults: dict[str, int]
    planned: dict[str, int]
    checks: int
    violations: list[Violation]
    pods: int
    node_claims: int
    instances: int
    restarts: int
    counts: dict[str, int]
    wall_seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Whether every invariant held."""
        return not self.violations


class Chaos:
    """Injects the planned faults into one :class:`Simulation` and checks the invariants."""

    def __init__(self, faults: Sequence[Fault], *, seed: int) -> None:
        self.faults = list(faults)
        self.injected = dict.fromkeys(FAULTS, 0)
        self.checker = InvariantChecker()
        self._rng = random.Random(f"chaos-{seed}")  # noqa: S311 - reproducible, not secret
        self._kube_faults: list[tuple[str, frozenset[str], KubeApiError]] = []
        self._sim: Simulation | None = None
        self._crash_on_launch = 0
        self._crash_on_evict = 0
        self._never_join = 0
        self._capacity_since = 0.0
        self._evictions: list[Eviction] = []
        self._tags: dict[str, str] = {}
        self._launches: dict[str, list[str]] = {}
        self._reasons: set[str] = set()
        self._events_seen = 0
        self._disturbed: set[str] = set()
        self._node_instance: dict[str, str] = {}
        self._min_member: dict[str, int] = {}

    @property
    def sim(self) -> Simulation:
        """The simulation the faults go into."""
        if self._sim is None:
            raise RuntimeError("chaos is not installed")
        return self._sim

    def wrap_kube(self, kube: KubeClient) -> KubeClient:
        """The controllers' port with the API server's faults (``RunOptions.wrap_kube``)."""
        return ChaosKube(kube, self._kube_faults, self.injected)

    def install(self, sim: Simulation) -> None:
        """Schedule the faults and the checks (``RunOptions.on_start``)."""
        self._sim = sim
        world = sim.world
        previous = world.account.after_launch

        def after_launch(launch: Launch) -> None:
            if previous is not None:
                previous(launch)
            self._after_launch(launch)

        world.account.after_launch = after_launch
        world.recorder.on_evicted.append(self._after_eviction)
        world.kube.subscribe(self._observe_change, frozen=True)
        for index, fault in enumerate(self.faults):
            world.timeline.schedule(
                fault.at, self._injector(fault), key=("chaos", fault.kind, index)
            )
        world.timeline.schedule(OBSERVE_EVERY, self._check, key=("invariants",))

    # -- faults ------------------------------------------------------------------------------

    def _injector(self, fault: Fault) -> Callable[[], None]:
        return lambda: self._inject(fault)

    def _inject(self, fault: Fault) -> None:  # noqa: C901, PLR0912 - one case per fault
        world = self.sim.world
        now = world.timeline.now
        match fault.kind:
            case "iceStorm":
                self.injected[fault.kind] += 1
                self._capacity_since = max(self._capacity_since, now + fault.params["for"])
            case "ec2Throttling":
                world.account.throttle_budget += int(fault.params["calls"])
                self.injected[fault.kind] += 1
                self._capacity_since = max(self._capacity_since, now + 60.0)
            case "kubeConflict":
                self._kube_faults.append((fault.kind, frozenset({"patch", "update"}), _conflict()))
            case "kubeGone":
                world.kube.compact()
                # The watches expire: the informers' relist meets 410 first, then succeeds.
                gone = GoneError("too old resource version", reason="Expired")
                self._kube_faults.append((fault.kind, frozenset({"list"}), gone))
                world.driver.relist()
            case "kubeServerError":
                error = _server_error(int(fault.params["code"]))
                self._kube_faults.append((fault.kind, _WRITES, error))
            case "controllerRestart":
                self.injected[fault.kind] += 1
                self._capacity_since = max(self._capacity_since, now)
            case "restartMidLaunch":
                self._crash_on_launch += 1
            case "restartMidDrain":
                self._crash_on_evict += 1
            case "neverJoin":
                self._never_join += 1
            case "rebalanceRecommendation":
                target = self._pick_node(spot=True)
                if target is not None:
                    world.account.send_instance_event(
                        target, "EC2 Instance Rebalance Recommendation"
                    )
                    self._wake_interruption()
                    self.injected[fault.kind] += 1
            case "stateChange":
                target = self._pick_node(spot=False)
                if target is not None:
                    world.recorder.interrupted[target] = _STOPPED
                    self._disturb(target)
                    world.account.stop_instance(target)
                    world.account.send_instance_event(
                        target, "EC2 Instance State-change Notification", state="stopping"
                    )
                    self._wake_interruption()
                    self.injected[fault.kind] += 1

    def _wake_interruption(self) -> None:
        driver = self.sim.world.driver
        if driver.has(_INTERRUPTION):
            driver.enqueue(_INTERRUPTION, Request())

    def _pick_node(self, *, spot: bool) -> str | None:
        world = self.sim.world
        candidates = []
        for node in world.kube.view(NODES):
            instance = str((node.get("spec") or {}).get("providerID") or "").rpartition("/")[2]
            labels = labels_of(node)
            if (
                instance
                and not is_deleting(node)
                and instance not in world.recorder.interrupted
                and wk.LABEL_NODEPOOL in labels
                and (not spot or labels.get(wk.LABEL_CAPACITY_TYPE) == wk.CAPACITY_TYPE_SPOT)
            ):
                candidates.append(instance)
        return self._rng.choice(sorted(candidates)) if candidates else None

    def _after_launch(self, launch: Launch) -> None:
        if self._never_join > 0:
            self._never_join -= 1
            self.sim.world.kubelet.never_join.add(launch.instance_id)
            self.injected["neverJoin"] += 1
        if self._crash_on_launch > 0:
            self._crash_on_launch -= 1
            self.injected["restartMidLaunch"] += 1
            self._capacity_since = max(self._capacity_since, self.sim.world.timeline.now)
            raise ControllerCrash("chaos: controller restart mid-launch")

    def _after_eviction(self, record: EvictionRecord, pod: Mapping[str, Any]) -> None:
        kube = self.sim.world.kube
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        short = []
        pdbs = [
            pdb
            for pdb in kube.view(POD_DISRUPTION_BUDGETS, namespace=namespace)
            if matching_pods(pdb, [pod])
        ]
        pods = (
            [p for p in kube.view(PODS, namespace=namespace) if uid_of(p) != record.uid]
            if pdbs
            else []
        )
        for pdb in pdbs:
            selected = matching_pods(pdb, pods)
            healthy = sum(1 for p in selected if is_pod_healthy(p))
            if healthy < desired_healthy(pdb, len(selected) + 1):
                short.append(f"{namespace}/{name_of(pdb)}")
        self._evictions.append(
            Eviction(
                at=record.at,
                pod=record.pod,
                protected=annotations.get(DO_NOT_DISRUPT) == "true",
                short_pdbs=tuple(short),
            )
        )
        if self._crash_on_evict > 0:
            self._crash_on_evict -= 1
            self.injected["restartMidDrain"] += 1
            self._capacity_since = max(self._capacity_since, self.sim.world.timeline.now)
            raise ControllerCrash("chaos: controller restart mid-drain")

    # -- the record the checks need ------------------------------------------------------------

    def _observe_change(self, resource: Resource, event: WatchEvent) -> None:
        obj = event.object
        if resource == NODES:
            instance = str((obj.get("spec") or {}).get("providerID") or "").rpartition("/")[2]
            if instance:
                self._node_instance[name_of(obj)] = instance
        elif resource == PODS and (event.type == WatchEventType.DELETED or is_deleting(obj)):
            node = (obj.get("spec") or {}).get("nodeName")
            lost = self._node_instance.get(str(node), "") if node else ""
            record = self.sim.world.recorder.pods.get(uid_of(obj))
            if (
                lost in self.sim.world.recorder.interrupted
                and record is not None
                and record.pod_group is not None
            ):
                self._disturbed.add(record.pod_group)
        elif resource.kind == "PodGroup":
            spec = obj.get("spec") or {}
            key = f"{(obj.get('metadata') or {}).get('namespace')}/{name_of(obj)}"
            self._min_member[key] = int(spec.get("minMember") or 1)

    def _disturb(self, instance: str) -> None:
        world = self.sim.world
        nodes = {n for n, i in self._node_instance.items() if i == instance}
        for record in world.recorder.pods.values():
            if record.node in nodes and record.pod_group is not None:
                self._disturbed.add(record.pod_group)

    def _check(self) -> None:
        world = self.sim.world
        self.observe()
        following = world.timeline.now + OBSERVE_EVERY
        if following <= self.sim.scenario.duration:
            world.timeline.schedule(following, self._check, key=("invariants",))

    def observe(self) -> list[Violation]:
        """Check every invariant on the cluster and the account now."""
        world = self.sim.world
        now = world.timeline.now
        account = world.account
        new = [i for i in account.launches if i not in self._tags]
        for instance in account.describe(new) if new else []:
            instance_id = str(instance.get("InstanceId"))
            claim = account.nodeclaim_of(instance)
            self._tags[instance_id] = claim
            if claim:
                self._launches.setdefault(claim, []).append(instance_id)
        instances = tuple(
            Instance(instance_id=i, node_claim=self._tags.get(i, ""))
            for i, launch in sorted(account.launches.items())
            if launch.terminated_at is None
        )
        claims = tuple(
            Claim(
                name=name_of(c),
                node_pool=labels_of(c).get(wk.LABEL_NODEPOOL, ""),
                capacity=parse_resource_list((c.get("status") or {}).get("capacity") or {}),
            )
            for c in world.kube.view(NODE_CLAIMS)
        )
        pools = tuple(
            Pool(
                name=name_of(p),
                limits=parse_resource_list((p.get("spec") or {}).get("limits") or {}),
            )
            for p in world.kube.view(NODE_POOLS)
        )
        events = world.recorder.events
        for event in events[self._events_seen :]:
            if event.object.startswith("Pod/") and (
                event.reason == "Nominated" or event.message.startswith("Failed to schedule pod")
            ):
                self._reasons.add(event.object.removeprefix("Pod/"))
        self._events_seen = len(events)
        pending = []
        bound: dict[str, int] = {}
        for pod in world.kube.view(PODS):
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            if status.get("phase") in {"Succeeded", "Failed"} or is_deleting(pod):
                continue
            record = world.recorder.pods.get(uid_of(pod))
            group = record.pod_group if record is not None else None
            if spec.get("nodeName"):
                if group is not None:
                    bound[group] = bound.get(group, 0) + 1
                continue
            if group is not None:
                bound.setdefault(group, 0)
            key = pod_key(pod)
            pending.append(
                PendingPod(
                    key=key,
                    created_at=record.created_at if record is not None else now,
                    has_reason=key in self._reasons,
                )
            )
        gangs = tuple(
            Gang(
                key=key,
                min_member=self._min_member.get(key, 1),
                bound=count,
                disturbed=key in self._disturbed,
            )
            for key, count in sorted(bound.items())
        )
        observation = Observation(
            at=now,
            instances=instances,
            launches={k: tuple(v) for k, v in self._launches.items()},
            claims=claims,
            pools=pools,
            pending=tuple(pending),
            gangs=gangs,
            evictions=tuple(self._evictions),
            capacity_since=self._capacity_since,
        )
        self._evictions = []
        return self.checker.observe(observation)


def soak_catalog() -> Catalog:
    """The built-in us-east-1 catalog cut to the families the soak's NodePools choose from.

    The controllers list instance types on every provisioning and disruption pass; a few
    hundred types instead of 1,325 keeps a 24-hour soak within minutes.
    """
    catalog = builtin_catalog("us-east-1")
    return Catalog(
        catalog.region,
        tuple(
            t
            for t in catalog.instance_types
            if t.labels.get(wk.LABEL_INSTANCE_FAMILY) in SOAK_FAMILIES
        ),
    )


def run_soak(
    seed: int,
    hours: float,
    *,
    pods: int = 2000,
    catalog: Path | None = None,
    factory: ControllersFactory = manager_factory,
    solver_deterministic_time: float = 0.2,
    tamper: Callable[[Chaos], None] | None = None,
) -> SoakResult:
    """Run the chaos soak and return what it injected and found.

    Args:
        seed: seeds the workload, the faults and the run.
        hours: virtual hours.
        pods: the workload's scale.
        catalog: a catalog file (None: :func:`soak_catalog`).
        factory: builds the controllers (the production ones by default).
        solver_deterministic_time: the optimiser's budget per batch.
        tamper: called once the chaos is installed (tests add a fault that must be caught).
    """
    if catalog is None:
        with tempfile.TemporaryDirectory(prefix="jointer-soak-") as directory:
            path = Path(directory) / "us-east-1.json"
            path.write_text(json.dumps(catalog_to_wire(soak_catalog())), encoding="utf-8")
            return run_soak(
                seed,
                hours,
                pods=pods,
                catalog=path,
                factory=factory,
                solver_deterministic_time=solver_deterministic_time,
                tamper=tamper,
            )
    scenario = soak_scenario(seed, hours, pods=pods, catalog=catalog)
    faults = plan_faults(seed, hours)
    chaos = Chaos(faults, seed=seed)

    def start(sim: Simulation) -> None:
        chaos.install(sim)
        if tamper is not None:
            tamper(chaos)

    simulation = Simulation(
        scenario,
        factory=factory,
        options=RunOptions(
            seed=seed,
            solver_deterministic_time=solver_deterministic_time,
            wrap_kube=chaos.wrap_kube,
            on_start=start,
        ),
    )
    report = simulation.run()
    chaos.injected["spotInterruption"] = sum(
        1 for e in report.get("events", []) if e.get("reason") == "SpotInterruptionWarning"
    )
    planned = dict.fromkeys(FAULTS, 0)
    for fault in faults:
        planned[fault.kind] += 1
    return SoakResult(
        seed=seed,
        hours=hours,
        faults=chaos.injected,
        planned=planned,
        checks=chaos.checker.observations,
        violations=list(chaos.checker.violations),
        counts=chaos.checker.counts(),
        pods=len(report.get("pods", [])),
        node_claims=len(report.get("nodeClaims", [])),
        instances=len(report.get("ec2Instances", [])),
        restarts=sum(
            1 for e in report.get("events", []) if e.get("reason") == "ControllerRestarted"
        ),
    )


def _hours(hours: float) -> str:
    return f"{hours:g} virtual hour{'' if hours == 1 else 's'}"


def _target(result: SoakResult) -> str:
    per_day = result.wall_seconds * 24 / result.hours
    verdict = "holds" if per_day <= SOAK_WALL_TARGET_SECONDS else "does not hold"
    if result.hours == 24:  # noqa: PLR2004
        return f"{per_day / 60:.1f} min measured: {verdict}"
    return (
        f"{per_day / 60:.0f} min extrapolated from this {_hours(result.hours)} run "
        f"(x{24 / result.hours:g}): {verdict}"
    )


def render_reliability(result: SoakResult, *, machine: str, date: str) -> str:
    """``docs/reliability.md`` from a soak's result."""
    lines = [
        "# Reliability: the chaos soak",
        "",
        (
            "Written by `make soak` (`python scripts/soak.py`); do not edit by hand. The soak "
            f"replays {_hours(result.hours)} of a churning workload on `jointer simulate` "
            "(the production controllers on the embedded cluster and the moto-backed AWS "
            "account) with faults injected at random from a seed through the same seams "
            "production code meets: the simulated EC2 answers EC2's errors and events, the "
            "controllers' Kubernetes port answers the API server's errors. Every invariant is "
            f"checked every {OBSERVE_EVERY:g} virtual seconds. The code is "
            "`provisioner/simulation/chaos.py` and `provisioner/simulation/invariants.py`."
        ),
        "",
        f"- Machine: {machine}",
        f"- Date: {date}",
        (
            f"- Seed: {result.seed}; virtual hours: {result.hours:g}; "
            f"wall: {result.wall_seconds:.0f} s"
        ),
        (
            f"- Pods that ever existed: {result.pods}; NodeClaims: {result.node_claims}; "
            f"instances launched: {result.instances}; controller restarts: {result.restarts}"
        ),
        f"- Invariant checks: {result.checks}",
        f"- Wall-time target (`make soak`, 24 virtual hours, <= 10 min): {_target(result)}",
        f"- Result: **{'PASS' if result.passed else 'FAIL'}**",
        "",
        "## Faults injected",
        "",
        "| Fault | What | Planned | Injected |",
        "|---|---|---:|---:|",
    ]
    for kind, (what, _) in FAULTS.items():
        lines.append(
            f"| `{kind}` | {what} | {result.planned.get(kind, 0)} | {result.faults.get(kind, 0)} |"
        )
    lines += [
        "",
        (
            "A planned fault that found nothing to act on (no spot node to interrupt, no launch "
            "or drain while a crash was armed) is not counted as injected."
        ),
        "",
        "## Invariants",
        "",
        "| Invariant | Violations | Result |",
        "|---|---:|---|",
    ]
    for name, promise in INVARIANTS.items():
        count = result.counts.get(name, 0)
        lines.append(f"| {promise} (`{name}`) | {count} | {'holds' if count == 0 else 'FAILS'} |")
    if result.violations:
        lines += ["", "## Violations", ""]
        lines += [
            f"- {v.at:g}s `{v.invariant}` {v.subject}: {v.detail}" for v in result.violations[:50]
        ]
    return "\n".join(lines) + "\n"
