"""The provider reads EC2NodeClasses from the controllers' cache, not from the API each time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from provisioner.kube.forwarding import ForwardingKube
from provisioner.kube.protocol import KubeClient
from provisioner.kube.resource import EC2_NODE_CLASSES, Resource
from tests.e2e.conftest import bundled, run, shortened

pytestmark = pytest.mark.usefixtures("test_catalog")

PROVIDER = str(Path(__file__).resolve().parents[2] / "cloudprovider")


class Counts:
    """The controllers' GETs of EC2NodeClasses, and those the cloud provider made."""

    gets = 0
    by_provider = 0


class CountingKube(ForwardingKube):
    """Counts GETs of EC2NodeClasses into ``counts`` (every (re)start's port shares them)."""

    def __init__(self, inner: KubeClient, counts: Counts) -> None:
        super().__init__(inner)
        self.counts = counts

    def _before(
        self,
        verb: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
    ) -> None:
        if verb != "get" or resource != EC2_NODE_CLASSES:
            return
        self.counts.gets += 1
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.startswith(PROVIDER):
                self.counts.by_provider += 1
                return
            frame = frame.f_back  # type: ignore[assignment]


def test_launches_drift_checks_and_garbage_collection_read_no_nodeclass_from_the_api() -> None:
    counts = Counts()
    # 20 minutes: launches, drift checks (every 5 minutes per node), garbage collection lists
    report, _ = run(
        shortened(bundled("deployment-0-to-200"), 1200.0),
        wrap_kube=lambda kube: CountingKube(kube, counts),
    )
    assert report["summary"]["nodeClaimsLaunched"] > 0
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    # the NodeClass controller still reads its object to reconcile it; the provider never
    # does (it read from the API 55 times in this run before)
    assert counts.gets > 0
    assert counts.by_provider == 0
