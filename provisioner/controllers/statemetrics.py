"""Karpenter's state metrics controllers: node, pod and offering gauges, refreshed periodically.

* ``metrics.node`` (every 5 s): for each registered state node (managed or not)
  ``karpenter_nodes_allocatable``, ``_total_pod_requests``, ``_total_pod_limits``,
  ``_total_daemon_requests``, ``_total_daemon_limits``, ``_system_overhead`` (per
  ``resource_type``) and ``_current_lifetime_seconds``, plus
  ``karpenter_cluster_utilization_percent``.
* ``metrics.pod`` (every 5 s, only when the cache changed): ``karpenter_pods_state`` = 1 for
  every pod, labelled with its node's well-known labels.
* :class:`OfferingGauges`: ``karpenter_cloudprovider_instance_type_offering_available`` /
  ``_price_estimate``, observed by the provisioner from the instance types it resolves.

Values are Karpenter's: CPU in cores, every other resource in whole units (rounded up);
``resource_type`` is the resource name lower-cased with ``-`` as ``_``. Series of objects that are
gone are removed (Karpenter's ``metrics.Store``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from prometheus_client import Gauge

from cloudprovider.instancetype import InstanceType
from provisioner.apis import labels as wk
from provisioner.apis.core import Node, Pod
from provisioner.controllers.metrics import NODE_LABELS, Metrics
from provisioner.runtime.clock import Clock
from provisioner.runtime.reconciler import Request, Result
from provisioner.scheduling.resources import (
    ResourceListError,
    add,
    limits_of,
    parse_resource_list,
    requests_of,
    subtract,
)
from provisioner.state.cluster import ClusterState
from provisioner.state.statenode import StateNode

__all__ = [
    "NODE_METRICS_INTERVAL",
    "POD_METRICS_INTERVAL",
    "GaugeStore",
    "NodeMetricsController",
    "OfferingGauges",
    "PodMetricsController",
]

NODE_METRICS_INTERVAL: Final = timedelta(seconds=5)
POD_METRICS_INTERVAL: Final = timedelta(seconds=5)

_CPU: Final = "cpu"
_MILLI: Final = 1000
_WELL_KNOWN: Final = {
    "nodepool": wk.LABEL_NODEPOOL,
    "zone": wk.LABEL_ZONE,
    "region": wk.LABEL_REGION,
    "instance_type": wk.LABEL_INSTANCE_TYPE,
    "arch": wk.LABEL_ARCH,
    "os": wk.LABEL_OS,
    "capacity_type": wk.LABEL_CAPACITY_TYPE,
    "windows_build": wk.LABEL_WINDOWS_BUILD,
}

_Series = tuple[Gauge, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class _Sample:
    gauge: Gauge
    labels: Mapping[str, str]
    value: float

    @property
    def series(self) -> _Series:
        return (self.gauge, tuple(sorted(self.labels.items())))


class GaugeStore:
    """Karpenter's ``metrics.Store``: gauge series per object key, stale ones removed."""

    def __init__(self) -> None:
        self._store: dict[str, set[_Series]] = {}

    def update(self, key: str, samples: Iterable[_Sample]) -> None:
        """Set ``key``'s series; remove those it had before and has no more."""
        current: set[_Series] = set()
        for sample in samples:
            sample.gauge.labels(**sample.labels).set(sample.value)
            current.add(sample.series)
        for gauge, labels in self._store.get(key, set()) - current:
            gauge.remove(*(value for _, value in _ordered(gauge, labels)))
        self._store[key] = current

    def replace_all(self, samples: Mapping[str, Iterable[_Sample]]) -> None:
        """Update every key given; delete every other key."""
        for key, items in samples.items():
            self.update(key, items)
        for key in set(self._store) - set(samples):
            self.delete(key)

    def delete(self, key: str) -> None:
        """Remove every series of ``key``."""
        for gauge, labels in self._store.pop(key, set()):
            gauge.remove(*(value for _, value in _ordered(gauge, labels)))


def _ordered(gauge: Gauge, labels: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    by_name = dict(labels)
    return [(name, by_name[name]) for name in gauge._labelnames]  # noqa: SLF001


def resource_type(name: str) -> str:
    """Karpenter's ``resource_type`` label value."""
    return name.lower().replace("-", "_")


def _value(name: str, milli: int) -> float:
    """CPU in cores; any other resource in whole units, rounded up (``Quantity.Value()``)."""
    return milli / _MILLI if name == _CPU else float(math.ceil(milli / _MILLI))


def _is_daemon(pod: Pod) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references)


def _milli(values: Mapping[str, str | int | float]) -> dict[str, int]:
    try:
        return parse_resource_list(values, field="status")
    except ResourceListError:
        return {}


def node_labels(node: Node, managed: bool) -> dict[str, str]:
    """The labels of a node's ``karpenter_nodes_*`` series."""
    labels = {name: node.metadata.labels.get(key, "") for name, key in _WELL_KNOWN.items()}
    labels.update(node_name=node.metadata.name, phase="", managed=str(managed).lower())
    return {name: labels[name] for name in NODE_LABELS}


class NodeMetricsController:
    """``metrics.node``: the node gauges of every registered state node, every 5 s."""

    def __init__(self, *, state: ClusterState, metrics: Metrics, clock: Clock) -> None:
        self._state = state
        self._metrics = metrics
        self._clock = clock
        self._store = GaugeStore()

    @property
    def name(self) -> str:
        """``metrics.node``."""
        return "metrics.node"

    def reconcile(self, request: Request) -> Result:
        """Rebuild every node's gauges; drop those of gone nodes."""
        del request
        nodes = [n for n in self._state.state_nodes(self._clock.now()) if n.node is not None]
        samples: dict[str, list[_Sample]] = {n.name: self._node(n) for n in nodes}
        samples["clusterUtilization"] = self._utilization(nodes)
        self._store.replace_all(samples)
        return Result.after(NODE_METRICS_INTERVAL)

    def _node(self, state: StateNode) -> list[_Sample]:
        node = state.node
        assert node is not None  # noqa: S101 - filtered by the caller
        m = self._metrics
        requests, limits, daemon_requests, daemon_limits = _pod_totals(state.pods)
        allocatable = _milli(node.status.allocatable)
        by_gauge = (
            (m.nodes_system_overhead, subtract(_milli(node.status.capacity), allocatable)),
            (m.nodes_total_pod_requests, requests),
            (m.nodes_total_pod_limits, limits),
            (m.nodes_total_daemon_requests, daemon_requests),
            (m.nodes_total_daemon_limits, daemon_limits),
            (m.nodes_allocatable, allocatable),
        )
        labels = node_labels(node, state.managed)
        samples = [
            _Sample(gauge, {**labels, "resource_type": resource_type(name)}, _value(name, milli))
            for gauge, resources in by_gauge
            for name, milli in sorted(resources.items())
        ]
        created = node.metadata.creation_timestamp
        lifetime = (self._clock.now() - created).total_seconds() if created is not None else 0.0
        samples.append(_Sample(m.nodes_lifetime, labels, lifetime))
        return samples

    def _utilization(self, nodes: Iterable[StateNode]) -> list[_Sample]:
        allocatable: dict[str, int] = {}
        used: dict[str, int] = {}
        for state in nodes:
            assert state.node is not None  # noqa: S101 - filtered by the caller
            allocatable = add(allocatable, _milli(state.node.status.allocatable))
            used = add(used, _pod_totals(state.pods)[0])
        samples = []
        for name, total in sorted(allocatable.items()):
            whole = _value(name, total)
            if whole == 0:
                continue
            percent = 100 * _value(name, used.get(name, 0)) / whole
            gauge = self._metrics.cluster_utilization
            samples.append(_Sample(gauge, {"resource_type": resource_type(name)}, percent))
        return samples


def _pod_totals(
    pods: Iterable[Pod],
) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]:
    """Requests, limits, DaemonSet requests and DaemonSet limits of a node's live pods."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    daemon_requests: dict[str, int] = {}
    daemon_limits: dict[str, int] = {}
    for pod in pods:
        try:
            own, own_limits = requests_of(pod), limits_of(pod)
        except ResourceListError:
            continue
        requests, limits = add(requests, own), add(limits, own_limits)
        if _is_daemon(pod):
            daemon_requests = add(daemon_requests, own)
            daemon_limits = add(daemon_limits, own_limits)
    return requests, limits, daemon_requests, daemon_limits


def _owner(pod: Pod) -> str:
    """The first owner's self link, as Karpenter renders it."""
    if not pod.metadata.owner_references:
        return ""
    ref = pod.metadata.owner_references[0]
    namespace = pod.metadata.namespace or "default"
    return f"/apis/{ref.api_version}/namespaces/{namespace}/{ref.kind.lower()}s/{ref.name}"


def pod_state_labels(pod: Pod, node: Node | None) -> dict[str, str]:
    """The labels of a pod's ``karpenter_pods_state`` series."""
    status = pod.status
    conditions = status.conditions if status is not None else ()
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    node_labels_ = node.metadata.labels if node is not None else {}
    pool = node_labels_.get(wk.LABEL_NODEPOOL, "")
    return {
        "name": pod.metadata.name,
        "namespace": pod.metadata.namespace or "default",
        "owner": _owner(pod),
        "node": pod.spec.node_name,
        "scheduled": str(bool(pod.spec.node_name)).lower(),
        "nodepool": pool,
        "zone": node_labels_.get(wk.LABEL_ZONE, ""),
        "arch": node_labels_.get(wk.LABEL_ARCH, ""),
        "capacity_type": node_labels_.get(wk.LABEL_CAPACITY_TYPE, ""),
        "instance_type": node_labels_.get(wk.LABEL_INSTANCE_TYPE, ""),
        "phase": status.phase if status is not None else "",
        "ready": str(ready).lower(),
        "managed": str(bool(pool)).lower(),
    }


class PodMetricsController:
    """``metrics.pod``: ``karpenter_pods_state`` for every pod, refreshed when the cache moves."""

    def __init__(self, *, state: ClusterState, metrics: Metrics) -> None:
        self._state = state
        self._metrics = metrics
        self._store = GaugeStore()
        self._seen: int | None = None

    @property
    def name(self) -> str:
        """``metrics.pod``."""
        return "metrics.pod"

    def reconcile(self, request: Request) -> Result:
        """Set every pod's state series; drop those of deleted pods."""
        del request
        generation = self._state.generation
        if generation != self._seen:
            self._seen = generation
            nodes = {n.metadata.name: n for n in self._state.nodes()}
            gauge = self._metrics.pods_state
            self._store.replace_all(
                {
                    pod.key: [
                        _Sample(gauge, pod_state_labels(pod, nodes.get(pod.spec.node_name)), 1)
                    ]
                    for pod in self._state.pods()
                }
            )
        return Result.after(POD_METRICS_INTERVAL)


class OfferingGauges:
    """``karpenter_cloudprovider_instance_type_offering_available`` / ``_price_estimate``.

    Observed from the instance types the provisioner resolves for its NodePools on each batch
    (Karpenter's AWS provider sets them from the same ``GetInstanceTypes`` answers). An offering
    is available when it is available for any NodePool; offerings no NodePool has any more are
    removed. Only changed series are written (a region has thousands of offerings).
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._last: dict[tuple[str, str, str], tuple[bool, float]] = {}

    def observe(self, types: Iterable[Sequence[InstanceType]]) -> None:
        """Set the gauges from every NodePool's instance types."""
        current: dict[tuple[str, str, str], tuple[bool, float]] = {}
        for pool_types in types:
            for instance_type in pool_types:
                for offering in instance_type.offerings:
                    key = (instance_type.name, offering.capacity_type, offering.zone)
                    seen = current.get(key)
                    available = offering.available or (seen is not None and seen[0])
                    current[key] = (available, offering.price)
        available_gauge, price_gauge = (
            self._metrics.offering_available,
            self._metrics.offering_price,
        )
        for key, value in current.items():
            if self._last.get(key) != value:
                available_gauge.labels(*key).set(float(value[0]))
                price_gauge.labels(*key).set(value[1])
        for key in self._last.keys() - current.keys():
            available_gauge.remove(*key)
            price_gauge.remove(*key)
        self._last = current
