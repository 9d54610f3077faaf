# ruff: noqa: PT018
"""Lease leader election with a fake clock: acquire, renew, expiry handover, release, races."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from provisioner.kube import errors
from provisioner.kube.leader import LeaderElectionConfig, LeaderElector
from provisioner.kube.resource import LEASES


def elector(kube, clock, identity, events=None) -> LeaderElector:
    events = events if events is not None else []
    return LeaderElector(
        kube,
        LeaderElectionConfig(
            name="karpenter-leader-election", namespace="kube-system", identity=identity
        ),
        clock=clock,
        on_started_leading=lambda: events.append((identity, "started")),
        on_stopped_leading=lambda: events.append((identity, "stopped")),
    )


def lease(kube) -> dict[str, Any]:
    obj: dict[str, Any] = kube.get(LEASES, "karpenter-leader-election", namespace="kube-system")
    return obj


def test_first_candidate_creates_lease(kube, clock):
    events: list[Any] = []
    a = elector(kube, clock, "a", events)
    assert a.step() == 2.0
    assert a.is_leader and events == [("a", "started")]
    spec = lease(kube)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"] == "2025-01-01T00:00:00.000000Z"


def test_other_candidate_waits_while_leader_renews(kube, clock):
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.step()
    for _ in range(10):
        clock.advance(2)
        a.step()
        b.step()
    assert a.is_leader and not b.is_leader and b.holder == "a"


def test_handover_after_lease_expires(kube, clock):
    events: list[Any] = []
    a, b = elector(kube, clock, "a", events), elector(kube, clock, "b", events)
    a.step()
    b.step()  # observes a's record
    clock.advance(14)
    b.step()
    assert b.holder == "a"
    clock.advance(1)
    b.step()
    assert b.is_leader
    assert lease(kube)["spec"]["leaseTransitions"] == 1
    clock.advance(10)
    a.step()  # a finds b holding and its own renew deadline passed
    assert not a.is_leader
    assert events == [("a", "started"), ("b", "started"), ("a", "stopped")]


def test_leader_gives_up_after_renew_deadline(kube, clock):
    events: list[Any] = []
    a = elector(kube, clock, "a", events)
    a.step()
    for _ in range(5):
        clock.advance(2)
        kube.fail_next("get", errors.UnreachableError("down"))
        a.step()
    assert not a.is_leader
    assert events == [("a", "started"), ("a", "stopped")]


def test_release_lets_the_next_candidate_take_over_at_once(kube, clock):
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.step()
    b.step()
    a.release()
    assert not a.is_leader
    assert "holderIdentity" not in lease(kube)["spec"]
    b.step()
    assert b.is_leader


def test_conflicting_write_loses(kube, clock):
    a, b = elector(kube, clock, "a"), elector(kube, clock, "b")
    a.step()
    a.release()
    original_get = kube.get

    def racing_get(*args, **kwargs):
        obj = original_get(*args, **kwargs)
        kube.merge_patch(
            LEASES,
            "karpenter-leader-election",
            {"spec": {"holderIdentity": "c"}},
            namespace="kube-system",
        )
        return obj

    kube.get = racing_get
    assert not b.try_acquire_or_renew()


def test_run_releases_on_stop(kube, clock):
    a = elector(kube, clock, "a")
    stop = threading.Event()
    rounds = []

    def wait(delay, event):
        rounds.append(delay)
        clock.advance(timedelta(seconds=delay).total_seconds())
        if len(rounds) == 3:
            event.set()

    a.run(stop, wait=wait)
    assert rounds == [2.0, 2.0, 2.0]
    assert not a.is_leader
    assert "holderIdentity" not in lease(kube)["spec"]
