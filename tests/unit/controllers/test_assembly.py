"""The one controller assembly: optional interruption and pricing, the cache's instance index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from cloudprovider.aws.assembly import ParsedNodeClasses
from cloudprovider.fake import FakeCloudProvider
from cloudprovider.interruption import (
    DisruptionRequest,
    IndexedNodeClaim,
    MessageObserver,
    NodeClaimIndex,
)
from provisioner.app.settings import Settings
from provisioner.controllers.assembly import PRICING_INTERVAL, ControllerSet, assemble
from provisioner.controllers.interruption import MessageMetrics
from provisioner.controllers.metrics import Metrics
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.protocol import get_or_none
from provisioner.kube.resource import EC2_NODE_CLASSES, NODE_CLAIMS
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.reconciler import Request
from tests.aws.harness import nodeclass_body
from tests.unit.controllers.harness import TYPES

QUEUED = "karpenter_interruption_message_queue_duration_seconds"


class Source:
    """An interruption source that remembers what it was built on."""

    def __init__(self, index: NodeClaimIndex, observer: MessageObserver) -> None:
        self.index = index
        self.observer = observer

    def poll(self) -> list[DisruptionRequest]:
        return []


class Pricing:
    def __init__(self) -> None:
        self.refreshed: list[datetime | None] = []

    def refresh_if_stale(self, now: datetime | None = None) -> None:
        self.refreshed.append(now)


def build(**parts: Any) -> tuple[ControllerSet, InMemoryKube, FakeClock, CollectorRegistry]:
    clock = FakeClock()
    kube = InMemoryKube(clock=clock.now)
    registry = CollectorRegistry()
    controllers = assemble(
        kube=kube,
        cloud=FakeCloudProvider(instance_types=list(TYPES), clock=clock.now),
        clock=clock,
        settings=Settings(policy="greedy"),
        logger=structlog.get_logger(),
        metrics=Metrics(registry),
        **parts,
    )
    return controllers, kube, clock, registry


def names(controllers: ControllerSet) -> list[str]:
    return [r.name for r in controllers.reconcilers]


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1b",
                "karpenter.sh/capacity-type": "spot",
            },
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
            "requirements": [],
        },
    }


def test_without_a_source_or_prices_neither_extra_reconciler_runs():
    controllers, *_ = build()
    assert "interruption" not in names(controllers)
    assert "providers.pricing" not in names(controllers)
    extra = names(controllers)[len(controllers.manager.reconcilers) :]
    assert extra == ["metrics.node", "metrics.pod"]


def test_the_source_is_built_on_the_managers_cache_and_counted_in_its_metrics():
    built: list[Source] = []

    def factory(index: NodeClaimIndex, observer: MessageObserver) -> Source:
        built.append(Source(index, observer))
        return built[-1]

    controllers, kube, _, registry = build(interruption=factory)
    assert names(controllers).count("interruption") == 1
    (source,) = built
    for name in ("a", "b"):
        kube.create(NODE_CLAIMS, claim(f"default-{name}"))
        status = {"status": {"providerID": f"aws:///us-east-1b/i-0{name}"}}
        kube.patch_status(NODE_CLAIMS, f"default-{name}", status)
    assert source.index.nodeclaim_for_instance("i-0b") is None  # the cache is not filled yet
    controllers.start()
    assert source.index.nodeclaim_for_instance("i-0b") == IndexedNodeClaim(
        name="default-b", instance_type="m5.large", zone="us-east-1b", capacity_type="spot"
    )
    assert source.index.nodeclaim_for_instance("i-0c") is None
    source.observer.received("spot_interrupted")
    source.observer.deleted()
    sample = registry.get_sample_value
    assert (
        sample(
            "karpenter_interruption_received_messages_total", {"message_type": "spot_interrupted"}
        )
        == 1
    )
    assert sample("karpenter_interruption_deleted_messages_total") == 1


def test_prices_are_refreshed_hourly_on_the_injected_clock():
    pricing = Pricing()
    controllers, _, clock, _ = build(pricing=pricing)
    started = [r.name for r, _ in controllers.start()]
    assert started.count("providers.pricing") == 1
    (refresher,) = [r for r in controllers.reconcilers if r.name == "providers.pricing"]
    result = refresher.reconcile(Request())
    assert pricing.refreshed == [clock.now()]
    assert result.requeue_after == PRICING_INTERVAL


def test_queue_time_runs_from_the_events_time_to_now():
    clock = FakeClock()
    registry = CollectorRegistry()
    observer = MessageMetrics(Metrics(registry), clock)
    now = clock.now()
    observer.handled(now - timedelta(seconds=12))
    observer.handled((now - timedelta(seconds=3)).astimezone(UTC).replace(tzinfo=None))
    observer.handled(now + timedelta(seconds=5))  # a skewed clock never counts negative time
    observer.handled(None)
    assert registry.get_sample_value(f"{QUEUED}_count") == 3
    assert registry.get_sample_value(f"{QUEUED}_sum") == 15


def test_nodeclasses_read_through_the_port_are_none_when_absent_or_malformed():
    kube = InMemoryKube(clock=FakeClock().now)
    nodeclasses = ParsedNodeClasses(lambda name: get_or_none(kube, EC2_NODE_CLASSES, name))
    assert nodeclasses.get_nodeclass("default") is None
    kube.create(
        EC2_NODE_CLASSES,
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": "not a list"},
        },
    )
    assert get_or_none(kube, EC2_NODE_CLASSES, "default") is not None
    assert nodeclasses.get_nodeclass("default") is None


def test_a_nodeclass_is_parsed_again_only_when_its_resource_version_changes():
    kube = InMemoryKube(clock=FakeClock().now)
    reads: list[str] = []

    def read(name: str) -> Any:
        reads.append(name)
        return get_or_none(kube, EC2_NODE_CLASSES, name)

    nodeclasses = ParsedNodeClasses(read)
    kube.create(EC2_NODE_CLASSES, nodeclass_body("default"))
    first = nodeclasses.get_nodeclass("default")
    assert first is not None
    assert nodeclasses.get_nodeclass("default") is first  # same version: the same parse
    assert reads == ["default", "default"]  # but every call still reads
    kube.merge_patch(EC2_NODE_CLASSES, "default", {"spec": {"role": "OtherRole"}})
    second = nodeclasses.get_nodeclass("default")
    assert second is not None
    assert second is not first
    assert second.spec.role == "OtherRole"
    kube.delete(EC2_NODE_CLASSES, "default")
    assert nodeclasses.get_nodeclass("default") is None
