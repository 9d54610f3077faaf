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


class CountingKube(ForwardingKube):
    """Counts the controllers' GETs of EC2NodeClasses, and those the cloud provider makes."""

    gets = 0
    by_provider = 0

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
        CountingKube.gets += 1
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.startswith(PROVIDER):
                CountingKube.by_provider += 1
                return
            frame = frame.f_back  # type: ignore[assignment]


def test_launches_drift_checks_and_garbage_collection_read_no_nodeclass_from_the_api() -> None:
    CountingKube.gets = CountingKube.by_provider = 0

    def wrap(kube: KubeClient) -> KubeClient:
        return CountingKube(kube)

    # 20 minutes: launches, drift checks (every 5 minutes per node), garbage collection lists
    report, _ = run(shortened(bundled("deployment-0-to-200"), 1200.0), wrap_kube=wrap)
    assert report["summary"]["nodeClaimsLaunched"] > 0
    assert report["summary"]["podsScheduled"] == report["summary"]["podsTotal"]
    # the NodeClass controller still reads its object to reconcile it; the provider never
    # does (it read from the API 55 times in this run before)
    assert CountingKube.gets > 0
    assert CountingKube.by_provider == 0
