"""NodeOverlays in the controller: applied to every batch, with their conditions written."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.kube.resource import EVENTS, NODE_OVERLAYS, NODE_POOLS, PODS
from tests.unit.controllers.harness import Harness, nodepool, pending_pod


def _overlay(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [], **spec},
    }


def _types_of(claim: dict[str, Any]) -> list[str]:
    terms = claim["spec"]["requirements"]
    return next(t["values"] for t in terms if t["key"] == "node.kubernetes.io/instance-type")


def _conditions(h: Harness, name: str) -> dict[str, str]:
    status = h.kube.get(NODE_OVERLAYS, name).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or ()}


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.create(NODE_POOLS, nodepool())
    return harness


def _first_launch(overlay: dict[str, Any] | None) -> tuple[str, Harness]:
    h = Harness()
    h.create(NODE_POOLS, nodepool())
    if overlay is not None:
        h.create(NODE_OVERLAYS, overlay)
        h.run(1)
    h.create(PODS, pending_pod("web-0", cpu="500m"))
    h.run(2)
    return _types_of(h.claims()[0])[0], h


def test_a_price_overlay_changes_what_is_launched() -> None:
    assert _first_launch(None)[0] == "c.large"
    pricey = _overlay(
        "pricey-large",
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c.large"]}
        ],
        price="50",
    )
    launched, h = _first_launch(pricey)
    assert launched == "c.xlarge"
    assert _conditions(h, "pricey-large") == {"ValidationSucceeded": "True", "Ready": "True"}


def test_a_capacity_overlay_makes_an_extended_resource_launchable(h: Harness) -> None:
    widget = {"example.com/widget": "1"}
    pod = pending_pod("gadget-0")
    pod["spec"]["containers"][0]["resources"]["requests"].update(widget)
    h.create(PODS, pod)
    h.run(2)
    assert h.claims() == []
    h.create(
        NODE_OVERLAYS,
        _overlay(
            "widgets",
            requirements=[
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["c.2xlarge"],
                }
            ],
            capacity={"example.com/widget": "4"},
        ),
    )
    h.run(15)
    assert [_types_of(c) for c in h.claims()] == [["c.2xlarge"]]


def test_an_overlay_jointer_cannot_read_is_not_ready_and_named(h: Harness) -> None:
    body = _overlay("both-prices", price="1", priceAdjustment="+10%")
    h.create(NODE_OVERLAYS, body)
    h.run(1)
    assert _conditions(h, "both-prices") == {"ValidationSucceeded": "False", "Ready": "False"}
    warnings = [
        e
        for e in h.kube.list(EVENTS).items
        if e["reason"] == "FailedValidation" and e["involvedObject"]["name"] == "both-prices"
    ]
    assert len(warnings) == 1
