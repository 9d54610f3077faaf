"""Virtual time and the driver that runs reconcilers from the event queue (no AWS involved)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent
from provisioner.kube.resource import EVENTS, NODES, PODS, Resource
from provisioner.runtime.reconciler import Request, Result
from provisioner.simulation import timeline as timeline_module
from provisioner.simulation.driver import ControllerCrash, ControllerDriver
from provisioner.simulation.timeline import LivelockError, Timeline


def test_actions_run_in_time_order_and_ties_in_scheduling_order() -> None:
    timeline = Timeline()
    seen: list[tuple[str, float]] = []

    def note(name: str) -> Callable[[], None]:
        return lambda: seen.append((name, timeline.now))

    for name, at in (("c", 5.0), ("a", 1.0), ("b", 1.0), ("d", 2.5)):
        timeline.schedule(at, note(name))
    timeline.run_until(10)
    assert seen == [("a", 1.0), ("b", 1.0), ("d", 2.5), ("c", 5.0)]
    assert timeline.now == 10
    assert timeline.clock.now() == timeline.start + timedelta(seconds=10)


def test_actions_after_the_end_wait_and_the_past_is_now() -> None:
    timeline = Timeline()
    seen: list[float] = []
    timeline.schedule(20, lambda: seen.append(timeline.now))
    timeline.run_until(10)
    assert seen == []
    timeline.schedule(3, lambda: seen.append(timeline.now))  # in the past: runs at once
    timeline.run_until(30)
    assert seen == [10, 20]


def test_a_key_runs_once_at_the_earlier_time() -> None:
    timeline = Timeline()
    seen: list[float] = []
    timeline.schedule(5, lambda: seen.append(timeline.now), key="k")
    timeline.schedule(8, lambda: seen.append(-1), key="k")
    timeline.schedule(2, lambda: seen.append(timeline.now), key="k")
    assert timeline.is_queued("k")
    timeline.run_until(10)
    assert seen == [2]
    assert not timeline.is_queued("k")


def test_cancel_drops_keyed_actions() -> None:
    timeline = Timeline()
    seen: list[str] = []
    timeline.schedule(1, lambda: seen.append("a"), key=("x", 1))
    timeline.schedule(1, lambda: seen.append("b"), key=("y", 1))
    assert timeline.cancel(lambda key: key[0] == "x") == 1  # type: ignore[index]
    timeline.run_until(5)
    assert seen == ["b"]


def test_an_action_rescheduling_itself_without_time_passing_is_a_livelock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timeline_module, "MAX_ACTIONS_PER_INSTANT", 50)
    timeline = Timeline()

    def again() -> None:
        timeline.after(0, again)

    timeline.schedule(1, again)
    with pytest.raises(LivelockError, match=r"virtual time 1\.000s"):
        timeline.run_until(10)


def test_on_advance_sees_every_step_of_the_clock() -> None:
    timeline = Timeline()
    timeline.schedule(4, lambda: None)
    steps: list[float] = []
    timeline.run_until(6, on_advance=steps.append)
    assert steps == [4, 6]


# --- the driver -------------------------------------------------------------------------------


@dataclass
class Recorder:
    name: str
    timeline: Timeline
    results: list[Result | Exception] = field(default_factory=list)
    runs: list[tuple[float, Request]] = field(default_factory=list)

    def reconcile(self, request: Request) -> Result:
        self.runs.append((self.timeline.now, request))
        outcome = self.results.pop(0) if self.results else Result.done()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


@dataclass
class FakeManager:
    reconcilers: tuple[Any, ...]
    handled: list[tuple[Resource, str]] = field(default_factory=list)

    def start(self) -> list[tuple[Any, Request]]:
        return [(self.reconcilers[0], Request())]

    def handle(self, resource: Resource, event: WatchEvent) -> list[tuple[Any, Request]]:
        name = event.object["metadata"]["name"]
        self.handled.append((resource, name))
        return [(self.reconcilers[-1], Request(name=name))]


class Logger:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, message: str, **fields: Any) -> None:
        self.lines.append((message, fields))


def setup(
    *names: str, **kwargs: Any
) -> tuple[Timeline, InMemoryKube, ControllerDriver, FakeManager, Logger]:
    timeline = Timeline()
    kube = InMemoryKube(clock=timeline.clock.now)
    logger = Logger()
    driver = ControllerDriver(timeline, kube, logger=logger, **kwargs)
    manager = FakeManager(tuple(Recorder(name, timeline) for name in names))
    return timeline, kube, driver, manager, logger


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def test_initial_work_runs_at_start_and_events_map_to_requests() -> None:
    timeline, kube, driver, manager, _ = setup("singleton", "nodes")
    driver.start(manager, ignored=[EVENTS])

    def create() -> None:
        kube.create(NODES, node("n1"))

    timeline.schedule(5, create)
    timeline.run_until(10)
    singleton, nodes = manager.reconcilers
    assert singleton.runs == [(0, Request())]
    assert nodes.runs == [(5, Request(name="n1"))]
    assert manager.handled == [(NODES, "n1")]


def test_ignored_resources_are_not_delivered() -> None:
    _, kube, driver, manager, _ = setup("only")
    driver.start(manager, ignored=[NODES])
    kube.create(NODES, node("n1"))
    assert manager.handled == []


def test_extra_resources_are_delivered_as_added_at_start() -> None:
    _, kube, driver, manager, _ = setup("a", "b")
    kube.create(NODES, node("n0"))
    driver.start(manager, extra=[NODES])
    assert manager.handled == [(NODES, "n0")]


def test_events_of_one_instant_reconcile_a_request_once() -> None:
    timeline, kube, driver, manager, _ = setup("s", "nodes")
    driver.start(manager)

    def burst() -> None:
        kube.create(NODES, node("n1"))
        kube.merge_patch(NODES, "n1", {"metadata": {"labels": {"a": "b"}}})

    timeline.schedule(3, burst)
    timeline.run_until(5)
    assert manager.reconcilers[1].runs == [(3, Request(name="n1"))]


def test_requeue_after_runs_again_in_virtual_time_with_a_floor() -> None:
    timeline, _, driver, manager, _ = setup("s", min_requeue_for={"s": 2.0})
    singleton = manager.reconcilers[0]
    singleton.results = [
        Result.after(timedelta(seconds=10)),
        Result.after(timedelta(0)),
        Result.done(),
    ]
    driver.start(manager)
    timeline.run_until(60)
    assert [at for at, _ in singleton.runs] == [0, 10, 12]


def test_failures_back_off_exponentially_and_are_logged() -> None:
    timeline, _, driver, manager, logger = setup("s")
    singleton = manager.reconcilers[0]
    singleton.results = [
        RuntimeError("boom"),
        RuntimeError("boom"),
        RuntimeError("boom"),
        Result.done(),
    ]
    driver.start(manager)
    timeline.run_until(60)
    assert [at for at, _ in singleton.runs] == [0, 1, 3, 7]
    assert driver.errors == 3
    assert logger.lines[0][0] == "reconciler error"
    assert logger.lines[0][1]["controller"] == "s"
    assert "RuntimeError: boom" in logger.lines[0][1]["error"]


def test_stop_forgets_queued_work_and_a_restart_starts_afresh() -> None:
    timeline, kube, driver, manager, _ = setup("s")
    singleton = manager.reconcilers[0]
    singleton.results = [Result.after(timedelta(seconds=30))]
    driver.start(manager)
    timeline.run_until(10)
    driver.stop()
    kube.create(NODES, node("n1"))  # not delivered: nobody is running
    timeline.run_until(40)
    assert [at for at, _ in singleton.runs] == [0]
    fresh = FakeManager((Recorder("s", timeline),))
    driver.start(fresh)
    timeline.run_until(50)
    assert fresh.reconcilers[0].runs == [(40, Request())]
    assert manager.handled == []


def test_a_controller_crash_is_reported_not_retried() -> None:
    timeline, _, driver, manager, _ = setup("s")
    manager.reconcilers[0].results = [ControllerCrash("after CreateFleet")]
    crashes: list[str] = []
    driver.on_crash = lambda crash: crashes.append(str(crash))
    driver.start(manager)
    timeline.run_until(30)
    assert crashes == ["after CreateFleet"]
    assert driver.errors == 0
    assert len(manager.reconcilers[0].runs) == 1


def test_starting_twice_is_refused() -> None:
    _, _, driver, manager, _ = setup("s")
    driver.start(manager)
    with pytest.raises(RuntimeError, match="already running"):
        driver.start(manager)


def test_duplicate_reconciler_names_are_refused() -> None:
    timeline, _, driver, _, _ = setup()
    manager = FakeManager((Recorder("x", timeline), Recorder("x", timeline)))
    with pytest.raises(ValueError, match="two reconcilers are named 'x'"):
        driver.start(manager)


def test_pods_resource_is_delivered_too() -> None:
    _, kube, driver, manager, _ = setup("s", "p")
    driver.start(manager)
    kube.create(
        PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "d"}}
    )
    assert manager.handled == [(PODS, "x")]
