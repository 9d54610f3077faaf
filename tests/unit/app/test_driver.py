# ruff: noqa: PT018
"""The real driver: informers into the manager, the work queue, requeues, backoff, workers.

Most tests use the step mode (informers over InMemoryKube that end each watch once caught up, a
FakeClock moved by `Driver.advance`); the concurrency and shutdown tests run the worker threads
and synchronise on events, never on time.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import CapturingLogger

from cloudprovider.fake import FakeCloudProvider
from provisioner.app.driver import DEFAULT_REDISCOVERY, Driver, RateLimiter, WorkQueue
from provisioner.app.settings import Settings
from provisioner.app.wiring import (
    ResourceDiscovery,
    optional_resources,
    served_resources,
    watched_resources,
)
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provisioning.planner import PlannerConfig
from provisioner.kube.errors import GoneError, make_error
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent
from provisioner.kube.resource import (
    EVENTS,
    NODE_CLAIMS,
    NODE_OVERLAYS,
    NODE_POOLS,
    NODES,
    POD_GROUP_RESOURCES,
    PODS,
    Resource,
)
from provisioner.runtime.clock import FakeClock, SystemClock
from provisioner.runtime.reconciler import Reconciler, Request, Result
from tests.unit.controllers.harness import TYPES, nodepool, pending_pod


def capturing_logger() -> tuple[Any, CapturingLogger]:
    capture = CapturingLogger()
    logger = structlog.wrap_logger(
        capture, processors=[], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG)
    )
    return logger, capture


def condition(claim: dict[str, Any], kind: str) -> str | None:
    for c in claim.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["status"])
    return None


class Crds:
    """InMemoryKube whose listed CRDs are not installed (404) or not granted (403)."""

    def __init__(self, inner: InMemoryKube) -> None:
        self.inner = inner
        self.missing: set[Resource] = set()
        self.forbidden: set[Resource] = set()

    def _check(self, resource: Resource) -> None:
        if resource in self.missing:
            raise make_error(404, "NotFound", f"the server could not find {resource}")
        if resource in self.forbidden:
            raise make_error(
                403,
                "Forbidden",
                f'{resource.plural}.{resource.group} is forbidden: User "jointer" cannot list',
            )

    def list(self, resource: Resource, **kwargs: Any) -> Any:
        self._check(resource)
        return self.inner.list(resource, **kwargs)

    def watch(self, resource: Resource, **kwargs: Any) -> Any:
        self._check(resource)
        return self.inner.watch(resource, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class World:
    """The production manager over InMemoryKube and FakeCloudProvider, run by the real driver."""

    def __init__(self, *, served: bool = False, discover: bool = False) -> None:
        self.clock = FakeClock()
        self.kube = InMemoryKube(clock=self.clock.now)
        self.api = Crds(self.kube)
        self.cloud = FakeCloudProvider(instance_types=list(TYPES), clock=self.clock.now)
        self.registry = CollectorRegistry()
        self.logger, self.capture = capturing_logger()
        self.manager = Manager(
            kube=self.kube,
            cloud=self.cloud,
            clock=self.clock,
            settings=Settings(policy="greedy"),
            logger=self.logger,
            metrics=Metrics(self.registry),
            planner=PlannerConfig(policy="greedy"),
        )
        self.discovery = ResourceDiscovery(self.api, optional_resources(), self.logger)
        self.driver = Driver(
            self.manager,
            self.api,
            clock=self.clock,
            resources=watched_resources(self.manager, self.kube if served else None),
            logger=self.logger,
            watch_timeout=None,
            registry=self.registry,
            discover=self.discovery.probe if discover else None,
        )

    def advance(self, seconds: float) -> int:
        return self.driver.advance(self.clock, timedelta(seconds=seconds))

    def claims(self) -> list[dict[str, Any]]:
        return self.kube.list(NODE_CLAIMS).items

    def kubelet(self, claim: dict[str, Any]) -> dict[str, Any]:
        """Register a Ready Node for the claim, as a kubelet would."""
        name = f"ip-{claim['metadata']['name']}"
        status = claim["status"]
        return self.kube.create(
            NODES,
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {
                    "providerID": status["providerID"],
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                },
                "status": {
                    "capacity": status["capacity"],
                    "allocatable": status["allocatable"],
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def logs(self, message: str) -> list[dict[str, Any]]:
        return [c.kwargs for c in self.capture.calls if c.kwargs.get("event") == message]


# -- the production controllers, end to end ---------------------------------------------------


def test_a_nodeoverlay_is_followed_where_served_and_changes_the_launch():
    """`jointer run` watches NodeOverlays the API serves, applies them and writes their status."""
    w = World(served=True)
    w.kube.create(NODE_POOLS, nodepool())
    w.kube.create(
        NODE_OVERLAYS,
        {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": "pricey-large"},
            "spec": {
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["c.large"],
                    }
                ],
                "price": "50",
            },
        },
    )
    w.driver.start_sync()
    w.kube.create(PODS, pending_pod("web-0"), namespace="default")
    w.advance(2)
    [claim] = w.claims()
    types = next(
        t["values"]
        for t in claim["spec"]["requirements"]
        if t["key"] == "node.kubernetes.io/instance-type"
    )
    assert types[0] == "c.xlarge"
    status = w.kube.get(NODE_OVERLAYS, "pricey-large")["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "ValidationSucceeded": "True",
        "Ready": "True",
    }


OPEN_MODELS = next(r for r in POD_GROUP_RESOURCES if r.kind == "OpenModel")


def test_an_openmodel_is_followed_where_served_and_its_first_flavor_is_launched():
    """`jointer run` watches llmaz OpenModels; a model pod gets its first flavor, not the
    cheapest type."""
    w = World(served=True)
    assert OPEN_MODELS in w.driver.resources
    w.kube.create(NODE_POOLS, nodepool())
    w.kube.create(
        OPEN_MODELS,
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": "llama"},
            "spec": {
                "inferenceConfig": {
                    "flavors": [
                        {
                            "name": "big",
                            "nodeSelector": {"node.kubernetes.io/instance-type": "c.2xlarge"},
                        },
                        {
                            "name": "small",
                            "nodeSelector": {"node.kubernetes.io/instance-type": "c.large"},
                        },
                    ]
                }
            },
        },
    )
    w.driver.start_sync()
    model_pod = pending_pod("llama-0")
    model_pod["metadata"]["labels"]["llmaz.io/model-name"] = "llama"
    w.kube.create(PODS, model_pod, namespace="default")
    typo = pending_pod("llama-1")
    typo["metadata"]["labels"]["llmaz.io/model-name"] = "llama"
    typo["metadata"]["annotations"] = {"llmaz.io/inference-service-flavors": "huge"}
    w.kube.create(PODS, typo, namespace="default")
    w.advance(2)
    [claim] = w.claims()
    types = next(
        t["values"]
        for t in claim["spec"]["requirements"]
        if t["key"] == "node.kubernetes.io/instance-type"
    )
    assert types == ["c.2xlarge"]
    warnings = [
        e
        for e in w.kube.list(EVENTS).items
        if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "llama-1"
    ]
    assert warnings
    assert warnings[0]["type"] == "Warning"
    assert 'flavor "huge"' in warnings[0]["message"]
    assert 'OpenModel "llama"' in warnings[0]["message"]


def test_nodeoverlays_are_not_watched_where_the_crd_is_not_served():
    class _Kube:
        def list(self, resource, **_):
            raise make_error(404, "NotFound", f"the server could not find {resource}")

    w = World()
    assert NODE_OVERLAYS not in watched_resources(w.manager, _Kube())  # type: ignore[arg-type]
    assert NODE_OVERLAYS in watched_resources(w.manager, w.kube)


def test_nodeoverlays_are_not_watched_with_the_feature_gate_off():
    w = World()
    assert NODE_OVERLAYS not in watched_resources(w.manager, w.kube, node_overlays=False)


def test_pending_pods_become_a_ready_nodeclaim():
    w = World()
    w.kube.create(NODE_POOLS, nodepool())
    w.driver.start_sync()
    assert w.driver.synced
    for i in range(3):
        w.kube.create(PODS, pending_pod(f"web-{i}"), namespace="default")
    w.advance(0.5)
    assert w.claims() == []  # the batch is still open (1 s idle)
    w.advance(1.5)
    claims = w.claims()
    assert len(claims) == 1
    claim = claims[0]
    assert condition(claim, "Launched") == "True"
    assert claim["status"]["providerID"].startswith("fake://")
    assert (
        w.metric(
            "karpenter_nodeclaims_created_total",
            reason="provisioned",
            nodepool="default",
            min_values_relaxed="false",
        )
        == 1
    )
    w.kubelet(claim)
    w.advance(1)
    claim = w.kube.get(NODE_CLAIMS, claim["metadata"]["name"])
    assert condition(claim, "Registered") == "True"
    assert condition(claim, "Initialized") == "True"
    assert condition(claim, "Ready") == "True"
    assert len(w.cloud.create_calls) == 1
    assert w.driver.errors == 0
    assert (
        w.metric(
            "controller_runtime_reconcile_total", controller="nodeclaim.lifecycle", result="success"
        )
        + w.metric(
            "controller_runtime_reconcile_total",
            controller="nodeclaim.lifecycle",
            result="requeue_after",
        )
        >= 3
    )
    assert w.logs("launched nodeclaim") and w.logs("initialized nodeclaim")


def test_nothing_is_bought_twice_when_informers_replay_objects():
    w = World()
    w.kube.create(NODE_POOLS, nodepool())
    w.kube.create(PODS, pending_pod("web-0"), namespace="default")
    w.driver.start_sync()  # the manager's list and the informers' list both see the pod
    w.advance(5)
    assert len(w.claims()) == 1
    for resource in (PODS, NODE_CLAIMS, NODE_POOLS):  # watches expire: relist, objects replayed
        w.kube.fail_next("watch", GoneError("too old", reason="Expired"), resource=resource)
    w.advance(5)
    assert len(w.claims()) == 1
    relists = {i.resource: i.relists for i in w.driver.informers}
    assert relists[PODS] == relists[NODE_CLAIMS] == relists[NODE_POOLS] == 2


# -- the work queue -------------------------------------------------------------------------


class Scripted:
    """A reconciler that records when it ran and answers from a script."""

    def __init__(
        self, name: str, clock: Any, answer: Callable[[int, Request], Result] | None = None
    ) -> None:
        self._name = name
        self._clock = clock
        self._answer = answer or (lambda n, r: Result.done())
        self.runs: list[tuple[float, Request]] = []

    @property
    def name(self) -> str:
        return self._name

    def reconcile(self, request: Request) -> Result:
        self.runs.append((self._clock.monotonic(), request))
        return self._answer(len(self.runs), request)

    def times(self, request: Request | None = None) -> list[float]:
        wanted = request or Request()
        return [round(t, 3) for t, r in self.runs if r == wanted]


class Stub:
    """A controller set: one initial request per reconciler; node events map to `route`."""

    def __init__(
        self,
        *reconcilers: Reconciler,
        route: Callable[[Resource, WatchEvent], list[tuple[Reconciler, Request]]] | None = None,
    ) -> None:
        self._reconcilers = reconcilers
        self._route = route or (lambda resource, event: [])
        self.events: list[tuple[str, str]] = []

    @property
    def reconcilers(self) -> tuple[Reconciler, ...]:
        return self._reconcilers

    def start(self) -> list[tuple[Reconciler, Request]]:
        return [(r, Request()) for r in self._reconcilers]

    def handle(self, resource: Resource, event: WatchEvent) -> list[tuple[Reconciler, Request]]:
        self.events.append((str(event.type), event.object["metadata"]["name"]))
        return self._route(resource, event)


def stub_driver(controllers: Stub, clock: Any, kube: Any = None, **kwargs: Any) -> Driver:
    logger, _ = capturing_logger()
    kube = kube if kube is not None else InMemoryKube(clock=clock.now)
    return Driver(
        controllers,
        kube,
        clock=clock,
        resources=kwargs.pop("resources", []),
        logger=kwargs.pop("logger", logger),
        watch_timeout=None,
        **kwargs,
    )


def test_requeue_after_runs_again_at_that_virtual_time():
    clock = FakeClock()
    every_ten = Scripted("ten", clock, lambda n, r: Result.after(timedelta(seconds=10)))
    driver = stub_driver(Stub(every_ten), clock)
    driver.start_sync()
    driver.advance(clock, timedelta(seconds=35))
    assert every_ten.times() == [0, 10, 20, 30]


def test_an_event_runs_an_item_sooner_and_its_result_sets_the_next_time():
    clock = FakeClock()
    kube = InMemoryKube(clock=clock.now)
    every_ten = Scripted("ten", clock, lambda n, r: Result.after(timedelta(seconds=10)))
    controllers = Stub(every_ten, route=lambda resource, event: [(every_ten, Request())])
    driver = stub_driver(controllers, clock, kube, resources=[NODES])
    driver.start_sync()
    driver.advance(clock, timedelta(seconds=4))
    kube.create(NODES, {"metadata": {"name": "n1"}})
    driver.advance(clock, timedelta(seconds=17))
    assert every_ten.times() == [0, 4, 14]
    assert controllers.events == [("ADDED", "n1")]


def test_an_item_queued_many_times_before_it_runs_runs_once():
    clock = FakeClock()
    once = Scripted("once", clock)
    driver = stub_driver(Stub(once), clock)
    for _ in range(5):
        driver.queue.add(("once", Request(name="a")))
    driver.queue.add_after(("once", Request(name="a")), timedelta(seconds=3))
    driver.queue.add(("once", Request(name="b")))
    driver.run_pending()
    assert [r.name for _, r in once.runs] == ["a", "b"]
    driver.advance(clock, timedelta(seconds=10))
    assert [r.name for _, r in once.runs] == ["a", "b"]  # the delayed add is moot after a run


def test_the_earliest_of_several_delays_wins():
    clock = FakeClock()
    once = Scripted("once", clock)
    driver = stub_driver(Stub(once), clock)
    key = ("once", Request(name="a"))
    driver.queue.add_after(key, timedelta(seconds=8))
    driver.queue.add_after(key, timedelta(seconds=3))
    driver.queue.add_after(key, timedelta(seconds=5))
    driver.advance(clock, timedelta(seconds=10))
    assert once.times(Request(name="a")) == [3]


def test_errors_back_off_exponentially_and_success_resets_the_backoff():
    clock = FakeClock()
    logger, capture = capturing_logger()
    registry = CollectorRegistry()

    def answer(n: int, request: Request) -> Result:
        if n in {1, 2, 3, 5}:
            raise RuntimeError(f"attempt {n} failed")
        return Result.after(timedelta(seconds=20)) if n == 4 else Result.done()

    flaky = Scripted("flaky", clock, answer)
    driver = stub_driver(Stub(flaky), clock, logger=logger, registry=registry)
    driver.start_sync()
    driver.advance(clock, timedelta(seconds=100))
    # fails at 0, 1, 3 (backoff 1 s, 2 s, 4 s), succeeds at 7, runs again at 27 and fails:
    # the backoff starts again at 1 s
    assert flaky.times() == [0, 1, 3, 7, 27, 28]
    assert driver.errors == 4
    errors = [c for c in capture.calls if c.kwargs.get("event") == "Reconciler error"]
    assert len(errors) == 4
    assert errors[0].kwargs["controller"] == "flaky"
    assert errors[0].kwargs["error"] == "RuntimeError: attempt 1 failed"
    assert errors[1].kwargs["retry-after"] == "2s"
    assert isinstance(errors[0].kwargs["exc_info"], RuntimeError)
    assert (
        registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "flaky"}
        )
        == 4
    )


def test_rate_limiter_is_capped():
    limiter = RateLimiter()
    assert [limiter.delay(n).total_seconds() for n in (1, 2, 3, 9, 10, 500)] == [
        1,
        2,
        4,
        256,
        300,
        300,
    ]


def test_an_event_the_controllers_cannot_handle_is_logged_and_skipped():
    clock = FakeClock()
    kube = InMemoryKube(clock=clock.now)
    once = Scripted("once", clock)
    logger, capture = capturing_logger()

    def route(resource, event):
        if event.object["metadata"]["name"] == "bad":
            raise ValueError("cannot map")
        return [(once, Request(name=event.object["metadata"]["name"]))]

    controllers = Stub(once, route=route)
    driver = stub_driver(controllers, clock, kube, resources=[NODES], logger=logger)
    kube.create(NODES, {"metadata": {"name": "bad"}})
    driver.start_sync()
    kube.create(NODES, {"metadata": {"name": "good"}})
    driver.run_pending()
    assert controllers.events == [("ADDED", "bad"), ("ADDED", "good")]
    assert sorted(r.name for _, r in once.runs) == ["", "good"]
    failed = [c for c in capture.calls if c.kwargs.get("event") == "failed handling watch event"]
    assert failed and failed[0].kwargs["error"] == "ValueError: cannot map"


def test_per_controller_limits_and_round_robin():
    clock = FakeClock()
    queue = WorkQueue(clock=clock, limits={"a": 1})
    for name in ("a1", "a2"):
        queue.add(("a", Request(name=name)))
    queue.add(("b", Request(name="b1")))
    first = queue.try_get()
    second = queue.try_get()
    assert first == ("a", Request(name="a1")) and second == ("b", Request(name="b1"))
    assert queue.try_get() is None  # "a" is at its limit
    queue.done(first)
    assert queue.try_get() == ("a", Request(name="a2"))


# -- threads ----------------------------------------------------------------------------------


class Instrumented:
    """Counts concurrent runs per request; request "slow" blocks until released."""

    name = "instrumented"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.runs: Counter[str] = Counter()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.done: dict[tuple[str, int], threading.Event] = {}

    def finished(self, request: str, run: int) -> threading.Event:
        with self.lock:
            return self.done.setdefault((request, run), threading.Event())

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            self.active[request.name] += 1
            self.runs[request.name] += 1
            run = self.runs[request.name]
            self.most[request.name] = max(self.most[request.name], self.active[request.name])
        if request.name == "slow" and run == 1:
            self.entered.set()
            assert self.release.wait(30)
        with self.lock:
            self.active[request.name] -= 1
        self.finished(request.name, run).set()
        return Result.done()


def threaded(reconciler: Any, **kwargs: Any) -> Driver:
    class Controllers:
        reconcilers = (reconciler,)

        def start(self):
            return []

        def handle(self, resource, event):
            return []

    logger, _ = capturing_logger()
    return Driver(
        Controllers(),
        InMemoryKube(clock=SystemClock().now),
        clock=SystemClock(),
        resources=[],
        logger=kwargs.pop("logger", logger),
        workers=4,
        **kwargs,
    )


def test_an_item_never_runs_concurrently_with_itself():
    r = Instrumented()
    driver = threaded(r)
    driver.start()
    slow = ("instrumented", Request(name="slow"))
    driver.queue.add(slow)
    assert r.entered.wait(30)
    for _ in range(5):
        driver.queue.add(slow)  # queued while it runs: once more, after it
    driver.queue.add(("instrumented", Request(name="fast")))
    assert r.finished("fast", 1).wait(30)  # other workers are free, yet "slow" did not start again
    with r.lock:
        assert r.runs["slow"] == 1 and r.active["slow"] == 1
    r.release.set()
    assert r.finished("slow", 2).wait(30)
    assert driver.stop(timedelta(seconds=30))
    assert r.runs["slow"] == 2 and r.most["slow"] == 1


def test_stop_waits_for_in_flight_reconciles_and_takes_no_more_work():
    r = Instrumented()
    driver = threaded(r)
    driver.start()
    driver.queue.add(("instrumented", Request(name="slow")))
    assert r.entered.wait(30)
    order: list[str] = []
    results: list[bool] = []

    def stop() -> None:
        results.append(driver.stop(timedelta(seconds=30)))
        order.append("stopped")

    stopper = threading.Thread(target=stop)
    stopper.start()
    assert driver._stop.wait(30)
    driver.queue.add(("instrumented", Request(name="late")))
    order.append("released")
    r.release.set()
    stopper.join(30)
    assert order == ["released", "stopped"] and results == [True]
    assert r.runs["slow"] == 1 and r.runs["late"] == 0


def test_stop_gives_up_after_its_bound_and_says_so():
    r = Instrumented()
    logger, capture = capturing_logger()
    driver = threaded(r, logger=logger)
    driver.start()
    driver.queue.add(("instrumented", Request(name="slow")))
    assert r.entered.wait(30)
    assert driver.stop(timedelta(0)) is False
    warnings = [c for c in capture.calls if c.method_name == "warning"]
    assert warnings and warnings[0].kwargs["controllers"] == ["instrumented"]
    r.release.set()
    assert r.finished("slow", 1).wait(30)


def test_two_reconcilers_with_one_name_are_refused():
    clock = FakeClock()
    with pytest.raises(ValueError, match="two reconcilers"):
        stub_driver(Stub(Scripted("x", clock), Scripted("x", clock)), clock)


def test_pod_group_kinds_are_watched_only_where_served():
    class _Kube:
        def list(self, resource, **_):
            if resource.group != "scheduling.run.ai":
                raise make_error(404, "NotFound", f"the server could not find {resource}")
            return []

    served = served_resources(_Kube(), POD_GROUP_RESOURCES)  # type: ignore[arg-type]
    assert {r.kind for r in served} == {"PodGroup", "Queue"}
    assert {r.group for r in served} == {"scheduling.run.ai"}


# -- optional CRDs installed later --------------------------------------------------------------

KAI_POD_GROUPS, KAI_QUEUES = POD_GROUP_RESOURCES[:2]
OVER_QUOTA = {
    "schedulingConditions": [
        {
            "type": "UnschedulableOnNodePool",
            "status": "True",
            "reasons": [{"reason": "NonPreemptibleOverQuota", "message": "over quota"}],
        }
    ]
}


def test_a_pod_group_crd_installed_after_the_start_is_watched_and_its_admission_provisions():
    w = World(discover=True)
    w.api.missing = {KAI_POD_GROUPS, KAI_QUEUES}
    w.kube.create(NODE_POOLS, nodepool())
    w.driver.start_sync()
    w.advance(1)
    assert KAI_POD_GROUPS not in w.driver.resources

    w.api.missing.clear()  # KAI is installed; its PodGroup holds the gang back
    w.kube.create(
        KAI_POD_GROUPS,
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": 2, "queue": "team"},
            "status": OVER_QUOTA,
        },
        namespace="default",
    )
    w.advance(DEFAULT_REDISCOVERY.total_seconds())
    assert {KAI_POD_GROUPS, KAI_QUEUES} <= set(w.driver.resources)
    watched = [log["resource"] for log in w.logs("watching resource")]
    assert watched.count(str(KAI_POD_GROUPS)) == watched.count(str(KAI_QUEUES)) == 1
    for i in range(2):
        pod = pending_pod(f"w-{i}", cpu="1", schedulerName="kai-scheduler")
        pod["metadata"]["annotations"] = {"pod-group-name": "pg"}
        w.kube.create(PODS, pod, namespace="default")
    w.advance(30)
    assert w.claims() == []  # the PodGroup, now in the cache, holds them back

    w.kube.merge_patch(
        KAI_POD_GROUPS, "pg", {"status": {"schedulingConditions": []}}, namespace="default"
    )
    w.advance(2)  # one batch window; no pod changed
    assert len(w.claims()) >= 1


def test_a_forbidden_pod_group_crd_is_logged_once_and_watched_once_granted():
    w = World(discover=True)
    w.api.forbidden = {KAI_POD_GROUPS}
    w.driver.start_sync()
    w.advance(3 * DEFAULT_REDISCOVERY.total_seconds())
    assert KAI_POD_GROUPS not in w.driver.resources
    warnings = [
        c.kwargs
        for c in w.capture.calls
        if c.method_name == "warning" and "RBAC must grant list and watch" in c.kwargs["event"]
    ]
    assert [x["resource"] for x in warnings] == ["podgroups.scheduling.run.ai"]
    assert "forbidden" in warnings[0]["error"]

    w.api.forbidden.clear()  # the ClusterRole is fixed
    w.advance(DEFAULT_REDISCOVERY.total_seconds())
    assert KAI_POD_GROUPS in w.driver.resources
