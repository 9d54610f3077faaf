"""The chaos soak, one virtual hour: every fault is injected, every invariant holds; and a
seeded test-only fault (a cloud that launches twice, a hook that evicts a do-not-disrupt pod)
makes the checks fail."""

from __future__ import annotations

from provisioner.kube.errors import GoneError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import WatchEvent
from provisioner.kube.resource import PODS, Resource
from provisioner.runtime.reconciler import Reconciler
from provisioner.simulation.chaos import FAULTS, Chaos, plan_faults, run_soak, soak_scenario
from provisioner.simulation.cloud import Launch
from provisioner.simulation.driver import ControllerCrash, ControllerDriver, WorkItem
from provisioner.simulation.objects import name_of
from provisioner.simulation.recorder import RecordingKube
from provisioner.simulation.runner import quiet_logger
from provisioner.simulation.timeline import Timeline

SMALL = 100
"""The workload's scale in tests (the soak itself runs ~2,000 pods)."""


def test_the_fault_plan_is_seeded_and_has_every_fault() -> None:
    plan = plan_faults(7, 24)
    assert plan == plan_faults(7, 24)
    assert plan != plan_faults(8, 24)
    assert {f.kind for f in plan_faults(7, 1)} == set(FAULTS)
    assert all(0 < f.at < 24 * 3600 for f in plan)
    scenario = soak_scenario(7, 24)
    kinds = {s.kind for s in scenario.steps}
    assert {"apply", "scale", "capacityOutage", "spotInterruption", "restartController"} <= kinds
    assert scenario.duration == 24 * 3600


def test_one_hour_of_chaos_injects_every_fault_and_breaks_no_invariant() -> None:
    result = run_soak(3, 1.0, pods=SMALL)
    assert result.violations == []
    assert result.checks == 60
    missing = [kind for kind, count in result.faults.items() if count == 0]
    assert missing == []
    assert result.restarts >= 3
    assert result.instances > 0


def launch_twice(chaos: Chaos) -> None:
    """A cloud that, once, launches a second instance for one CreateFleet's NodeClaim."""
    account = chaos.sim.world.account
    previous = account.after_launch
    done: list[str] = []

    def twice(launch: Launch) -> None:
        if previous is not None:
            previous(launch)
        if done:
            return
        instance = account.describe([launch.instance_id])[0]
        done.append(launch.instance_id)
        account.run_instance(
            image_id=instance["ImageId"],
            instance_type=launch.instance_type,
            zone=launch.zone,
            security_group_ids=[g["GroupId"] for g in instance.get("SecurityGroups", [])],
            tags={t["Key"]: t["Value"] for t in instance.get("Tags", [])},
            capacity_type=launch.capacity_type,
        )

    account.after_launch = twice


def evict_protected(chaos: Chaos) -> None:
    """A controller hook that evicts a do-not-disrupt pod through the controllers' port."""
    world = chaos.sim.world

    def evict() -> None:
        port = RecordingKube(world.kube, world.recorder)
        ledger = [
            p
            for p in world.kube.list(PODS, namespace="finance").items
            if (p.get("spec") or {}).get("nodeName")
        ]
        assert ledger, "no bound ledger pod to evict"
        try:
            port.evict("finance", name_of(ledger[0]))
        except ControllerCrash as crash:  # an armed mid-drain crash met the hook's eviction
            assert world.driver.on_crash is not None
            world.driver.on_crash(crash)

    world.timeline.schedule(20 * 60, evict, key=("test", "evict-protected"))


def test_a_seeded_failing_invariant_makes_the_soak_fail() -> None:
    def tamper(chaos: Chaos) -> None:
        launch_twice(chaos)
        evict_protected(chaos)

    result = run_soak(3, 0.5, pods=SMALL, tamper=tamper)
    assert not result.passed
    assert result.counts["duplicateLaunches"] == 1
    assert result.counts["protectedPodEvictions"] == 1
    duplicate = next(v for v in result.violations if v.invariant == "duplicateLaunches")
    assert "2 instances for one NodeClaim" in duplicate.detail


class Relisting:
    """A controller set whose lists fail while ``failures`` lasts (410 Gone)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.failures = 0
        self.lists: list[float] = []

    @property
    def reconcilers(self) -> tuple[Reconciler, ...]:
        return ()

    def start(self) -> list[WorkItem]:
        self.lists.append(self.timeline.now)
        if self.failures:
            self.failures -= 1
            raise GoneError("too old resource version", reason="Expired")
        return []

    def handle(self, resource: Resource, event: WatchEvent) -> list[WorkItem]:
        return []


def test_a_relist_after_410_gone_retries_with_backoff_until_it_lists() -> None:
    timeline = Timeline()
    driver = ControllerDriver(
        timeline, InMemoryKube(clock=timeline.clock.now), logger=quiet_logger()
    )
    controllers = Relisting(timeline)
    driver.start(controllers)
    controllers.failures = 2
    timeline.after(5, driver.relist)
    timeline.run_until(60)
    assert controllers.lists == [0, 5, 6, 8]
