"""The manager registers every disruption reconciler with its watches."""

from __future__ import annotations

from provisioner.controllers.manager import Registration
from provisioner.kube.resource import NODE_CLAIMS, NODE_POOLS, PODS
from tests.unit.controllers.disruption.world import FakeInterruptionSource, World


def registrations(world: World) -> dict[str, Registration]:
    return {r.reconciler.name: r for r in world.manager.registrations}


def test_disruption_reconcilers_are_registered():
    found = registrations(World())
    for name in (
        "disruption",
        "disruption.queue",
        "nodeclaim.disruption",
        "nodeclaim.podevents",
        "nodeclaim.expiration",
        "node.termination",
    ):
        assert name in found
    assert "interruption" not in found
    assert found["disruption"].watches == ()
    assert {w.resource for w in found["disruption.queue"].watches} == {NODE_CLAIMS}
    assert {w.resource for w in found["nodeclaim.disruption"].watches} == {NODE_CLAIMS, NODE_POOLS}
    assert {w.resource for w in found["nodeclaim.podevents"].watches} == {PODS}
    names = [r.name for r in World().manager.reconcilers]
    assert len(names) == len(set(names))


def test_interruption_is_registered_with_a_message_source():
    found = registrations(World(interruption=FakeInterruptionSource()))
    assert found["interruption"].initial()
    assert found["disruption"].initial()
